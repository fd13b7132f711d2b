//! Command handlers of the binary, one file per subcommand, plus what they share: progress
//! bars, output of fingerprints, atomic file writes. Only this module and `main.rs` print.

pub mod check;
pub mod diagnose;
pub mod diff;
pub mod explain;
pub mod fleet;
pub mod handoff;
pub mod probe;
pub mod report;
pub mod spin;

use anyhow::{Context, Result};
use clap::Args;
use cpudoctor::diagnose::{
    DIAGNOSIS_VERSION, Diagnosis, DiagnosisError, SavedKind, from_json_bytes,
};
use cpudoctor::error::InputError;
use cpudoctor::measure::Progress;
use cpudoctor::report::terminal;
use cpudoctor::schema::{Fingerprint, json};
use indicatif::{ProgressBar, ProgressStyle};
use std::io::Write;
use std::path::{Path, PathBuf};
use std::sync::Mutex;

#[derive(Args)]
pub struct OutputArgs {
    /// Print the fingerprint as JSON on stdout instead of tables.
    #[arg(long)]
    pub json: bool,
    /// Also write the fingerprint to FILE (written whole or not at all; the directory is
    /// checked before measuring).
    #[arg(long, value_name = "FILE")]
    pub save: Option<PathBuf>,
    /// Also write the figures and verdicts in Prometheus' text format to FILE, for
    /// node_exporter's textfile collector (e.g.
    /// /var/lib/prometheus/node-exporter/cpudoctor.prom); written to a temporary file in the
    /// same directory and renamed, so the collector never reads half a file.
    #[arg(long, value_name = "FILE")]
    pub prom: Option<PathBuf>,
    /// After the summary, print every verdict in full, the machine facts and every probe's
    /// figures.
    #[arg(short, long)]
    pub verbose: bool,
    /// Run the battery N times and keep every run: each figure is the median over the runs,
    /// with its spread and interval across them (the run-to-run noise of a shared machine).
    /// Use it for a baseline `diff` will compare against.
    #[arg(long, value_name = "N", default_value_t = 1, value_parser = clap::value_parser!(u32).range(1..=20))]
    pub runs: u32,
}

/// Progress on stderr through indicatif; drawn only between timed sections, hidden when
/// stderr is not a terminal.
pub struct BarProgress {
    pub bar: Mutex<Option<ProgressBar>>,
}

impl BarProgress {
    pub fn new() -> BarProgress {
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

/// `v` when it is a finite number above zero, else the [`InputError`] naming the option `what`.
pub fn positive(what: &'static str, v: f64) -> Result<f64, InputError> {
    if v.is_finite() && v > 0.0 {
        Ok(v)
    } else {
        Err(InputError::NotPositive {
            what,
            value: v.to_string(),
        })
    }
}

/// Columns to wrap at: the terminal's width, else `COLUMNS` (as a shell exports it for a
/// pipe), else 100; never below 60.
pub fn terminal_width() -> u16 {
    comfy_table::Table::new()
        .width()
        .or_else(|| std::env::var("COLUMNS").ok()?.trim().parse().ok())
        .unwrap_or(100)
        .max(60)
}

/// How text goes to stdout: the width, and colour only on a terminal without `NO_COLOR`
/// (<https://no-color.org>: any non-empty value turns colour off).
pub fn stdout_style() -> terminal::Style {
    use std::io::IsTerminal;
    let no_color = std::env::var_os("NO_COLOR").is_some_and(|v| !v.is_empty());
    terminal::Style {
        width: terminal_width(),
        color: std::io::stdout().is_terminal() && !no_color,
    }
}

/// Writes `bytes` to `path` through a temporary file in the same directory and a rename, so a
/// failure never leaves a half-written file.
pub fn write_atomically(path: &Path, bytes: &[u8]) -> Result<()> {
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

/// [`write_atomically`] for a file the user named: the directory is checked first, and a write
/// that fails anyway is an [`InputError`] naming the path (exit 2), nothing left behind.
pub fn write_output(path: &Path, bytes: &[u8]) -> Result<()> {
    check_output_dir(path)?;
    write_atomically(path, bytes).map_err(|e| {
        InputError::OutputNotWritable {
            path: path.display().to_string(),
            reason: e.root_cause().to_string(),
        }
        .into()
    })
}

/// How files are named to a reader: the file name alone, unless two share it (then the paths
/// as given).
pub fn labels(files: &[&Path]) -> Vec<String> {
    let names: Vec<String> = files
        .iter()
        .map(|f| {
            f.file_name()
                .map_or_else(|| f.display().to_string(), |n| n.to_string_lossy().into())
        })
        .collect();
    let unique = names
        .iter()
        .enumerate()
        .all(|(i, n)| !names[..i].contains(n));
    if unique {
        names
    } else {
        files.iter().map(|f| f.display().to_string()).collect()
    }
}

/// Why a file cannot be read, in a few words.
fn read_reason(e: &std::io::Error) -> String {
    match e.kind() {
        std::io::ErrorKind::NotFound => "no such file".to_string(),
        std::io::ErrorKind::PermissionDenied => "permission denied".to_string(),
        std::io::ErrorKind::IsADirectory => "it is a directory".to_string(),
        _ => e.to_string(),
    }
}

/// What a saved file is, from its content; `None` when it cannot be read or is not JSON.
pub fn saved_kind(path: &Path) -> Option<SavedKind> {
    let bytes = std::fs::read(path).ok()?;
    let v: serde_json::Value = serde_json::from_slice(&bytes).ok()?;
    Some(SavedKind::of(&v))
}

/// Reads a saved diagnosis; every way the file can be wrong is an [`InputError`] that names
/// the file.
pub fn load_diagnosis(path: &Path) -> Result<Diagnosis> {
    let shown = path.display().to_string();
    let bytes = std::fs::read(path).map_err(|e| InputError::UnreadableDiagnosis {
        path: shown.clone(),
        reason: read_reason(&e),
    })?;
    from_json_bytes(&bytes).map_err(|e| {
        anyhow::Error::from(match e {
            DiagnosisError::Newer { found } => InputError::NewerDiagnosis {
                path: shown,
                found,
                known: DIAGNOSIS_VERSION,
            },
            other => InputError::NotADiagnosis {
                path: shown,
                reason: other.to_string(),
            },
        })
    })
}

/// Prints the fingerprint (summary or JSON) and saves it. The results are printed first, so a
/// save that fails after minutes of measuring loses nothing: the error then says so.
pub fn emit(fp: &Fingerprint, output: &OutputArgs) -> Result<()> {
    emit_with(fp, output, false)
}

/// [`emit`], and with `figures` every probe's figures even without `--verbose` (what
/// `probe` is run for).
pub fn emit_with(fp: &Fingerprint, output: &OutputArgs, figures: bool) -> Result<()> {
    let bytes = json::to_json_bytes(fp);
    let mut out = std::io::stdout().lock();
    if output.json {
        out.write_all(&bytes)?;
    } else {
        let style = stdout_style();
        write!(out, "{}", terminal::render_check(fp, style, output.verbose))?;
        if figures && !output.verbose {
            write!(
                out,
                "\nFigures (median, ±relative spread of repetitions, WIDE when noisy)\n\n{}",
                terminal::render_probe_list(&fp.probes, style)
            )?;
        }
    }
    out.flush()?;
    if let Some(path) = &output.save {
        write_atomically(path, &bytes).context(
            "the results above were not saved; fix the path and run again, or keep them \
             with --json > FILE",
        )?;
        if !output.json {
            writeln!(out, "Saved to {}.", path.display())?;
        }
    }
    if let Some(path) = &output.prom {
        write_atomically(
            path,
            cpudoctor::report::prom::prometheus_text(fp).as_bytes(),
        )
        .context("the Prometheus export was not written; fix the path and run again")?;
        if !output.json {
            writeln!(out, "Prometheus figures written to {}.", path.display())?;
        }
    }
    Ok(())
}

pub fn check_save_target(output: &OutputArgs) -> Result<()> {
    // Fail before minutes of measuring, not after.
    for path in output.save.iter().chain(&output.prom) {
        check_output_dir(path)?;
    }
    Ok(())
}

/// Reads a saved fingerprint; every way the file can be wrong is an [`InputError`] that names
/// the file.
pub fn load_fingerprint(path: &Path) -> Result<Fingerprint> {
    let shown = path.display().to_string();
    let bytes = std::fs::read(path).map_err(|e| InputError::UnreadableFingerprint {
        path: shown.clone(),
        reason: read_reason(&e),
    })?;
    json::from_json_bytes(&bytes).map_err(|e| {
        anyhow::Error::from(match e {
            json::FingerprintError::NewerSchema { found } => InputError::NewerFingerprint {
                path: shown,
                found,
                known: cpudoctor::schema::SCHEMA_VERSION,
            },
            json::FingerprintError::Malformed(err) => InputError::NotAFingerprint {
                path: shown,
                reason: match err.classify() {
                    serde_json::error::Category::Data => format!("wrong shape: {err}"),
                    _ => format!("not JSON: {err}"),
                },
            },
        })
    })
}

/// Fails with an [`InputError`] when `path` cannot be written (its directory missing, or not
/// writable by this user: tried by creating and removing a file there), before any work is
/// done.
pub fn check_output_dir(path: &Path) -> Result<()> {
    let dir = path
        .parent()
        .filter(|p| !p.as_os_str().is_empty())
        .unwrap_or(Path::new("."));
    if !dir.is_dir() {
        return Err(InputError::OutputDirMissing {
            path: path.display().to_string(),
            dir: dir.display().to_string(),
        }
        .into());
    }
    if path.is_dir() {
        return Err(InputError::OutputNotWritable {
            path: path.display().to_string(),
            reason: "it is a directory".into(),
        }
        .into());
    }
    let probe = dir.join(format!(".cpudoctor-write-test-{}", std::process::id()));
    match std::fs::File::create(&probe) {
        Ok(_) => {
            let _ = std::fs::remove_file(&probe);
            Ok(())
        }
        Err(e) => Err(InputError::OutputNotWritable {
            path: path.display().to_string(),
            reason: match e.kind() {
                std::io::ErrorKind::PermissionDenied => {
                    format!("no permission to write in {}", dir.display())
                }
                _ => format!("{} refuses new files ({e})", dir.display()),
            },
        }
        .into()),
    }
}
