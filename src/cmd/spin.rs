//! `cpudoctor spin`: the spin-before-block model at this machine's PAUSE or a given one.

use super::{BarProgress, MAX_CORES, pause_ns_arg, terminal_width};
use anyhow::Result;
use clap::Args;
use cpudoctor::probes::{ProbeOptions, Profile};
use cpudoctor::render::terminal;
use cpudoctor::schema::probes::pause::PauseFigures;
use cpudoctor::session::{self, Host};
use cpudoctor::spin::{self, LegacySpin, NormalizedSpin};
use serde_json::json;
use std::io::Write;

#[derive(Args)]
pub struct SpinArgs {
    /// Model a PAUSE of this many ns instead of measuring this machine's (43 = the seed's Skylake-SP).
    #[arg(long, value_name = "NS", value_parser = pause_ns_arg, allow_negative_numbers = true)]
    pub pause_ns: Option<f64>,
    /// Core count the .NET spin limit scales with, 1 to 65536 (default: this machine's
    /// logical CPUs).
    #[arg(long, value_name = "N", value_parser = clap::value_parser!(u64).range(1..=MAX_CORES))]
    pub cores: Option<u64>,
    /// Print the model as JSON (with --handoff: the fingerprint).
    #[arg(long)]
    pub json: bool,
    #[command(flatten)]
    pub handoff: super::handoff::HandoffArgs,
}

pub fn run(args: SpinArgs) -> Result<()> {
    if args.handoff.handoff {
        let model = super::handoff::ModelOptions {
            pause_ns: args.pause_ns,
            cores: args.cores,
            json: args.json,
        };
        return super::handoff::run(&args.handoff, &model);
    }
    let host = Host::detect();
    let cores = args.cores.unwrap_or(host.machine.logical_cpus as u64);
    let (pause_ns, source) = match args.pause_ns {
        Some(ns) => (ns, "given"),
        None => {
            let (_, pause) = session::measure_pause(
                &host,
                "spin",
                &ProbeOptions::new(Profile::Quick),
                &BarProgress::new(),
            );
            let pause = pause.map_err(|reason| {
                anyhow::anyhow!(
                    "could not measure PAUSE here ({reason}); give --pause-ns to model a CPU"
                )
            })?;
            (pause.ns, "measured")
        }
    };
    let costs: Vec<_> = spin::RUNTIMES
        .iter()
        .map(|p| spin::spin_cost(p, pause_ns, cores))
        .collect();
    let legacy = LegacySpin::new(cores);
    let normalized = NormalizedSpin::new(pause_ns);
    let mut out = super::stdout_text();
    if args.json {
        let doc = json!({
            (PauseFigures::PAUSE_NS.metric): pause_ns,
            "pause_source": source,
            "cores": cores,
            "runtimes": costs,
            "dotnet_legacy": {
                "schedule": legacy,
                "total_ns": legacy.total_ns(pause_ns),
                "last_round_ns": legacy.last_round_ns(pause_ns),
            },
            "dotnet_normalized": {
                "schedule": normalized,
                "total_ns": normalized.total_ns(),
                "longest_iteration_ns": normalized.longest_iteration_ns(),
            },
        });
        serde_json::to_writer_pretty(&mut out, &doc)?;
        writeln!(out)?;
        return Ok(());
    }
    let h = cpudoctor::format::human_ns;
    let g = cpudoctor::format::group_thousands;
    write!(
        out,
        "{}",
        terminal::render_spin_table(&costs, pause_ns, cores, terminal_width())
    )?;
    writeln!(
        out,
        "PAUSE cost {source}{}.\n",
        if source == "measured" {
            " on this machine"
        } else {
            ""
        }
    )?;
    writeln!(
        out,
        ".NET legacy spin on {cores} cores (limit {} PAUSEs per round):\n  \
         rounds of {} PAUSEs, x{} repetitions\n  \
         total {} PAUSEs = {}; last round {} PAUSEs = {}\n  \
         A waiter re-checks the lock only between rounds, so a lock freed just after the \
         last round starts costs it up to {} extra.\n\
         .NET normalized (measures PAUSE at start-up): {} PAUSE(s) per normalized yield ({}), \
         up to {} yields per iteration; {} iterations of {} PAUSEs, a look at the lock after \
         each: total {} PAUSEs = {}, then it waits; a freed lock is seen within {}.",
        g(legacy.limit_pauses),
        legacy
            .rounds
            .iter()
            .map(|&r| g(r))
            .collect::<Vec<_>>()
            .join(", "),
        spin::dotnet::REPETITIONS,
        g(legacy.total_pauses),
        h(legacy.total_ns(pause_ns)),
        g(legacy.last_round_pauses),
        h(legacy.last_round_ns(pause_ns)),
        h(legacy.last_round_ns(pause_ns)),
        normalized.pauses_per_normalized_yield,
        h(normalized.normalized_yield_ns),
        normalized.optimal_max_normalized_yields_per_iteration,
        normalized.iteration_pauses.len(),
        compact_runs(&normalized.iteration_pauses),
        g(normalized.total_pauses),
        h(normalized.total_ns()),
        h(normalized.longest_iteration_ns()),
    )?;
    Ok(())
}

/// `1, 2, 4, 6 x 27`: a run list with its repeated tail folded.
fn compact_runs(runs: &[u64]) -> String {
    let Some(&last) = runs.last() else {
        return String::new();
    };
    let tail = runs.iter().rev().take_while(|&&r| r == last).count();
    let mut parts: Vec<String> = runs[..runs.len() - tail]
        .iter()
        .map(|r| r.to_string())
        .collect();
    parts.push(if tail > 1 {
        format!("{last} x {tail}")
    } else {
        last.to_string()
    });
    parts.join(", ")
}
