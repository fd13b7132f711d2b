//! `cpudoctor diff OLD.json NEW.json`: two saved fingerprints side by side.

use super::{load_fingerprint, terminal_width};
use anyhow::Result;
use clap::Args;
use cpudoctor::report::diff;
use std::io::Write;
use std::path::PathBuf;

#[derive(Args)]
pub struct DiffArgs {
    /// The baseline fingerprint (the machine where the software ran as expected).
    #[arg(value_name = "OLD.json")]
    pub old: PathBuf,
    /// The fingerprint to compare with it.
    #[arg(value_name = "NEW.json")]
    pub new: PathBuf,
    /// Print the comparison as JSON on stdout instead of tables.
    #[arg(long)]
    pub json: bool,
}

pub fn run(args: DiffArgs) -> Result<()> {
    let old = load_fingerprint(&args.old)?;
    let new = load_fingerprint(&args.new)?;
    let d = diff::diff(
        &old,
        &new,
        &args.old.display().to_string(),
        &args.new.display().to_string(),
    );
    let text = if args.json {
        diff::diff_to_json(&d)
    } else {
        diff::render_diff(&d, terminal_width())
    };
    std::io::stdout().lock().write_all(text.as_bytes())?;
    Ok(())
}
