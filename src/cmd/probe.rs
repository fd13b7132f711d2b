//! `cpudoctor probe`: the full microbenchmarks, with their knobs.

use super::{BarProgress, OutputArgs, check_save_target, emit};
use anyhow::Result;
use clap::Args;
use cpudoctor::error::InputError;
use cpudoctor::probes::{self, ProbeOptions, Profile};
use cpudoctor::session::{self, Host};

#[derive(Args)]
pub struct ProbeArgs {
    /// Probes to run (default: all). See --list.
    #[arg(value_name = "NAME")]
    pub names: Vec<String>,
    /// List the probes and exit.
    #[arg(long)]
    pub list: bool,
    /// CPUs to measure on, as a list like 0,2-3 (default: every CPU this process may use).
    #[arg(long, value_name = "LIST")]
    pub cpus: Option<String>,
    /// Repetitions per measurement (default: by profile).
    #[arg(long, value_name = "N", value_parser = clap::value_parser!(u32).range(1..))]
    pub repetitions: Option<u32>,
    /// Use the quick profile (what `check` runs) instead of the full one.
    #[arg(long)]
    pub quick: bool,
    #[command(flatten)]
    pub output: OutputArgs,
}

pub fn run(args: ProbeArgs) -> Result<()> {
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
