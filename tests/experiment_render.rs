//! The experiment's renderers on saved results of real runs (tests/fixtures/experiment/, from
//! the 2-vCPU Zen 4 KVM guest): the one screen at the terminal's width (40 and 80 columns),
//! the Markdown, the HTML page's charts, and the JSON read back unchanged.

use cpudoctor::experiment::ExperimentResult;
use cpudoctor::render::experiment::{render_html, render_markdown, render_text};
use cpudoctor::render::text::Style;
use std::path::Path;

fn fixture(name: &str) -> ExperimentResult {
    let path = Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("tests/fixtures/experiment")
        .join(name);
    serde_json::from_str(&std::fs::read_to_string(&path).unwrap()).unwrap()
}

const FIXTURES: [&str; 2] = ["pages_neighbour.json", "scaling_packed.json"];

/// Every line of `text` within `width` columns.
fn assert_fits(text: &str, width: usize, name: &str) {
    for line in text.lines() {
        assert!(
            line.chars().count() <= width,
            "{name} at {width}: {} columns: {line}",
            line.chars().count()
        );
    }
}

#[test]
fn the_screen_fits_80_columns_and_keeps_its_shape() {
    for name in FIXTURES {
        let r = fixture(name);
        let text = render_text(&r, Style::plain(80));
        assert_fits(&text, 80, name);
        insta::assert_snapshot!(format!("experiment_text_{name}"), text);
        insta::assert_snapshot!(format!("experiment_markdown_{name}"), render_markdown(&r));
    }
}

/// The experiment screen was fixed at 80 columns while every other view took the terminal's
/// width: at 40 columns its lines ran past the screen, at 160 it left half of it empty. It
/// takes the width like the others (issue 32), words whole: the effect and its interval stay
/// readable in 40 columns.
#[test]
fn case_columns_40_the_screen_takes_the_terminals_width() {
    for name in FIXTURES {
        let r = fixture(name);
        let narrow = render_text(&r, Style::plain(40));
        assert_fits(&narrow, 40, name);
        insta::assert_snapshot!(format!("experiment_text_40_{name}"), narrow);
        // Wider than 80, a sentence that wrapped at 80 takes one line.
        let wide = render_text(&r, Style::plain(200));
        assert!(wide.lines().count() < render_text(&r, Style::plain(80)).lines().count());
        assert!(
            wide.lines().any(|l| l.chars().count() > 80),
            "{name}: {wide}"
        );
    }
}

#[test]
fn the_page_draws_the_effects_and_the_scaling_curve_against_ideal() {
    let runs: Vec<(String, ExperimentResult)> = FIXTURES
        .iter()
        .map(|n| (n.to_string(), fixture(n)))
        .collect();
    let page = render_html(&runs);
    assert!(page.starts_with("<!DOCTYPE html>"));
    assert!(page.contains("Effect on the command"));
    assert!(page.contains("Throughput against CPUs"));
    assert!(page.contains(">ideal<") || page.contains("ideal"));
    assert_eq!(
        page.matches("<svg").count(),
        3,
        "two effect charts, one curve"
    );
    // Each effect a dot (plotters' circles) on the charts' axis, its variant named.
    assert!(page.contains("split-locks neighbour vs alone"), "{page}");
    assert!(page.matches("<circle").count() >= 5);
}

#[test]
fn the_json_reads_back_unchanged() {
    for name in FIXTURES {
        let r = fixture(name);
        let again: ExperimentResult =
            serde_json::from_str(&serde_json::to_string_pretty(&r).unwrap()).unwrap();
        assert_eq!(again, r, "{name}");
        assert_eq!(r.kind, "experiment");
        assert_eq!(r.schema_version, cpudoctor::experiment::SCHEMA_VERSION);
    }
}
