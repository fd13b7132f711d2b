//! The terminal report of a diagnosis: header facts, findings with their evidence and code,
//! then the tables behind them (hot sites, functions, threads, memory). Returns a `String`.

use crate::diagnose::Diagnosis;
use crate::diagnose::analyse::disasm::SiteKind;
use crate::diagnose::analyse::figures::{MachineFigure, MachineFigures};
use crate::diagnose::analyse::hotspots::ThreadReport;
use crate::diagnose::analyse::hotspots::coverage::Coverage;
use crate::diagnose::analyse::hotspots::short_module;
use crate::diagnose::analyse::kernel::{CpuCoverage, KernelReport};
use crate::diagnose::analyse::wall::{StateTimes, WallReport};
use crate::diagnose::record::memory::ProcessMemory;
use crate::diagnose::record::sampler::KernelSampling;
use crate::diagnose::record::wall::WallSource;
use crate::diagnose::record::work::{WorkMeasure, WorkRecord};
use crate::format::count_of;
use crate::format::group_thousands;
use crate::format::human_kib;
use crate::format::human_ns;
use crate::format::human_value;
use crate::format::pct;
use crate::render::text::Style;
use crate::render::text::{align_right, table, wrap, wrap_labelled};
use crate::schema::line_sharing::{WatchOutcome, WatchSkipped};
use crate::words::diagnose::{
    CommandFollowed, KernelNotSampled, KernelShare, kernel_not_sampled, kernel_sampled,
    processes_followed,
};
use std::fmt::Write;

/// Renders the whole report for a terminal of `style` (its width).
pub fn render(d: &Diagnosis, style: impl Into<Style>) -> String {
    let width = style.into().width;
    let mut o = header(d, width);
    o.push('\n');
    if let Some(w) = &d.wall {
        o.push_str(&wall(w, width));
        o.push('\n');
    }
    o.push_str(&findings(d, width));
    o.push_str(&line_watch(d, width));
    o.push_str(&coverage(d, width));
    o.push_str(&hot_sites(d, width));
    o.push_str(&functions(d, width));
    o.push_str(&threads(d, width));
    o.push_str(&process_figures(d, width));
    o
}

/// The header: what ran, how it was sampled, the counters or why none, the machine, PAUSE.
fn header(d: &Diagnosis, w: u16) -> String {
    let mut o = String::new();
    // A process run by another name than its executable's (Debian's `redis-server`, a
    // symlink to `redis-check-rdb`) says both: the name it was run by, the file beside.
    let executable = d.target.name.as_ref().and_then(|n| n.executable.as_ref());
    let what = match (&d.target.command, &d.target.name) {
        (Some(c), _) => match executable {
            Some(exe) => format!("{} (executable {exe}), pid {}", c.join(" "), d.target.pid),
            None => format!("{} (pid {})", c.join(" "), d.target.pid),
        },
        (None, Some(n)) => format!("attached to {}, pid {}", n.describe(), d.target.pid),
        (None, None) => format!("attached to PID {} (pid {})", d.target.pid, d.target.pid),
    };
    o.push_str(&wrap_labelled(
        &format!(
            "{what}: {}, {:.2} s recorded",
            d.target.ended, d.sampling.wall_s
        ),
        "Workload    ",
        w,
    ));
    if let Some(line) = processes_line(d) {
        o.push_str(&wrap_labelled(&line, "Processes   ", w));
    }
    for n in &d.target.namespaces {
        o.push_str(&wrap_labelled(&n.describe(), "Namespaces  ", w));
    }
    o.push_str(&wrap_labelled(
        &format!(
            "{} at {} Hz, {}: {} samples{}",
            d.sampling.event.event_name(),
            d.sampling.frequency_hz,
            d.sampling.scope.words(),
            group_thousands(d.sampling.samples),
            if d.sampling.lost > 0 {
                format!(", {} records lost", d.sampling.lost)
            } else {
                String::new()
            }
        ),
        "Sampling    ",
        w,
    ));
    if let Some(u) = d.sampling.stacks.as_ref().filter(|u| u.samples > 0) {
        o.push_str(&wrap_labelled(&u.line(), "Stacks      ", w));
    }
    if let Some(line) = d
        .kernel
        .as_ref()
        .and_then(|k| kernel_line(k, d.sampling.samples))
    {
        o.push_str(&wrap_labelled(&line, "Kernel      ", w));
    }
    if d.counters.available {
        let cpi = d
            .counters
            .cpi
            .map(|c| format!("CPI {c:.2}; "))
            .unwrap_or_default();
        let _ = writeln!(o, "Counters    {cpi}events: {}", d.counters.note);
    } else {
        let pmu = format!(
            "none: {}. Hardware counters (CPI, TLB misses, bus locks, machine clears, HITM) \
             are not available; everything below comes from timer samples, the code and /proc.",
            d.machine.pmu_reason.as_deref().unwrap_or("not usable")
        );
        o.push_str(&wrap_labelled(&pmu, "PMU         ", w));
    }
    o.push_str(&wrap_labelled(
        &format!(
            "{}, {} logical CPUs, THP {}",
            d.machine.cpu,
            d.machine.logical_cpus,
            d.machine.thp.map_or("unknown", |t| t.as_str())
        ),
        "Machine     ",
        w,
    ));
    if let Some(p) = d.machine.pause {
        let source = d
            .machine
            .pause_source
            .as_ref()
            .map(crate::diagnose::PauseSource::words)
            .unwrap_or_else(|| "measured now, quick pause probe".to_string());
        o.push_str(&wrap_labelled(
            &format!(
                "{:.1} ns{} ({source})",
                p.ns,
                p.cycles
                    .map(|c| format!(" = {c:.0} cycles"))
                    .unwrap_or_default()
            ),
            "PAUSE       ",
            w,
        ));
    }
    if let Some(f) = &d.machine.figures {
        o.push_str(&wrap_labelled(&figures_line(f), "Figures     ", w));
    }
    if let Some(work) = &d.work {
        o.push_str(&wrap_labelled(&work_line(work), "Work        ", w));
    }
    o
}

/// The machine figures the diagnosis carries, one line: `clock 3.70 GHz, PAUSE 24.5 ns, DRAM
/// 118 ns (4 KiB) / 96 ns (huge), measured now`, where they came from, and which were
/// measured while the CPUs were busy.
fn figures_line(f: &MachineFigures) -> String {
    use crate::diagnose::analyse::rules::CostSource;
    if f.figures.is_empty() {
        return "none recorded (the CPU facts only)".to_string();
    }
    let value = |fig: MachineFigure| {
        f.figures
            .get(&fig)
            .map(|v| human_value(v.value, fig.unit()))
    };
    let mut parts = Vec::new();
    for fig in MachineFigure::ALL {
        let Some(v) = value(fig) else { continue };
        match fig {
            MachineFigure::CoreClockGhz => parts.push(format!("clock {v}")),
            MachineFigure::DramLatency4kNs => {
                parts.push(match value(MachineFigure::DramLatencyHugeNs) {
                    Some(h) => format!("DRAM {v} (4 KiB) / {h} (huge)"),
                    None => format!("DRAM {v} (4 KiB)"),
                })
            }
            MachineFigure::DramLatencyHugeNs => {
                if value(MachineFigure::DramLatency4kNs).is_none() {
                    parts.push(format!("DRAM {v} (huge)"));
                }
            }
            _ => parts.push(format!("{} {v}", fig.label())),
        }
    }
    let file = |s: &CostSource| match s {
        // The file's name: its directory would take the line.
        CostSource::SavedCheck { file } => Some(
            std::path::Path::new(file)
                .file_name()
                .map_or_else(|| file.clone(), |n| n.to_string_lossy().into_owned()),
        ),
        CostSource::MeasuredNow => None,
    };
    let files: std::collections::BTreeSet<String> =
        f.figures.values().filter_map(|v| file(&v.source)).collect();
    let short = |k: &MachineFigure| match k {
        MachineFigure::CoreClockGhz => "clock",
        other => other.label(),
    };
    let now: Vec<&str> = f
        .figures
        .iter()
        .filter(|(_, v)| v.source == CostSource::MeasuredNow)
        .map(|(k, _)| short(k))
        .collect();
    let files = files.into_iter().collect::<Vec<_>>().join(", ");
    let source = if files.is_empty() {
        "measured now".to_string()
    } else if now.is_empty() {
        format!("from {files}")
    } else {
        format!("from {files}; {} measured now", now.join(", "))
    };
    let busy: Vec<&str> = f
        .figures
        .iter()
        .filter(|(_, v)| v.disturbed)
        .map(|(k, _)| short(k))
        .collect();
    let busy = if busy.is_empty() {
        String::new()
    } else if busy.len() == f.figures.len() {
        "; CPUs busy: may read off".to_string()
    } else {
        format!("; CPUs busy for {}: may read off", busy.join(", "))
    };
    format!("{}, {source}{busy}", parts.join(", "))
}

/// The work measure, one line: `wall 2.31 s, 1 run (profiled)`, or `wall, 5 runs without the
/// profiler: median 2.28 s (2.25-2.33)`.
fn work_line(w: &WorkRecord) -> String {
    let (what, unit) = match &w.measure {
        WorkMeasure::WallTime => ("wall".to_string(), "s"),
        WorkMeasure::CpuTime => ("CPU time".to_string(), "s"),
        WorkMeasure::Metric {
            regex,
            higher_is_better,
        } => (
            format!(
                "/{regex}/ ({} is better)",
                if *higher_is_better { "higher" } else { "lower" }
            ),
            "",
        ),
        WorkMeasure::Rate { unit } => ("rate (--rate)".to_string(), unit.as_str()),
    };
    let shown = |v: f64| human_value(v, unit).trim_end().to_string();
    let runs = match &w.measure {
        WorkMeasure::Rate { .. } => count_of(w.values.len(), "reading", "readings"),
        _ if w.with_profiler => format!("{} (profiled)", count_of(w.values.len(), "run", "runs")),
        _ => format!(
            "{} without the profiler",
            count_of(w.values.len(), "run", "runs")
        ),
    };
    match w.values.as_slice() {
        [] => format!("{what}, no value"),
        [one] => format!("{what} {}, {runs}", shown(*one)),
        many => {
            let median = crate::stats::median(many).unwrap_or(f64::NAN);
            let lo = many.iter().copied().fold(f64::INFINITY, f64::min);
            let hi = many.iter().copied().fold(f64::NEG_INFINITY, f64::max);
            format!(
                "{what}, {runs}: median {} ({}-{})",
                shown(median),
                shown(lo).trim_end_matches(&format!(" {unit}")[..]),
                shown(hi)
            )
        }
    }
}

/// Kernel time: its share of the samples, per process and function; or, where kernel code was
/// not sampled, how much of the threads' CPU time the samples do not cover.
fn kernel_line(k: &KernelReport, samples: u64) -> Option<String> {
    let system_share = k.cpu.as_ref().map(CpuCoverage::system_share);
    match &k.sampling {
        KernelSampling::Sampled if samples > 0 => Some(kernel_sampled(&KernelShare {
            share: k.share,
            processes: k
                .processes
                .iter()
                .map(|p| (p.command.as_str(), p.kernel_share))
                .collect(),
            entries: k
                .entries
                .iter()
                .map(|e| (e.kind.label(&e.from), e.share))
                .collect(),
            functions: k
                .functions
                .iter()
                .map(|f| (f.function.as_str(), f.share))
                .collect(),
            system_share,
            unnamed_because: k.unnamed_because.as_deref(),
        })),
        KernelSampling::Sampled => None,
        KernelSampling::Off | KernelSampling::Refused { .. } => {
            let why = match &k.sampling {
                KernelSampling::Refused { paranoid, .. } => KernelNotSampled::Refused(*paranoid),
                _ => KernelNotSampled::Asked,
            };
            let sampled_s = k.cpu.as_ref().map_or(0.0, |c| c.sampled_s);
            Some(kernel_not_sampled(
                why,
                k.cpu.as_ref().map(|c| c.cpu_s),
                k.cpu.as_ref().map(|c| c.system_s),
                sampled_s,
            ))
        }
    }
}

/// How the wall-clock view's states were timed: `timed by the kernel's context-switch
/// records`.
pub(crate) fn timed_by(source: WallSource) -> String {
    match source {
        WallSource::SwitchRecords => "timed by the kernel's context-switch records".into(),
        WallSource::Schedstat => "timed by each thread's schedstat counts".into(),
    }
}

/// Where the time went: per command, then the threads that spent most time off the CPU.
fn wall(w: &WallReport, width: u16) -> String {
    let mut o = String::new();
    let m = &w.method;
    let _ = writeln!(o, "Where the time went");
    let how = format!(
        "{} window; states {}; why and where threads slept sampled by {} looks at /proc, one \
         every {} ms{}",
        human_ns(m.window_s * 1e9),
        timed_by(m.source),
        group_thousands(m.looks),
        m.look_every_ms,
        if m.unobserved_share >= 0.001 {
            format!(
                " ({} of the sleep is of threads no look found asleep: why is not known)",
                pct(m.unobserved_share, 1)
            )
        } else {
            String::new()
        }
    );
    o.push_str(&wrap_labelled(&how, "  ", width));
    for c in &w.commands {
        let t = &c.times;
        let head = format!(
            "{}: {} in {}, {} of thread time",
            c.command,
            count_of(c.threads as usize, "thread", "threads"),
            count_of(c.processes as usize, "process", "processes"),
            human_ns(t.wall_s * 1e9)
        );
        o.push_str(&wrap_labelled(&head, "  ", width));
        o.push_str(&wrap_labelled(&states_line(t), "    ", width));
    }
    let shown: Vec<_> = w.threads.iter().take(WALL_THREADS).collect();
    if !shown.is_empty() {
        let mut t = table(
            width,
            &[
                "TID",
                "Name",
                "Running",
                "Spinning",
                "CPU wait",
                "Blocked",
                "Blocked on",
            ],
        );
        for th in shown {
            let s = &th.times;
            t.add_row(vec![
                th.tid.to_string(),
                th.name.clone(),
                pct(s.share(s.running_s), 1),
                pct(s.share(s.spinning_s), 1),
                pct(s.share(s.runnable_s), 1),
                pct(s.share(s.blocked_s), 1),
                blocked_on(s),
            ]);
        }
        let _ = writeln!(o, "{t}");
        if w.threads.len() > WALL_THREADS {
            let _ = writeln!(
                o,
                "  ({} more threads in the JSON)",
                w.threads.len() - WALL_THREADS
            );
        }
    }
    for l in &m.lacks {
        o.push_str(&wrap_labelled(&format!("Lacks: {l}"), "  ", width));
    }
    o
}

/// Threads shown in the wall-clock table.
const WALL_THREADS: usize = 12;

/// `running 9.9% (spinning 0.0%), waiting for a CPU 46.0%, blocked 44.1% (lock 24.1%, ...)`.
fn states_line(t: &StateTimes) -> String {
    let blocked = blocked_on(t);
    format!(
        "running {} (spinning {}), waiting for a CPU {}, blocked {}{}",
        pct(t.share(t.running_s), 1),
        pct(t.share(t.spinning_s), 1),
        pct(t.share(t.runnable_s), 1),
        pct(t.share(t.blocked_s), 1),
        if blocked.is_empty() {
            String::new()
        } else {
            format!(" ({blocked})")
        }
    )
}

/// What the blocked time was spent on: the known waits by kind, then the reasons the kinds do
/// not cover, two at most, as shares of the wall time.
fn blocked_on(t: &StateTimes) -> String {
    let mut parts: Vec<(String, f64)> = t
        .waits
        .iter()
        .map(|k| (k.kind.word().to_string(), k.s))
        .collect();
    let known: f64 = t.waits.iter().map(|k| k.s).sum();
    if known < 0.9 * t.blocked_s {
        let rest = t.blocked_s - known;
        // The reasons, scaled to the part no known wait covers.
        let all: f64 = t.blocked.iter().map(|r| r.s).sum::<f64>().max(1e-12);
        parts.extend(
            t.blocked
                .iter()
                .map(|r| (r.reason.word().to_string(), r.s / all * rest)),
        );
    }
    parts.sort_by(|a, b| b.1.total_cmp(&a.1));
    parts
        .into_iter()
        .filter(|(_, s)| t.share(*s) >= 0.001)
        .take(2)
        .map(|(w, s)| format!("{w} {}", pct(t.share(s), 1)))
        .collect::<Vec<_>>()
        .join(", ")
}

/// The processes followed, by command: for an attached process always (whether its children
/// were found is news), for a started command when it started others.
fn processes_line(d: &Diagnosis) -> Option<String> {
    let t = &d.target;
    let attached = t.command.is_none();
    let processes: u64 = t.followed.iter().map(|g| g.processes).sum();
    if processes == 0 || (!attached && processes == 1) {
        return None;
    }
    let total = d.sampling.samples.max(1) as f64;
    let groups: Vec<CommandFollowed> = t
        .followed
        .iter()
        .map(|g| CommandFollowed {
            command: &g.command,
            processes: g.processes,
            at_attach: g.at_attach,
            started: g.started,
            exited: g.exited,
            sample_share: g.samples as f64 / total,
        })
        .collect();
    Some(processes_followed(&groups, attached, t.no_children))
}

/// The findings, each with its evidence, code, cost and advice.
fn findings(d: &Diagnosis, w: u16) -> String {
    let mut o = String::new();
    if d.findings.is_empty() {
        o.push_str(&wrap_labelled(
            &Coverage::no_findings(d.coverage.as_ref()),
            "",
            w,
        ));
    } else {
        let _ = writeln!(o, "Findings");
    }
    for f in &d.findings {
        o.push('\n');
        o.push_str(&wrap_labelled(
            &format!("[{}] {}", f.level.word(), f.title),
            "",
            w,
        ));
        for e in &f.evidence {
            o.push_str(&wrap_labelled(e, "  - ", w));
        }
        if !f.disassembly.is_empty() {
            let _ = writeln!(o, "  code:");
            for l in &f.disassembly {
                let _ = writeln!(o, "    {l}");
            }
        }
        o.push_str(&wrap_labelled(&format!("Cost: {}", f.explanation), "  ", w));
        o.push_str(&wrap_labelled(&format!("Do: {}", f.advice), "  ", w));
    }
    o
}

/// The watched cache lines: each line's verdict, its words' writers and readers, the fix; or
/// why they were not watched, where the hot code had a contended site to watch.
fn line_watch(d: &Diagnosis, w: u16) -> String {
    use crate::words::lines as words;
    let mut o = String::new();
    let contended = d
        .hot_sites
        .iter()
        .any(|s| matches!(s.kind, SiteKind::LockedRmw | SiteKind::SpinWithoutPause));
    let Some(watch) = &d.line_watch else {
        if contended {
            o.push('\n');
            o.push_str(&wrap_labelled(&words::not_asked(), "", w));
        }
        return o;
    };
    if watch.killed_by_trap {
        o.push('\n');
        o.push_str(&wrap_labelled(
            &format!("{}.", words::killed_by_trap()),
            "",
            w,
        ));
    }
    match &watch.outcome {
        WatchOutcome::Skipped { why } => {
            // A program the watch's trap killed was said above.
            let said = watch.killed_by_trap && *why == WatchSkipped::EndedDuringWatch;
            if !said
                && (contended
                    || matches!(
                        why,
                        WatchSkipped::Refused { .. } | WatchSkipped::EndedDuringWatch
                    ))
            {
                o.push('\n');
                o.push_str(&wrap_labelled(
                    &format!("Cache lines not watched: {}.", words::skipped(why)),
                    "",
                    w,
                ));
            }
        }
        WatchOutcome::Watched => {
            o.push('\n');
            o.push_str(&wrap_labelled(
                &format!(
                    "Cache lines watched (hardware watchpoints): {}.",
                    words::cost(watch)
                ),
                "",
                w,
            ));
            for line in &watch.lines {
                o.push_str(&crate::render::text::wrap_hanging(
                    &words::heading(line),
                    w,
                    2,
                    4,
                ));
                for word in &line.words {
                    o.push_str(&wrap_labelled(&words::word_row(line, word), "    - ", w));
                }
                if let Some(fix) = words::fix(line) {
                    o.push_str(&wrap_labelled(&fix, "    ", w));
                }
            }
        }
    }
    o
}

/// What was not analysed (or not named), each gap with its share and fix; nothing when every
/// sample was analysed and named.
fn coverage(d: &Diagnosis, w: u16) -> String {
    let mut o = String::new();
    let Some(c) = d.coverage.as_ref().filter(|c| !c.gaps.is_empty()) else {
        return o;
    };
    o.push('\n');
    o.push_str(&wrap_labelled(&c.heading(), "", w));
    for g in &c.gaps {
        o.push_str(&wrap_labelled(
            &g.sentence(),
            &format!("{:>7}  ", pct(g.share, 1)),
            w,
        ));
    }
    o
}

/// The ten hottest sites.
fn hot_sites(d: &Diagnosis, width: u16) -> String {
    if d.hot_sites.is_empty() {
        return String::new();
    }
    if width < WIDE_SITES_COLUMNS {
        return hot_sites_list(d, width);
    }
    let mut t = table(
        width,
        &[
            "Share",
            "Kind",
            "Function",
            "Where",
            "Instruction",
            "Threads",
        ],
    );
    for s in d.hot_sites.iter().take(10) {
        t.add_row(vec![
            pct(s.share, 1),
            s.kind.describe().to_string(),
            s.symbol.clone(),
            format!("{} {:#x}", short_module(&s.module), s.address),
            s.instruction.clone(),
            s.threads
                .iter()
                .take(3)
                .map(|t| format!("{} {}", t.tid, pct(t.share_of_thread, 1)))
                .collect::<Vec<_>>()
                .join(", "),
        ]);
    }
    format!("\nHot sites\n{t}\n")
}

/// Below this many columns the hot sites are a list: a six-column table would split
/// instructions and symbols mid-word.
const WIDE_SITES_COLUMNS: u16 = 110;

/// The hot sites as a list for a narrow terminal: share, kind and place on one line, the
/// instruction and its threads under it.
fn hot_sites_list(d: &Diagnosis, width: u16) -> String {
    let mut o = String::from("\nHot sites\n");
    for s in d.hot_sites.iter().take(10) {
        let head = format!(
            "{} in {} ({} {:#x})",
            s.kind.describe(),
            s.symbol,
            short_module(&s.module),
            s.address
        );
        o.push_str(&wrap_labelled(
            &head,
            &format!("  {:>6}  ", pct(s.share, 1)),
            width,
        ));
        let threads = s
            .threads
            .iter()
            .take(3)
            .map(|t| format!("{} {}", t.tid, pct(t.share_of_thread, 1)))
            .collect::<Vec<_>>()
            .join(", ");
        o.push_str(&wrap_labelled(
            &format!("{}; threads {threads}", s.instruction),
            "          ",
            width,
        ));
    }
    o
}

/// The ten hottest functions, then who called the hottest: the sampled call chains,
/// innermost caller first.
fn functions(d: &Diagnosis, width: u16) -> String {
    let mut o = String::new();
    if d.functions.is_empty() {
        return o;
    }
    let _ = writeln!(o, "\nFunctions");
    let mut t = table(width, &["Share", "Samples", "Function", "Module"]);
    for f in d.functions.iter().take(10) {
        t.add_row(vec![
            pct(f.share, 1),
            f.samples.to_string(),
            f.symbol.clone(),
            short_module(&f.module).to_string(),
        ]);
    }
    let _ = writeln!(o, "{t}");
    let with_callers: Vec<_> = d
        .functions
        .iter()
        .filter(|f| !f.callers.is_empty())
        .take(5)
        .collect();
    if !with_callers.is_empty() {
        let _ = writeln!(o, "\nCallers (innermost first)");
        for f in with_callers {
            let _ = writeln!(o, "  {} ({})", f.symbol, pct(f.share, 1));
            for c in &f.callers {
                let line = format!("{} <- {}", pct(c.share, 1), c.frames.join(" <- "));
                let _ = write!(o, "{}", wrap_labelled(&line, "    ", width));
            }
        }
    }
    o
}

/// The twelve busiest threads: CPU against wall time, switches, faults, where samples go.
/// When several processes were followed, grouped by their process's command (the commands
/// with most samples first), each group under a row with its processes and samples.
fn threads(d: &Diagnosis, width: u16) -> String {
    if d.threads.is_empty() {
        return String::new();
    }
    // Seven columns need ~110: below that the last one, the one that says most, was squeezed
    // to a few letters a line ("computat / ion"), so a narrow screen leaves out the switches
    // and faults (the JSON has them) and keeps where the samples go readable.
    let wide = width >= WIDE_THREADS_TABLE;
    let mut header = vec!["TID", "Name", "Samples", "CPU / wall"];
    if wide {
        header.extend(["Switches vol/invol", "Faults min/maj"]);
    }
    header.push("Where its samples go");
    let mut t = table(width, &header);
    let busiest: Vec<&ThreadReport> = d.threads.iter().take(12).collect();
    let groups = &d.target.followed;
    let grouped = groups.iter().map(|g| g.processes).sum::<u64>() > 1;
    if !grouped {
        for th in busiest {
            t.add_row(thread_row(th, th.figures.name.clone(), wide));
        }
        return format!("\nThreads\n{t}{}\n", narrow_note(wide, width));
    }
    let group_of = |th: &ThreadReport| groups.iter().position(|g| g.pids.contains(&th.figures.pid));
    // The followed groups in order, then threads of no known process.
    for (i, g) in groups.iter().enumerate() {
        let members: Vec<&&ThreadReport> = busiest
            .iter()
            .filter(|th| group_of(th) == Some(i))
            .collect();
        if members.is_empty() {
            continue;
        }
        let times = if g.processes > 1 {
            format!(" x{}", g.processes)
        } else {
            String::new()
        };
        let mut row = vec![
            String::new(),
            format!("{}{times}", g.command),
            format!(
                "{} ({})",
                g.samples,
                pct(g.samples as f64 / d.sampling.samples.max(1) as f64, 1)
            ),
        ];
        row.resize(header.len(), String::new());
        t.add_row(row);
        for th in members {
            let f = &th.figures;
            let name = if g.processes > 1 && f.tid != f.pid {
                format!("  {} (pid {})", f.name, f.pid)
            } else {
                format!("  {}", f.name)
            };
            t.add_row(thread_row(th, name, wide));
        }
    }
    for th in busiest.iter().filter(|th| group_of(th).is_none()) {
        t.add_row(thread_row(th, th.figures.name.clone(), wide));
    }
    format!(
        "\nThreads, by process command\n{t}{}\n",
        narrow_note(wide, width)
    )
}

/// Terminal width from which the threads table has its switch and fault columns.
const WIDE_THREADS_TABLE: u16 = 110;

/// Under a narrow threads table: where the columns it left out are, wrapped to `width`.
fn narrow_note(wide: bool, width: u16) -> String {
    if wide {
        String::new()
    } else {
        let note = wrap(
            "(switches and faults per thread: --json, or a terminal 110 columns wide)",
            width,
            2,
        );
        format!("\n{}", note.trim_end())
    }
}

/// One thread's row of the threads table, under `name`; `wide` with switches and faults.
fn thread_row(th: &ThreadReport, name: String, wide: bool) -> Vec<String> {
    let f = &th.figures;
    let mut row = vec![
        f.tid.to_string(),
        name,
        format!("{} ({})", th.samples, pct(th.sample_share, 1)),
        if f.wall_s > 0.0 {
            format!(
                "{} of {} ({})",
                human_ns(f.cpu_s * 1e9),
                human_ns(f.wall_s * 1e9),
                pct(f.cpu_per_wall, 1)
            )
        } else {
            "-".into()
        },
    ];
    if wide {
        row.push(format!(
            "{}/{}",
            f.voluntary_switches, f.involuntary_switches
        ));
        row.push(format!("{}/{}", f.minor_faults, f.major_faults));
    }
    let kernel = (th.kernel_samples > 0).then(|| {
        format!(
            "kernel {}",
            pct(th.kernel_samples as f64 / th.samples.max(1) as f64, 1)
        )
    });
    row.push(
        kernel
            .into_iter()
            .chain(
                th.kinds
                    .iter()
                    .map(|k| format!("{} {}", k.kind.describe(), pct(k.share, 1))),
            )
            .collect::<Vec<_>>()
            .join(if wide { "; " } else { "\n" }),
    );
    row
}

/// Process totals, memory per process, counter values, notes.
fn process_figures(d: &Diagnosis, w: u16) -> String {
    let mut o = String::new();
    if let Some(tot) = &d.totals {
        let line = format!(
            "user {:.2} s, system {:.2} s, {} voluntary / {} involuntary switches, {} minor / \
             {} major faults, peak RSS {}",
            tot.user_s,
            tot.system_s,
            tot.voluntary_switches,
            tot.involuntary_switches,
            tot.minor_faults,
            tot.major_faults,
            human_kib(tot.max_rss_kb)
        );
        o.push_str(&wrap_labelled(&line, "Process totals: ", w));
    }
    for line in memory_lines(d) {
        o.push_str(&wrap_labelled(&line, "", w));
    }
    if d.counters.available && !d.counters.values.is_empty() {
        // The share of the time each event was on a counter; below 99% its count is scaled
        // up from what was counted (multiplexed).
        let mut t = table(w, &["Counter", "Count", "Counted"]);
        align_right(&mut t, &[1, 2]);
        for v in &d.counters.values {
            let counted = pct(v.running_fraction, 1);
            t.add_row(vec![
                v.name.clone(),
                format!("{:.0}", v.value),
                if v.running_fraction < 0.99 {
                    format!("{counted}, scaled")
                } else {
                    counted
                },
            ]);
        }
        let _ = writeln!(o, "\nCounters\n{t}");
    }
    for n in &d.notes {
        o.push_str(&wrap_labelled(&format!("Note: {n}"), "", w));
    }
    o
}

/// Memory of each process, at its largest RSS; several processes of one command (a server's
/// workers) in one line: the largest in full, the others' RSS as a range.
fn memory_lines(d: &Diagnosis) -> Vec<String> {
    let one = |p: &ProcessMemory| {
        format!(
            "Memory of {} ({}): RSS {}, anonymous {}, on huge pages {} ({})",
            p.pid,
            p.name,
            human_kib(p.rss_kb),
            human_kib(p.anonymous_kb),
            human_kib(p.anon_huge_pages_kb),
            pct(p.huge_share(), 1)
        )
    };
    let mut lines = Vec::new();
    let mut said = Vec::new();
    for g in &d.target.followed {
        let mine: Vec<&ProcessMemory> = d
            .processes
            .iter()
            .filter(|p| g.pids.contains(&p.pid))
            .collect();
        said.extend(mine.iter().map(|p| p.pid));
        let Some(largest) = mine
            .iter()
            .max_by_key(|p| (p.rss_kb, std::cmp::Reverse(p.pid)))
        else {
            continue;
        };
        if mine.len() == 1 {
            lines.push(one(largest));
            continue;
        }
        let others = mine
            .iter()
            .filter(|p| p.pid != largest.pid)
            .map(|p| p.rss_kb);
        let (low, high) = others.fold((u64::MAX, 0), |(l, h), r| (l.min(r), h.max(r)));
        let range = if low == high {
            human_kib(low)
        } else {
            format!("{} to {}", human_kib(low), human_kib(high))
        };
        lines.push(format!(
            "Memory of {} x{}: the largest, {}: RSS {}, anonymous {}, on huge pages {} ({}); \
             the other {}: RSS {range}",
            g.command,
            mine.len(),
            largest.pid,
            human_kib(largest.rss_kb),
            human_kib(largest.anonymous_kb),
            human_kib(largest.anon_huge_pages_kb),
            pct(largest.huge_share(), 1),
            mine.len() - 1,
        ));
    }
    lines.extend(
        d.processes
            .iter()
            .filter(|p| !said.contains(&p.pid))
            .map(one),
    );
    lines
}

#[cfg(test)]
pub(crate) mod tests {
    use super::*;
    use crate::diagnose::test_fixture as fixture;

    /// The counters were a hand-aligned list (`{:<40} {:>16.0}`): a longer event name pushed
    /// its count out of line. They are a table now, counts lined up at the right, each with
    /// the share of the time it was on a counter.
    #[test]
    fn counters_are_a_table_with_counts_lined_up() {
        use crate::diagnose::record::counters::CounterValue;
        let mut d = fixture("pause-spin-zen4-kvm.json");
        let value = |name: &str, value, running_fraction| CounterValue {
            name: name.into(),
            signal: None,
            value,
            running_fraction,
        };
        d.counters.available = true;
        d.counters.values = vec![
            value("cycles", 4_000_000_000.0, 1.0),
            value(
                "ls_dispatch.ld_st_dispatch_with_a_name_longer_than_forty_columns",
                12.0,
                0.5,
            ),
        ];
        let text = render(&d, 120);
        let rows: Vec<&str> = text
            .lines()
            .skip_while(|l| *l != "Counters")
            .filter(|l| l.contains("cycles") || l.contains("ls_dispatch"))
            .collect();
        assert_eq!(rows.len(), 2, "{text}");
        // The counts end in the same column.
        let end = |l: &str, n: &str| l.find(n).map(|i| i + n.len());
        assert_eq!(
            end(rows[0], "4000000000 "),
            end(rows[1], "12 "),
            "{rows:#?}"
        );
        assert!(rows[0].contains("100.0%"), "{rows:#?}");
        assert!(rows[1].contains("50.0%, scaled"), "{rows:#?}");
    }

    /// The Intel KVM guest's spurious debug traps: a watch whose program was killed by
    /// SIGTRAP says so on the screen, whatever the watch saw; a contended atomic without a
    /// watch says what --watch would add.
    #[test]
    fn a_program_killed_by_the_watchs_trap_is_said_and_the_watch_is_offered_when_off() {
        use crate::schema::line_sharing::LineWatch;
        let mut d = fixture("pause-spin-zen4-kvm.json");
        d.hot_sites[0].kind = SiteKind::LockedRmw;
        d.line_watch = None;
        let said = |d: &Diagnosis| {
            render(d, 80)
                .split_whitespace()
                .collect::<Vec<_>>()
                .join(" ")
        };
        assert!(
            said(&d).contains("Cache lines not watched: --watch names"),
            "{}",
            said(&d)
        );
        let mut w = LineWatch::skipped(WatchSkipped::EndedDuringWatch, 5.0);
        w.killed_by_trap = true;
        d.line_watch = Some(w);
        let text = said(&d);
        assert!(
            text.contains("killed by SIGTRAP during the watch"),
            "{text}"
        );
        assert!(
            !text.contains("ended while its lines were watched"),
            "said once: {text}"
        );
        assert!(!text.contains("--watch names"), "{text}");
    }

    /// The two lines a diagnosis saved for `diff` adds under the machine (issue 31): its
    /// figures with their source, and its work measure; each within 80 columns.
    #[test]
    fn the_figures_and_the_work_are_one_line_each_at_80_columns() {
        use crate::diagnose::analyse::figures::FigureValue;
        use crate::diagnose::analyse::rules::CostSource;
        let mut d = fixture("pause-spin-zen4-kvm.json");
        // Wrapped lines joined: what a line says, whatever the width.
        let header_of = |d: &Diagnosis| {
            let h = header(d, 80);
            for line in h.lines() {
                assert!(line.chars().count() <= 80, "{line}");
            }
            h.replace("\n            ", " ")
        };
        assert!(!header_of(&d).contains("Figures"), "an older file has none");
        let mut figures = crate::diagnose::analyse::figures::MachineFigures {
            cpu: None,
            logical_cpus: 2,
            hypervisor: Some("KVM".into()),
            thp: None,
            figures: Default::default(),
            latency_curve: Vec::new(),
        };
        let now = |value, disturbed| FigureValue {
            value,
            source: CostSource::MeasuredNow,
            disturbed,
        };
        figures
            .figures
            .insert(MachineFigure::CoreClockGhz, now(3.7, false));
        figures
            .figures
            .insert(MachineFigure::PauseNs, now(24.5, true));
        figures
            .figures
            .insert(MachineFigure::DramLatency4kNs, now(118.0, false));
        figures
            .figures
            .insert(MachineFigure::DramLatencyHugeNs, now(96.0, false));
        d.machine.figures = Some(figures.clone());
        d.work = Some(WorkRecord {
            measure: WorkMeasure::WallTime,
            values: vec![2.31],
            with_profiler: true,
        });
        let h = header_of(&d);
        assert!(
            h.contains(
                "Figures     clock 3.70 GHz, PAUSE 24.5 ns, DRAM 118 ns (4 KiB) / 96.0 ns (huge), \
                 measured now; CPUs busy for PAUSE: may read off\n"
            ),
            "{h}"
        );
        assert!(
            h.contains("Work        wall 2.31 s, 1 run (profiled)\n"),
            "{h}"
        );
        d.work = Some(WorkRecord {
            measure: WorkMeasure::WallTime,
            values: vec![2.28, 2.25, 2.33, 2.30, 2.26],
            with_profiler: false,
        });
        figures.figures.clear();
        figures.figures.insert(
            MachineFigure::PauseNs,
            FigureValue {
                value: 24.5,
                source: CostSource::SavedCheck {
                    file: "/work/corpus/zen4.json".into(),
                },
                disturbed: false,
            },
        );
        figures
            .figures
            .insert(MachineFigure::CoreClockGhz, now(3.7, false));
        d.machine.figures = Some(figures);
        let h = header_of(&d);
        assert!(
            h.contains(
                "Work        wall, 5 runs without the profiler: median 2.28 s (2.25-2.33 s)\n"
            ),
            "{h}"
        );
        assert!(
            h.contains(
                "Figures     clock 3.70 GHz, PAUSE 24.5 ns, from zen4.json; clock measured now\n"
            ),
            "{h}"
        );
        d.work = Some(WorkRecord {
            measure: WorkMeasure::Rate { unit: "tps".into() },
            values: vec![9388.0, 9412.0],
            with_profiler: true,
        });
        let h = header_of(&d);
        assert!(
            h.contains("rate (--rate), 2 readings: median 9400 tps (9388-9412 tps)"),
            "{h}"
        );
    }

    #[test]
    fn an_attached_tree_says_its_processes_and_groups_threads_by_command() {
        use crate::diagnose::record::tree::FollowedCommand;
        let mut d = fixture("locked-counter-zen4-kvm.json");
        // As if attached to locked_counter (19544), which had started two helpers.
        d.target.command = None;
        let group = |command: &str, pids: Vec<u32>, at_attach, samples| FollowedCommand {
            command: command.into(),
            processes: pids.len() as u64,
            at_attach,
            started: pids.len() as u64 - at_attach,
            exited: 0,
            samples,
            pids,
        };
        d.target.followed = vec![
            group("locked_counter", vec![19544], 1, 236),
            group("helper", vec![20000, 20001], 0, 0),
        ];
        let mut helper = d.threads[2].clone();
        (helper.figures.pid, helper.figures.tid) = (20000, 20002);
        helper.figures.name = "helper".into();
        d.threads.push(helper);
        let text = render(&d, 120);
        assert!(
            text.contains(
                "Processes   3 processes followed: locked_counter (1 running at attach; 100.0% \
                 of samples), helper x2 (2 started)"
            ),
            "{text}"
        );
        let table = &text[text.find("Threads, by process command").expect(&text)..];
        let row = |s: &str| table.find(s).unwrap_or_else(|| panic!("no {s} in {table}"));
        // Each command's row, then its threads under it; a thread of a process with others
        // of its name says which process.
        assert!(row("┆ locked_counter ") < row("19546"));
        assert!(row("19544") < row("helper x2"));
        assert!(row("helper x2") < row("helper (pid 20000)"));
        // The helpers' memory in one line, the largest in full.
        let helper_memory = |pid, rss_kb| ProcessMemory {
            pid,
            name: "helper".into(),
            rss_kb,
            anonymous_kb: 100,
            anon_huge_pages_kb: 0,
        };
        d.processes
            .extend([helper_memory(20000, 2048), helper_memory(20001, 4096)]);
        let text = render(&d, 200);
        assert!(
            text.contains(
                "Memory of helper x2: the largest, 20001: RSS 4 MiB, anonymous 100 KiB, on huge \
                 pages 0 B (0.0%); the other 1: RSS 2 MiB\n"
            ),
            "{text}"
        );
        assert!(
            text.contains("Memory of 19544 (locked_counter): RSS"),
            "{text}"
        );
        // A file without the processes (older, or one process) keeps the plain table.
        let old = fixture("locked-counter-zen4-kvm.json");
        let text = render(&old, 120);
        assert!(
            text.contains("\nThreads\n") && !text.contains("Processes "),
            "{text}"
        );
    }

    #[test]
    fn at_80_columns_every_line_fits_and_no_instruction_is_split() {
        // Issue 21's review: the hot-sites table cut `cmp [rax+rs|i],r10b` at 80 columns.
        let mut d = fixture("pause-spin-zen4-kvm.json");
        d.hot_sites[0].instruction = "lock cmpxchg qword ptr [rdx+rsi*8+10h],rcx".into();
        d.hot_sites[0].symbol = "__pthread_mutex_lock_full".into();
        let text = render(&d, 80);
        let sites = &text[text.find("Hot sites").unwrap()..text.find("\nFunctions").unwrap()];
        assert!(sites.lines().all(|l| l.chars().count() <= 80), "{sites}");
        for s in d.hot_sites.iter().take(10) {
            assert!(
                sites.contains(&s.instruction),
                "{} split in\n{sites}",
                s.instruction
            );
        }
    }

    /// The Redis case: attached to Debian's redis-server (a symlink to redis-check-rdb), 80%
    /// of its samples in the kernel; then the same without kernel samples.
    #[test]
    fn case_redis_names_the_process_as_run_and_says_its_kernel_share_at_80_columns() {
        use crate::diagnose::analyse::hotspots::KernelFunction;
        use crate::diagnose::analyse::kernel::*;
        use crate::diagnose::record::target::ProcessName;
        let mut d = fixture("pause-spin-zen4-kvm.json");
        d.target.command = None;
        d.target.name = Some(ProcessName {
            name: "redis-server".into(),
            executable: Some("/usr/bin/redis-check-rdb".into()),
        });
        let tid = d.threads[0].figures.tid;
        d.threads[0].kernel_samples = d.threads[0].samples / 2;
        let half = pct(
            d.threads[0].kernel_samples as f64 / d.threads[0].samples as f64,
            1,
        );
        let cpu = CpuCoverage {
            cpu_s: 2.1,
            system_s: 1.7,
            sampled_s: 0.37,
        };
        d.kernel = Some(KernelReport {
            sampling: KernelSampling::Sampled,
            samples: 800,
            share: 0.8,
            functions: vec![KernelFunction {
                function: "tcp_sendmsg_locked".into(),
                samples: 80,
                share: 0.08,
            }],
            entries: vec![KernelEntry {
                from: "write".into(),
                kind: KernelEntryKind::SystemCall,
                samples: 500,
                share: 0.5,
            }],
            unnamed_because: None,
            processes: Vec::new(),
            cpu: Some(cpu.clone()),
        });
        let text = render(&d, 80);
        assert!(text.lines().all(|l| l.chars().count() <= 80), "{text}");
        let flat = text.split_whitespace().collect::<Vec<_>>().join(" ");
        assert!(
            flat.contains("Workload attached to redis-server (/usr/bin/redis-check-rdb), pid"),
            "{text}"
        );
        assert!(
            flat.contains(
                "Kernel 80.0% of samples in kernel code; entered from write 50.0%; \
                 hottest kernel functions tcp_sendmsg_locked 8.0%; by the kernel's own \
                 accounting (/proc stime) 81.0% of the threads' CPU time"
            ),
            "{text}"
        );
        let row = text
            .lines()
            .find(|l| l.starts_with(&format!("│ {tid} ")))
            .unwrap();
        assert!(row.contains(&format!("kernel {half}")), "{row}");
        // Refused: what the samples miss, in the kernel's figures.
        d.kernel.as_mut().unwrap().sampling = KernelSampling::Refused {
            paranoid: Some(2),
            error: "Permission denied (os error 13)".into(),
        };
        let flat = render(&d, 80)
            .split_whitespace()
            .collect::<Vec<_>>()
            .join(" ");
        assert!(
            flat.contains("Kernel user space only: samples cover 0.37 s of 2.10 s of CPU; 1.70 s"),
            "{flat}"
        );
    }

    /// PostgreSQL's backends at 80 columns: seven columns left "Where its samples go" a few
    /// letters wide ("computat / ion", "read-mod / ify-writ"); a narrow screen drops the
    /// switch and fault columns and says where they are.
    #[test]
    fn the_threads_table_at_80_columns_keeps_whole_words() {
        let d = fixture("locked-counter-zen4-kvm.json");
        let text = render(&d, 80);
        let table = &text[text.find("\nThreads").unwrap()..];
        let table = &table[..table.find("\n\n").unwrap_or(table.len())];
        assert!(table.lines().all(|l| l.chars().count() <= 80), "{table}");
        assert!(!table.contains("Faults"), "{table}");
        assert!(
            table.contains("switches and faults per thread: --json"),
            "{table}"
        );
        for word in d.threads[0].kinds[0].kind.describe().split_whitespace() {
            assert!(table.contains(word), "{word} broken in {table}");
        }
        let wide = render(&d, 140);
        assert!(wide.contains("Faults min/maj"), "{wide}");
        assert!(!wide.contains("switches and faults per thread"), "{wide}");
    }

    /// The coverage of the `node hot.js` case: nearly every sample in V8's code, no perf map.
    pub(crate) fn node_without_perf_map() -> crate::diagnose::analyse::hotspots::coverage::Coverage
    {
        use crate::diagnose::analyse::hotspots::coverage::{
            Coverage, CoverageGap, Fix, GapCause, JitRuntime,
        };
        Coverage {
            samples: 1334,
            analysed: 21,
            gaps: vec![CoverageGap {
                cause: GapCause::JitWithoutPerfMap,
                module: "//anon".into(),
                runtime: Some(JitRuntime::Node),
                pid: 27769,
                samples: 1299,
                share: 1299.0 / 1334.0,
                analysed: 0,
                fix: Some(Fix::NodePerfMap),
            }],
        }
    }

    #[test]
    fn without_findings_and_most_samples_not_analysed_the_screen_says_what_to_add_not_no_findings()
    {
        // The `diagnose -- node hot.js` case: it said "No findings" with 98.4% of the samples
        // in one anonymous JIT mapping.
        let mut d = fixture("pause-spin-zen4-kvm.json");
        d.findings.clear();
        d.coverage = Some(node_without_perf_map());
        let o = render(&d, 80);
        assert!(!o.contains("No findings: no spin-wait"), "{o}");
        assert!(
            o.contains("No findings in the 1.6% of samples analysed"),
            "{o}"
        );
        assert!(o.contains("Not analysed: 98.4% of 1,334 samples"), "{o}");
        assert!(o.contains("--perf-basic-prof"), "{o}");
        for l in o.lines() {
            assert!(l.chars().count() <= 80, "wider than 80: {l}");
        }
        // Enough analysed: "No findings" as before.
        d.coverage = None;
        assert!(render(&d, 80).contains("No findings: no spin-wait"));
    }
}
