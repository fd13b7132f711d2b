//! Flame graphs of diagnoses, drawn by inferno from the folded stacks ([`super::export`]) and
//! made fit to sit inline in the report page: no script (the page's Content Security Policy
//! forbids it; each frame keeps its `<title>` tooltip, which needs none), no stylesheet of its
//! own (an inline SVG's `<style>` would restyle the whole page; the page styles `.flame`), ids
//! prefixed so that several graphs share a page. A differential flame graph draws the
//! differential folding [`crate::compare::flame`] made: frames are the new profile's, red where
//! they grew, blue where they shrank.

pub use crate::compare::flame::FlameError;
use crate::diagnose::Diagnosis;
use crate::diagnose::export::{LeafOffsets, folded};
use inferno::flamegraph::{self, Options};

/// Width the graphs are drawn at, in px; the page scales them down to fit.
const WIDTH: usize = 1200;

fn options<'a>(title: &str, subtitle: &str) -> Options<'a> {
    let mut o = Options::default();
    o.title = title.to_string();
    o.subtitle = Some(subtitle.to_string());
    o.count_name = "samples".into();
    o.image_width = Some(WIDTH);
    // Colours from a hash of each name, not random: the same diagnosis, the same page.
    o.hash = true;
    o.deterministic = true;
    o
}

fn draw(lines: &str, mut opt: Options<'_>, id: &str) -> Result<String, FlameError> {
    if lines.trim().is_empty() {
        return Err(FlameError::NoSamples);
    }
    let mut svg = Vec::new();
    flamegraph::from_lines(&mut opt, lines.lines(), &mut svg)
        .map_err(|e| FlameError::Inferno(e.to_string()))?;
    Ok(inline(&String::from_utf8_lossy(&svg), id))
}

/// The flame graph of `d`, as inline SVG whose ids start with `id`.
pub fn flame_graph(d: &Diagnosis, title: &str, id: &str) -> Result<String, FlameError> {
    let subtitle = format!(
        "{} samples at {} Hz; width: share of samples, hover a frame for its count",
        d.sampling.samples, d.sampling.frequency_hz
    );
    draw(&folded(d, LeafOffsets::Drop), options(title, &subtitle), id)
}

/// The differential flame graph of a differential folding ([`crate::compare::flame`]): the
/// new profile's frames, coloured by the change in share (red grew, blue shrank).
pub fn differential(folded_lines: &str, title: &str, id: &str) -> Result<String, FlameError> {
    draw(
        folded_lines,
        options(
            title,
            "frames of the new run; red: grew in share, blue: shrank (old scaled to the new total)",
        ),
        id,
    )
}

/// Removes the element that starts at `open` (`<script`) up to and including `close`.
fn remove_element(s: &mut String, open: &str, close: &str) {
    while let Some(start) = s.find(open) {
        let Some(len) = s[start..].find(close) else {
            break;
        };
        s.replace_range(start..start + len + close.len(), "");
    }
}

/// inferno's standalone SVG made inline: from `<svg` on, without script, `onload`, own
/// stylesheet or the search/zoom controls that need the script, ids prefixed with `id`.
fn inline(svg: &str, id: &str) -> String {
    let mut s = svg[svg.find("<svg").unwrap_or(0)..].to_string();
    s = s.replacen(" onload=\"init(evt)\"", "", 1);
    remove_element(&mut s, "<script", "</script>");
    remove_element(&mut s, "<style", "</style>");
    for control in ["details", "unzoom", "search", "matched"] {
        remove_element(&mut s, &format!("<text id=\"{control}\""), "</text>");
    }
    s = s
        .replace("id=\"", &format!("id=\"{id}-"))
        .replace("url(#", &format!("url(#{id}-"));
    s.replacen(
        "<svg ",
        &format!("<svg class=\"flame\" role=\"img\" aria-label=\"flame graph\" data-id=\"{id}\" "),
        1,
    )
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::compare::flame::differential_folded;
    use crate::diagnose::test_fixture as fixture;

    #[test]
    fn a_flame_graph_is_inline_svg_without_script_with_each_function() {
        let d = fixture("spin-phases-4000-zen3-kvm.json");
        let svg = flame_graph(&d, "new.json", "flame-1").unwrap();
        assert!(svg.starts_with("<svg class=\"flame\""), "{}", &svg[..200]);
        assert!(svg.trim_end().ends_with("</svg>"));
        for banned in ["<script", "onload", "<style", "<?xml", "<!DOCTYPE"] {
            assert!(!svg.contains(banned), "{banned} left in");
        }
        for f in ["wait_for_item", "do_work", "serve", "main"] {
            assert!(svg.contains(&format!("<title>{f} (")), "{f}");
        }
        assert!(!svg.contains("id=\"frames\""), "ids are prefixed");
        assert!(svg.contains("id=\"flame-1-frames\""));
        assert_eq!(svg, flame_graph(&d, "new.json", "flame-1").unwrap());
    }

    #[test]
    fn the_differential_graph_colours_growth_red_and_shrinkage_blue() {
        let old = fixture("spin-phases-140-zen3-kvm.json");
        let new = fixture("spin-phases-4000-zen3-kvm.json");
        let folded = differential_folded(&old, &new).unwrap();
        let svg = differential(&folded, "diff", "flame-d").unwrap();
        // inferno gives each frame a fill: red for growth (rgb(255,...)), blue for shrinkage.
        let frame = |name: &str| {
            let at = svg.find(&format!("<title>{name} (")).unwrap();
            let rest = &svg[at..];
            let fill = rest.find("fill=\"").unwrap() + 6;
            rest[fill..fill + rest[fill..].find('"').unwrap()].to_string()
        };
        assert!(
            frame("wait_for_item").starts_with("rgb(255,"),
            "{}",
            frame("wait_for_item")
        );
        let work = frame("do_work");
        assert!(work.ends_with(",255)"), "{work}");
    }

    #[test]
    fn no_samples_is_said_not_drawn() {
        let mut d = fixture("spin-phases-4000-zen3-kvm.json");
        d.stacks.clear();
        d.functions.clear();
        assert_eq!(flame_graph(&d, "x", "f"), Err(FlameError::NoSamples));
    }
}
