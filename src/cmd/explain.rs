//! `cpudoctor explain [HAZARD [FILE]]`: one hazard in full (the figure, the reference it is
//! judged against, what it means for software in this machine's figures, what it hurts),
//! measured now with only the probes it reads, or read from a saved fingerprint. Without a
//! hazard, the list of hazards.

use super::{BarProgress, load_fingerprint, stdout_style};
use anyhow::Result;
use clap::Args;
use cpudoctor::error::InputError;
use cpudoctor::hazards;
use cpudoctor::probes::{self, ProbeOptions, Profile};
use cpudoctor::render::{terminal, text};
use cpudoctor::session::{self, Host};
use std::io::Write;
use std::path::PathBuf;

#[derive(Args)]
pub struct ExplainArgs {
    /// The hazard, as `check` names it in its JSON (`slow_pause`, `false_sharing`, ...).
    /// Without it, the hazards are listed.
    #[arg(value_name = "HAZARD")]
    pub hazard: Option<String>,
    /// A fingerprint saved with `--save` to read instead of measuring this machine (`-`:
    /// stdin).
    #[arg(value_name = "FILE")]
    pub file: Option<PathBuf>,
}

pub fn run(args: ExplainArgs) -> Result<()> {
    let style = stdout_style();
    let mut out = super::stdout_text();
    let Some(id) = args.hazard else {
        writeln!(out, "Hazards (cpudoctor explain HAZARD):")?;
        let mut t = text::columns(style.width, &[]);
        for h in hazards::all() {
            t.add_row(vec![
                h.id().to_string(),
                format!("hurts {}", h.hurts().join("; ")),
            ]);
        }
        text::keep_whole(&mut t, &[0]);
        write!(out, "{}", text::lines(t, 2))?;
        return Ok(());
    };
    let rule = hazards::by_id(&id).ok_or_else(|| InputError::UnknownHazard {
        name: id.clone(),
        known: hazards::known_ids(),
    })?;
    let fp = match &args.file {
        Some(path) => load_fingerprint(path)?,
        None => {
            let selected: Vec<&dyn probes::Probe> = rule
                .probes()
                .iter()
                .filter_map(|name| probes::by_name(name))
                .collect();
            let host = Host::detect();
            eprintln!(
                "cpudoctor explain {id}: measuring {} on {}",
                rule.probes().join(", "),
                host.machine.cpu_line()
            );
            session::run(
                &host,
                "explain",
                &selected,
                &ProbeOptions::new(Profile::Quick),
                &BarProgress::new(),
            )
        }
    };
    // `fp` is judged (`session::judge`): a saved file when loaded, a fresh run by `run`.
    let Some(verdict) = fp.verdicts.iter().find(|v| v.hazard == rule.id()).cloned() else {
        return match &args.file {
            Some(path) => Err(InputError::NoVerdict {
                path: path.display().to_string(),
                hazard: id,
                probes: rule.probes().join(", "),
            }
            .into()),
            None => {
                let why = fp
                    .not_judged
                    .iter()
                    .find(|n| n.hazard == rule.id())
                    .map_or_else(
                        || "the probes it reads did not run".to_string(),
                        |n| n.why.clone(),
                    );
                anyhow::bail!("no {id} verdict: {why}")
            }
        };
    };
    write!(out, "{}", terminal::render_verdict_detail(&verdict, style))?;
    Ok(())
}
