//! `cpudoctor check`: every probe in its quick profile, then the verdict table.

use super::{BarProgress, OutputArgs, check_output_args, emit};
use anyhow::Result;
use clap::Args;
use cpudoctor::error::InputError;
use cpudoctor::probes::{self, ProbeOptions, Profile};
use cpudoctor::schema::Status;
use cpudoctor::session::{self, Host};

/// What `check` takes.
#[derive(Args)]
pub struct CheckArgs {
    #[command(flatten)]
    pub output: OutputArgs,
    /// Leave out probes: repeatable, or a comma list (`--skip split-lock,c2c`). On a shared
    /// host run periodically, leave out split-lock and split-lock-neighbour: they lock the
    /// memory bus, which slows every other tenant of the host while they run.
    #[arg(long, value_name = "PROBE", value_delimiter = ',')]
    pub skip: Vec<String>,
}

pub fn run(args: CheckArgs) -> Result<()> {
    let CheckArgs { output: args, skip } = args;
    check_output_args(&args)?;
    // An unknown name is an input error, like `probe NAME`.
    let skipped = session::select_probes(&skip)?;
    let selected: Vec<&'static dyn probes::Probe> = probes::all()
        .iter()
        .copied()
        .filter(|p| skip.is_empty() || !skipped.iter().any(|s| s.name() == p.name()))
        .collect();
    if selected.is_empty() {
        return Err(InputError::EverythingSkipped.into());
    }
    let host = Host::detect();
    let progress = BarProgress::new();
    eprintln!(
        "cpudoctor check: {} probes, quick profile, {} run(s) (a few seconds each)",
        selected.len(),
        args.runs
    );
    let fp = session::run_repeated(
        &host,
        "check",
        &selected,
        &ProbeOptions::new(Profile::Quick),
        &progress,
        args.runs as usize,
    );
    emit(&fp, &args)?;
    if !fp.probes.iter().any(|p| p.status == Status::Ok) {
        return Err(super::NothingMeasured.into());
    }
    Ok(())
}
