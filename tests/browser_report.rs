//! The HTML report in a real browser: headless Chromium loads pages written by
//! `cpudoctor report`, with no console message (the page has no script, and its Content
//! Security Policy turns any attempted fetch into a console error), and every chart is laid
//! out at a real size with its data drawn.
//!
//! Chromium comes from the Debian package `chromium` (`.ci/run` installs it). Without it the
//! test fails, or prints SKIPPED with CPUDOCTOR_ALLOW_SKIP=1. CPUDOCTOR_CHROMIUM overrides the
//! binary.

mod common;

use serde_json::Value;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

fn chromium() -> Option<PathBuf> {
    if let Some(p) = std::env::var_os("CPUDOCTOR_CHROMIUM") {
        return Some(PathBuf::from(p)).filter(|p| p.exists());
    }
    ["/usr/bin/chromium", "/usr/bin/chromium-browser"]
        .iter()
        .map(PathBuf::from)
        .find(|p| p.exists())
}

/// The browser, or `None` after saying why the test is skipped; panics when CI requires it.
fn browser_or_skip() -> Option<PathBuf> {
    let found = chromium();
    if found.is_none() {
        common::missing_tool(
            "Chromium (/usr/bin/chromium or $CPUDOCTOR_CHROMIUM)",
            "apt-get install chromium",
        );
    }
    found
}

/// Output of one headless Chromium run.
struct Run {
    dom: String,
    console: Vec<String>,
}

/// Loads `page` in a fresh headless Chromium and dumps its DOM after the load event. The
/// flags keep it from reaching for a network this machine does not have (it would hang).
fn load(chromium: &Path, page: &Path, scratch: &Path) -> Run {
    let profile = tempfile::tempdir_in(scratch).unwrap();
    let mut child = Command::new(chromium)
        .args([
            "--headless",
            "--no-sandbox",
            "--disable-gpu",
            "--disable-quic",
            "--no-first-run",
            "--disable-background-networking",
            "--disable-component-update",
            "--disable-sync",
            "--allow-file-access-from-files",
            "--enable-logging=stderr",
            "--v=0",
            "--dump-dom",
        ])
        .arg(format!("--user-data-dir={}", profile.path().display()))
        .arg(format!("file://{}", page.display()))
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("start chromium");
    // Read both pipes on threads so a full pipe cannot stall the browser.
    let mut out = child.stdout.take().unwrap();
    let mut err = child.stderr.take().unwrap();
    let out_t = std::thread::spawn(move || {
        let mut s = String::new();
        std::io::Read::read_to_string(&mut out, &mut s).ok();
        s
    });
    let err_t = std::thread::spawn(move || {
        let mut s = String::new();
        std::io::Read::read_to_string(&mut err, &mut s).ok();
        s
    });
    let deadline = Instant::now() + Duration::from_secs(180);
    let status = loop {
        if let Some(s) = child.try_wait().unwrap() {
            break s;
        }
        if Instant::now() > deadline {
            child.kill().ok();
            child.wait().ok();
            panic!(
                "chromium did not finish loading {} in 180 s",
                page.display()
            );
        }
        std::thread::sleep(Duration::from_millis(50));
    };
    let (dom, log) = (out_t.join().unwrap(), err_t.join().unwrap());
    assert!(status.success(), "chromium failed ({status}): {log}");
    Run {
        dom,
        // Chromium logs every console message of the page as `...:CONSOLE:<line>] "<text>"`.
        console: log
            .lines()
            .filter(|l| l.contains(":CONSOLE"))
            .map(str::to_string)
            .collect(),
    }
}

/// A page that loads `report` in a frame and, once everything has loaded, records for every
/// chart its SVGs' laid-out size, text count and data marks: shapes filled or stroked in a
/// colour (axes, grid, background and labels are all greys; runs and heat are coloured).
fn harness(report: &str) -> String {
    format!(
        r#"<!DOCTYPE html><html><head><meta charset="utf-8"><title>harness</title></head><body>
<iframe id="page" src="{report}" style="width:1200px;height:900px"></iframe>
<script>
function coloured(c) {{
  var m = /rgba?\((\d+), (\d+), (\d+)/.exec(c || "");
  return !!m && !(m[1] === m[2] && m[2] === m[3]);
}}
window.addEventListener("load", function () {{
  var out = {{ figures: [] }};
  try {{
    var doc = document.getElementById("page").contentDocument;
    out.title = doc.title;
    doc.querySelectorAll("figure.chart").forEach(function (f) {{
      var svgs = [];
      f.querySelectorAll("svg").forEach(function (s) {{
        var r = s.getBoundingClientRect();
        var marks = 0;
        s.querySelectorAll("rect,circle,polyline,path,line").forEach(function (e) {{
          var st = getComputedStyle(e);
          if (coloured(st.fill) || coloured(st.stroke)) marks++;
        }});
        svgs.push({{ width: r.width, height: r.height, marks: marks,
          texts: s.querySelectorAll("text").length }});
      }});
      out.figures.push({{ id: f.id, kind: f.dataset.kind, svgs: svgs }});
    }});
  }} catch (e) {{ out.error = String(e); }}
  var pre = document.createElement("pre");
  pre.id = "result";
  pre.textContent = JSON.stringify(out);
  document.body.appendChild(pre);
}});
</script></body></html>"#
    )
}

/// `cpudoctor report FIXTURES... -o DIR/report.html` (files of tests/fixtures), which must
/// succeed; returns the page.
fn write_report(dir: &Path, inputs: &[&str]) -> PathBuf {
    let out = dir.join("report.html");
    let status = Command::new(env!("CARGO_BIN_EXE_cpudoctor"))
        .arg("report")
        .args(inputs.iter().map(|n| common::fixture(n)))
        .arg("-o")
        .arg(&out)
        .stdout(Stdio::null())
        .status()
        .unwrap();
    assert!(status.success());
    out
}

/// Loads the report directly (console must stay silent), then through the harness, and
/// returns the per-chart measurements.
fn render_in_browser(chromium: &Path, dir: &Path, report: &Path) -> Value {
    let direct = load(chromium, report, dir);
    assert!(
        direct.console.is_empty(),
        "console messages: {:#?}",
        direct.console
    );
    assert!(direct.dom.contains("<figure class=\"chart\""));
    let page = dir.join("harness.html");
    std::fs::write(&page, harness("report.html")).unwrap();
    let run = load(chromium, &page, dir);
    assert!(
        run.console.is_empty(),
        "console messages: {:#?}",
        run.console
    );
    let start = run.dom.find("<pre id=\"result\">").expect("harness ran") + 17;
    let end = start + run.dom[start..].find("</pre>").unwrap();
    let json = run.dom[start..end]
        .replace("&quot;", "\"")
        .replace("&lt;", "<")
        .replace("&gt;", ">")
        .replace("&amp;", "&");
    let result: Value = serde_json::from_str(&json).unwrap();
    assert!(result.get("error").is_none(), "{result}");
    result
}

fn figure<'a>(result: &'a Value, id: &str) -> &'a Value {
    common::entry(&result["figures"], "id", id)
}

/// Every SVG of the chart is laid out at a real size, with axis labels and at least
/// `min_marks` coloured data marks.
fn assert_drawn(result: &Value, id: &str, min_marks: u64) {
    let f = figure(result, id);
    let svgs = f["svgs"].as_array().unwrap();
    assert!(!svgs.is_empty(), "{id}: no svg");
    for s in svgs {
        assert!(s["width"].as_f64().unwrap() > 200.0, "{id}: {s}");
        assert!(s["height"].as_f64().unwrap() > 150.0, "{id}: {s}");
        assert!(s["texts"].as_u64().unwrap() >= 5, "{id}: {s}");
        assert!(s["marks"].as_u64().unwrap() >= min_marks, "{id}: {s}");
    }
}

#[test]
fn console_capture_sees_errors() {
    // The check below is only worth something if a console error would be seen.
    let Some(chromium) = browser_or_skip() else {
        return;
    };
    let dir = tempfile::tempdir().unwrap();
    let page = dir.path().join("noisy.html");
    std::fs::write(
        &page,
        "<!DOCTYPE html><html><head><title>x</title></head><body>\
         <script>console.error('deliberate-error')</script></body></html>",
    )
    .unwrap();
    let run = load(&chromium, &page, dir.path());
    assert!(
        run.console.iter().any(|l| l.contains("deliberate-error")),
        "console capture missed the error: {:#?}",
        run.console
    );
}

#[test]
fn report_of_a_real_fingerprint_draws_every_chart() {
    let Some(chromium) = browser_or_skip() else {
        return;
    };
    let dir = tempfile::tempdir().unwrap();
    // Every probe, measured on this 2-vCPU guest.
    let report = write_report(dir.path(), &["fingerprints/zen4-kvm-probe-all.json"]);
    let result = render_in_browser(&chromium, dir.path(), &report);
    // Eleven charts' worth of series (the file read with this build's analysis, which adds
    // the 4 KiB penalty at each DRAM size); four add nothing and are left out: the 2 x 2
    // core-to-core matrices (one pair, one figure), the one-group topology bars, and the
    // latency curve in cycles beside the same curve in ns.
    assert_eq!(result["figures"].as_array().unwrap().len(), 7, "{result}");
    // Ten runtimes, one bar each.
    assert_drawn(&result, "chart-spin-before-block", 10);
    // Two CPUs, one bar each.
    assert_drawn(&result, "chart-pause-pause-ns-per-cpu", 2);
    // Latency curves per page kind (4 KiB, THP), 33 sizes each: two lines, 66 markers.
    assert_drawn(&result, "chart-mem-latency-latency-ns-size-bytes", 2 + 66);
    // The TLB sweep: 27 sizes per page kind, and the 4 KiB extra over huge pages.
    assert_drawn(
        &result,
        "chart-mem-latency-latency-ns-size-bytes-spanned-one-line-per-4-kib-page",
        2 + 54,
    );
    assert_drawn(
        &result,
        "chart-mem-latency-extra-latency-cycles-4-kib-over-huge-pages-size-bytes-spanned-one-line-per-4-kib-page",
        1 + 27,
    );
    // The 4 KiB penalty at each size of the curve's DRAM plateau (11 of them): a line
    // and its markers.
    assert_drawn(
        &result,
        "chart-mem-latency-latency-ratio-4-kib-over-huge-pages-size-bytes",
        1 + 11,
    );
    // Read bandwidth: 1 and 2 threads, 4 KiB and THP, with and without prefetch.
    assert_drawn(&result, "chart-bandwidth-read-bw-gbs", 10);
}

#[test]
fn overlaid_report_draws_curves_heatmap_and_bars() {
    let Some(chromium) = browser_or_skip() else {
        return;
    };
    let dir = tempfile::tempdir().unwrap();
    let report = write_report(
        dir.path(),
        &[
            "fingerprints/zen4-kvm-probe-full.json",
            "fingerprints/slow-pause-skylake-sp.json",
            "fingerprints/synthetic-all-series.json",
        ],
    );
    let result = render_in_browser(&chromium, dir.path(), &report);
    assert_eq!(result["figures"].as_array().unwrap().len(), 5, "{result}");
    // Three runs with a PAUSE figure: 30 bars.
    assert_drawn(&result, "chart-spin-before-block", 30);
    assert_drawn(&result, "chart-pause-pause-ns-per-cpu", 6);
    // Two curves of 17 points: two lines plus 34 point markers.
    assert_drawn(&result, "chart-mem-latency-latency-ns-size-bytes", 36);
    // 4 x 4 cells, 4 of them null (grey), so 12 coloured, plus the 64-step colour key.
    assert_drawn(&result, "chart-c2c-c2c-latency-ns", 12 + 64);
    assert_drawn(&result, "chart-bandwidth-read-bandwidth-gbps", 4);
}

/// The flame graphs of a diagnoses report: every figure of `kind`, each laid out at a real
/// size with its frames' names and at least `min_marks` coloured frames.
fn assert_flames(result: &Value, kind: &str, count: usize, min_marks: u64) {
    let figures: Vec<&Value> = result["figures"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|f| f["kind"] == kind)
        .collect();
    assert_eq!(figures.len(), count, "{kind}: {result}");
    for f in figures {
        // The graph, and inside it the frames' own svg.
        let outer = &f["svgs"][0];
        assert!(outer["width"].as_f64().unwrap() > 300.0, "{f}");
        assert!(outer["height"].as_f64().unwrap() > 60.0, "{f}");
        assert!(outer["texts"].as_u64().unwrap() >= 5, "{f}");
        assert!(outer["marks"].as_u64().unwrap() >= min_marks, "{f}");
    }
}

/// The experiment page: each experiment's effects (a dot and a whisker per variant, drawn by
/// plotters like every other chart since issue 32, where it was hand-written SVG) and the
/// scaling curve against ideal, each laid out at a real size in the report's chart frame.
#[test]
fn report_of_two_experiments_draws_their_effects_and_the_scaling_curve() {
    let Some(chromium) = browser_or_skip() else {
        return;
    };
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("report.html");
    let fixtures = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/experiment");
    let status = Command::new(env!("CARGO_BIN_EXE_cpudoctor"))
        .arg("report")
        .arg(fixtures.join("pages_neighbour.json"))
        .arg(fixtures.join("scaling_packed.json"))
        .arg("-o")
        .arg(&out)
        .stdout(Stdio::null())
        .status()
        .unwrap();
    assert!(status.success());
    let result = render_in_browser(&chromium, dir.path(), &out);
    assert_eq!(result["figures"].as_array().unwrap().len(), 3, "{result}");
    // Four variants against their baselines: four dots and four whiskers; one for the
    // scaling run; its curve a line and a dot per CPU count.
    assert_drawn(&result, "effects-0", 8);
    assert_drawn(&result, "effects-1", 2);
    assert_drawn(&result, "scaling-1", 3);
}

#[test]
fn report_of_two_diagnoses_draws_both_flame_graphs_and_the_differential_one() {
    let Some(chromium) = browser_or_skip() else {
        return;
    };
    let dir = tempfile::tempdir().unwrap();
    let out = write_report(
        dir.path(),
        &[
            "diagnose/spin-phases-140-zen3-kvm.json",
            "diagnose/spin-phases-4000-zen3-kvm.json",
        ],
    );
    let result = render_in_browser(&chromium, dir.path(), &out);
    assert_eq!(result["figures"].as_array().unwrap().len(), 3, "{result}");
    // Five frames each (libc's thread start, main, serve, do_work, wait_for_item), coloured
    // by name; in the differential one only the two that changed are coloured.
    assert_flames(&result, "flame", 2, 5);
    assert_flames(&result, "flame-diff", 1, 2);
}

#[test]
fn report_of_two_wall_views_draws_their_wall_time_flame_graphs() {
    let Some(chromium) = browser_or_skip() else {
        return;
    };
    let dir = tempfile::tempdir().unwrap();
    let out = write_report(
        dir.path(),
        &[
            "diagnose/mutex-wait-2-zen4-kvm.json",
            "diagnose/mutex-wait-4-zen4-kvm.json",
        ],
    );
    let result = render_in_browser(&chromium, dir.path(), &out);
    assert_eq!(result["figures"].as_array().unwrap().len(), 5, "{result}");
    // The wall-time graphs: the main thread's join, the workers on and off the CPU, the lock
    // wait: well over a dozen coloured frames each.
    assert_flames(&result, "flame-wall", 2, 15);
    assert_flames(&result, "flame", 2, 5);
}
