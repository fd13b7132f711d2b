//! The experiment's renderers on saved results of real runs (tests/fixtures/experiment/, from
//! the 2-vCPU Zen 4 KVM guest): the one screen at 80 columns, the Markdown, the HTML page's
//! charts, and the JSON read back unchanged.

use cpudoctor::experiment::ExperimentResult;
use cpudoctor::render::experiment::{SCREEN_COLUMNS, render_html, render_markdown, render_text};
use std::path::Path;

fn fixture(name: &str) -> ExperimentResult {
    let path = Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("tests/fixtures/experiment")
        .join(name);
    serde_json::from_str(&std::fs::read_to_string(&path).unwrap()).unwrap()
}

const FIXTURES: [&str; 2] = ["pages_neighbour.json", "scaling_packed.json"];

#[test]
fn the_screen_fits_80_columns_and_keeps_its_shape() {
    for name in FIXTURES {
        let r = fixture(name);
        let text = render_text(&r);
        for line in text.lines() {
            assert!(
                line.chars().count() <= SCREEN_COLUMNS as usize,
                "{name}: {} columns: {line}",
                line.chars().count()
            );
        }
        insta::assert_snapshot!(format!("experiment_text_{name}"), text);
        insta::assert_snapshot!(format!("experiment_markdown_{name}"), render_markdown(&r));
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
