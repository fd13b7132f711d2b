//! The words of "why is it slower" (`compare::why`, printed first by `render::why`): the
//! loss, what each machine figure predicts, why a mechanism has no prediction, the remainder,
//! and how to measure what is missing. Callers pass the labels of their typed vocabulary
//! (a mechanism's, a figure's) as text, since words sit below `compare` and `diagnose`.

use crate::format::{interval_words, pct};

/// How to record the work done, so a diff measures the loss.
pub const HOW_TO_MEASURE: &str = "record the work with `cpudoctor diagnose --runs N -- CMD` \
    (wall time of N runs), `--metric REGEX` (a figure of its output, a throughput or a time) \
    or, attached, `--rate N` (a rate read from the server's own client)";

/// How to give a diagnosis its machine's figures.
pub const HOW_TO_GET_FIGURES: &str = "to get a missing figure: `cpudoctor diagnose --check \
    CHECK.json` (a saved check of that machine) or `--figures all` when diagnosing, or \
    `cpudoctor diff --machines OLD_CHECK.json NEW_CHECK.json` for files already saved";

/// Neither side, or one side, recorded the work.
pub fn loss_not_recorded(side: Option<&str>) -> String {
    let which = match side {
        None => "neither diagnosis records the work it did".to_string(),
        Some(s) => format!("the {s} diagnosis does not record the work it did"),
    };
    format!(
        "The loss was not measured: {which}; the attribution below is in CPU time per unit of \
         work instead. To measure it, {HOW_TO_MEASURE}."
    )
}

/// The two sides measured different things.
pub fn loss_measures_differ(old: &str, new: &str) -> String {
    format!(
        "The loss was not measured: the old diagnosis records {old}, the new one {new}; the \
         attribution below is in CPU time per unit of work instead. To measure it, record \
         both the same way: {HOW_TO_MEASURE}."
    )
}

/// The work records hold no usable value.
pub fn loss_no_values() -> String {
    format!(
        "The loss was not measured: a work record holds no positive value. To measure it, \
         {HOW_TO_MEASURE}."
    )
}

/// A work measure in words: `wall time`, `CPU time`, `` `tps: (\d+)` `` (a metric), `rate (TPS)`.
pub fn measure(kind: &str, detail: &str) -> String {
    match (kind, detail.is_empty()) {
        ("wall_time", _) => "wall time".into(),
        ("cpu_time", _) => "CPU time".into(),
        ("metric", _) => format!("`{detail}`"),
        ("rate", true) => "a rate".into(),
        ("rate", false) => format!("rate ({detail})"),
        (k, _) => k.replace('_', " "),
    }
}

/// The headline: `1.38x slower (wall time, 95% CI 1.31-1.45x, 5 runs each)`, or with one
/// run each, `1.38x slower (wall time, one run each: no interval)`. `ratio` is new over old
/// time per unit; a ratio below 1 reads as faster (old over new).
pub fn headline(
    ratio: f64,
    interval: Option<(f64, f64, f64)>,
    measure: &str,
    runs: (usize, usize),
    nominal: f64,
) -> String {
    let (word, r, iv) = if ratio >= 1.0 {
        ("slower", ratio, interval)
    } else {
        (
            "faster",
            1.0 / ratio,
            interval.map(|(l, h, c)| (1.0 / h, 1.0 / l, c)),
        )
    };
    let runs_words = if runs.0 == runs.1 {
        format!("{} runs each", runs.0)
    } else {
        format!("{} and {} runs", runs.0, runs.1)
    };
    let detail = match iv {
        _ if runs == (1, 1) => "one run each: no interval".to_string(),
        Some((l, h, c)) => format!(
            "{}, {runs_words}",
            interval_words(l, h, "ratio", c, nominal, Some(runs.0.min(runs.1)))
        ),
        None => runs_words,
    };
    if (r - 1.0).abs() < 0.005 {
        return format!("No change: {r:.2}x ({measure}, {detail})");
    }
    format!("{r:.2}x {word} ({measure}, {detail})")
}

/// The section's heading: slower, faster, or no change (within half a point, or within
/// noise when `beyond_noise` says so).
pub fn heading(total_points: f64, beyond_noise: Option<bool>) -> &'static str {
    if beyond_noise == Some(false) {
        "What moved, and why (no change overall beyond noise)"
    } else if total_points >= 0.5 {
        "Why it is slower"
    } else if total_points <= -0.5 {
        "Why it is faster"
    } else {
        "What moved, and why (no change overall)"
    }
}

/// Heading of the states of the threads' time that moved.
pub const WALL_MOVES: &str = "Where the threads' time went, from the wall-clock views:";

/// Without a loss: the CPU time per unit of work, which the points are of.
pub fn cpu_headline(old_s: f64, new_s: f64, ratio: Option<f64>, unit: &str) -> String {
    let r = match ratio {
        Some(r) if r >= 1.0 => format!(" ({r:.2}x more)"),
        Some(r) if r > 0.0 => format!(" ({:.2}x less)", 1.0 / r),
        _ => String::new(),
    };
    format!(
        "CPU time per {unit}: {} -> {}{r}; the points below are of the old side's CPU time per \
         {unit}",
        crate::format::human_ns(old_s * 1e9),
        crate::format::human_ns(new_s * 1e9)
    )
}

/// What a unit of work is, by basis (`run`, `unit`, `second`).
pub fn unit_word(basis: &str) -> &'static str {
    match basis {
        "run" => "run",
        "unit" => "unit of work",
        _ => "second of recording",
    }
}

/// With a loss: what the CPU profile holds of it.
pub fn cpu_share_of_loss(cpu_points: f64, loss_points: f64, unit: &str) -> String {
    format!(
        "CPU time per {unit} moved {cpu_points:+.1} points of the {loss_points:+.1}; the \
         points below are of the old side's CPU time per {unit}"
    )
}

/// A figure's value on both sides: `PAUSE 24.1 -> 43.6 ns (1.81x)`.
pub fn figure_line(label: &str, unit: &str, old: Option<f64>, new: Option<f64>) -> String {
    let v = |x: Option<f64>| x.map_or_else(|| "?".to_string(), |x| format!("{x:.1}"));
    let v2 = |x: Option<f64>| x.map_or_else(|| "?".to_string(), |x| format!("{x:.2}"));
    let ratio = match (old, new) {
        (Some(o), Some(n)) if o > 0.0 => format!(" ({})", ratio_words(n / o)),
        _ => String::new(),
    };
    // Times past 10 us in their own unit (a trapped split lock: `1.1 ms -> 1.1 us`), not as
    // seven-digit nanoseconds.
    if unit == "ns" && old.into_iter().chain(new).any(|x| x >= 1e4) {
        let h = |x: Option<f64>| x.map_or_else(|| "?".to_string(), crate::format::human_ns);
        return format!("{label} {} -> {}{ratio}", h(old), h(new));
    }
    let (a, b) = if unit == "GHz" {
        (v2(old), v2(new))
    } else {
        (v(old), v(new))
    };
    format!("{label} {a} -> {b} {unit}{ratio}")
}

/// A ratio with two significant digits however small: `1.81x`, `0.0010x` (a split lock
/// trapped on one side only), never `0.00x`.
pub fn ratio_words(r: f64) -> String {
    let digits = if r > 0.0 && r < 0.1 {
        (1 - r.log10().floor() as i32).max(2) as usize
    } else {
        2
    };
    format!("{r:.digits$}x")
}

/// The name of the DRAM figures when the two sides got different page sizes.
pub const DRAM_LOAD: &str = "DRAM load";

/// A figure whose old side is another (the page size each side got): `DRAM load: huge pages
/// 259.0 -> 4 KiB pages 429.3 ns (1.66x)`.
pub fn figure_pair_line(
    label: &str,
    old_label: &str,
    new_label: &str,
    unit: &str,
    old: f64,
    new: f64,
) -> String {
    let ratio = if old > 0.0 {
        format!(" ({:.2}x)", new / old)
    } else {
        String::new()
    };
    format!("{label}: {old_label} {old:.1} -> {new_label} {new:.1} {unit}{ratio}")
}

/// Where a pair's DRAM figures were read: at the program's `footprint`, off each side's
/// latency curve or (`one_curve`: its side) both off one side's; `ends_below` names each
/// curve that ends below the footprint, with the size read there (its end).
pub fn dram_at_footprint(
    footprint: u64,
    one_curve: Option<&str>,
    ends_below: &[(&str, u64)],
) -> String {
    use crate::format::human_bytes;
    let whose = match one_curve {
        Some(side) => format!(
            "both sides off the {side} side's latency curve (one machine: the two page sizes \
             compare within one paired measurement)"
        ),
        None => "each side off its own latency curve".to_string(),
    };
    let mut line = format!(
        "DRAM figures read at the program's footprint, {} (its largest process's anonymous \
         memory), {whose}",
        human_bytes(footprint)
    );
    let short: Vec<String> = ends_below
        .iter()
        .map(|(side, at)| {
            format!(
                "the {side} side's curve ends at {}, read there",
                human_bytes(*at)
            )
        })
        .collect();
    if !short.is_empty() {
        line.push_str("; ");
        line.push_str(&short.join(", "));
    }
    line
}

/// A figure not known on a side, in a table cell.
pub fn figure_not_known(label: &str) -> String {
    format!("{label} (not known)")
}

/// A figure missing on one side or both, and how to get it.
pub fn figure_missing(label: &str, old_missing: bool, new_missing: bool) -> String {
    let side = match (old_missing, new_missing) {
        (true, true) => "either side",
        (true, false) => "the old side",
        _ => "the new side",
    };
    format!("no prediction: the {label} figure is not known on {side} ({HOW_TO_GET_FIGURES})")
}

/// A spin without PAUSE has no figure.
pub const SPIN_WITHOUT_PAUSE_UNPREDICTED: &str = "no figure predicts it: a spin without PAUSE \
    re-reads its line for as long as the holder holds it, which the program sets, not the \
    machine";
/// Blocked on a lock.
pub const BLOCKED_UNPREDICTED: &str = "no figure predicts it: a thread blocked on a lock waits \
    as long as the holder keeps it (the wall-clock view shows the waits)";
/// Kernel code.
pub const KERNEL_UNPREDICTED: &str = "no figure predicts it: kernel code follows the kernel's \
    path (system calls, page faults, a hypervisor's exits), not one figure of the CPU";

/// InnoDB's spin by its formula, both sides' knobs known.
pub fn innodb_formula(server: &str, old_pauses: u64, new_pauses: u64) -> String {
    format!(
        "{server}'s spin by its formula: {old_pauses} -> {new_pauses} PAUSEs a round \
         (multiplier x delay, as each server runs), times PAUSE's own change"
    )
}

/// Neither side spins.
pub fn innodb_no_spin(server: &str) -> String {
    format!("{server}'s spin is 0 PAUSEs a round on both sides (innodb_spin_wait_delay = 0)")
}

/// The old side did not spin: no ratio.
pub fn innodb_old_did_not_spin(server: &str) -> String {
    format!(
        "no prediction: {server} spun 0 PAUSEs a round on the old side (innodb_spin_wait_delay \
         = 0), so no ratio of its spin exists"
    )
}

/// A changed delay, the multiplier not read.
pub fn innodb_delay_ratio(server: &str, old_delay: u64, new_delay: u64) -> String {
    let gone = if new_delay == 0 {
        ": all the spin's rounds go"
    } else {
        ""
    };
    format!(
        "{server}'s innodb_spin_wait_delay {old_delay} -> {new_delay} scales every round of \
         its spin{gone} (the same calibrated multiplier assumed: it was not read)"
    )
}

/// InnoDB's spin, calibrated.
pub fn innodb_calibrated(server: &str) -> String {
    format!(
        "no change predicted from PAUSE: {server}'s spin is multiplier x \
         innodb_spin_wait_delay PAUSEs a round, the multiplier calibrated to PAUSE at start-up \
         (its value was not read, so the formula cannot be applied)"
    )
}

/// An InnoDB lock spin whose `innodb_spin_wait_delay` was read on one side only.
pub fn innodb_delay_read_on_one_side(server: &str, unread: &str) -> String {
    format!(
        "no prediction: {server}'s innodb_spin_wait_delay was not read on the {unread} side \
         (its lock spin was too cold there to be found in the code); `SELECT \
         @@innodb_spin_wait_delay` on that server tells whether the setting changed"
    )
}

/// .NET's normalized spin.
pub fn dotnet_normalized() -> String {
    "no change predicted from PAUSE: .NET's normalized spin times PAUSE at start-up and spins \
     for a time, not a count (about 272 ns an iteration on any CPU)"
        .into()
}

/// What a mechanism's rest is: its observed ratio against what its figure predicts
/// (`1.06x where core clock 3.10 -> 3.10 GHz (1.00x) predicts 1.00x`), or why there is no
/// prediction.
pub fn mechanism_rest(
    observed_ratio: Option<f64>,
    predicted_ratio: Option<f64>,
    figure: Option<&str>,
    reason: Option<&str>,
) -> String {
    let observed = observed_ratio.map_or_else(
        || "not sampled on the old side".to_string(),
        |r| format!("{r:.2}x"),
    );
    match (predicted_ratio, figure) {
        (Some(p), Some(figure)) => format!("{observed} where {figure} predicts {p:.2}x"),
        (Some(p), None) => format!("{observed} where {p:.2}x was predicted"),
        (None, _) => match reason {
            Some(r) => format!("{observed}; {r}"),
            None => observed,
        },
    }
}

/// The name of the part of the loss the CPU profile does not hold.
pub const OFF_CPU: &str = "outside the CPU profile";

/// That part, for a CPU-time loss.
pub fn cpu_time_rest() -> String {
    "CPU time the samples did not catch (sampling noise, time before or after the recording)".into()
}

/// That part, for a metric or a rate.
pub fn metric_rest() -> String {
    "the measure's own change that the run's CPU time does not show: it may time a part of \
     the run (a phase, a loop), or time spent off the CPU"
        .into()
}

/// That part, for a wall time.
pub fn off_cpu_rest(has_wall_view: bool) -> String {
    if has_wall_view {
        "off the CPU (waits or a CPU's queue): the states of the threads' time that moved \
         follow"
            .into()
    } else {
        "off the CPU (waits, a CPU's queue) or outside the recording: a wall-clock view on \
         both sides would say which"
            .into()
    }
}

/// The whole accounting in one sentence, signed parts that add up to the points observed:
/// `Of the +26 points, core clock 3.24 -> 2.40 GHz (0.74x) explains +21, PAUSE 24.1 -> 16.4
/// ns (0.68x) -13, and +18 are unexplained`. `parts` are the figures that predict, with their
/// points; `other` the points of mechanisms too small to list.
pub fn accounting(parts: &[(String, f64)], other: f64, unexplained: f64, total: f64) -> String {
    let signed = |p: f64| {
        let n = points_number(p);
        if n.starts_with('-') {
            n
        } else {
            format!("+{n}")
        }
    };
    let mut items: Vec<String> = parts
        .iter()
        .enumerate()
        .map(|(i, (what, p))| {
            if i == 0 {
                format!("{what} explains {}", signed(*p))
            } else {
                format!("{what} {}", signed(*p))
            }
        })
        .collect();
    if other.abs() >= 0.05 {
        items.push(format!("smaller mechanisms {}", signed(other)));
    }
    let rest = format!(
        "{} {} unexplained",
        signed(unexplained),
        if unexplained.abs() >= 1.5 || unexplained.abs() < 0.95 {
            "are"
        } else {
            "is"
        }
    );
    if items.is_empty() {
        return format!(
            "Of the {} points, no figure explains any: {rest}",
            signed(total)
        );
    }
    format!(
        "Of the {} points, {}, and {rest}",
        signed(total),
        items.join(", ")
    )
}

/// A point figure rounded for a sentence: whole points from 10, one decimal below.
pub fn points_number(p: f64) -> String {
    if p.abs() >= 10.0 {
        format!("{p:.0}")
    } else {
        format!("{p:.1}")
    }
}

/// One part of the remainder: `computation +3.7 pt: 1.06x where ...`.
pub fn remainder_part(label: &str, points: f64, words: &str) -> String {
    format!("{label} {points:+.1} pt: {words}")
}

/// A state of the threads' time that moved: `lock wait 12.0% -> 38.5% of the threads' time`.
pub fn wall_move(state: &str, old_share: f64, new_share: f64) -> String {
    format!(
        "{state} {} -> {} of the threads' time",
        pct(old_share, 1),
        pct(new_share, 1)
    )
}

/// The heading of the column that says whether a prediction holds.
pub fn holds_heading(factor: f64) -> String {
    format!("Within {factor:.2}x")
}

/// A function's observed change in a table cell: `1.75x +33.0 pt`, `new +12.0 pt` (not
/// sampled on the old side), `gone -100.0 pt`.
pub fn observed_cell(ratio: Option<f64>, points: f64) -> String {
    match ratio {
        None => format!("new {points:+.1} pt"),
        Some(0.0) => format!("gone {points:+.1} pt"),
        Some(r) => format!("{} {points:+.1} pt", ratio_words(r)),
    }
}

/// A prediction's verdict in a table cell.
pub fn holds_cell(holds: Option<bool>) -> &'static str {
    match holds {
        Some(true) => "yes",
        Some(false) => "no",
        None => "-",
    }
}

/// Why a function's prediction is not judged.
pub fn not_judged(min_samples: u64) -> String {
    format!("a prediction is judged only with {min_samples} samples or more on each side")
}

/// Some figure was measured while other work loaded the CPUs.
pub fn disturbed_figures() -> String {
    "a figure was measured while other work loaded the CPUs (its probe's disturbance record): \
     it may read off, and so may what it predicts"
        .into()
}

/// One run each.
pub fn one_run_each() -> String {
    "one run each: the loss has no interval; `diagnose --runs N` times N runs of each side".into()
}

/// A check given with `--machines` does not look like the machine a diagnosis ran on.
pub fn check_of_another_machine(side: &str, check_cpu: &str, diagnosis_cpu: &str) -> String {
    format!(
        "the {side} check was saved on {check_cpu}, the {side} diagnosis ran on \
         {diagnosis_cpu}: the check's figures are used as given"
    )
}

/// The waterfall's caption.
pub fn waterfall_caption() -> String {
    "The loss by mechanism, in points of the old side's time: each figure's explained points \
     from zero, then the unexplained rest; the last bar is the whole"
        .into()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_accounting_is_one_sentence_whose_signed_parts_add_up() {
        // The fixed-count PAUSE program, Zen 3 -> Emerald Rapids (issue 42): the core clock
        // explains +21, PAUSE -12.7, and 17.7 are left of the 26 observed.
        let s = accounting(
            &[
                ("core clock 3.24 -> 2.40 GHz (0.74x)".into(), 21.0),
                ("PAUSE 24.1 -> 16.4 ns (0.68x)".into(), -12.7),
            ],
            0.0,
            17.7,
            26.0,
        );
        assert_eq!(
            s,
            "Of the +26 points, core clock 3.24 -> 2.40 GHz (0.74x) explains +21, PAUSE \
             24.1 -> 16.4 ns (0.68x) -13, and +18 are unexplained"
        );
        assert!(accounting(&[], 0.0, -0.7, -0.7).contains("no figure explains any"));
        assert!(
            accounting(&[("x".into(), 5.0)], 1.0, 1.0, 7.0).contains("smaller mechanisms +1.0")
        );
    }
}
