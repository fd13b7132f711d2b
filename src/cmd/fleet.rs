//! `cpudoctor fleet FILE... | DIR...`: many hosts' saved fingerprints, read in parallel, a bad
//! file named on stderr and skipped, then the bands of [`cpudoctor::compare::fleet`].

use anyhow::Result;
use clap::Args;
use cpudoctor::compare::fleet::{self, Host, HostFingerprint};
use cpudoctor::error::InputError;
use cpudoctor::render::export::{Export, Json};
use cpudoctor::schema::SCHEMA_VERSION;
use cpudoctor::schema::json::{FingerprintError, check_schema_version};
use std::io::Write;
use std::path::{Path, PathBuf};

#[derive(Args)]
pub struct FleetArgs {
    /// Saved fingerprints (`check --save`), or directories of them (every `*.json` inside,
    /// not recursive). A host is named by its file name without `.json`.
    #[arg(required = true, value_name = "FILE|DIR")]
    pub paths: Vec<PathBuf>,
    /// Print the analysis as JSON.
    #[arg(long)]
    pub json: bool,
    /// Also write an HTML page with a strip plot of each banded figure (one dot per host).
    #[arg(long, value_name = "FILE")]
    pub html: Option<PathBuf>,
}

/// The files to read: each file as given, each directory's `*.json`, sorted. A `*.json` in a
/// directory that is no readable file (a dangling symlink, a symlink loop, a directory, a
/// FIFO) is named with why, never skipped silently.
fn expand(paths: &[PathBuf]) -> (Vec<PathBuf>, Vec<(PathBuf, String)>) {
    let (mut files, mut bad) = (Vec::new(), Vec::new());
    for p in paths {
        if p.is_dir() {
            match std::fs::read_dir(p) {
                Ok(entries) => {
                    let mut found: Vec<PathBuf> = entries
                        .flatten()
                        .map(|e| e.path())
                        .filter(|f| f.extension().is_some_and(|x| x == "json"))
                        .collect();
                    found.sort();
                    for f in found {
                        match not_a_file(&f) {
                            None => files.push(f),
                            Some(why) => bad.push((f, why)),
                        }
                    }
                }
                Err(e) => bad.push((p.clone(), format!("cannot list it ({e})"))),
            }
        } else {
            files.push(p.clone());
        }
    }
    (files, bad)
}

/// Why a directory entry named `*.json` cannot be read as a fingerprint, if it cannot.
fn not_a_file(f: &Path) -> Option<String> {
    match std::fs::metadata(f) {
        Ok(m) if m.is_file() => None,
        Ok(m) if m.is_dir() => Some("it is a directory".into()),
        Ok(_) => Some("not a regular file (a FIFO, device or socket)".into()),
        Err(e) => Some(match e.raw_os_error() {
            Some(libc::ELOOP) => "a symlink loop".into(),
            Some(libc::ENOENT) => match std::fs::read_link(f) {
                Ok(to) => format!(
                    "a dangling symlink (to {}, which does not exist)",
                    to.display()
                ),
                Err(_) => "it vanished while being read".into(),
            },
            _ => format!("cannot read it ({e})"),
        }),
    }
}

/// One file, or why it cannot be used.
fn read_one(path: &Path) -> Result<Host, String> {
    let bytes = std::fs::File::open(path)
        .and_then(super::read_saved)
        .map_err(|e| format!("cannot read it ({e})"))?;
    let fp: HostFingerprint = serde_json::from_slice(&bytes).map_err(|e| {
        if e.is_eof() {
            "truncated (the JSON ends early)".to_string()
        } else {
            format!("not a cpudoctor fingerprint ({e})")
        }
    })?;
    // The same versions `diff`, `report` and `explain` read, refused in the same words.
    check_schema_version(u64::from(fp.schema_version)).map_err(|e| match e {
        FingerprintError::NewerSchema { found } => format!(
            "schema_version {found}, newer than this cpudoctor reads ({SCHEMA_VERSION}); \
             upgrade cpudoctor to read it"
        ),
        other => format!("not a cpudoctor fingerprint ({other})"),
    })?;
    let label = path.file_stem().map_or_else(
        || path.display().to_string(),
        |s| s.to_string_lossy().into(),
    );
    Ok(Host { label, fp })
}

/// Reads `files` on every CPU, keeping their order.
fn read_all(files: &[PathBuf]) -> Vec<Result<Host, String>> {
    let threads = std::thread::available_parallelism().map_or(1, |n| n.get());
    let chunk = files.len().div_ceil(threads).max(1);
    std::thread::scope(|s| {
        let handles: Vec<_> = files
            .chunks(chunk)
            .map(|part| s.spawn(move || part.iter().map(|f| read_one(f)).collect::<Vec<_>>()))
            .collect();
        handles
            .into_iter()
            .flat_map(|h| h.join().expect("a reader thread panicked"))
            .collect()
    })
}

pub fn run(args: FleetArgs) -> Result<()> {
    let inputs: Vec<&Path> = args.paths.iter().map(PathBuf::as_path).collect();
    super::check_outputs(
        &[("--html", args.html.as_deref())],
        &inputs,
        args.json.then_some("--json"),
    )?;
    let (files, mut bad) = expand(&args.paths);
    let mut hosts = Vec::new();
    for (file, r) in files.iter().zip(read_all(&files)) {
        match r {
            Ok(h) => hosts.push(h),
            Err(why) => bad.push((file.clone(), why)),
        }
    }
    for (file, why) in &bad {
        super::note(&format!("skipped {}: {why}", file.display()));
    }
    if hosts.is_empty() {
        return Err(InputError::NoFleet {
            given: args
                .paths
                .iter()
                .map(|p| p.display().to_string())
                .collect::<Vec<_>>()
                .join(" "),
            skipped: bad.len(),
        }
        .into());
    }
    let report = fleet::analyse(&hosts);
    let mut out = super::screen(super::stdout_is_an_output(&[args.html.as_deref()]));
    if args.json {
        out.write_all(&Json.export(&report))?;
    } else {
        let style = super::stdout_style();
        write!(
            out,
            "{}",
            cpudoctor::render::fleet_text::render_fleet(&report, bad.len(), style)
        )?;
    }
    out.flush()?;
    if let Some(path) = &args.html {
        super::write_output(
            path,
            cpudoctor::render::html::fleet::fleet_to_html(&report).as_bytes(),
        )?;
        if !args.json {
            writeln!(out, "Report written to {}.", super::shown(path))?;
        }
    }
    Ok(())
}
