//! The Prometheus export against the real tools a fleet runs: `promtool check metrics` on the
//! text, Debian's `prometheus-node-exporter` serving it from its textfile directory, and a
//! reader that must never see half a file while cpudoctor rewrites it.

mod common;

use common::{cpudoctor, missing_tool};
use cpudoctor::render::export::prometheus::exposition;
use cpudoctor::render::export::{Export, Prometheus};
use cpudoctor::schema::json::from_json_bytes;
use cpudoctor::schema::{Fingerprint, Status};
use std::io::{Read, Write};
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

const INSTALL: &str = "apt-get install prometheus prometheus-node-exporter";

fn fixture_text(name: &str) -> String {
    let path: PathBuf = [
        env!("CARGO_MANIFEST_DIR"),
        "tests/fixtures/fingerprints",
        name,
    ]
    .iter()
    .collect();
    let fp = from_json_bytes(&std::fs::read(&path).unwrap()).unwrap();
    export_text(&fp)
}

fn export_text(fp: &Fingerprint) -> String {
    String::from_utf8(Prometheus.export(fp)).expect("the exposition format is text")
}

/// Every saved fingerprint of the corpus: each machine's checks (`tests/fixtures/machines/*/`,
/// with their `regression/` folders) and the fingerprints the other tests read.
fn corpus() -> Vec<(PathBuf, Fingerprint)> {
    fn json_files(dir: &Path, out: &mut Vec<PathBuf>) {
        for e in std::fs::read_dir(dir).unwrap().flatten() {
            let p = e.path();
            if p.is_dir() {
                json_files(&p, out);
            } else if p.extension().is_some_and(|x| x == "json") {
                out.push(p);
            }
        }
    }
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures");
    let mut files = Vec::new();
    json_files(&root.join("machines"), &mut files);
    json_files(&root.join("fingerprints"), &mut files);
    files.sort();
    let corpus: Vec<(PathBuf, Fingerprint)> = files
        .into_iter()
        .filter_map(|p| {
            let fp = from_json_bytes(&std::fs::read(&p).ok()?).ok()?;
            Some((p, fp))
        })
        .collect();
    let machines: Vec<&PathBuf> = corpus
        .iter()
        .map(|(p, _)| p)
        .filter(|p| p.starts_with(root.join("machines")))
        .collect();
    assert!(
        machines.len() >= 5,
        "the machines' fingerprints: {machines:?}"
    );
    corpus
}

/// `promtool check metrics` on `text`: whether it passed, and everything it said.
fn promtool_check(text: &str) -> (bool, String) {
    let mut child = Command::new("promtool")
        .args(["check", "metrics"])
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    child
        .stdin
        .take()
        .unwrap()
        .write_all(text.as_bytes())
        .unwrap();
    let out = child.wait_with_output().unwrap();
    (
        out.status.success(),
        format!(
            "{}{}",
            String::from_utf8_lossy(&out.stdout),
            String::from_utf8_lossy(&out.stderr)
        ),
    )
}

fn have(tool: &str) -> bool {
    Command::new(tool)
        .arg("--version")
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .status()
        .is_ok()
}

/// Issue 32: the export had `cpudoctor_split_lock_locks_per_s_locks_s` and
/// `cpudoctor_aggressor_split_locks_per_s_locks_s`, which promtool rejects ("metric names
/// should not contain abbreviated units"). The full export, every figure any fingerprint of the
/// corpus has in one file (the fingerprint with the most figures, then every other file's
/// probes, whose figures the exporter adds where they are new), passes promtool without a
/// word, and so does each file's own export.
#[test]
fn promtool_finds_nothing_to_say_about_the_full_export() {
    if !have("promtool") {
        return missing_tool("promtool", INSTALL);
    }
    let corpus = corpus();
    let figures = |fp: &Fingerprint| -> usize { fp.probes.iter().map(|p| p.metrics.len()).sum() };
    let (_, most) = corpus
        .iter()
        .max_by_key(|(_, fp)| figures(fp))
        .expect("a corpus");
    let mut full = most.clone();
    for (_, fp) in &corpus {
        full.probes.extend(fp.probes.iter().cloned());
    }
    let text = export_text(&full);
    // Every figure of every file is in it, under its exposition name.
    for (path, fp) in &corpus {
        for p in fp.probes.iter().filter(|p| p.status == Status::Ok) {
            for m in &p.metrics {
                let name = exposition(&m.name, &m.unit).name(None);
                assert!(
                    text.contains(&format!("\n{name} ")),
                    "{}: {} ({}) is missing as {name}",
                    path.display(),
                    m.name,
                    m.unit
                );
            }
        }
    }
    let (ok, said) = promtool_check(&text);
    assert!(ok && said.trim().is_empty(), "promtool said:\n{said}");
    for (path, fp) in &corpus {
        let (ok, said) = promtool_check(&export_text(fp));
        assert!(
            ok && said.trim().is_empty(),
            "{}: promtool said:\n{said}",
            path.display()
        );
    }
}

fn free_port() -> u16 {
    std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port()
}

fn scrape(port: u16) -> Option<String> {
    let mut s = std::net::TcpStream::connect(("127.0.0.1", port)).ok()?;
    s.set_read_timeout(Some(Duration::from_secs(5))).ok()?;
    write!(
        s,
        "GET /metrics HTTP/1.0\r\nHost: 127.0.0.1\r\nAccept: text/plain\r\n\r\n"
    )
    .ok()?;
    let mut body = String::new();
    s.read_to_string(&mut body).ok()?;
    Some(body)
}

struct Killed(std::process::Child);
impl Drop for Killed {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

#[test]
fn node_exporter_serves_the_series_from_its_textfile_directory() {
    if !Path::new("/usr/bin/prometheus-node-exporter").exists() {
        return missing_tool("prometheus-node-exporter", INSTALL);
    }
    let dir = tempfile::tempdir().unwrap();
    std::fs::write(
        dir.path().join("cpudoctor.prom"),
        fixture_text("zen3-kvm-runs3-a.json"),
    )
    .unwrap();
    let port = free_port();
    let _exporter = Killed(
        Command::new("/usr/bin/prometheus-node-exporter")
            .arg(format!(
                "--collector.textfile.directory={}",
                dir.path().display()
            ))
            .arg(format!("--web.listen-address=127.0.0.1:{port}"))
            // Only what the test reads: fewer collectors, a faster scrape.
            .args(["--collector.disable-defaults", "--collector.textfile"])
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .unwrap(),
    );
    let deadline = Instant::now() + Duration::from_secs(20);
    let body = loop {
        if let Some(b) = scrape(port).filter(|b| b.contains("cpudoctor_info")) {
            break b;
        }
        assert!(
            Instant::now() < deadline,
            "node_exporter never served cpudoctor_info"
        );
        std::thread::sleep(Duration::from_millis(200));
    };
    assert!(body.contains("node_textfile_scrape_error 0"), "{body}");
    for series in [
        "cpudoctor_verdict{borderline=",
        "cpudoctor_pause_seconds ",
        "cpudoctor_c2c_latency_seconds ",
        "cpudoctor_read_bw_1t_bytes_per_second ",
        "cpudoctor_false_sharing_ratio ",
        "cpudoctor_dram_latency_ci_low_seconds ",
    ] {
        assert!(body.contains(series), "{series} missing from\n{body}");
    }
}

#[test]
fn a_reader_never_sees_half_an_export() {
    // node_exporter may read the directory at any moment; cpudoctor writes a temporary file
    // beside the target and renames it. A reader polling the file while it is rewritten must
    // only ever see whole exports (the last line is the last figure, newline-terminated).
    let dir = tempfile::tempdir().unwrap();
    let target = dir.path().join("cpudoctor.prom");
    let stop = std::sync::atomic::AtomicBool::new(false);
    let (reads, torn) = std::thread::scope(|s| {
        let reader = s.spawn(|| {
            let (mut reads, mut torn) = (0u32, Vec::new());
            while !stop.load(std::sync::atomic::Ordering::Relaxed) {
                for entry in std::fs::read_dir(dir.path()).unwrap().flatten() {
                    let name = entry.file_name().to_string_lossy().to_string();
                    // The collector reads `*.prom` only; temporary files are hidden.
                    if !name.ends_with(".prom") {
                        continue;
                    }
                    if let Ok(text) = std::fs::read_to_string(entry.path()) {
                        reads += 1;
                        let whole = text.starts_with("# HELP cpudoctor_info")
                            && text.ends_with('\n')
                            && text.contains("cpudoctor_pause_cycles ");
                        if !whole {
                            torn.push(text.len());
                        }
                    }
                }
            }
            (reads, torn)
        });
        for _ in 0..3 {
            cpudoctor()
                .args(["probe", "pause", "--repetitions", "1", "--prom"])
                .arg(&target)
                .assert()
                .success();
        }
        stop.store(true, std::sync::atomic::Ordering::Relaxed);
        reader.join().unwrap()
    });
    assert!(reads > 0, "the reader never saw the file");
    assert!(torn.is_empty(), "partial exports seen: {torn:?}");
    // Nothing but the export is left in the directory.
    let names: Vec<String> = std::fs::read_dir(dir.path())
        .unwrap()
        .flatten()
        .map(|e| e.file_name().to_string_lossy().to_string())
        .collect();
    assert_eq!(names, ["cpudoctor.prom"]);
}

#[test]
fn an_unwritable_export_path_is_one_line_before_measuring() {
    let out = cpudoctor()
        .args(["check", "--prom", "/proc/cpudoctor.prom"])
        .assert()
        .code(2)
        .get_output()
        .clone();
    assert!(out.stdout.is_empty());
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(err.trim().lines().count(), 1, "{err}");
    assert!(err.contains("/proc/cpudoctor.prom"), "{err}");
}

#[test]
fn check_skips_the_bus_locking_probes_when_asked_and_names_an_unknown_one() {
    cpudoctor()
        .args(["check", "--skip", "no-such-probe"])
        .assert()
        .code(2)
        .stderr(predicates::str::contains("unknown probe 'no-such-probe'"));
}

#[test]
fn the_example_rules_pass_promtool() {
    if !have("promtool") {
        return missing_tool("promtool", INSTALL);
    }
    let rules: PathBuf = [
        env!("CARGO_MANIFEST_DIR"),
        "contrib/prometheus/cpudoctor-rules.yml",
    ]
    .iter()
    .collect();
    let out = Command::new("promtool")
        .args(["check", "rules"])
        .arg(&rules)
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
}
