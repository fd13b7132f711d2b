//! `cpudoctor report FILE.json [MORE.json...] -o report.html`: one self-contained HTML page, of
//! saved fingerprints or of saved diagnoses (told from the files' content).

use super::{Input, check_outputs, labels, write_output};
use anyhow::{Context, Result};
use clap::Args;
use cpudoctor::compare::diagnoses::{ComparedDiagnoses, DiagnosisRun};
use cpudoctor::compare::fingerprint::{Compared, Run};
use cpudoctor::diagnose::SavedKind;
use cpudoctor::error::InputError;
use cpudoctor::experiment::{self, ExperimentResult};
use cpudoctor::render::html;
use cpudoctor::render::html::diagnoses;
use std::io::Write;
use std::path::{Path, PathBuf};

#[derive(Args)]
pub struct ReportArgs {
    /// Fingerprints, or diagnoses, to show. With two or more, the first is compared with each
    /// other one (fingerprints: charts overlaid; diagnoses: function diff and differential
    /// flame graph). `-` reads stdin; each file is read once, so a FIFO or `<(...)` works.
    #[arg(value_name = "FILE.json", required = true)]
    pub files: Vec<PathBuf>,
    /// The HTML file to write (written whole or not at all; `-` for stdout).
    #[arg(short = 'o', long = "output", value_name = "report.html")]
    pub output: PathBuf,
    /// For diagnoses: a saved check (`check --save`) of the machine of each diagnosis, in the
    /// order the diagnoses are given, whose figures the "why it is slower" section uses (they
    /// replace or fill in those the diagnoses recorded).
    #[arg(long, num_args = 1.., value_name = "CHECK.json")]
    pub machines: Option<Vec<PathBuf>>,
}

/// Saved diagnoses: findings, the function diff beside the differential flame graph, a flame
/// graph each.
fn report_diagnoses(args: &ReportArgs, paths: &[&Path], inputs: &[Input]) -> Result<()> {
    let mut runs = Vec::new();
    for (input, label) in inputs.iter().zip(labels(paths)) {
        runs.push(DiagnosisRun {
            label,
            diagnosis: input.diagnosis()?,
        });
    }
    if let Some(checks) = &args.machines {
        if checks.len() != runs.len() {
            return Err(InputError::MachinesCount {
                checks: checks.len(),
                diagnoses: runs.len(),
            }
            .into());
        }
        let check_paths: Vec<&Path> = checks.iter().map(PathBuf::as_path).collect();
        for ((input, path), run) in Input::read_all(&check_paths)?
            .iter()
            .zip(&check_paths)
            .zip(runs.iter_mut())
        {
            let figures = cpudoctor::diagnose::analyse::figures::from_fingerprint(
                &input.fingerprint()?,
                &path.display().to_string(),
            );
            cpudoctor::compare::why::give_machine(&mut run.diagnosis, figures);
        }
    }
    let compared = ComparedDiagnoses::new(runs).context("no diagnosis to report on")?;
    let report = diagnoses::render_diagnoses(&compared);
    write_output(&args.output, report.html.as_bytes())?;
    let mut out = super::screen(super::stdout_is_an_output(&[Some(&args.output)]));
    writeln!(
        out,
        "Report written to {} ({} diagnos{}, {} flame graph(s))",
        super::shown(&args.output),
        compared.runs().len(),
        if compared.runs().len() == 1 {
            "is"
        } else {
            "es"
        },
        report.charts
    )?;
    for skipped in &report.charts_skipped {
        writeln!(out, "Not drawn: {skipped}")?;
    }
    Ok(())
}

/// Saved experiments (`experiment --save`): each one's table, its effects with their
/// intervals, its scaling curve against ideal.
fn report_experiments(args: &ReportArgs, paths: &[&Path], inputs: &[Input]) -> Result<()> {
    let mut results = Vec::new();
    for ((input, label), path) in inputs.iter().zip(labels(paths)).zip(paths) {
        let bad = |reason: String| InputError::BadExperiment {
            path: path.display().to_string(),
            reason,
        };
        let bytes = input.bytes.as_ref().map_err(|e| bad(e.to_string()))?;
        let r: ExperimentResult = serde_json::from_slice(bytes).map_err(|e| bad(e.to_string()))?;
        if r.schema_version > experiment::SCHEMA_VERSION {
            return Err(bad(format!(
                "schema_version {}, newer than {}",
                r.schema_version,
                experiment::SCHEMA_VERSION
            ))
            .into());
        }
        results.push((label, r));
    }
    let page = cpudoctor::render::experiment::render_html(&results);
    write_output(&args.output, page.as_bytes())?;
    let mut out = super::screen(super::stdout_is_an_output(&[Some(&args.output)]));
    writeln!(
        out,
        "Report written to {} ({} experiment(s))",
        super::shown(&args.output),
        results.len()
    )?;
    Ok(())
}

pub fn run(args: ReportArgs) -> Result<()> {
    let paths: Vec<&Path> = args.files.iter().map(PathBuf::as_path).collect();
    check_outputs(&[("-o", Some(&args.output))], &paths, None)?;
    let inputs = Input::read_all(&paths)?;
    let is_experiment: Vec<bool> = inputs
        .iter()
        .map(|i| {
            i.bytes
                .as_ref()
                .ok()
                .and_then(|b| serde_json::from_slice::<serde_json::Value>(b).ok())
                .is_some_and(|v| ExperimentResult::is_experiment(&v))
        })
        .collect();
    if let Some(e) = is_experiment.iter().position(|x| *x) {
        if let Some(o) = is_experiment.iter().position(|x| !*x) {
            return Err(InputError::MixedExperiment {
                experiment: paths[e].display().to_string(),
                other: paths[o].display().to_string(),
            }
            .into());
        }
        return report_experiments(&args, &paths, &inputs);
    }
    let kinds: Vec<Option<SavedKind>> = inputs.iter().map(Input::kind).collect();
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
        (Some(_), None) => return report_diagnoses(&args, &paths, &inputs),
        _ => {}
    }
    if args.machines.is_some() {
        return Err(InputError::MachinesForFingerprints.into());
    }
    let mut runs = Vec::new();
    for (input, label) in inputs.iter().zip(labels(&paths)) {
        runs.push(Run {
            label,
            fp: input.fingerprint()?,
        });
    }
    // clap requires at least one file, so this holds; the type makes the page rely on it.
    let compared = Compared::new(runs).context("no fingerprint to report on")?;
    let report = html::render_report(&compared);
    write_output(&args.output, report.html.as_bytes())?;
    let mut out = super::screen(super::stdout_is_an_output(&[Some(&args.output)]));
    writeln!(
        out,
        "Report written to {} ({} fingerprint(s), {} chart(s))",
        super::shown(&args.output),
        compared.runs().len(),
        report.charts
    )?;
    for skipped in &report.charts_skipped {
        writeln!(out, "Not drawn: {skipped}")?;
    }
    Ok(())
}
