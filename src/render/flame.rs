//! Flame graphs of diagnoses, drawn by inferno from their folded stacks (the `--folded`
//! export's folding, in `diagnose`) and made fit to sit inline in the report page: no script
//! (the page's Content Security Policy forbids it; each frame keeps its `<title>` tooltip,
//! which needs none), no stylesheet of its
//! own (an inline SVG's `<style>` would restyle the whole page; the page styles `.flame`), ids
//! prefixed so that several graphs share a page. A differential flame graph draws the
//! differential folding [`crate::compare::flame`] made: frames are the new profile's, red where
//! they grew, blue where they shrank.
//!
//! A diagnosis with a wall-clock view gets a wall-time flame graph too: every thread's time,
//! on and off the CPU, in one unit (microseconds of thread time, the `--folded` export's),
//! drawn in Brendan Gregg's hot/cold convention, "mixed" form: each stack keeps the colour of
//! its state from the root up, warm (inferno's hot palette, the CPU graph's colours) on a CPU,
//! aqua waiting for a CPU, blue blocked, so one function waiting and running is two boxes side
//! by side, never one box of mixed meaning. Off-CPU frames carry an annotation inferno strips
//! from the names it shows (`_[i]`, `_[w]`) and are coloured through a palette map; the CPU
//! graph stays beside it, since off-CPU time, summed over sleeping threads, squeezes the
//! on-CPU stacks narrow.

pub use crate::compare::flame::FlameError;
use crate::diagnose::Diagnosis;
use crate::diagnose::record::wall::OffCpu;
use crate::diagnose::stacks::{FOLDED_WALL_UNIT_NS, LeafOffsets, folded_samples, folded_wall_ns};
use inferno::flamegraph::color::{Color, PaletteMap};
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

/// The largest total of counts a graph is drawn with: inferno adds a graph's counts in a
/// `usize` (`flamegraph/merge.rs`), which the counts of a loaded file (outside input) can
/// overflow. 2^53 is 285 years of thread time in microseconds, beyond any real recording,
/// and every count below it is exact in an `f64`.
const MAX_TOTAL_COUNT: f64 = 9_007_199_254_740_992.0;

/// Folded lines whose `columns` trailing counts (1, or 2 for a differential folding) are
/// scaled down together, in proportion, when a column's total passes [`MAX_TOTAL_COUNT`]: the
/// widths are shares, so the picture stays the same. Lines as given otherwise.
fn fit_counts(lines: &str, columns: usize) -> std::borrow::Cow<'_, str> {
    let parsed: Vec<(&str, Vec<u64>)> = lines
        .lines()
        .filter_map(|l| {
            let mut parts = l.rsplitn(columns + 1, ' ');
            let mut counts: Vec<u64> = (0..columns)
                .map(|_| parts.next()?.parse().ok())
                .collect::<Option<_>>()?;
            counts.reverse();
            Some((parts.next()?, counts))
        })
        .collect();
    let largest_total = (0..columns)
        .map(|c| parsed.iter().map(|(_, n)| n[c] as f64).sum::<f64>())
        .fold(0.0, f64::max);
    if largest_total <= MAX_TOTAL_COUNT {
        return std::borrow::Cow::Borrowed(lines);
    }
    let factor = MAX_TOTAL_COUNT / largest_total;
    let mut out = String::new();
    for (stack, counts) in parsed {
        let scaled: Vec<String> = counts
            .iter()
            .map(|&n| ((n as f64 * factor).floor() as u64).to_string())
            .collect();
        out.push_str(&format!("{stack} {}\n", scaled.join(" ")));
    }
    std::borrow::Cow::Owned(out)
}

/// `columns`: the counts each folded line ends with (2 for a differential folding).
fn draw(lines: &str, mut opt: Options<'_>, id: &str, columns: usize) -> Result<String, FlameError> {
    if lines.trim().is_empty() {
        return Err(FlameError::NoSamples);
    }
    let lines = fit_counts(lines, columns);
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
    draw(
        &folded_samples(d, LeafOffsets::Drop),
        options(title, &subtitle),
        id,
        1,
    )
}

/// The annotation inferno hides that marks a frame of a runnable stack.
const RUNNABLE_MARK: &str = "_[i]";
/// The annotation that marks a frame of a blocked stack.
const BLOCKED_MARK: &str = "_[w]";

/// A shade from a name, 0 to 1: the same name, the same shade (FNV-1a).
fn shade(name: &str) -> f32 {
    let mut h: u32 = 0x811c_9dc5;
    for b in name.bytes() {
        h = (h ^ u32::from(b)).wrapping_mul(0x0100_0193);
    }
    (h % 1000) as f32 / 1000.0
}

/// The colour of an off-CPU frame: inferno's aqua (runnable) or blue (blocked) palette, shaded
/// by name.
fn cold(state: OffCpu, name: &str) -> Color {
    let v = shade(name);
    let c = |base: f32, range: f32| (base + range * v) as u8;
    match state {
        OffCpu::Runnable => Color {
            r: c(50.0, 60.0),
            g: c(165.0, 55.0),
            b: c(165.0, 55.0),
        },
        OffCpu::Blocked { .. } => Color {
            r: c(80.0, 60.0),
            g: c(80.0, 60.0),
            b: c(205.0, 50.0),
        },
    }
}

/// The wall-time flame graph of `d` ([module docs](self)), as inline SVG whose ids start with
/// `id`; [`FlameError::NoSamples`] without a wall view or time in it.
pub fn wall_flame_graph(d: &Diagnosis, title: &str, id: &str) -> Result<String, FlameError> {
    let lines = folded_wall_ns(d, LeafOffsets::Drop).ok_or(FlameError::NoSamples)?;
    let mut palette = PaletteMap::default();
    let mut text = String::new();
    for (names, (state, ns)) in &lines {
        let us = (ns / FOLDED_WALL_UNIT_NS).round() as u64;
        if us == 0 {
            continue;
        }
        let marked: Vec<String> = match state {
            None => names.clone(),
            Some(state) => names
                .iter()
                .map(|n| {
                    let mark = match state {
                        OffCpu::Runnable => RUNNABLE_MARK,
                        OffCpu::Blocked { .. } => BLOCKED_MARK,
                    };
                    let m = format!("{n}{mark}");
                    palette.insert(&m, cold(*state, n));
                    m
                })
                .collect(),
        };
        text.push_str(&format!("{} {us}\n", marked.join(";")));
    }
    let threads = d.wall.as_ref().map(|w| w.threads.len()).unwrap_or(0);
    let window_s = d.wall.as_ref().map(|w| w.method.window_s).unwrap_or(0.0);
    let subtitle = format!(
        "{threads} threads' time over {window_s:.2} s, in us; warm: on a CPU, aqua: waiting \
         for a CPU, blue: blocked; hover a frame for its time"
    );
    let mut opt = options(title, &subtitle);
    opt.count_name = "us".into();
    opt.palette_map = Some(&mut palette);
    draw(&text, opt, id, 1)
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
        2,
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

    /// Guards the fuzz failure of 2026-11-27 (issue 32's merge): a loaded wall-clock stack of
    /// ~10^30 ns became a count of u64::MAX us and inferno's sum of the counts overflowed.
    #[test]
    fn counts_whose_total_overflows_are_scaled_down_together() {
        let lines = format!("a;b {}\nc {}\nd 0\n", u64::MAX, u64::MAX / 2);
        let fitted = fit_counts(&lines, 1);
        let counts: Vec<f64> = fitted
            .lines()
            .map(|l| l.rsplit_once(' ').unwrap().1.parse::<u64>().unwrap() as f64)
            .collect();
        assert!(counts.iter().sum::<f64>() <= MAX_TOTAL_COUNT);
        assert!((counts[0] / counts[1] - 2.0).abs() < 1e-9, "{fitted}");
        assert!(fitted.starts_with("a;b "), "{fitted}");
        let svg = draw(&lines, options("t", "s"), "f", 1).unwrap();
        assert!(svg.contains("<svg"));
        let small = "a;b 3\nc 4\n";
        assert_eq!(fit_counts(small, 1), small);
        let two = format!("a 1 {}\nb {} 1\n", u64::MAX, u64::MAX);
        let fitted = fit_counts(&two, 2);
        assert!(
            fitted.lines().all(|l| l.split(' ').count() == 3),
            "{fitted}"
        );
        draw(&two, options("t", "s"), "f", 2).unwrap();
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

    /// The fill of the first frame whose tooltip starts `title` (`compute_under_lock (`).
    fn fill_of(svg: &str, title: &str, nth: usize) -> String {
        let at = svg
            .match_indices(&format!("<title>{title}"))
            .nth(nth)
            .unwrap_or_else(|| panic!("no {nth}th {title}"))
            .0;
        let rest = &svg[at..];
        let fill = rest.find("fill=\"rgb(").unwrap() + 10;
        rest[fill..fill + rest[fill..].find(')').unwrap()].to_string()
    }

    fn rgb(fill: &str) -> (u8, u8, u8) {
        let v: Vec<u8> = fill.split(',').map(|x| x.parse().unwrap()).collect();
        (v[0], v[1], v[2])
    }

    #[test]
    fn the_wall_flame_graph_draws_running_warm_waiting_aqua_and_blocked_blue() {
        let d = fixture("mutex-wait-4-zen4-kvm.json");
        let svg = wall_flame_graph(&d, "wall", "flame-w").unwrap();
        assert!(svg.starts_with("<svg class=\"flame\""));
        assert!(svg.contains("id=\"flame-w-frames\""));
        assert_eq!(svg, wall_flame_graph(&d, "wall", "flame-w").unwrap());
        // The marks that set the colours are hidden from the reader.
        assert!(
            !svg.contains("_[w]") && !svg.contains("_[i]"),
            "marks shown"
        );
        // Counted in microseconds of thread time.
        assert!(
            svg.contains("<title>[blocked: futex] (5,925,453 us,"),
            "lock wait"
        );
        // compute_under_lock three times: on a CPU (warm: inferno's hot palette, red high and
        // blue low), preempted (aqua: green = blue), and never blocked. In sorted order: the
        // on-CPU stack, then the runnable one.
        let (r, g, b) = rgb(&fill_of(&svg, "compute_under_lock (", 0));
        assert!(r >= 205 && b <= 55 && r > g, "warm: {r},{g},{b}");
        let (r, g, b) = rgb(&fill_of(&svg, "compute_under_lock (", 1));
        assert!(g == b && g >= 165 && r < g, "aqua: {r},{g},{b}");
        let (r, g, b) = rgb(&fill_of(&svg, "[runnable] (", 1));
        assert!(g == b && r < g, "aqua: {r},{g},{b}");
        // Asleep on the mutex: blue from the state down to the stack's root (sorted after the
        // same frames preempted, aqua).
        for f in [
            "[blocked: futex] (",
            "__lll_lock_wait (",
            "pthread_mutex_lock (",
            "take_lock_and_work (",
        ] {
            let n = svg.matches(&format!("<title>{f}")).count();
            let (r, g, b) = rgb(&fill_of(&svg, f, n - 1));
            assert!(r == g && b >= 205 && r < b, "{f} blue: {r},{g},{b}");
        }
    }

    #[test]
    fn without_a_wall_view_there_is_no_wall_flame_graph_and_the_cpu_one_is_unchanged() {
        let d = fixture("spin-phases-4000-zen3-kvm.json");
        assert_eq!(wall_flame_graph(&d, "x", "f"), Err(FlameError::NoSamples));
        // With a wall view the CPU graph still counts samples only.
        let w = fixture("mutex-wait-4-zen4-kvm.json");
        let cpu = flame_graph(&w, "cpu", "f").unwrap();
        assert!(cpu.contains("samples"), "counted in samples");
        assert!(
            !cpu.contains("[blocked"),
            "no off-CPU stack in the CPU graph"
        );
    }
}
