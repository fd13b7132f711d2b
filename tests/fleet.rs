//! `cpudoctor fleet` on fleets made from a real check of the Zen 3 guest: every host a copy
//! with each figure jittered by 2% (seeded), and, for the Netflix JVM case, 6 of 50 hosts in a
//! fast band of false sharing. Bad files beside them are named and skipped.

mod common;

use common::{cpudoctor, json_of, stdout_text};
use serde_json::Value;
use std::path::{Path, PathBuf};

/// SplitMix64, so the fleets are the same on every run.
struct Rng(u64);
impl Rng {
    fn next(&mut self) -> f64 {
        self.0 = self.0.wrapping_add(0x9E37_79B9_7F4A_7C15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
        ((z ^ (z >> 31)) >> 11) as f64 / (1u64 << 53) as f64
    }
    fn normal(&mut self) -> f64 {
        let (u, v) = (self.next().max(1e-12), self.next());
        (-2.0 * u.ln()).sqrt() * (2.0 * std::f64::consts::PI * v).cos()
    }
}

fn real_check() -> Value {
    let path: PathBuf = [
        env!("CARGO_MANIFEST_DIR"),
        "tests/fixtures/fingerprints/zen3-kvm-runs3-a.json",
    ]
    .iter()
    .collect();
    serde_json::from_slice(&std::fs::read(path).unwrap()).unwrap()
}

/// Writes `n` hosts into `dir`; the hosts in `fast` get a false-sharing ratio of a fifth.
fn write_fleet(dir: &Path, n: usize, fast: &[usize], seed: u64) {
    let base = real_check();
    let mut rng = Rng(seed);
    for i in 0..n {
        let mut fp = base.clone();
        for p in fp["probes"].as_array_mut().unwrap() {
            for m in p["metrics"].as_array_mut().unwrap() {
                let v = m["value"].as_f64().unwrap();
                let mut x = v * (1.0 + 0.02 * rng.normal());
                if fast.contains(&i) && m["name"] == "false_sharing_ratio" {
                    x /= 5.0;
                }
                m["value"] = x.into();
            }
        }
        std::fs::write(
            dir.join(format!("host{i:02}.json")),
            serde_json::to_vec(&fp).unwrap(),
        )
        .unwrap();
    }
}

#[test]
fn a_fast_minority_of_false_sharing_is_named_with_its_share_and_hosts() {
    let dir = tempfile::tempdir().unwrap();
    let fast = [3, 11, 19, 27, 38, 45];
    write_fleet(dir.path(), 50, &fast, 1);
    let text = stdout_text(
        cpudoctor()
            .env("COLUMNS", "80")
            .arg("fleet")
            .arg(dir.path()),
    );
    assert!(
        text.contains("false_sharing_ratio (sharing): 2 bands"),
        "{text}"
    );
    assert!(text.contains("6 of 50 hosts, 12%"), "{text}");
    assert!(text.contains("44 of 50 hosts, 88%"), "{text}");
    let hosts = "host03, host11, host19, host27, host38, host45";
    let flat = text.split_whitespace().collect::<Vec<_>>().join(" ");
    assert!(flat.contains(hosts), "{text}");
    // Only that figure splits: the rest are jitter.
    let banded = text
        .lines()
        .filter(|l| l.contains("standard deviations apart"))
        .count();
    assert_eq!(banded, 1, "{text}");
    for line in text.lines() {
        assert!(line.chars().count() <= 80, "too wide: {line:?}");
    }

    let json: Value = serde_json::from_slice(
        &cpudoctor()
            .args(["fleet", "--json"])
            .arg(dir.path())
            .assert()
            .success()
            .get_output()
            .stdout,
    )
    .unwrap();
    let g = &json["groups"][0];
    assert_eq!(g["hosts"], 50);
    assert_eq!(g["banded"][0]["metric"], "false_sharing_ratio");
    assert_eq!(g["banded"][0]["bands"][0]["hosts"], 6);
}

#[test]
fn hosts_that_differ_only_by_noise_have_no_bands() {
    let dir = tempfile::tempdir().unwrap();
    write_fleet(dir.path(), 50, &[], 2);
    cpudoctor()
        .arg("fleet")
        .arg(dir.path())
        .assert()
        .success()
        .stdout(predicates::str::contains(
            "No figure splits these hosts into bands",
        ));
}

#[test]
fn bad_files_are_named_one_line_each_and_the_rest_analysed() {
    let dir = tempfile::tempdir().unwrap();
    write_fleet(dir.path(), 8, &[], 3);
    let good = std::fs::read_to_string(dir.path().join("host00.json")).unwrap();
    std::fs::write(dir.path().join("cut.json"), &good[..good.len() / 2]).unwrap();
    std::fs::write(dir.path().join("foreign.json"), r#"{"hello": "world"}"#).unwrap();
    std::fs::write(dir.path().join("notjson.json"), "GIF89a").unwrap();
    let newer = good.replacen("\"schema_version\":1", "\"schema_version\":2", 1);
    assert_ne!(newer, good, "the fixture's schema_version was not found");
    std::fs::write(dir.path().join("newer.json"), newer).unwrap();
    let out = cpudoctor()
        .arg("fleet")
        .arg(dir.path())
        .assert()
        .success()
        .get_output()
        .clone();
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(err.lines().count(), 4, "{err}");
    for (file, why) in [
        ("cut.json", "truncated"),
        ("foreign.json", "not a cpudoctor fingerprint"),
        ("notjson.json", "not a cpudoctor fingerprint"),
        ("newer.json", "schema_version 2"),
    ] {
        assert!(
            err.lines().any(|l| l.contains(file) && l.contains(why)),
            "{file}: {err}"
        );
    }
    let text = String::from_utf8_lossy(&out.stdout);
    let flat = text.split_whitespace().collect::<Vec<_>>().join(" ");
    assert!(flat.starts_with("8 hosts in 1 group"), "{text}");
    assert!(flat.contains("4 file(s) skipped"), "{text}");
}

#[test]
fn nothing_readable_is_one_line_and_exit_2() {
    let dir = tempfile::tempdir().unwrap();
    std::fs::write(dir.path().join("a.json"), "{").unwrap();
    cpudoctor()
        .arg("fleet")
        .arg(dir.path())
        .assert()
        .code(2)
        .stderr(predicates::str::contains("no fingerprint could be read"));
    cpudoctor()
        .args(["fleet", "/no/such/file.json"])
        .assert()
        .code(2)
        .stderr(predicates::str::contains("cannot read it"));
}

#[test]
fn the_html_page_draws_a_strip_plot_for_each_banded_figure() {
    let dir = tempfile::tempdir().unwrap();
    write_fleet(dir.path(), 50, &[3, 11, 19, 27, 38, 45], 4);
    let page = dir.path().join("fleet.html");
    cpudoctor()
        .arg("fleet")
        .arg(dir.path())
        .arg("--html")
        .arg(&page)
        .assert()
        .success();
    let html = std::fs::read_to_string(&page).unwrap();
    assert_eq!(
        html.matches("<svg").count(),
        1,
        "one banded figure, one chart"
    );
    assert!(html.contains("false_sharing_ratio: one dot per host"));
    assert!(html.contains("host03, host11, host19, host27, host38, host45"));
    // An unwritable page is refused before the files are read.
    cpudoctor()
        .arg("fleet")
        .arg(dir.path())
        .args(["--html", "/proc/fleet.html"])
        .assert()
        .code(2)
        .stdout("");
}

#[test]
fn guests_with_one_brand_string_but_different_cpus_are_not_alike() {
    // The Zen 2 (family 23 model 49) and Zen 3 (25/1) guests both call themselves "AMD EPYC"
    // and share microcode and kernel: grouped by brand string they were "alike hosts", and a
    // band between them would have been two CPUs, not the Netflix case.
    let fixtures = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/fingerprints");
    let out = json_of(cpudoctor().args(["fleet", "--json"]).args([
        fixtures.join("zen2-kvm-check.json"),
        fixtures.join("zen3-kvm-runs3-a.json"),
        fixtures.join("zen3-kvm-runs3-b.json"),
    ]));
    let groups = out["groups"].as_array().unwrap();
    assert_eq!(groups.len(), 2, "{out:#}");
    let families: Vec<(u64, u64, u64)> = groups
        .iter()
        .map(|g| {
            (
                g["cpu"]["family"].as_u64().unwrap(),
                g["cpu"]["model"].as_u64().unwrap(),
                g["hosts"].as_u64().unwrap(),
            )
        })
        .collect();
    assert_eq!(families, [(25, 1, 2), (23, 49, 1)]);
    assert!(groups.iter().all(|g| g["cpu_model"] == "AMD EPYC"));
}
