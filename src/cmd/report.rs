//! `cpudoctor report FILE.json [MORE.json...] -o report.html`: one self-contained HTML page, of
//! saved fingerprints or of saved diagnoses (told from the files' content).

use super::{
    check_output_dir, labels, load_diagnosis, load_fingerprint, saved_kind, write_atomically,
};
use anyhow::{Context, Result};
use clap::Args;
use cpudoctor::diagnose::SavedKind;
use cpudoctor::error::InputError;
use cpudoctor::report::html::diagnoses::{self, DiagnosisRun};
use cpudoctor::report::html::{self, Run, Runs};
use std::path::{Path, PathBuf};

#[derive(Args)]
pub struct ReportArgs {
    /// Fingerprints, or diagnoses, to show. With two or more, the first is compared with each
    /// other one (fingerprints: charts overlaid; diagnoses: function diff and differential
    /// flame graph).
    #[arg(value_name = "FILE.json", required = true)]
    pub files: Vec<PathBuf>,
    /// The HTML file to write (written whole or not at all).
    #[arg(short = 'o', long = "output", value_name = "report.html")]
    pub output: PathBuf,
}

/// Saved diagnoses: findings, the function diff beside the differential flame graph, a flame
/// graph each.
fn report_diagnoses(args: &ReportArgs, paths: &[&Path]) -> Result<()> {
    let mut runs = Vec::new();
    for (file, label) in paths.iter().zip(labels(paths)) {
        runs.push(DiagnosisRun {
            label,
            diagnosis: load_diagnosis(file)?,
        });
    }
    let report = diagnoses::render_diagnoses(&runs);
    write_atomically(&args.output, report.html.as_bytes())?;
    println!(
        "Report written to {} ({} diagnos{}, {} flame graph(s))",
        args.output.display(),
        runs.len(),
        if runs.len() == 1 { "is" } else { "es" },
        report.charts
    );
    for skipped in &report.charts_skipped {
        println!("Not drawn: {skipped}");
    }
    Ok(())
}

pub fn run(args: ReportArgs) -> Result<()> {
    check_output_dir(&args.output)?;
    let paths: Vec<&Path> = args.files.iter().map(PathBuf::as_path).collect();
    let kinds: Vec<Option<SavedKind>> = paths.iter().map(|p| saved_kind(p)).collect();
    let find = |k: SavedKind| kinds.iter().position(|x| *x == Some(k));
    match (find(SavedKind::Diagnosis), find(SavedKind::Fingerprint)) {
        (Some(d), Some(f)) => {
            return Err(InputError::MixedKinds {
                diagnosis: paths[d].display().to_string(),
                fingerprint: paths[f].display().to_string(),
                command: "a report shows",
            }
            .into());
        }
        (Some(_), None) => return report_diagnoses(&args, &paths),
        _ => {}
    }
    let mut runs = Vec::new();
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
