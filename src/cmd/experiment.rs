//! `cpudoctor experiment [VARIANTS] -- CMD ARGS...`: the user's command under controlled
//! variants, interleaved and repeated; each variant's effect as a ratio with its interval.

use super::{
    BarProgress, DEFER_SIGNALS, STOP, check_outputs, note, screen, stdout_is_an_output,
    stdout_style, write_output,
};
use anyhow::Result;
use clap::Args;
use cpudoctor::error::InputError;
use cpudoctor::experiment::plan::{Asked, plan};
use cpudoctor::experiment::run::{Spec, execute, startable};
use cpudoctor::experiment::{Measure, NeighbourKind};
use cpudoctor::machine::Machine;
use cpudoctor::measure::{Clock, NoProgress, Progress};
use cpudoctor::render::experiment::{render_markdown, render_text};
use cpudoctor::render::export::{Export, Json};
use std::io::{IsTerminal, Write};
use std::path::PathBuf;
use std::sync::atomic::Ordering;

#[derive(Args)]
pub struct ExperimentArgs {
    /// Transparent huge pages off for the command (prctl PR_SET_THP_DISABLE) against huge
    /// pages asked for (GLIBC_TUNABLES=glibc.malloc.hugetlb=1 where THP is madvise); says
    /// how much huge-page memory the command got (AnonHugePages in its smaps_rollup).
    #[arg(long)]
    pub pages: bool,
    /// A neighbour on a CPU the command does not use, for each whole run: split-locks (the
    /// split-lock probes' bus-locking child), memory (a streaming reader), atomics (locked
    /// adds on its own line). Repeat or separate with commas.
    #[arg(long, value_name = "KIND", value_delimiter = ',', value_parser = neighbour_kind)]
    pub neighbour: Vec<NeighbourKind>,
    /// The command on two CPUs placed each way the machine allows: one core's SMT siblings,
    /// two cores sharing a cache, across a cache (CCD) boundary, across NUMA nodes.
    #[arg(long)]
    pub placement: bool,
    /// A scaling curve: the command on each count of CPUs (by affinity, one per core first),
    /// throughput against the fewest, with the ideal line. E.g. 1,2,4.
    #[arg(long, value_name = "N,M,...", value_parser = cpu_counts)]
    pub cpus: Option<CpuCounts>,
    /// Measure a figure from the command's stdout instead of wall time: the first capture
    /// group (or the whole match) of REGEX, e.g. 'ops/s: ([0-9.]+)'.
    #[arg(long, value_name = "REGEX")]
    pub metric: Option<String>,
    /// With --metric: a higher figure is better (a rate, a score); by default lower is.
    #[arg(long, requires = "metric")]
    pub higher_is_better: bool,
    /// Timed rounds; each runs every variant once, in turn (6 or more give a 95% interval).
    #[arg(long, value_name = "N", default_value_t = 10,
          value_parser = clap::value_parser!(u32).range(1..=10_000))]
    pub runs: u32,
    /// Rounds run first and thrown away (caches, page cache, CPU frequency settle).
    #[arg(long, value_name = "N", default_value_t = 1,
          value_parser = clap::value_parser!(u32).range(0..=1000))]
    pub warmup: u32,
    /// A shell command run (untimed) before every run, as hyperfine's --prepare.
    #[arg(long, value_name = "CMD")]
    pub prepare: Option<String>,
    /// Print the experiment as JSON on stdout instead of the screen.
    #[arg(long)]
    pub json: bool,
    /// Also write the JSON to FILE (for `cpudoctor report`, or to compare later).
    #[arg(long, value_name = "FILE")]
    pub save: Option<PathBuf>,
    /// Also write the result as Markdown to FILE.
    #[arg(long, value_name = "FILE")]
    pub export_markdown: Option<PathBuf>,
    /// The command to run, after `--`.
    #[arg(last = true, value_name = "CMD")]
    pub command: Vec<String>,
}

/// Parsed `--cpus`: distinct counts, ascending.
#[derive(Debug, Clone)]
pub struct CpuCounts(pub Vec<usize>);

fn neighbour_kind(text: &str) -> Result<NeighbourKind, String> {
    NeighbourKind::from_word(text.trim()).ok_or_else(|| {
        format!("'{text}' is not a neighbour: expected split-locks, memory or atomics")
    })
}

fn cpu_counts(text: &str) -> Result<CpuCounts, String> {
    let mut v = Vec::new();
    for part in text.split(',') {
        let n: usize = part
            .trim()
            .parse()
            .ok()
            .filter(|n| (1..=cpudoctor::machine::topology::MAX_CPUS).contains(n))
            .ok_or_else(|| format!("'{part}' is not a count of CPUs (1 or more)"))?;
        if v.contains(&n) {
            return Err(format!("{n} is listed twice"));
        }
        v.push(n);
    }
    v.sort_unstable();
    Ok(CpuCounts(v))
}

pub fn run(args: ExperimentArgs) -> Result<()> {
    let outputs = [
        ("--save", args.save.as_deref()),
        ("--export-markdown", args.export_markdown.as_deref()),
    ];
    check_outputs(&outputs, &[], args.json.then_some("--json"))?;
    let Some(program) = args.command.first() else {
        return Err(InputError::NoExperimentCommand.into());
    };
    let mut neighbours = Vec::new();
    for k in &args.neighbour {
        if !neighbours.contains(k) {
            neighbours.push(*k);
        }
    }
    let asked = Asked {
        pages: args.pages,
        neighbours,
        placement: args.placement,
        cpus: args.cpus.clone().map_or_else(Vec::new, |c| c.0),
    };
    if asked == Asked::default() {
        return Err(InputError::NoVariant.into());
    }
    let metric = super::metric_regex(args.metric.as_deref())?;
    startable(program).map_err(|reason| InputError::CommandNotStarted {
        program: program.clone(),
        reason,
    })?;
    let machine = Machine::detect();
    let clock = Clock::detect(machine.cpu.tsc_invariant);
    let plan = plan(
        &asked,
        machine.topology.as_ref(),
        &machine.allowed_cpus,
        machine.thp.as_ref().map(|t| t.enabled),
    );
    let to_stderr =
        args.json || stdout_is_an_output(&[args.save.as_deref(), args.export_markdown.as_deref()]);
    if plan.comparisons.is_empty() {
        for l in &plan.not_run {
            note(&format!("not run: {l}"));
        }
        return Err(InputError::NothingRunnable.into());
    }
    let spec = Spec {
        command: args.command.clone(),
        prepare: args.prepare.clone(),
        measure: match &args.metric {
            None => Measure::WallTime,
            Some(r) => Measure::Metric {
                regex: r.clone(),
                higher_is_better: args.higher_is_better,
            },
        },
        metric,
        runs: args.runs as usize,
        warmup: args.warmup as usize,
    };
    let bar = BarProgress::new();
    let progress: &dyn Progress = if std::io::stderr().is_terminal() {
        &bar
    } else {
        &NoProgress
    };
    // A first SIGINT, SIGTERM or SIGHUP stops the rounds (the run in flight is killed with its
    // process group) and the rounds measured so far are printed and saved; main then ends as
    // the signal would. A second one ends cpudoctor at once.
    DEFER_SIGNALS.store(true, Ordering::SeqCst);
    let result = execute(&spec, &plan, &machine, &clock, progress, &STOP);
    let json = Json.export(&result);
    if let Some(p) = &args.save {
        write_output(p, &json)?;
    }
    if let Some(p) = &args.export_markdown {
        write_output(p, render_markdown(&result).as_bytes())?;
    }
    if args.json {
        let mut out = std::io::stdout().lock();
        out.write_all(&json)?;
        out.flush()?;
    } else {
        let mut out = screen(to_stderr);
        out.write_all(render_text(&result, stdout_style()).as_bytes())?;
        out.flush()?;
    }
    if result.comparisons.iter().all(|c| c.ratio.is_none()) {
        anyhow::bail!("no variant could be measured (each failure is named above)");
    }
    Ok(())
}
