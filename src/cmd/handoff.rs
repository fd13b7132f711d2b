//! `cpudoctor spin --handoff`: the seed's producer/consumer handoff on each runtime, plus the
//! model lock with .NET's two spin policies. Kept out of `check`: a full run takes minutes.

use super::{
    BarProgress, OutputArgs, check_output_args, millis_arg, screen, stdout_is_an_output,
    stdout_style, write_output,
};
use anyhow::Result;
use clap::Args;
use cpudoctor::error::InputError;
use cpudoctor::names::probe;
use cpudoctor::probes::handoff::{
    DEFAULT_REPETITIONS, HandoffConfig, HandoffProbe, ModelPause, QUICK_DELAYS_MS, QUICK_ITEMS,
    Runtime, ideal_ms,
};
use cpudoctor::probes::{self, ProbeContext, ProbeOptions, Profile};
use cpudoctor::render::export::{Export, Json};
use cpudoctor::render::{handoff::render_handoff, terminal};
use cpudoctor::session::{self, Host};
use std::io::Write;
use std::path::PathBuf;

#[derive(Args)]
pub struct HandoffArgs {
    /// Run the seed's producer/consumer handoff on each runtime (C pthread, Rust std, Go,
    /// Java, and a model lock with .NET's legacy and normalized spin). Takes minutes; see --quick.
    #[arg(long)]
    pub handoff: bool,
    /// Items per run (default 100; 20 with --quick).
    #[arg(long, requires = "handoff", value_name = "N",
          value_parser = clap::value_parser!(u64).range(1..=1_000_000))]
    pub items: Option<u64>,
    /// Busy work per item while the worker holds the lock, in ms (default 10; at most a day).
    #[arg(
        long,
        requires = "handoff",
        value_name = "MS",
        allow_negative_numbers = true,
        value_parser = millis_arg
    )]
    pub work_ms: Option<f64>,
    /// Sender delays after each item, in ms, comma-separated (default 1,2,...,9; 1,2,5,9 with --quick).
    #[arg(
        long,
        requires = "handoff",
        value_delimiter = ',',
        value_name = "MS,...",
        allow_negative_numbers = true,
        value_parser = millis_arg
    )]
    pub delays: Option<Vec<f64>>,
    /// Short version: 20 items, delays 1,2,5,9 ms (about a minute instead of five).
    #[arg(long, requires = "handoff")]
    pub quick: bool,
    /// Runs per runtime and delay; tables show the median (default 3, the fewest the model
    /// lock's legacy/normalized ratio is reported over).
    #[arg(long, requires = "handoff", value_name = "N",
          value_parser = clap::value_parser!(u32).range(1..=10_000))]
    pub repetitions: Option<u32>,
    /// Runtimes to run, comma-separated: names (c_pthread_adaptive, rust_std, ...) or groups
    /// (c, rust, go, java, model). Default: all.
    #[arg(long, requires = "handoff", value_delimiter = ',', value_name = "LIST")]
    pub runtimes: Option<Vec<String>>,
    /// Also write the fingerprint to FILE (written whole or not at all).
    #[arg(long, requires = "handoff", value_name = "FILE")]
    pub save: Option<PathBuf>,
}

fn select_runtimes(words: &[String]) -> Result<Vec<Runtime>, InputError> {
    let mut chosen = Vec::new();
    for w in words {
        let found = Runtime::select(w.trim());
        if found.is_empty() {
            return Err(InputError::UnknownRuntime {
                name: w.clone(),
                known: Runtime::ALL.map(Runtime::name).join(", "),
            });
        }
        chosen.extend(found);
    }
    chosen.sort();
    chosen.dedup();
    Ok(chosen)
}

/// The spin model's options `--handoff` shares (`spin --pause-ns N --cores N --json`).
pub struct ModelOptions {
    /// PAUSE to model, in ns; `None`: the pause probe's figure.
    pub pause_ns: Option<f64>,
    /// Cores the legacy spin scales with; `None`: this machine's logical CPUs.
    pub cores: Option<u64>,
    /// Print the fingerprint as JSON.
    pub json: bool,
}

pub fn run(h: &HandoffArgs, args: &ModelOptions) -> Result<()> {
    let work_ms = h.work_ms.unwrap_or(10.0);
    let delays_ms = delays_of(h)?;
    let runtimes = match &h.runtimes {
        Some(words) => select_runtimes(words)?,
        None => Runtime::ALL.to_vec(),
    };
    let output = OutputArgs {
        json: args.json,
        save: h.save.clone(),
        prom: None,
        verbose: false,
        runs: 1,
    };
    check_output_args(&output)?;

    let host = Host::detect();
    let profile = if h.quick {
        Profile::Quick
    } else {
        Profile::Full
    };
    let options = ProbeOptions::new(profile);
    let progress = BarProgress::new();
    // The pause probe first: its verdict belongs in the fingerprint, and its `pause_ns` is the
    // PAUSE the model lock models when none is given. The handoff never times PAUSE itself.
    let (mut fp, pause) = session::measure_pause(&host, "spin --handoff", &options, &progress);
    let model_pause = match (args.pause_ns, pause) {
        (Some(ns), _) => ModelPause::Given(ns),
        (None, Ok(p)) => ModelPause::Measured(p.ns),
        (None, Err(reason)) => ModelPause::Unknown(format!(
            "PAUSE was not measured here ({reason}); give --pause-ns to model a CPU"
        )),
    };
    let mut config = HandoffConfig::seed(
        args.cores.unwrap_or(host.machine.logical_cpus as u64),
        model_pause,
    );
    config.items = h
        .items
        .unwrap_or(if h.quick { QUICK_ITEMS } else { config.items });
    config.work_ms = work_ms;
    config.delays_ms = delays_ms;
    config.repetitions = h.repetitions.unwrap_or(DEFAULT_REPETITIONS);
    config.runtimes = runtimes;

    let ideal_s: f64 = config
        .delays_ms
        .iter()
        .map(|&d| ideal_ms(config.items, config.work_ms, d))
        .sum::<f64>()
        * config.repetitions as f64
        * config.runtimes.len() as f64
        / 1e3;
    eprint!(
        "{}",
        cpudoctor::render::text::wrap(
            &format!(
                "handoff: {} runtime(s) x {} delay(s) x {} run(s); at least {} of runs, plus \
                 building the C, Go and Java programs on first use",
                config.runtimes.len(),
                config.delays_ms.len(),
                config.repetitions,
                cpudoctor::format::human_ns(ideal_s * 1e9)
            ),
            stdout_style().width,
            0
        )
    );
    let probe = HandoffProbe { config };
    let ctx = ProbeContext {
        machine: &host.machine,
        clock: &host.clock,
        options: &options,
        progress: &progress,
    };
    fp.probes.push(probes::run_probe(&probe, &ctx));
    let fp = session::judge(&fp);

    print_result(&fp, &output)
}

/// The sender delays asked for (`--delays`, each once), or the defaults of the profile.
fn delays_of(h: &HandoffArgs) -> Result<Vec<f64>> {
    Ok(match &h.delays {
        Some(d) => {
            let mut seen: Vec<f64> = Vec::new();
            for &v in d {
                if seen.contains(&v) {
                    return Err(InputError::RepeatedValue {
                        what: "--delays",
                        value: v.to_string(),
                    }
                    .into());
                }
                seen.push(v);
            }
            seen
        }
        None if h.quick => QUICK_DELAYS_MS.to_vec(),
        None => cpudoctor::probes::handoff::SEED_DELAYS_MS.to_vec(),
    })
}

/// Saves the fingerprint first (minutes of runs are not lost to a screen that cannot be
/// written), then prints it: JSON, or the machine, the handoff tables and the verdicts.
fn print_result(fp: &cpudoctor::schema::Fingerprint, output: &OutputArgs) -> Result<()> {
    let bytes = Json.export(fp);
    let to_stderr = stdout_is_an_output(&[output.save.as_deref()]);
    if let Some(path) = &output.save {
        write_output(path, &bytes)?;
    }
    let mut out = screen(to_stderr);
    if output.json {
        out.write_all(&bytes)?;
        return Ok(());
    }
    let style = stdout_style();
    writeln!(out, "{}", terminal::render_machine_wrapped(fp, style))?;
    if let Some(p) = fp.probe(probe::HANDOFF) {
        write!(out, "{}", render_handoff(p, style))?;
    }
    // The verdicts as `check -v` gives them: paragraphs that wrap at word boundaries.
    for v in &fp.verdicts {
        writeln!(out)?;
        write!(out, "{}", terminal::render_verdict_detail(v, style))?;
    }
    writeln!(out)?;
    if let Some(path) = &output.save {
        writeln!(out, "Fingerprint saved to {}", super::shown(path))?;
    }
    Ok(())
}
