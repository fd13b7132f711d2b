//! `cpudoctor report FILE.json [MORE.json...] -o report.html`: one self-contained HTML page.

use super::{check_output_dir, labels, load_fingerprint, write_atomically};
use anyhow::{Context, Result};
use clap::Args;
use cpudoctor::report::html::{self, Run, Runs};
use std::path::PathBuf;

#[derive(Args)]
pub struct ReportArgs {
    /// Fingerprints to show. With two or more, charts overlay them and the first is compared
    /// with each other one.
    #[arg(value_name = "FILE.json", required = true)]
    pub files: Vec<PathBuf>,
    /// The HTML file to write (written whole or not at all).
    #[arg(short = 'o', long = "output", value_name = "report.html")]
    pub output: PathBuf,
}

pub fn run(args: ReportArgs) -> Result<()> {
    check_output_dir(&args.output)?;
    let mut runs = Vec::new();
    let paths: Vec<&std::path::Path> = args.files.iter().map(PathBuf::as_path).collect();
    for (file, label) in args.files.iter().zip(labels(&paths)) {
        runs.push(Run {
            label,
            fp: load_fingerprint(file)?,
        });
    }
    // clap requires at least one file, so this holds; the type makes the page rely on it.
    let runs = Runs::new(runs).context("no fingerprint to report on")?;
    let report = html::render_report(&runs);
    write_atomically(&args.output, report.html.as_bytes())?;
    println!(
        "Report written to {} ({} fingerprint(s), {} chart(s))",
        args.output.display(),
        runs.as_slice().len(),
        report.charts
    );
    for skipped in &report.charts_skipped {
        println!("Not drawn: {skipped}");
    }
    Ok(())
}
