//! `cpudoctor diff OLD.json NEW.json`: two saved fingerprints, what changed first; or two saved
//! diagnoses, which functions grew and what their hot code does on each side. The kind is told
//! from the files' content.

use super::{Input, labels, stdout_style};
use anyhow::Result;
use clap::{Args, ValueEnum};
use cpudoctor::compare::fingerprint::{self, Change, VerdictMove};
use cpudoctor::compare::profile as compare;
use cpudoctor::compare::why;
use cpudoctor::diagnose::SavedKind;
use cpudoctor::error::InputError;
use cpudoctor::render::diff;
use cpudoctor::render::export::{Export, Json};
use cpudoctor::render::profile_diff as compare_render;
use std::io::Write;
use std::path::PathBuf;

#[derive(Args)]
pub struct DiffArgs {
    /// The baseline fingerprint or diagnosis (the machine where the software ran as expected);
    /// `-` reads stdin. Each file is read once, so a FIFO or `<(...)` works.
    #[arg(value_name = "OLD.json")]
    pub old: PathBuf,
    /// The fingerprint or diagnosis to compare with it (the same kind as OLD).
    #[arg(value_name = "NEW.json")]
    pub new: PathBuf,
    /// Print the comparison as JSON on stdout instead of text.
    #[arg(long)]
    pub json: bool,
    /// Also list every figure that did not change (within noise, or measured on one side); for
    /// diagnoses, every function.
    #[arg(long)]
    pub all: bool,
    /// Exit with status 3 when NEW is worse than OLD (a figure worse beyond noise, or a
    /// verdict that got worse), so a CI job can gate on it.
    #[arg(long, value_name = "WHAT")]
    pub fail_on: Option<FailOn>,
    /// For two diagnoses: saved checks (`check --save`) of the machines the OLD and the NEW
    /// diagnosis ran on. Their figures (PAUSE, clock, line transfer, the shared atomic add,
    /// split lock, DRAM latency and its curve) replace or fill in those the diagnoses
    /// recorded, so files saved without them are explained too.
    #[arg(long, num_args = 2, value_names = ["OLD_CHECK.json", "NEW_CHECK.json"])]
    pub machines: Option<Vec<PathBuf>>,
}

/// What `--fail-on` gates on.
#[derive(Clone, Copy, ValueEnum)]
pub enum FailOn {
    /// Any figure worse beyond noise, or any verdict that got worse.
    Worse,
}

/// NEW is worse than OLD and `--fail-on worse` was given: `main` exits with status 3.
#[derive(Debug, thiserror::Error)]
#[error("{0} (--fail-on worse)")]
pub struct Regressed(pub String);

/// Two saved diagnoses: functions ranked by growth, hot code side by side.
fn diff_diagnoses(args: &DiffArgs, inputs: &[Input]) -> Result<()> {
    if args.fail_on.is_some() {
        return Err(InputError::FailOnDiagnoses.into());
    }
    let mut old = inputs[0].diagnosis()?;
    let mut new = inputs[1].diagnosis()?;
    let names = labels(&[args.old.as_path(), args.new.as_path()]);
    let mut notes = Vec::new();
    if let Some(checks) = &args.machines {
        let paths: Vec<&std::path::Path> = checks.iter().map(PathBuf::as_path).collect();
        let read = Input::read_all(&paths)?;
        for ((input, path), (d, side)) in read
            .iter()
            .zip(&paths)
            .zip([(&mut old, "old"), (&mut new, "new")])
        {
            let fp = input.fingerprint()?;
            let figures = cpudoctor::diagnose::analyse::figures::from_fingerprint(
                &fp,
                &path.display().to_string(),
            );
            notes.extend(why::check_of_another_machine(d, &figures, side));
            why::give_machine(d, figures);
        }
    }
    let mut d = compare::compare(&old, &new, &names[0], &names[1]);
    d.notes.extend(notes);
    let mut out = super::stdout_text();
    if args.json {
        out.write_all(&Json.export(&d))?;
    } else {
        write!(
            out,
            "{}",
            compare_render::render(&d, stdout_style(), args.all)
        )?;
    }
    out.flush()?;
    Ok(())
}

pub fn run(args: DiffArgs) -> Result<()> {
    let inputs = Input::read_all(&[args.old.as_path(), args.new.as_path()])?;
    let kinds = (inputs[0].kind(), inputs[1].kind());
    let shown = |p: &PathBuf| p.display().to_string();
    match kinds {
        (Some(SavedKind::Diagnosis), Some(SavedKind::Fingerprint)) => {
            return Err(InputError::MixedKinds {
                diagnosis: shown(&args.old),
                fingerprint: shown(&args.new),
                command: "diff compares two",
            }
            .into());
        }
        (Some(SavedKind::Fingerprint), Some(SavedKind::Diagnosis)) => {
            return Err(InputError::MixedKinds {
                diagnosis: shown(&args.new),
                fingerprint: shown(&args.old),
                command: "diff compares two",
            }
            .into());
        }
        (Some(SavedKind::Diagnosis), _) | (_, Some(SavedKind::Diagnosis)) => {
            return diff_diagnoses(&args, &inputs);
        }
        _ => {}
    }
    if args.machines.is_some() {
        return Err(InputError::MachinesForFingerprints.into());
    }
    let old = inputs[0].fingerprint()?;
    let new = inputs[1].fingerprint()?;
    let d = fingerprint::diff(
        &old,
        &new,
        &args.old.display().to_string(),
        &args.new.display().to_string(),
    );
    let bytes = if args.json {
        Json.export(&d)
    } else {
        diff::render_diff_with(&d, stdout_style(), args.all).into_bytes()
    };
    let mut out = super::stdout_text();
    out.write_all(&bytes)?;
    out.flush()?;
    if let Some(FailOn::Worse) = args.fail_on {
        let worse = d
            .metrics
            .iter()
            .filter(|m| m.change == Change::Worse)
            .count();
        let verdicts = d
            .hazards
            .iter()
            .filter(|h| h.direction == VerdictMove::Worse)
            .count();
        if worse + verdicts > 0 {
            return Err(Regressed(format!(
                "{} is worse than {}: {worse} figure(s) and {verdicts} verdict(s)",
                args.new.display(),
                args.old.display()
            ))
            .into());
        }
    }
    Ok(())
}
