//! `cpudoctor diagnose`: run or attach to a workload, sample it, and print findings.

use super::{
    BarProgress, DEFER_SIGNALS, Input, STOP, check_outputs, note, screen, seconds_arg,
    stdout_is_an_output, stdout_style, write_output,
};
use anyhow::Result;
use clap::Args;
use cpudoctor::diagnose::analyse::figures::{self, FiguresAsked, FiguresNeeded, MachineFigure};
use cpudoctor::diagnose::analyse::{hotspots, rules};
use cpudoctor::diagnose::record::recording::{RecordOptions, Target};
use cpudoctor::diagnose::record::watch::WatchBudget;
use cpudoctor::diagnose::record::work::{self, WorkMeasure, WorkRecord};
use cpudoctor::diagnose::record::{counters, recording, sampler};
use cpudoctor::diagnose::stacks::{LeafOffsets, stacks_of};
use cpudoctor::diagnose::{self, Diagnosis};
use cpudoctor::probes::{ProbeOptions, Profile};
use cpudoctor::render::diagnosis as render;
use cpudoctor::render::export::{Export, Folded, Json, Pprof};
use cpudoctor::session::{self, Host};
use std::io::Write;
use std::path::{Path, PathBuf};
use std::sync::atomic::Ordering;
use std::time::Duration;

#[derive(Args)]
pub struct DiagnoseArgs {
    /// Attach to this running process instead of starting a command: its threads, its child
    /// processes already running (all generations: a server's workers, PostgreSQL's backends)
    /// and those it starts while recording. The screen says how many of each command were
    /// followed.
    #[arg(long, value_name = "PID", conflicts_with = "command")]
    pub pid: Option<i32>,
    /// With --pid: follow the process and its threads only, not its child processes, neither
    /// those running nor those it forks while recording (their events are not inherited).
    // clap drops a `requires` whose target conflicts with an argument given (the command), so
    // the conflict is said here too.
    #[arg(long, requires = "pid", conflicts_with = "command")]
    pub no_children: bool,
    /// Stop after S seconds, at most a day (default: when the command exits; 10 s with
    /// --pid). A started command and every process it started are then sent SIGTERM (SIGKILL
    /// 2 s later).
    #[arg(long, value_name = "S", value_parser = seconds_arg)]
    pub duration: Option<f64>,
    /// Samples per second per running thread (at most kernel.perf_event_max_sample_rate).
    #[arg(long, value_name = "HZ", default_value_t = sampler::DEFAULT_FREQUENCY_HZ,
          value_parser = clap::value_parser!(u64).range(1..))]
    pub frequency: u64,
    /// Sample the sampled function only, without its callers (call stacks are walked by frame
    /// pointers at each sample; this saves that walk).
    #[arg(long)]
    pub no_stacks: bool,
    /// Sample on-CPU time only. By default every thread's whole wall time is accounted:
    /// running, waiting for a CPU, or blocked (on a lock, I/O, a sleep, poll) with the stack
    /// where it blocked, from each thread's schedstat counts (its time on a CPU and waiting
    /// for one, read every 100 ms) and looks at sleeping threads in /proc every 50 ms.
    #[arg(long)]
    pub no_wall: bool,
    /// Time the wall-clock view by the kernel's context-switch records instead of the
    /// threads' counts: every interval on and off the CPU, each preemption's own stack, and a
    /// wait for a CPU after a wake-up told from a preemption. Costs the kernel ~0.8 us and
    /// diagnose a record at every context switch: on a server switching 40,000 times a second,
    /// several % of its throughput (docs/diagnose.md, "Overhead on servers"). Used anyway where
    /// the kernel keeps no schedstat counts.
    #[arg(long, conflicts_with = "no_wall")]
    pub switches: bool,
    /// Sample with one event per followed thread and CPU, inherited by the threads and
    /// processes it creates: what an unprivileged user gets. By default, where CPU-wide events
    /// are permitted (root, CAP_PERFMON, or kernel.perf_event_paranoid <= 0), diagnose samples
    /// with one event per CPU for every process and keeps the followed processes' records.
    /// Per task, the kernel stops and starts each thread's sampling timer at each of its
    /// context switches, an exit to the hypervisor in a VM: PostgreSQL switching 40,000 times
    /// a second lost ~20% of its throughput per task, ~12% CPU-wide (both with the wall-clock
    /// view timed by switch records, now --switches). CPU-wide, every process on the machine is sampled (a timer interrupt and a
    /// 16 KiB stack copy each, ~1% of a busy CPU at the default rate), the others' samples
    /// dropped. Also set by CPUDOCTOR_PER_TASK=1.
    #[arg(long, env = "CPUDOCTOR_PER_TASK", value_parser = clap::builder::FalseyValueParser::new())]
    pub per_task: bool,
    /// Sample user-space code only. By default kernel code is sampled too where the kernel
    /// permits it (root, CAP_PERFMON, or kernel.perf_event_paranoid <= 1), named from
    /// /proc/kallsyms, and each process's and thread's share of samples in the kernel shown
    /// (a server in network system calls spends most of its CPU time there). Where it is not
    /// permitted, or with this flag, the screen says how much of the threads' CPU time (from
    /// /proc) the samples do not cover. Also set by CPUDOCTOR_USER_ONLY=1.
    #[arg(long, env = "CPUDOCTOR_USER_ONLY", value_parser = clap::builder::FalseyValueParser::new())]
    pub user_only: bool,
    /// Watch the hot code's cache lines: once the window is over and while the workload
    /// still runs (an attached process, or a command --duration stopped), the hottest
    /// instructions that touch memory are aimed at with hardware breakpoints (the debug
    /// registers: no PMU needed) and the cache lines they touch most are watched word by word
    /// on every thread, naming which threads write and read which fields: false sharing
    /// (different fields on one line), true sharing (one field written by several threads),
    /// or neither. Each hit traps (~10 us), so the watch lasts 2% of the window (100 ms to
    /// 1 s) and each watchpoint stops after 500 hits; the screen says what it took. Off by
    /// default because a trap can kill the program: on an Intel KVM guest one trap in 40,000
    /// to 250,000 reached it as a SIGTRAP (a watch takes ~2,000); use it on a program you can
    /// restart. The screen says when the program ended during the watch.
    #[arg(long)]
    pub watch: bool,
    /// The watch is off by default (see --watch); kept so that older scripts still run.
    #[arg(long, hide = true, conflicts_with = "watch")]
    pub no_watch: bool,
    /// Print the diagnosis as JSON on stdout (the command's own stdout goes to stderr).
    #[arg(long)]
    pub json: bool,
    /// Also write the JSON diagnosis to FILE.
    #[arg(long, value_name = "FILE")]
    pub save: Option<PathBuf>,
    /// Also write the samples as a pprof profile (profile.proto, gzipped) to FILE: functions,
    /// addresses, modules, CPU time from the sampling period; with the wall-clock view also a
    /// `wall` sample type holding the off-CPU stacks (labels `state`, `reason`, `wait`). Read
    /// it with `go tool pprof -top FILE` (`-sample_index=wall` for wall time), or compare two
    /// with `-diff_base OLD.pb.gz`.
    #[arg(long, value_name = "FILE")]
    pub pprof: Option<PathBuf>,
    /// Also write the call stacks folded to FILE, one `main;caller;function+0xOFFSET COUNT`
    /// line per stack, for flamegraph.pl, inferno or speedscope. With the wall-clock view
    /// (the default) on- and off-CPU stacks together, COUNT in microseconds of thread time, an
    /// off-CPU stack ending in `[blocked: REASON]` or `[runnable]`; with --no-wall (or a file
    /// saved without the view) COUNT is samples.
    #[arg(long, value_name = "FILE")]
    pub folded: Option<PathBuf>,
    /// Record nothing: read a diagnosis saved with --save and convert it (--pprof, --folded),
    /// or print it again when no export is asked for.
    #[arg(long, value_name = "SAVED.json",
          conflicts_with_all = ["pid", "command", "duration", "frequency", "no_stacks", "no_wall", "save",
                                "figures", "measure", "runs", "metric", "rate"])]
    pub from: Option<PathBuf>,
    /// A fingerprint saved by `cpudoctor check --save` on this machine: the PAUSE,
    /// line-transfer and lock costs the findings quote come from it. Without it (or when it
    /// was measured on another CPU) they are measured after the workload with the probes'
    /// quick profile; an attached process (--pid) still running then shares the CPUs with
    /// the probe, and the diagnosis says how busy they were.
    #[arg(long, value_name = "CHECK.json", conflicts_with = "from")]
    pub check: Option<PathBuf>,
    /// Which figures of this machine the diagnosis carries, for `diff` to say why a program
    /// is slower on one side: `needed` (the core clock, and those the hot code calls for:
    /// PAUSE for a spin, line transfer for a contended locked instruction, split lock, DRAM
    /// latency on 4 KiB and huge pages for loads that miss the caches), `all` (also PAUSE,
    /// line transfer and DRAM whatever the hot code: a baseline saved for later diffs; split
    /// lock still only when needed, as measuring it slows every neighbour), `none` (the CPU,
    /// its logical CPUs, hypervisor and THP mode only). Taken from --check when it was
    /// measured on this CPU, otherwise measured after the recording (a few seconds).
    #[arg(long, value_enum, value_name = "WHICH", default_value_t = FiguresArg::Needed)]
    pub figures: FiguresArg,
    /// The work measure recorded (what `diff` compares to say how much slower): `wall` (the
    /// command's wall time, spawn to exit) or `cpu` (user + system time of the command and
    /// its children, from wait4). Of the diagnosed run by default, profiler included; of the
    /// runs without it with --runs.
    #[arg(long, value_enum, value_name = "WHAT", default_value_t = MeasureArg::Wall,
          conflicts_with_all = ["pid", "metric"])]
    pub measure: MeasureArg,
    /// After the diagnosed run, run the command N more times without the profiler, one after
    /// the other, and record each run's measure (wall, cpu or --metric): the profiler's
    /// overhead does not touch them, and several runs give `diff` an interval.
    #[arg(long, value_name = "N", conflicts_with = "pid",
          value_parser = clap::value_parser!(u32).range(1..))]
    pub runs: Option<u32>,
    /// The work measure is the number REGEX finds in the command's stdout (its first capture
    /// group, or the whole match; thousands separators dropped), as `experiment --metric`
    /// takes it: a rate or a time the program prints. Its output still reaches the terminal
    /// (through a pipe: a C program's stdout is then buffered until it exits).
    #[arg(long, value_name = "REGEX", conflicts_with = "pid")]
    pub metric: Option<String>,
    /// With --metric: a higher figure is better (a rate, a score); by default lower is.
    #[arg(long, requires = "metric")]
    pub higher_is_better: bool,
    /// With --pid: the throughput the workload did while it was recorded, as its own client
    /// reported it (`--rate 9388tps`); repeat it for several readings, all in one unit. The
    /// work measure of an attached process, where cpudoctor cannot see the work done.
    #[arg(long, value_name = "VALUE[UNIT]", requires = "pid", conflicts_with = "command",
          value_parser = rate_arg)]
    pub rate: Vec<(f64, String)>,
    /// The command to run, after `--`. A JVM it starts gets JAVA_TOOL_OPTIONS with
    /// -XX:+DumpPerfMapAtExit (JIT code named at exit) and -XX:+PreserveFramePointer (stacks
    /// through Java frames); an attached JVM is asked with `jcmd PID Compiler.perfmap`. Node
    /// (--perf-basic-prof) and .NET (DOTNET_PerfMapEnabled=1) name their JIT code when
    /// started with those.
    #[arg(last = true, value_name = "CMD")]
    pub command: Vec<String>,
}

/// `--figures`.
#[derive(Clone, Copy, Debug, PartialEq, Eq, clap::ValueEnum)]
pub enum FiguresArg {
    /// The core clock and the figures the hot code calls for.
    Needed,
    /// Also PAUSE, line transfer and DRAM whatever the hot code.
    All,
    /// The CPU facts only.
    None,
}

impl FiguresArg {
    fn asked(self) -> FiguresAsked {
        match self {
            FiguresArg::Needed => FiguresAsked::Needed,
            FiguresArg::All => FiguresAsked::All,
            FiguresArg::None => FiguresAsked::None,
        }
    }
}

/// `--measure`.
#[derive(Clone, Copy, Debug, PartialEq, Eq, clap::ValueEnum)]
pub enum MeasureArg {
    /// Wall time, spawn to exit.
    Wall,
    /// User + system CPU time of the command and its children.
    Cpu,
}

/// One `--rate VALUE[UNIT]`.
fn rate_arg(text: &str) -> Result<(f64, String), String> {
    work::parse_rate(text)
}

/// The files a run writes, named by their options.
fn outputs(args: &DiagnoseArgs) -> [(&'static str, Option<&Path>); 3] {
    [
        ("--save", args.save.as_deref()),
        ("--pprof", args.pprof.as_deref()),
        ("--folded", args.folded.as_deref()),
    ]
}

/// Writes the exports asked for; one line per file written, for the reader.
fn write_exports(d: &Diagnosis, args: &DiagnoseArgs) -> Result<Vec<String>> {
    let mut done = Vec::new();
    let stacks = stacks_of(d);
    let what = if stacks.from_functions {
        "leaf-only, from its hottest functions: the file has no call stacks"
    } else {
        "call stacks"
    };
    let off_cpu = d.wall.as_ref().map(|w| w.stacks.len());
    if let Some(path) = &args.pprof {
        write_output(path, &Pprof.export(d))?;
        done.push(format!(
            "Wrote {} (pprof, {} samples in {} {what}{}): go tool pprof -top {}{}",
            super::shown(path),
            d.sampling.samples,
            stacks.stacks.len(),
            off_cpu
                .map(|n| format!(", and {n} off-CPU stacks in the wall sample type"))
                .unwrap_or_default(),
            off_cpu.map(|_| "-sample_index=wall ").unwrap_or_default(),
            path.display()
        ));
    }
    if let Some(path) = &args.folded {
        let bytes = Folded(LeafOffsets::Keep).export(d);
        write_output(path, &bytes)?;
        let lines = bytes.iter().filter(|&&b| b == b'\n').count();
        done.push(match off_cpu {
            Some(_) => format!(
                "Wrote {} (folded stacks, {} lines of {what} on and off the CPU, counted in \
                 microseconds of thread time)",
                super::shown(path),
                lines
            ),
            None => format!(
                "Wrote {} (folded stacks, {} lines of {what}, counted in samples)",
                super::shown(path),
                lines
            ),
        });
    }
    Ok(done)
}

/// `--from SAVED.json`: converts a saved diagnosis, or prints it again.
fn from_saved(path: &Path, args: &DiagnoseArgs) -> Result<()> {
    check_outputs(&outputs(args), &[path], args.json.then_some("--json"))?;
    let d = Input::read(path).diagnosis()?;
    let done = write_exports(&d, args)?;
    let to_stderr = stdout_is_an_output(&[args.pprof.as_deref(), args.folded.as_deref()]);
    let mut out = screen(to_stderr);
    if args.json {
        out.write_all(&Json.export(&d))?;
        for line in &done {
            note(line);
        }
    } else if done.is_empty() {
        write!(out, "{}", render::render(&d, stdout_style()))?;
    } else {
        for line in &done {
            writeln!(out, "{line}")?;
        }
    }
    Ok(())
}

/// The line costs the findings quote: from the saved check when it was taken on this CPU,
/// else measured now (quick profile) when a finding will quote them.
fn line_costs(
    args: &DiagnoseArgs,
    saved_check: Option<&(&PathBuf, cpudoctor::schema::Fingerprint)>,
    hot: &hotspots::HotSpots,
    rec: &recording::Recording,
    host: &Host,
    measured: &mut Vec<cpudoctor::schema::Fingerprint>,
) -> Option<rules::MachineCosts> {
    let (transfer, split) = diagnose::needs_line_costs(hot, &rec.counter_values);
    if !(transfer || split) || STOP.load(Ordering::SeqCst) {
        return None;
    }
    if let Some((path, fp)) = saved_check {
        if fp.machine.cpu_line() == host.machine.cpu_line() {
            let source = rules::CostSource::SavedCheck {
                file: path.display().to_string(),
            };
            if let Some(costs) = session::line_costs_of(fp, source)
                && (!transfer || costs.line_transfer_ns.is_some())
                && (!split || costs.split_lock_ns.is_some())
            {
                return Some(costs);
            }
            note(&format!(
                "{} lacks the c2c or split-lock figures the findings need: measuring them now",
                args.check.as_deref().unwrap_or(path).display()
            ));
        } else {
            note(&format!(
                "{} was measured on {}, not this CPU: measuring the costs here instead",
                path.display(),
                fp.machine.cpu_line()
            ));
        }
    }
    let names = [
        (cpudoctor::names::probe::C2C, transfer),
        (cpudoctor::names::probe::SPLIT_LOCK, split),
    ];
    let names: Vec<&str> = names.iter().filter(|(_, w)| *w).map(|(n, _)| *n).collect();
    let fp = session::measure_named(
        host,
        &names,
        &ProbeOptions::new(Profile::Quick),
        &BarProgress::new(),
    )?;
    let costs = session::line_costs_of(&fp, rules::CostSource::MeasuredNow);
    measured.push(fp);
    costs
}

/// PAUSE for a spin's cost: from the saved check when it was taken on this CPU and holds it
/// (measured on an idle machine, while an attached server may still load the CPUs now), else
/// measured now, after the recording, with what the CPUs did meanwhile (its disturbance
/// record): an attached process keeps running, and a busy CPU reads PAUSE low.
fn pause_cost(
    saved_check: Option<&(&PathBuf, cpudoctor::schema::Fingerprint)>,
    host: &Host,
    measured: &mut Vec<cpudoctor::schema::Fingerprint>,
) -> Option<(rules::PauseCost, diagnose::PauseSource)> {
    if let Some((path, fp)) = saved_check
        && fp.machine.cpu_line() == host.machine.cpu_line()
        && let Ok(pause) = session::pause_of(fp)
    {
        let disturbance = fp
            .probe(cpudoctor::names::probe::PAUSE)
            .and_then(|p| p.disturbance.as_ref());
        let source = diagnose::PauseSource {
            from: rules::CostSource::SavedCheck {
                file: path.display().to_string(),
            },
            ..diagnose::PauseSource::measured_now(disturbance)
        };
        return Some((pause, source));
    }
    let (fp, pause) = session::measure_pause(
        host,
        "diagnose",
        &ProbeOptions::new(Profile::Quick),
        &BarProgress::new(),
    );
    let source = diagnose::PauseSource::measured_now(
        fp.probe(cpudoctor::names::probe::PAUSE)
            .and_then(|p| p.disturbance.as_ref()),
    );
    measured.push(fp);
    Some((pause.ok()?, source))
}

/// The machine figures the diagnosis carries (`--figures`): the CPU facts as they are now;
/// every figure of a saved check taken on this CPU; those measured for the findings already
/// (`measured`); and what is still asked for, measured now with the probes' quick profile
/// (DRAM by a reduced latency curve that reaches the program's `footprint`,
/// [`session::dram_options`]).
fn machine_figures(
    args: &DiagnoseArgs,
    saved_check: Option<&(&PathBuf, cpudoctor::schema::Fingerprint)>,
    host: &Host,
    needed: FiguresNeeded,
    measured: &[cpudoctor::schema::Fingerprint],
    footprint: Option<u64>,
) -> figures::MachineFigures {
    use rules::CostSource;
    let mut out = figures::of_machine(&host.machine);
    let asked = args.figures.asked();
    if asked == FiguresAsked::None {
        return out;
    }
    if let Some((path, fp)) = saved_check
        && fp.machine.cpu_line() == host.machine.cpu_line()
    {
        let check = figures::from_fingerprint(fp, &path.display().to_string());
        out.figures = check.figures;
        out.latency_curve = check.latency_curve;
    }
    // A probe already run now is not run again, whether or not it gave its figure.
    let mut ran: Vec<String> = Vec::new();
    for fp in measured {
        take_figures(&mut out, fp);
        ran.extend(fp.probes.iter().map(|p| p.name.clone()));
    }
    let missing: Vec<MachineFigure> = figures::to_measure(asked, needed, &out.figures)
        .into_iter()
        .filter(|f| {
            *f == MachineFigure::CoreClockGhz || !ran.iter().any(|r| r == figures::probe_of(*f))
        })
        .collect();
    if missing.is_empty() || STOP.load(Ordering::SeqCst) || super::caught_signal().is_some() {
        return out;
    }
    let started = std::time::Instant::now();
    let mut probes: Vec<&str> = missing
        .iter()
        .filter(|f| **f != MachineFigure::CoreClockGhz)
        .map(|f| figures::probe_of(*f))
        .collect();
    probes.dedup();
    // The clock alone takes a few ms: said only with a probe.
    if !probes.is_empty() {
        let again: Vec<&str> = missing
            .iter()
            .filter(|f| out.figures.contains_key(f))
            .map(|f| f.label())
            .collect();
        note(&cpudoctor::words::work::measuring_figures(
            &missing.iter().map(|f| f.label()).collect::<Vec<_>>(),
            &again,
        ));
    }
    let quick: Vec<&str> = probes
        .iter()
        .copied()
        .filter(|p| *p != cpudoctor::names::probe::MEM_LATENCY)
        .collect();
    let mut now = Vec::new();
    if let Some(fp) = session::measure_named(
        host,
        &quick,
        &ProbeOptions::new(Profile::Quick),
        &BarProgress::new(),
    ) {
        now.push(fp);
    }
    if probes.contains(&cpudoctor::names::probe::MEM_LATENCY) && !STOP.load(Ordering::SeqCst) {
        now.extend(session::measure_named(
            host,
            &[cpudoctor::names::probe::MEM_LATENCY],
            &session::dram_options(&host.machine, footprint),
            &BarProgress::new(),
        ));
    }
    for fp in &now {
        take_figures(&mut out, fp);
    }
    // The clock, where no probe run now gave it: a few ms on each CPU.
    if !out.figures.contains_key(&MachineFigure::CoreClockGhz)
        && let Some((ghz, disturbed)) = session::measure_core_clock(host)
    {
        out.figures.insert(
            MachineFigure::CoreClockGhz,
            figures::FigureValue {
                value: ghz,
                source: CostSource::MeasuredNow,
                disturbed,
            },
        );
    }
    if started.elapsed() > Duration::from_millis(500) {
        note(&format!(
            "figures measured in {:.1} s",
            started.elapsed().as_secs_f64()
        ));
    }
    out
}

/// The figures of probes run now, offered to `out` ([`figures::offer`]: a figure it lacks, or
/// has only as measured while disturbed); the DRAM figures taken bring their latency curve, so
/// the curve and the figures read off it stay one measurement.
fn take_figures(out: &mut figures::MachineFigures, fp: &cpudoctor::schema::Fingerprint) {
    let mut dram_taken = false;
    for (f, v) in figures::figures_of(fp, &rules::CostSource::MeasuredNow) {
        let dram = matches!(
            f,
            MachineFigure::DramLatency4kNs | MachineFigure::DramLatencyHugeNs
        );
        dram_taken |= figures::offer(&mut out.figures, f, v) && dram;
    }
    if out.latency_curve.is_empty() || dram_taken {
        let curve = figures::latency_curve_of(fp);
        if !curve.is_empty() {
            out.latency_curve = curve;
        }
    }
}

/// The work of the diagnosed run (profiler attached): its wall or CPU time, or the metric its
/// output held; `Ok(None)` without a started command. `Err` is the one line that says why
/// none was recorded.
fn diagnosed_work(
    measure: &WorkMeasure,
    totals: Option<&recording::ProcessTotals>,
    stdout: Option<&(String, u64)>,
    metric: Option<&regex::Regex>,
) -> Result<Option<WorkRecord>, String> {
    let value = match (measure, metric) {
        (WorkMeasure::Metric { regex, .. }, Some(re)) => {
            let Some((text, bytes)) = stdout else {
                return Ok(None);
            };
            work::extract_metric(re, text).ok_or_else(|| {
                cpudoctor::words::work::metric_not_found(
                    "the diagnosed run",
                    regex,
                    (*bytes > work::STDOUT_KEEP_BYTES as u64)
                        .then(|| cpudoctor::format::human_bytes(work::STDOUT_KEEP_BYTES as u64))
                        .as_deref(),
                )
            })?
        }
        // A command cpudoctor ended (`--duration`, a signal) has no time that is its work:
        // no measure, and no error (most such runs never asked for one; --runs does).
        (WorkMeasure::CpuTime, _) => match totals {
            Some(t) if t.wall_s.is_some() => t.user_s + t.system_s,
            _ => return Ok(None),
        },
        _ => match totals.and_then(|t| t.wall_s) {
            Some(w) => w,
            None => return Ok(None),
        },
    };
    Ok(Some(WorkRecord {
        measure: measure.clone(),
        values: vec![value],
        with_profiler: true,
    }))
}

/// `--runs N`: the command run `n` more times without the profiler, each run's measure
/// recorded; `Err` is the one line of the first run that gave none.
fn timed_runs(
    command: &[String],
    n: u32,
    measure: &WorkMeasure,
    metric: Option<&regex::Regex>,
    stdout_to_stderr: bool,
) -> Result<WorkRecord, String> {
    use cpudoctor::words::work as w;
    note(&w::timing_runs(n));
    let mut values = Vec::new();
    for i in 1..=n {
        if STOP.load(Ordering::SeqCst) || super::caught_signal().is_some() {
            return Err(w::runs_stopped(i - 1, n));
        }
        let which = format!("run {i} of {n}");
        let out = match (metric, stdout_to_stderr) {
            (Some(_), true) => work::RunStdout::Scanned(Box::new(std::io::stderr())),
            (Some(_), false) => work::RunStdout::Scanned(Box::new(std::io::stdout())),
            (None, true) => work::RunStdout::ToStderr,
            (None, false) => work::RunStdout::Inherit,
        };
        let run = work::run_timed(command, out, &STOP)
            .map_err(|e| w::run_not_started(&which, &e.to_string()))?;
        if !run.success {
            return Err(w::run_failed(&which, &run.ended));
        }
        let value = match (measure, metric) {
            (WorkMeasure::Metric { regex, .. }, Some(re)) => work::extract_metric(
                re,
                run.stdout.as_deref().unwrap_or_default(),
            )
            .ok_or_else(|| {
                w::metric_not_found(
                    &which,
                    regex,
                    (run.stdout_bytes > work::STDOUT_KEEP_BYTES as u64)
                        .then(|| cpudoctor::format::human_bytes(work::STDOUT_KEEP_BYTES as u64))
                        .as_deref(),
                )
            })?,
            (WorkMeasure::CpuTime, _) => run.cpu_s,
            _ => run.wall_s,
        };
        values.push(value);
    }
    Ok(WorkRecord {
        measure: measure.clone(),
        values,
        with_profiler: false,
    })
}

pub fn run(args: DiagnoseArgs) -> Result<()> {
    if let Some(path) = &args.from {
        return from_saved(path, &args);
    }
    if args.pid.is_none() && args.command.is_empty() {
        return Err(cpudoctor::error::InputError::NothingToDiagnose.into());
    }
    let duration = match args.duration {
        // Above 0 and at most a day (seconds_arg).
        Some(s) => Some(Duration::from_secs_f64(s)),
        None if args.pid.is_some() => Some(Duration::from_secs(10)),
        None => None,
    };
    // Every output is checked before the workload starts: a recording is never lost to a
    // path found wrong at the end.
    check_outputs(&outputs(&args), &[], args.json.then_some("--json"))?;
    // Read now: a bad file is one line before the workload starts, not after.
    let saved_check = match &args.check {
        Some(path) => Some((path, super::load_fingerprint(path)?)),
        None => None,
    };
    // The work measure's inputs, checked before anything runs.
    let rates = work::rates_record(&args.rate).map_err(|(first, second)| {
        let unit = |u: String| if u.is_empty() { "none".to_string() } else { u };
        cpudoctor::error::InputError::MixedRateUnits {
            first: unit(first),
            second: unit(second),
        }
    })?;
    let metric = super::metric_regex(args.metric.as_deref())?;
    let measure = match (&args.metric, args.measure) {
        (Some(regex), _) => WorkMeasure::Metric {
            regex: regex.clone(),
            higher_is_better: args.higher_is_better,
        },
        (None, MeasureArg::Cpu) => WorkMeasure::CpuTime,
        (None, MeasureArg::Wall) => WorkMeasure::WallTime,
    };
    if let Some(pid) = args.pid {
        cpudoctor::diagnose::record::recording::check_pid(pid)?;
    }
    let to_stdout = stdout_is_an_output(&outputs(&args).map(|(_, p)| p));
    // --metric on the diagnosed run: its stdout goes through a pipe, passed on to where it
    // would have gone and kept for the metric.
    let tee = match (&metric, args.runs, args.pid) {
        (Some(_), None, None) => {
            let (r, w) = nix::unistd::pipe2(nix::fcntl::OFlag::O_CLOEXEC)?;
            let sink: Box<dyn Write + Send> = if args.json || to_stdout {
                Box::new(std::io::stderr())
            } else {
                Box::new(std::io::stdout())
            };
            Some((work::Tee::start(std::fs::File::from(r), sink), w))
        }
        _ => None,
    };
    let (tee, child_stdout) = match tee {
        Some((t, w)) => (Some(t), Some(std::sync::Arc::new(w))),
        None => (None, None),
    };
    let target = match args.pid {
        Some(pid) => Target::Pid(pid),
        None => Target::Command(args.command.clone()),
    };
    let host = Host::detect();
    let machine = &host.machine;
    let (mode, reason) = sampler::choose_mode(machine);
    let (specs, counter_note) = if machine.pmu.usable {
        counters::specs_for(&machine.cpu.vendor, machine.cpu.family, machine.cpu.model)
    } else {
        (Vec::new(), "no hardware PMU".to_string())
    };
    let cpus = machine
        .topology
        .as_ref()
        .map(|t| t.online_cpus.clone())
        .filter(|c| !c.is_empty())
        .unwrap_or_else(|| (0..machine.logical_cpus).collect());
    eprint!(
        "{}",
        cpudoctor::render::text::wrap(
            &format!(
                "cpudoctor diagnose: {} at {} Hz ({reason})",
                mode.event_name(),
                args.frequency
            ),
            stdout_style().width,
            0
        )
    );
    // From here a fatal signal (Ctrl-C, which reaches a started command too; SIGTERM from
    // `timeout` or a job runner; SIGHUP from a dropped ssh session; SIGQUIT) stops the
    // command and everything it started, and what was recorded is written before cpudoctor
    // ends by that signal (main.rs). A second signal ends it at once.
    DEFER_SIGNALS.store(true, Ordering::SeqCst);
    let rec = recording::record(
        &RecordOptions {
            target,
            duration,
            frequency_hz: args.frequency,
            mode,
            cpus,
            counters: specs,
            child_stdout_to_stderr: args.json || to_stdout,
            child_stdout,
            callchains: !args.no_stacks,
            wall: !args.no_wall,
            switches: args.switches,
            children: !args.no_children,
            per_task: args.per_task,
            kernel: !args.user_only,
            watch: args.watch.then_some(WatchBudget::DEFAULT),
        },
        &STOP,
    )?;
    // The pipe's write end went with the options: the reader sees the end of the output once
    // the command (and what it left running) closed theirs.
    let stdout_seen = tee.map(|t| t.finish(Duration::from_secs(2)));
    let work_diagnosed = match args.runs {
        Some(_) => Ok(None),
        None if args.pid.is_some() => Ok(rates),
        None => diagnosed_work(
            &measure,
            rec.totals.as_ref(),
            stdout_seen.as_ref(),
            metric.as_ref(),
        ),
    };
    let hot = hotspots::analyze(&rec);
    // A Ctrl-C typed at the terminal the command held reached the command, not cpudoctor:
    // once the diagnosis is written, cpudoctor ends as if it had (130), as the README says.
    if let Some(sig) = rec.interrupted_by {
        super::stopped_by(sig);
    }
    let mut measured = Vec::new();
    let pause = if diagnose::needs_pause_cost(&hot)
        && !STOP.load(Ordering::SeqCst)
        && super::caught_signal().is_none()
    {
        pause_cost(saved_check.as_ref(), &host, &mut measured)
    } else {
        None
    };
    let (line_transfer, split_lock) = diagnose::needs_line_costs(&hot, &rec.counter_values);
    let needed_pause = diagnose::needs_pause_cost(&hot);
    let costs = line_costs(
        &args,
        saved_check.as_ref(),
        &hot,
        &rec,
        &host,
        &mut measured,
    );
    let attached = args.pid.is_some();
    let mut d = diagnose::build(
        rec,
        hot,
        machine,
        reason,
        counter_note,
        pause.as_ref().map(|(p, _)| *p),
        costs,
    );
    if let Some((_, source)) = pause {
        if source.disturbed {
            d.notes.push(cpudoctor::words::diagnose::pause_under_load(
                source.busy_share(),
                attached,
            ));
        }
        d.machine.pause_source = Some(source);
    }
    let needed = FiguresNeeded {
        pause: needed_pause,
        line_transfer,
        split_lock,
        dram: diagnose::needs_dram_latency(&d),
    };
    d.machine.figures = Some(machine_figures(
        &args,
        saved_check.as_ref(),
        &host,
        needed,
        &measured,
        figures::footprint_bytes(&d.processes),
    ));
    let work_result = match (args.runs, work_diagnosed) {
        (Some(n), _) if super::caught_signal().is_none() && !STOP.load(Ordering::SeqCst) => {
            timed_runs(
                &args.command,
                n,
                &measure,
                metric.as_ref(),
                args.json || to_stdout,
            )
            .map(Some)
        }
        (Some(_), _) => Ok(None),
        (None, w) => w,
    };
    let work_failed = match work_result {
        Ok(w) => {
            d.work = w;
            None
        }
        Err(line) => Some(line),
    };
    let json = Json.export(&d);
    // The files first: after SIGHUP the terminal is gone and only they can keep the result.
    // A file that fails does not stop the others or the screen.
    let mut failed = None;
    if let Some(path) = &args.save
        && let Err(e) = write_output(path, &json)
    {
        failed = Some(e);
    }
    match write_exports(&d, &args) {
        Ok(lines) => lines.iter().for_each(|l| note(l)),
        Err(e) => failed = failed.or(Some(e)),
    }
    let mut out = screen(to_stdout);
    let shown = if args.json {
        out.write_all(&json)
    } else {
        write!(out, "{}", render::render(&d, stdout_style()))
    };
    if let Some(e) = failed {
        return Err(e.context(if args.json {
            "the diagnosis printed above was not saved; fix the path and run again, or keep \
             it with --json > FILE"
        } else {
            "the diagnosis above was not saved; fix the path and run again, or keep it with \
             --json > FILE"
        }));
    }
    shown?;
    if let Some(line) = work_failed {
        anyhow::bail!(line);
    }
    Ok(())
}
