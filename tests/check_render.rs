//! Snapshot tests of `check`'s terminal views on real fingerprints: the one-screen summary at
//! 80 columns (the width issue reports were read at) and the verbose view, which must keep
//! every figure the old verdict and probe tables showed, with no word broken.

use cpudoctor::render::terminal::{Style, render_check};
use cpudoctor::schema::Fingerprint;
use cpudoctor::schema::json::from_json_bytes;

fn fixture(name: &str) -> Fingerprint {
    let path = format!(
        "{}/tests/fixtures/fingerprints/{name}",
        env!("CARGO_MANIFEST_DIR")
    );
    let fp = from_json_bytes(&std::fs::read(&path).unwrap()).unwrap();
    // Judged by this build, as `explain FILE` and `diff` do.
    cpudoctor::session::judge(&fp)
}

/// Every word of `text` (split at whitespace) appears whole in `rendered`: wrapping moved it
/// to another line but never cut it.
fn words_survive(text: &str, rendered: &str) {
    let trim = |w: &str| w.trim_end_matches(['.', ',', ';', ':']).to_string();
    let words: std::collections::HashSet<String> = rendered.split_whitespace().map(trim).collect();
    for w in text.split_whitespace().map(trim) {
        assert!(
            words.contains(&w),
            "word {w:?} broken or lost in\n{rendered}"
        );
    }
}

#[test]
fn summary_fits_one_80_column_screen() {
    for name in ["zen2-kvm-check.json", "zen4-kvm-check-all.json"] {
        let fp = fixture(name);
        let out = render_check(&fp, Style::plain(80), false);
        // 24 lines of text plus the few that wrap when borderline levels (`notice/HAZARD`)
        // widen the level column.
        assert!(
            out.lines().count() <= 26,
            "{name}: {} lines\n{out}",
            out.lines().count()
        );
        for line in out.lines() {
            assert!(line.chars().count() <= 80, "{name}: too wide: {line:?}");
        }
        for v in &fp.verdicts {
            words_survive(&v.figure, &out);
            words_survive(&v.summary, &out);
        }
        assert!(!out.to_lowercase().contains("seed"), "{out}");
        assert!(!out.contains("not_detected"), "raw enum value in\n{out}");
    }
}

#[test]
fn summary_counts_levels() {
    let out = render_check(&fixture("zen2-kvm-check.json"), Style::plain(80), false);
    // False sharing reads HAZARD, not notice/HAZARD: the file's one atomic written from both
    // cores (4.0x, clear of the 3x line) is its worse sharing figure, above plain counters'
    // 3.2x (within the guest guard band).
    assert!(
        out.contains("2 hazards, 1 notice, 4 ok, 3 borderline"),
        "{out}"
    );
    assert!(out.contains("cpudoctor explain split_lock"), "{out}");
}

#[test]
fn verbose_keeps_every_figure_of_the_old_tables() {
    let fp = fixture("zen2-kvm-check.json");
    let out = render_check(&fp, Style::plain(80), true);
    for line in out.lines() {
        assert!(
            line.chars().count() <= 80 || !line.contains(' '),
            "too wide: {line:?}"
        );
    }
    for v in &fp.verdicts {
        words_survive(&v.explanation, &out);
        words_survive(&v.reference, &out);
    }
    for p in &fp.probes {
        for m in &p.metrics {
            assert!(out.contains(&m.name), "{} missing", m.name);
        }
    }
}

#[test]
fn check_summary_80() {
    insta::assert_snapshot!(
        "check_summary_80",
        render_check(&fixture("zen2-kvm-check.json"), Style::plain(80), false)
    );
}

#[test]
fn check_verbose_80() {
    insta::assert_snapshot!(
        "check_verbose_80",
        render_check(&fixture("zen2-kvm-check.json"), Style::plain(80), true)
    );
}
