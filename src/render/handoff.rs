//! Terminal rendering of the `handoff` probe (`cpudoctor spin --handoff`): wall time and the
//! CPU burned by waiting threads, one row per runtime, one column per sender delay, read back
//! from the fingerprint alone so a saved file renders the same. A series' points are in the
//! order of `params.delays_ms` and are read by position; a sentence whose figures are missing
//! is left out rather than printed with a NaN.

use crate::render::text::Style;
use crate::render::text::{table, wrap};
use crate::schema::figures::{RawRecord, from_map};
use crate::schema::probes::handoff::{
    HandoffDerived, HandoffEffects, HandoffFigures, HandoffParams, IDEAL_SERIES, Quantity, Runtime,
    RuntimeStatus, WaitCpuFrom,
};
use crate::schema::{ProbeResult, Status};
use crate::spin::dotnet::LIMIT_PAUSES_PER_CORE;
use comfy_table::CellAlignment;

/// What the report reads of a handoff result, each part as much as a saved file gives (a
/// file from another version may lack some: the part it cannot read stays empty).
struct Saved {
    params: HandoffParams,
    effects: HandoffEffects,
    derived: HandoffDerived,
    figures: HandoffFigures,
}

impl Saved {
    fn of(p: &ProbeResult) -> Saved {
        Saved {
            params: from_map(&p.params).unwrap_or_default(),
            effects: from_map(&p.effects).unwrap_or_default(),
            derived: HandoffDerived::read_from(p).unwrap_or_default(),
            figures: p.figures().unwrap_or_default(),
        }
    }

    /// What became of `rt`, when the file says.
    fn status(&self, rt: Runtime) -> Option<RuntimeStatus> {
        self.effects.runtimes.get(&rt).map(|e| e.status)
    }
}

/// The y of the point for delay number `i`, when the series has one point per delay.
fn at(points: &[[f64; 2]], delays: usize, i: usize) -> Option<f64> {
    (points.len() == delays).then(|| points[i][1])
}

/// One table: rows are runtimes, columns delays; `cell` formats a y value.
fn grid(
    saved: &Saved,
    quantity: Quantity,
    with_ideal: bool,
    cell: impl Fn(f64) -> String,
    width: u16,
) -> String {
    let delays = &saved.params.delays_ms;
    let mut header = vec!["Runtime".to_string()];
    header.extend(delays.iter().map(|d| format!("D={d} ms")));
    let header: Vec<&str> = header.iter().map(String::as_str).collect();
    let mut t = table(width, &header);
    let n = delays.len();
    if with_ideal && let Some(ideal) = saved.derived.xy(IDEAL_SERIES) {
        let mut row = vec!["ideal".to_string()];
        row.extend((0..n).map(|i| at(ideal, n, i).map_or("-".into(), &cell)));
        t.add_row(row);
    }
    for &rt in &saved.params.runtimes {
        let status = saved.status(rt);
        let mut row = vec![rt.name().to_string()];
        match saved.derived.xy(&quantity.series(rt)) {
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
    let saved = Saved::of(p);
    let params = &saved.params;
    let items = params.items;
    let work = params.work_ms;
    let reps = params.repetitions;
    s.push_str(&wrap(&format!("Handoff: {items} items; the worker holds the lock for {work} ms of busy work per item; \
         the sender adds an item under the lock, wakes the worker, then busy-waits D ms. \
         Ideal = items x max({work} ms, D). Median of {reps} run(s) per cell."), width, 0));
    if let Some(modelled) = params.model_pause_ns {
        let cores = params.model_cores;
        s.push_str(&wrap(&format!("Model lock: PAUSE modelled at {modelled:.1} ns ({}); legacy round limit \
             {LIMIT_PAUSES_PER_CORE} x {cores} cores. Each run of PAUSEs lasts until its modelled end (PAUSEs x \
             {modelled:.1} ns after the spin began); the lock is looked at only then.",
            params
                .model_pause_source
                .as_deref()
                .unwrap_or("source not recorded")), width, 0));
    }
    s.push_str(&wrap("\nWall time, seconds:", width, 0));
    s.push_str(&grid(
        &saved,
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
        &saved,
        Quantity::WaitCpuMs,
        false,
        |ms| format!("{ms:.1}"),
        width,
    ));
    s.push('\n');
    for &rt in &params.runtimes {
        if let Some(e) = saved.effects.runtimes.get(&rt)
            && let Some(reason) = &e.reason
            && e.status != RuntimeStatus::Ok
        {
            s.push_str(&wrap(
                &format!("{} {}: {reason}", rt.name(), e.status.word()),
                width,
                0,
            ));
        }
    }
    for &rt in &params.runtimes {
        let from = saved
            .effects
            .runtimes
            .get(&rt)
            .and_then(|e| e.wait_cpu_from);
        if from == Some(WaitCpuFrom::ProcessMinusBusy) {
            s.push_str(&wrap(
                &format!(
                    "{}: waiting CPU is the process's CPU less the busy work asked for (items x \
                 (work + D)): its threads cannot be timed one by one. It includes the runtime's \
                 own threads; preemption inside the busy work lowers it.",
                    rt.name()
                ),
                width,
                0,
            ));
        }
    }
    if let Some(line) = model_ratio_line(&saved) {
        s.push_str(&wrap(&format!("\n{line}"), width, 0));
    } else if let Some(why) = &saved.derived.model_legacy_over_normalized_ratio_omitted {
        s.push_str(&wrap(
            &format!("\nModel lock legacy/normalized ratio not given: {why}."),
            width,
            0,
        ));
    }
    if let Some((mean_ns, max_ns, looks)) = look_lateness(&saved, Runtime::ModelDotnetLegacy) {
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
fn model_ratio_line(saved: &Saved) -> Option<String> {
    let f = &saved.figures;
    let ratio = f.model_legacy_over_normalized_ratio.as_ref()?;
    let d = saved.derived.model_legacy_over_normalized_worst_delay_ms?;
    let wall = |rt: Runtime| f.wall_ms(rt, d).map(|m| m.value);
    let (legacy, normalized) = (
        wall(Runtime::ModelDotnetLegacy)?,
        wall(Runtime::ModelDotnetNormalized)?,
    );
    let spread = ratio.spread.as_ref().map_or(String::new(), |s| {
        format!(
            " (runs from {:.2}x to {:.2}x over {} pairs)",
            s.min, s.max, s.n
        )
    });
    let longest = saved
        .effects
        .runtimes
        .get(&Runtime::ModelDotnetLegacy)
        .and_then(|e| e.modelled_longest_run_ns)
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
fn look_lateness(saved: &Saved, rt: Runtime) -> Option<(f64, f64, u64)> {
    let by_delay = saved.effects.runtimes.get(&rt)?.lock_stats.as_ref()?;
    let (mut total, mut max, mut looks) = (0.0_f64, 0.0_f64, 0_u64);
    for s in by_delay.values().flatten() {
        total += s.look_late_ns_total as f64;
        max = max.max(s.look_late_ns_max as f64);
        looks += s.looks;
    }
    (looks > 0).then(|| (total / looks as f64, max, looks))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::schema::{Better, Metric, Series};
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
                        "delay_1ms": [{"looks": 800, "look_late_ns_total": 80_000_000,
                                       "look_late_ns_max": 2_000_000}],
                        "delay_5ms": [{"looks": 200, "look_late_ns_total": 20_000_000,
                                       "look_late_ns_max": 1_000_000}]}},
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
