//! The `cpudoctor` binary: parses arguments, wires the library's parts, and is the only place
//! that writes to the terminal or exits.

use anyhow::{Context, Result};
use clap::{Args, Parser, Subcommand};
use cpudoctor::error::InputError;
use cpudoctor::measure::Progress;
use cpudoctor::probes::{self, ProbeOptions, Profile};
use cpudoctor::report::{json, schema::Fingerprint, terminal};
use cpudoctor::session::{self, Host};
use cpudoctor::spin::{self, LegacySpin, NormalizedSpin};
use indicatif::{ProgressBar, ProgressStyle};
use serde_json::json;
use std::io::Write;
use std::path::{Path, PathBuf};
use std::process::ExitCode;
use std::sync::Mutex;

#[derive(Parser)]
#[command(
    name = "cpudoctor",
    version,
    about = "Measures the CPU behaviours software trips on, and says what they mean.",
    long_about = "Measures the CPU behaviours software trips on (slow PAUSE, cache-line \
        transfers, split locks, page size and TLB reach) on this machine, judges each against \
        reference figures, and says what it means for software.\n\n\
        Start with `cpudoctor check`. Results are saved as a versioned JSON fingerprint \
        (--save) so machines can be compared later."
)]
struct Cli {
    #[command(subcommand)]
    command: Command,
}

#[derive(Subcommand)]
enum Command {
    /// Quick battery of every probe (seconds), then a verdict table. The main job.
    #[command(
        long_about = "Runs every probe in its quick profile, then prints the machine summary, \
            the probe results (median and spread; WIDE marks a noisy figure) and a verdict \
            table: each hazard, the measured figure, the reference it is judged against, and \
            what it means for software.\n\nExample: cpudoctor check --save this-host.json"
    )]
    Check(OutputArgs),
    /// Run the full microbenchmarks, with their knobs.
    #[command(
        long_about = "Runs the named probes (all when none is named) in their full profile: \
            more repetitions, longer runs. `--list` shows the probes.\n\n\
            Example: cpudoctor probe pause --cpus 0-3 --json"
    )]
    Probe(ProbeArgs),
    /// How long each runtime's locks spin on PAUSE before blocking, on this CPU or a modelled one.
    #[command(
        long_about = "Models spin-before-block for glibc, Go, Rust std, parking_lot, crossbeam, \
            oneTBB, HotSpot, folly and .NET (legacy and normalized) at this machine's measured \
            PAUSE cost, or at --pause-ns to model another CPU. Includes the .NET legacy \
            schedule of the Skylake case in full: its rounds, total spin, and the last round, \
            which is the worst extra delay a waiter adds after a lock is freed.\n\n\
            Example (the seed's Skylake-SP): cpudoctor spin --pause-ns 43 --cores 24"
    )]
    Spin(SpinArgs),
}

#[derive(Args)]
struct OutputArgs {
    /// Print the fingerprint as JSON on stdout instead of tables.
    #[arg(long)]
    json: bool,
    /// Also write the fingerprint to FILE (written whole or not at all).
    #[arg(long, value_name = "FILE")]
    save: Option<PathBuf>,
}

#[derive(Args)]
struct ProbeArgs {
    /// Probes to run (default: all). See --list.
    #[arg(value_name = "NAME")]
    names: Vec<String>,
    /// List the probes and exit.
    #[arg(long)]
    list: bool,
    /// CPUs to measure on, as a list like 0,2-3 (default: every CPU this process may use).
    #[arg(long, value_name = "LIST")]
    cpus: Option<String>,
    /// Repetitions per measurement (default: by profile).
    #[arg(long, value_name = "N", value_parser = clap::value_parser!(u32).range(1..))]
    repetitions: Option<u32>,
    /// Use the quick profile (what `check` runs) instead of the full one.
    #[arg(long)]
    quick: bool,
    #[command(flatten)]
    output: OutputArgs,
}

#[derive(Args)]
struct SpinArgs {
    /// Model a PAUSE of this many ns instead of measuring this machine's (43 = the seed's Skylake-SP).
    #[arg(long, value_name = "NS")]
    pause_ns: Option<f64>,
    /// Core count the .NET spin limit scales with (default: this machine's logical CPUs).
    #[arg(long, value_name = "N", value_parser = clap::value_parser!(u64).range(1..))]
    cores: Option<u64>,
    /// Print the model as JSON.
    #[arg(long)]
    json: bool,
}

/// Progress on stderr through indicatif; drawn only between timed sections, hidden when
/// stderr is not a terminal.
struct BarProgress {
    bar: Mutex<Option<ProgressBar>>,
}

impl BarProgress {
    fn new() -> BarProgress {
        BarProgress {
            bar: Mutex::new(None),
        }
    }
}

impl Progress for BarProgress {
    fn begin(&self, label: &str, total: u64) {
        let bar = ProgressBar::new(total).with_style(
            ProgressStyle::with_template("{prefix:>12} [{bar:30}] {pos}/{len} {elapsed}")
                .expect("static template")
                .progress_chars("=> "),
        );
        bar.set_prefix(label.to_string());
        *self.bar.lock().expect("progress lock") = Some(bar);
    }
    fn advance(&self, steps: u64) {
        if let Some(b) = self.bar.lock().expect("progress lock").as_ref() {
            b.inc(steps);
        }
    }
    fn finish(&self) {
        if let Some(b) = self.bar.lock().expect("progress lock").take() {
            b.finish_and_clear();
        }
    }
}

fn terminal_width() -> u16 {
    comfy_table::Table::new().width().unwrap_or(120).max(60)
}

/// Writes `bytes` to `path` through a temporary file in the same directory and a rename, so a
/// failure never leaves a half-written file.
fn write_atomically(path: &Path, bytes: &[u8]) -> Result<()> {
    let dir = path
        .parent()
        .filter(|p| !p.as_os_str().is_empty())
        .unwrap_or(Path::new("."));
    let name = path
        .file_name()
        .with_context(|| format!("{} is not a file path", path.display()))?;
    let tmp = dir.join(format!(
        ".{}.tmp-{}",
        name.to_string_lossy(),
        std::process::id()
    ));
    let result = std::fs::write(&tmp, bytes)
        .and_then(|()| std::fs::rename(&tmp, path))
        .with_context(|| format!("cannot write {}", path.display()));
    if result.is_err() {
        let _ = std::fs::remove_file(&tmp);
    }
    result
}

fn emit(fp: &Fingerprint, output: &OutputArgs) -> Result<()> {
    let bytes = json::to_json_bytes(fp);
    if let Some(path) = &output.save {
        write_atomically(path, &bytes)?;
    }
    let mut out = std::io::stdout().lock();
    if output.json {
        out.write_all(&bytes)?;
    } else {
        write!(out, "{}", terminal::render_check(fp, terminal_width()))?;
        if let Some(path) = &output.save {
            writeln!(out, "Fingerprint saved to {}", path.display())?;
        }
    }
    Ok(())
}

fn check_save_target(output: &OutputArgs) -> Result<()> {
    // Fail before minutes of measuring, not after.
    if let Some(dir) = output
        .save
        .as_deref()
        .and_then(Path::parent)
        .filter(|p| !p.as_os_str().is_empty())
    {
        anyhow::ensure!(
            dir.is_dir(),
            "cannot save to {}: directory {} does not exist",
            output.save.as_ref().unwrap().display(),
            dir.display()
        );
    }
    Ok(())
}

fn cmd_check(args: OutputArgs) -> Result<()> {
    check_save_target(&args)?;
    let host = Host::detect();
    let progress = BarProgress::new();
    let selected = probes::all();
    eprintln!(
        "cpudoctor check: {} probe(s), quick profile, on {}",
        selected.len(),
        host.machine.cpu_line()
    );
    let fp = session::run(
        &host,
        "check",
        selected,
        &ProbeOptions::new(Profile::Quick),
        &progress,
    );
    emit(&fp, &args)
}

fn cmd_probe(args: ProbeArgs) -> Result<()> {
    if args.list {
        for p in probes::all() {
            println!("{:<12} {}", p.name(), p.about());
        }
        return Ok(());
    }
    let selected = session::select_probes(&args.names)?;
    check_save_target(&args.output)?;
    let cpus = args
        .cpus
        .as_deref()
        .map(|s| {
            cpudoctor::machine::topology::parse_cpu_list(s)
                .filter(|v| !v.is_empty())
                .ok_or_else(|| InputError::BadCpuList(s.to_string()))
        })
        .transpose()?;
    let host = Host::detect();
    if let Some(c) = &cpus {
        session::validate_cpus(c, &host.machine)?;
    }
    let options = ProbeOptions {
        profile: if args.quick {
            Profile::Quick
        } else {
            Profile::Full
        },
        cpus,
        repetitions: args.repetitions.map(|r| r as usize),
    };
    let command = format!(
        "probe {}",
        selected
            .iter()
            .map(|p| p.name())
            .collect::<Vec<_>>()
            .join(" ")
    );
    let fp = session::run(&host, &command, &selected, &options, &BarProgress::new());
    emit(&fp, &args.output)
}

fn cmd_spin(args: SpinArgs) -> Result<()> {
    if let Some(ns) = args.pause_ns
        && !(ns.is_finite() && ns > 0.0)
    {
        return Err(InputError::NotPositive {
            what: "--pause-ns",
            value: ns.to_string(),
        }
        .into());
    }
    let host = Host::detect();
    let cores = args.cores.unwrap_or(host.machine.logical_cpus as u64);
    let (pause_ns, source) = match args.pause_ns {
        Some(ns) => (ns, "given"),
        None => {
            let fp = session::run(
                &host,
                "spin",
                &[probes::by_name("pause").expect("pause probe is registered")],
                &ProbeOptions::new(Profile::Quick),
                &BarProgress::new(),
            );
            let ns = fp
                .metric("pause", "pause_ns")
                .map(|m| m.value)
                .with_context(|| {
                    format!(
                        "could not measure PAUSE here ({}); give --pause-ns to model a CPU",
                        fp.probes[0].reason.as_deref().unwrap_or("no result")
                    )
                })?;
            (ns, "measured")
        }
    };
    let costs: Vec<_> = spin::RUNTIMES
        .iter()
        .map(|p| spin::spin_cost(p, pause_ns, cores))
        .collect();
    let legacy = LegacySpin::new(cores);
    let normalized = NormalizedSpin::new(cores, pause_ns);
    let mut out = std::io::stdout().lock();
    if args.json {
        let doc = json!({
            "pause_ns": pause_ns,
            "pause_source": source,
            "cores": cores,
            "runtimes": costs,
            "dotnet_legacy": {
                "schedule": legacy,
                "total_ns": legacy.total_ns(pause_ns),
                "last_round_ns": legacy.last_round_ns(pause_ns),
            },
            "dotnet_normalized": normalized,
        });
        serde_json::to_writer_pretty(&mut out, &doc)?;
        writeln!(out)?;
        return Ok(());
    }
    let h = cpudoctor::hazards::pause::human_ns;
    let g = terminal::group_thousands;
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
         .NET normalized: {} PAUSE(s) per normalized yield ({}), total {}, last round {} \
         (model: legacy schedule counted in normalized yields at 8 PAUSEs each).",
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
        h(normalized.total_ns),
        h(normalized.last_round_ns),
    )?;
    Ok(())
}

fn main() -> ExitCode {
    let cli = Cli::parse();
    let result = match cli.command {
        Command::Check(a) => cmd_check(a),
        Command::Probe(a) => cmd_probe(a),
        Command::Spin(a) => cmd_spin(a),
    };
    match result {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("error: {e:#}");
            if e.downcast_ref::<InputError>().is_some() {
                ExitCode::from(2)
            } else {
                ExitCode::from(1)
            }
        }
    }
}
