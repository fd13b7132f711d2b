//! `cpudoctor check`: every probe in its quick profile, then the verdict table.

use super::{BarProgress, OutputArgs, check_save_target, emit};
use anyhow::Result;
use cpudoctor::probes::{self, ProbeOptions, Profile};
use cpudoctor::session::{self, Host};

pub fn run(args: OutputArgs) -> Result<()> {
    check_save_target(&args)?;
    let host = Host::detect();
    let progress = BarProgress::new();
    let selected = probes::all();
    eprintln!(
        "cpudoctor check: {} probes, quick profile, {} run(s) (a few seconds each)",
        selected.len(),
        args.runs
    );
    let fp = session::run_repeated(
        &host,
        "check",
        selected,
        &ProbeOptions::new(Profile::Quick),
        &progress,
        args.runs as usize,
    );
    emit(&fp, &args)
}
