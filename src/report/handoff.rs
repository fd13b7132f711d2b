//! Terminal rendering of the `handoff` probe (`cpudoctor spin --handoff`): wall time and the
//! CPU burned by waiting threads, one row per runtime, one column per sender delay, read back
//! from the fingerprint alone so a saved file renders the same.

use super::schema::{ProbeResult, Series, Status};
use comfy_table::{CellAlignment, ContentArrangement, Table, presets::UTF8_FULL_CONDENSED};
use serde_json::Value;
use std::fmt::Write;

fn xy<'a>(p: &'a ProbeResult, name: &str) -> Option<&'a [[f64; 2]]> {
    p.series.iter().find_map(|s| match s {
        Series::Xy {
            name: n, points, ..
        } if n == name => Some(points.as_slice()),
        _ => None,
    })
}

fn at(points: &[[f64; 2]], delay: f64) -> Option<f64> {
    points.iter().find(|p| p[0] == delay).map(|p| p[1])
}

fn f64_param(p: &ProbeResult, key: &str) -> Option<f64> {
    p.params.get(key).and_then(Value::as_f64)
}

static NULL: Value = Value::Null;

/// `params[key]`, or null when absent (a file from another version may lack it).
fn param<'a>(p: &'a ProbeResult, key: &str) -> &'a Value {
    p.params.get(key).unwrap_or(&NULL)
}

/// `effects[key]`, or null when absent.
fn effect<'a>(p: &'a ProbeResult, key: &str) -> &'a Value {
    p.effects.get(key).unwrap_or(&NULL)
}

/// One table: rows are runtimes, columns delays; `cell` formats a y value.
fn grid(
    p: &ProbeResult,
    delays: &[f64],
    runtimes: &[String],
    series_prefix: &str,
    with_ideal: bool,
    cell: impl Fn(f64) -> String,
    width: u16,
) -> String {
    let mut t = Table::new();
    t.load_style(UTF8_FULL_CONDENSED)
        .set_content_arrangement(ContentArrangement::Dynamic)
        .set_width(width);
    let mut header = vec!["Runtime".to_string()];
    header.extend(delays.iter().map(|d| format!("D={d} ms")));
    t.set_header(header);
    if with_ideal && let Some(ideal) = xy(p, "ideal_ms") {
        let mut row = vec!["ideal".to_string()];
        row.extend(
            delays
                .iter()
                .map(|&d| at(ideal, d).map_or("-".into(), &cell)),
        );
        t.add_row(row);
    }
    for rt in runtimes {
        let status = effect(p, "runtimes")[rt]["status"].as_str().unwrap_or("?");
        let mut row = vec![rt.clone()];
        match xy(p, &format!("{series_prefix}.{rt}")) {
            Some(points) if status == "ok" => row.extend(
                delays
                    .iter()
                    .map(|&d| at(points, d).map_or("-".into(), &cell)),
            ),
            _ => row.extend(delays.iter().map(|_| status.to_string())),
        }
        t.add_row(row);
    }
    for i in 1..=delays.len() {
        if let Some(c) = t.column_mut(i) {
            c.set_cell_alignment(CellAlignment::Right);
        }
    }
    t.to_string()
}

/// The handoff report: parameters, the wall-time table with the ideal, the waiting-CPU
/// table, what was skipped and why, and the model lock's comparison.
pub fn render_handoff(p: &ProbeResult, width: u16) -> String {
    let mut s = String::new();
    if p.status != Status::Ok {
        let _ = writeln!(
            s,
            "handoff {}: {}",
            if p.status == Status::Skipped {
                "skipped"
            } else {
                "FAILED"
            },
            p.reason.as_deref().unwrap_or("no reason given")
        );
        return s;
    }
    let delays: Vec<f64> = param(p, "delays_ms")
        .as_array()
        .map(|a| a.iter().filter_map(Value::as_f64).collect())
        .unwrap_or_default();
    let runtimes: Vec<String> = param(p, "runtimes")
        .as_array()
        .map(|a| {
            a.iter()
                .filter_map(|v| v.as_str().map(String::from))
                .collect()
        })
        .unwrap_or_default();
    let items = param(p, "items").as_u64().unwrap_or(0);
    let work = f64_param(p, "work_ms").unwrap_or(0.0);
    let reps = param(p, "repetitions").as_u64().unwrap_or(1);
    let _ = writeln!(
        s,
        "Handoff: {items} items; the worker holds the lock for {work} ms of busy work per item; \
         the sender adds an item under the lock, wakes the worker, then busy-waits D ms. \
         Ideal = items x max({work} ms, D). Median of {reps} run(s) per cell."
    );
    if let (Some(modelled), Some(measured)) = (
        f64_param(p, "model_pause_ns").or_else(|| effect(p, "modelled_pause_ns").as_f64()),
        effect(p, "measured_pause_ns").as_f64(),
    ) {
        let cores = param(p, "model_cores").as_u64().unwrap_or(0);
        let _ = writeln!(
            s,
            "Model lock: PAUSE modelled at {modelled:.1} ns (measured here {measured:.1} ns over \
             runs of {} PAUSEs; {:.2} PAUSEs here per modelled PAUSE); legacy round limit \
             20000 x {cores} cores.",
            effect(p, "pause_calibration_run_pauses")
                .as_u64()
                .map_or("?".into(), crate::format::group_thousands),
            modelled / measured
        );
    }
    let _ = writeln!(s, "\nWall time, seconds:");
    s.push_str(&grid(
        p,
        &delays,
        &runtimes,
        "wall_ms",
        true,
        |ms| format!("{:.3}", ms / 1e3),
        width,
    ));
    let _ = writeln!(
        s,
        "\n\nCPU burned by the waiting threads (sender acquiring the lock, worker acquiring it \
         and waiting for work), ms:"
    );
    s.push_str(&grid(
        p,
        &delays,
        &runtimes,
        "wait_cpu_ms",
        false,
        |ms| format!("{ms:.1}"),
        width,
    ));
    s.push('\n');
    for rt in &runtimes {
        let e = &effect(p, "runtimes")[rt];
        if let (Some(status), Some(reason)) = (e["status"].as_str(), e["reason"].as_str())
            && status != "ok"
        {
            let _ = writeln!(s, "{rt} {status}: {reason}");
        }
    }
    if let (Some(ratio), Some(d)) = (
        p.metric("model_legacy_over_normalized_ratio"),
        effect(p, "model_legacy_over_normalized_worst_delay_ms").as_f64(),
    ) {
        let wall = |rt: &str| {
            xy(p, &format!("wall_ms.{rt}"))
                .and_then(|pts| at(pts, d))
                .unwrap_or(f64::NAN)
        };
        let longest = effect(p, "runtimes")["model_dotnet_legacy"]["modelled_longest_run_ns"]
            .as_f64()
            .unwrap_or(f64::NAN);
        let _ = writeln!(
            s,
            "\nModel lock at D={d} ms: .NET legacy {:.3} s, normalized {:.3} s: legacy takes \
             {:.2}x as long. A legacy waiter looks at the lock only after a whole round (the \
             longest is {:.1} ms here), so a lock freed early in a round stays unclaimed to its \
             end; the normalized waiter looks every few hundred ns and then blocks.",
            wall("model_dotnet_legacy") / 1e3,
            wall("model_dotnet_normalized") / 1e3,
            ratio.value,
            longest / 1e6
        );
    }
    if let (Some(ns), Some(calibrated)) = (
        spin_ns_per_pause(p, "model_dotnet_legacy"),
        effect(p, "measured_pause_ns").as_f64(),
    ) {
        let _ = writeln!(
            s,
            "While spinning, the legacy waiter took {ns:.1} ns per PAUSE of this machine \
             (calibrated {calibrated:.1} ns). Well above the calibration means it was preempted \
             (a busy machine) or the hypervisor took pause-loop exits: a round counted in \
             PAUSEs then lasts longer than modelled, and so does the handoff."
        );
    }
    s
}

/// Wall time per PAUSE while the model lock `rt` spun, over every run: how fast its rounds
/// really went, against the calibration they were scaled with.
fn spin_ns_per_pause(p: &ProbeResult, rt: &str) -> Option<f64> {
    let by_delay = effect(p, "runtimes")[rt]["lock_stats"].as_object()?;
    let (mut ns, mut pauses) = (0.0, 0.0);
    for s in by_delay.values().filter_map(Value::as_array).flatten() {
        ns += s["spin_ns"].as_f64()?;
        pauses += s["pauses_spun"].as_f64()?;
    }
    (pauses > 0.0).then(|| ns / pauses)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::report::schema::{Better, Metric};
    use serde_json::json;

    fn probe() -> ProbeResult {
        let mut p = ProbeResult::new("handoff", Status::Ok);
        p.params.insert("items".into(), json!(100));
        p.params.insert("work_ms".into(), json!(10.0));
        p.params.insert("delays_ms".into(), json!([1.0, 5.0]));
        p.params.insert("repetitions".into(), json!(1));
        p.params.insert("model_pause_ns".into(), json!(43.0));
        p.params.insert("model_cores".into(), json!(24));
        p.params.insert(
            "runtimes".into(),
            json!(["model_dotnet_legacy", "model_dotnet_normalized", "go_sync"]),
        );
        p.effects.insert("measured_pause_ns".into(), json!(24.5));
        p.effects
            .insert("pause_calibration_run_pauses".into(), json!(40_000));
        p.effects.insert(
            "runtimes".into(),
            json!({
                "model_dotnet_legacy": {"status": "ok", "modelled_longest_run_ns": 14.1e6,
                    "lock_stats": {"delay_1ms": [{"spin_ns": 3.0e8, "pauses_spun": 1.0e7}],
                                   "delay_5ms": [{"spin_ns": 1.0e8, "pauses_spun": 1.0e7}]}},
                "model_dotnet_normalized": {"status": "ok"},
                "go_sync": {"status": "skipped", "reason": "go toolchain missing: go not found"},
            }),
        );
        p.effects.insert(
            "model_legacy_over_normalized_worst_delay_ms".into(),
            json!(1.0),
        );
        p.metrics.push(Metric::derived(
            "model_legacy_over_normalized_ratio",
            2.2,
            "ratio",
            Better::Lower,
        ));
        let xy = |name: &str, pts: Vec<[f64; 2]>| Series::Xy {
            name: name.into(),
            x_label: "delay_ms".into(),
            y_label: "wall_ms".into(),
            points: pts,
        };
        p.series = vec![
            xy("ideal_ms", vec![[1.0, 1000.0], [5.0, 1000.0]]),
            xy(
                "wall_ms.model_dotnet_legacy",
                vec![[1.0, 2210.0], [5.0, 1010.0]],
            ),
            xy(
                "wall_ms.model_dotnet_normalized",
                vec![[1.0, 1004.5], [5.0, 1003.0]],
            ),
            xy(
                "wait_cpu_ms.model_dotnet_legacy",
                vec![[1.0, 1200.0], [5.0, 2.0]],
            ),
            xy(
                "wait_cpu_ms.model_dotnet_normalized",
                vec![[1.0, 1.5], [5.0, 0.5]],
            ),
        ];
        p
    }

    #[test]
    fn table_has_a_row_per_runtime_a_column_per_delay_and_says_why_one_skipped() {
        let out = render_handoff(&probe(), 140);
        for needle in [
            "D=1 ms",
            "D=5 ms",
            "ideal",
            "1.000",
            "2.210",
            "1.004",
            "1200.0",
            "skipped",
            "go_sync skipped: go toolchain missing",
            "PAUSE modelled at 43.0 ns (measured here 24.5 ns over runs of 40,000 PAUSEs",
            "legacy takes 2.20x as long",
            "longest is 14.1 ms",
            "took 20.0 ns per PAUSE of this machine (calibrated 24.5 ns)",
        ] {
            assert!(out.contains(needle), "missing {needle:?} in\n{out}");
        }
    }

    // Regression: a run without the model lock has no `measured_pause_ns` effect, and the
    // renderer panicked indexing the missing key.
    #[test]
    fn renders_a_run_without_the_model_lock() {
        let mut p = probe();
        p.effects.remove("measured_pause_ns");
        p.effects
            .remove("model_legacy_over_normalized_worst_delay_ms");
        p.params.remove("model_pause_ns");
        p.metrics.clear();
        let out = render_handoff(&p, 120);
        assert!(
            out.contains("go_sync skipped: go toolchain missing"),
            "{out}"
        );
        assert!(!out.contains("Model lock:"), "{out}");
    }

    #[test]
    fn a_failed_probe_prints_its_reason() {
        let mut p = ProbeResult::new("handoff", Status::Failed);
        p.reason = Some("no runtime ran".into());
        assert_eq!(render_handoff(&p, 80), "handoff FAILED: no runtime ran\n");
    }
}
