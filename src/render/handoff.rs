//! Terminal rendering of the `handoff` probe (`cpudoctor spin --handoff`): wall time and the
//! CPU burned by waiting threads, one row per runtime, one column per sender delay, read back
//! from the fingerprint alone so a saved file renders the same. A series' points are in the
//! order of `params.delays_ms` and are read by position; a sentence whose figures are missing
//! is left out rather than printed with a NaN.

use crate::render::text::Style;
use crate::render::text::{table, wrap};
use crate::schema::handoff::{IDEAL_SERIES, MODEL_RATIO_METRIC, Quantity, RuntimeStatus};
use crate::schema::{ProbeResult, Series, Status};
use crate::spin::dotnet::LIMIT_PAUSES_PER_CORE;
use comfy_table::CellAlignment;
use serde_json::Value;

fn xy<'a>(p: &'a ProbeResult, name: &str) -> Option<&'a [[f64; 2]]> {
    p.series.iter().find_map(|s| match s {
        Series::Xy {
            name: n, points, ..
        } if n == name => Some(points.as_slice()),
        _ => None,
    })
}

/// The y of the point for delay number `i`, when the series has one point per delay.
fn at(points: &[[f64; 2]], delays: usize, i: usize) -> Option<f64> {
    (points.len() == delays).then(|| points[i][1])
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
    quantity: Quantity,
    with_ideal: bool,
    cell: impl Fn(f64) -> String,
    width: u16,
) -> String {
    let mut header = vec!["Runtime".to_string()];
    header.extend(delays.iter().map(|d| format!("D={d} ms")));
    let header: Vec<&str> = header.iter().map(String::as_str).collect();
    let mut t = table(width, &header);
    let n = delays.len();
    if with_ideal && let Some(ideal) = xy(p, IDEAL_SERIES) {
        let mut row = vec!["ideal".to_string()];
        row.extend((0..n).map(|i| at(ideal, n, i).map_or("-".into(), &cell)));
        t.add_row(row);
    }
    for rt in runtimes {
        let status: Option<RuntimeStatus> =
            serde_json::from_value(effect(p, "runtimes")[rt]["status"].clone()).ok();
        let mut row = vec![rt.clone()];
        match xy(p, &quantity.series(rt)) {
            Some(points) if status == Some(RuntimeStatus::Ok) => {
                row.extend((0..n).map(|i| at(points, n, i).map_or("-".into(), &cell)))
            }
            _ => row.extend(
                delays
                    .iter()
                    .map(|_| status.map_or("?", RuntimeStatus::word).to_string()),
            ),
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
pub fn render_handoff(p: &ProbeResult, style: impl Into<Style>) -> String {
    let width = style.into().width;
    let mut s = String::new();
    if p.status != Status::Ok {
        s.push_str(&wrap(
            &format!(
                "handoff {}: {}",
                if p.status == Status::Skipped {
                    "skipped"
                } else {
                    "FAILED"
                },
                p.reason.as_deref().unwrap_or("no reason given")
            ),
            width,
            0,
        ));
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
    s.push_str(&wrap(&format!("Handoff: {items} items; the worker holds the lock for {work} ms of busy work per item; \
         the sender adds an item under the lock, wakes the worker, then busy-waits D ms. \
         Ideal = items x max({work} ms, D). Median of {reps} run(s) per cell."), width, 0));
    if let Some(modelled) = f64_param(p, "model_pause_ns") {
        let cores = param(p, "model_cores").as_u64().unwrap_or(0);
        s.push_str(&wrap(&format!("Model lock: PAUSE modelled at {modelled:.1} ns ({}); legacy round limit \
             {LIMIT_PAUSES_PER_CORE} x {cores} cores. Each run of PAUSEs lasts until its modelled end (PAUSEs x \
             {modelled:.1} ns after the spin began); the lock is looked at only then.",
            param(p, "model_pause_source")
                .as_str()
                .unwrap_or("source not recorded")), width, 0));
    }
    s.push_str(&wrap("\nWall time, seconds:", width, 0));
    s.push_str(&grid(
        p,
        &delays,
        &runtimes,
        Quantity::WallMs,
        true,
        |ms| format!("{:.3}", ms / 1e3),
        width,
    ));
    s.push_str(&wrap(
        "\n\nCPU burned by the waiting threads (sender acquiring the lock, worker acquiring it \
         and waiting for work), ms:",
        width,
        0,
    ));
    s.push_str(&grid(
        p,
        &delays,
        &runtimes,
        Quantity::WaitCpuMs,
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
            s.push_str(&wrap(&format!("{rt} {status}: {reason}"), width, 0));
        }
    }
    for rt in &runtimes {
        if effect(p, "runtimes")[rt]["wait_cpu_from"].as_str() == Some("process_minus_busy") {
            s.push_str(&wrap(
                &format!(
                    "{rt}: waiting CPU is the process's CPU less the busy work asked for (items x \
                 (work + D)): its threads cannot be timed one by one. It includes the runtime's \
                 own threads; preemption inside the busy work lowers it."
                ),
                width,
                0,
            ));
        }
    }
    if let Some(line) = model_ratio_line(p) {
        s.push_str(&wrap(&format!("\n{line}"), width, 0));
    } else if let Some(why) = effect(p, "model_legacy_over_normalized_ratio_omitted").as_str() {
        s.push_str(&wrap(
            &format!("\nModel lock legacy/normalized ratio not given: {why}."),
            width,
            0,
        ));
    }
    if let Some((mean_ns, max_ns, looks)) = look_lateness(p, "model_dotnet_legacy") {
        s.push_str(&wrap(
            &format!(
                "The legacy waiter looked at the lock {looks} times, on average {} after the \
             modelled end of its run (latest {}): a busy machine delays a look (preemption), \
             never brings it forward.",
                crate::format::human_ns(mean_ns),
                crate::format::human_ns(max_ns)
            ),
            width,
            0,
        ));
    }
    s
}

/// The model lock's comparison at the delay where legacy is slowest against normalized,
/// when the fingerprint has every figure it needs.
fn model_ratio_line(p: &ProbeResult) -> Option<String> {
    let ratio = p.metric(MODEL_RATIO_METRIC)?;
    let d = effect(p, "model_legacy_over_normalized_worst_delay_ms").as_f64()?;
    let wall = |rt: &str| p.metric(&Quantity::WallMs.metric(rt, d)).map(|m| m.value);
    let (legacy, normalized) = (
        wall("model_dotnet_legacy")?,
        wall("model_dotnet_normalized")?,
    );
    let spread = ratio.spread.as_ref().map_or(String::new(), |s| {
        format!(
            " (runs from {:.2}x to {:.2}x over {} pairs)",
            s.min, s.max, s.n
        )
    });
    let longest = effect(p, "runtimes")["model_dotnet_legacy"]["modelled_longest_run_ns"]
        .as_f64()
        .map_or(String::new(), |ns| {
            format!(" (the longest is {:.1} ms here)", ns / 1e6)
        });
    Some(format!(
        "Model lock at D={d} ms: .NET legacy {:.3} s, normalized {:.3} s: legacy takes {:.2}x \
         as long, median of run pairs{spread}. A legacy waiter looks at the lock only after a \
         whole round{longest}, so a lock freed early in a round stays unclaimed to its end; the \
         normalized waiter looks every few hundred ns and then blocks.",
        legacy / 1e3,
        normalized / 1e3,
        ratio.value
    ))
}

/// (mean, max) lateness of the model lock `rt`'s looks after their modelled deadlines, in
/// ns, and the number of looks, over every run.
fn look_lateness(p: &ProbeResult, rt: &str) -> Option<(f64, f64, u64)> {
    let by_delay = effect(p, "runtimes")[rt]["lock_stats"].as_object()?;
    let (mut total, mut max, mut looks) = (0.0_f64, 0.0_f64, 0_u64);
    for s in by_delay.values().filter_map(Value::as_array).flatten() {
        total += s["look_late_ns_total"].as_f64()?;
        max = max.max(s["look_late_ns_max"].as_f64()?);
        looks += s["looks"].as_u64()?;
    }
    (looks > 0).then(|| (total / looks as f64, max, looks))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::schema::{Better, Metric};
    use serde_json::json;

    fn probe() -> ProbeResult {
        let mut p = ProbeResult::new("handoff", Status::Ok);
        p.params.insert("items".into(), json!(100));
        p.params.insert("work_ms".into(), json!(10.0));
        p.params.insert("delays_ms".into(), json!([1.0, 5.0]));
        p.params.insert("repetitions".into(), json!(3));
        p.params.insert("model_pause_ns".into(), json!(43.0));
        p.params.insert("model_pause_source".into(), json!("given"));
        p.params.insert("model_cores".into(), json!(24));
        p.params.insert(
            "runtimes".into(),
            json!(["model_dotnet_legacy", "model_dotnet_normalized", "go_sync"]),
        );
        p.effects.insert(
            "runtimes".into(),
            json!({
                "model_dotnet_legacy": {"status": "ok", "modelled_longest_run_ns": 14.1e6,
                    "lock_stats": {
                        "delay_1ms": [{"looks": 800, "look_late_ns_total": 80.0e6,
                                       "look_late_ns_max": 2.0e6}],
                        "delay_5ms": [{"looks": 200, "look_late_ns_total": 20.0e6,
                                       "look_late_ns_max": 1.0e6}]}},
                "model_dotnet_normalized": {"status": "ok"},
                "go_sync": {"status": "skipped", "reason": "go toolchain missing: go not found"},
            }),
        );
        p.effects.insert(
            "model_legacy_over_normalized_worst_delay_ms".into(),
            json!(1.0),
        );
        let ratio = Metric::from_samples(
            "model_legacy_over_normalized_ratio",
            "ratio",
            Better::Lower,
            &[2.2, 2.0, 2.4],
        );
        p.metrics.extend(ratio);
        for (name, v) in [
            ("model_dotnet_legacy_delay_1ms_wall_ms", 2210.0),
            ("model_dotnet_normalized_delay_1ms_wall_ms", 1004.5),
        ] {
            p.metrics
                .push(Metric::derived(name, v, "ms", Better::Lower));
        }
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
        // Wide enough that no needle is wrapped; the 80-column view is a snapshot test.
        let out = render_handoff(&probe(), 400);
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
            "PAUSE modelled at 43.0 ns (given); legacy round limit 20000 x 24 cores",
            "legacy takes 2.20x as long, median of run pairs (runs from 2.00x to 2.40x over 3 pairs)",
            "longest is 14.1 ms",
            "looked at the lock 1000 times, on average 100.0 us after",
            "(latest 2.0 ms)",
        ] {
            assert!(out.contains(needle), "missing {needle:?} in\n{out}");
        }
    }

    // Regression: cells were found by comparing each point's delay with the requested delay as
    // floats; a delay that does not survive a JSON round trip bit for bit lost its cell. Points
    // are read by position.
    #[test]
    fn cells_are_read_by_position_not_by_float_equality() {
        let mut p = probe();
        p.params
            .insert("delays_ms".into(), json!([1.0000000000000002, 5.0]));
        let out = render_handoff(&p, 140);
        assert!(out.contains("2.210") && out.contains("1.010"), "{out}");
    }

    #[test]
    fn a_process_minus_busy_runtime_says_how_its_waiting_cpu_was_found() {
        let mut p = probe();
        p.effects.get_mut("runtimes").unwrap()["model_dotnet_normalized"]["wait_cpu_from"] =
            json!("process_minus_busy");
        let out = render_handoff(&p, 140);
        assert!(
            out.contains(
                "model_dotnet_normalized: waiting CPU is the process's CPU less the busy work"
            ),
            "{out}"
        );
    }

    // Regression: a missing wall figure was printed as "NaN s" in the model lock's sentence.
    #[test]
    fn the_model_sentence_is_left_out_when_a_figure_is_missing() {
        let mut p = probe();
        p.metrics
            .retain(|m| m.name != "model_dotnet_normalized_delay_1ms_wall_ms");
        let out = render_handoff(&p, 140);
        assert!(
            !out.contains("NaN") && !out.contains("legacy takes"),
            "{out}"
        );
        let mut p = probe();
        p.metrics
            .retain(|m| m.name != "model_legacy_over_normalized_ratio");
        p.effects.insert(
            "model_legacy_over_normalized_ratio_omitted".into(),
            json!("1 run(s) per delay; the largest ratio is reported over 3 or more"),
        );
        let out = render_handoff(&p, 140);
        assert!(out.contains("ratio not given: 1 run(s) per delay"), "{out}");
    }

    #[test]
    fn renders_a_run_without_the_model_lock() {
        let mut p = probe();
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
