//! Command handlers of the binary, one file per subcommand, plus what they share: progress
//! bars, output of fingerprints, atomic file writes. Only this module and `main.rs` print.

pub mod check;
pub mod diagnose;
pub mod diff;
pub mod experiment;
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
use cpudoctor::render::export::{Export, Json, Prometheus};
use cpudoctor::render::terminal;
use cpudoctor::schema::{Fingerprint, json};
use cpudoctor::{output, process};
use indicatif::{ProgressBar, ProgressStyle};
use std::io::Write;
use std::path::{Path, PathBuf};
use std::sync::Mutex;
use std::sync::atomic::{AtomicBool, AtomicI32, Ordering};

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

/// The longest duration any option takes, in seconds: a day. A longer one is a typo (`1e30`),
/// and would overflow the clocks a duration is added to.
pub const A_DAY_S: f64 = 86_400.0;
/// The dearest PAUSE `--pause-ns` models: 10 us, seventy times the slowest PAUSE measured
/// (Skylake-SP's ~140 ns); beyond it the spin model's products lose meaning.
pub const MAX_MODEL_PAUSE_NS: f64 = 10_000.0;
/// The most cores `--cores` models: Linux's largest `NR_CPUS` (CONFIG_MAXSMP, 8192) eight
/// times over; the .NET legacy limit (20000 x cores) still fits in a u64 many times.
pub const MAX_CORES: u64 = 65_536;

/// A number of seconds above 0 and at most a day (`--duration`, `--budget`).
pub fn seconds_arg(text: &str) -> Result<f64, String> {
    cpudoctor::format::parse_positive_at_most(text, A_DAY_S)
}

/// A number of milliseconds above 0 and at most a day (`--work-ms`, `--delays`).
pub fn millis_arg(text: &str) -> Result<f64, String> {
    cpudoctor::format::parse_positive_at_most(text, A_DAY_S * 1e3)
}

/// A PAUSE cost in ns to model, above 0 and at most [`MAX_MODEL_PAUSE_NS`].
pub fn pause_ns_arg(text: &str) -> Result<f64, String> {
    cpudoctor::format::parse_positive_at_most(text, MAX_MODEL_PAUSE_NS)
}

/// `--metric REGEX` compiled (`diagnose`, `experiment`): a bad expression is one input-error
/// line with the regex crate's own last line of explanation.
pub fn metric_regex(
    metric: Option<&str>,
) -> Result<Option<regex::Regex>, cpudoctor::error::InputError> {
    metric
        .map(|r| {
            regex::Regex::new(r).map_err(|e| cpudoctor::error::InputError::BadMetric {
                regex: r.to_string(),
                reason: e
                    .to_string()
                    .lines()
                    .last()
                    .unwrap_or_default()
                    .trim()
                    .to_string(),
            })
        })
        .transpose()
}

/// Columns to wrap at: the terminal's width, else `COLUMNS` (as a shell exports it for a
/// pipe), else 100; never below [`MIN_WIDTH`]. Read by [`stdout_style`] only.
fn terminal_width() -> u16 {
    width_from(
        comfy_table::Table::new()
            .width()
            .or_else(|| std::env::var("COLUMNS").ok()?.trim().parse().ok()),
    )
}

/// The narrowest screen cpudoctor fits its text to: the paragraph filler keeps 20 columns of
/// text beside a label of up to 12, and a table of a figure, its value and its spread fits in
/// 40. Below it lines are wider than the screen. (It was 60, so a 40-column terminal broke
/// every line in mid-word: issue 29.)
pub const MIN_WIDTH: u16 = 40;

/// The width to wrap at, from the terminal's (or `COLUMNS`), when known.
fn width_from(terminal: Option<u16>) -> u16 {
    terminal.unwrap_or(100).max(MIN_WIDTH)
}

/// How text goes to stdout, built once per command and handed to every screen it renders
/// (`render(&T, Style)`): the width, and colour only on a terminal without `NO_COLOR`
/// (<https://no-color.org>: any non-empty value turns colour off) that is not `TERM=dumb`
/// (a terminal that says it understands no escapes: Emacs' shell, some CI logs).
pub fn stdout_style() -> terminal::Style {
    use std::io::IsTerminal;
    terminal::Style {
        width: terminal_width(),
        color: std::io::stdout().is_terminal() && colour_allowed(|k| std::env::var_os(k)),
    }
}

/// Whether the environment (`env`) allows colour: no non-empty `NO_COLOR`, no `TERM=dumb`.
fn colour_allowed(env: impl Fn(&str) -> Option<std::ffi::OsString>) -> bool {
    let no_color = env("NO_COLOR").is_some_and(|v| !v.is_empty());
    let dumb = env("TERM").is_some_and(|v| v == "dumb");
    !no_color && !dumb
}

/// Checks, before any work, every output a command will write: each can be written, no two
/// name one file, none is one of `inputs`, and `-` is not given where `stdout_taken` (what
/// already prints on stdout, `--json`) would mix with it. One line, exit 2.
pub fn check_outputs(
    outputs: &[(&'static str, Option<&Path>)],
    inputs: &[&Path],
    stdout_taken: Option<&'static str>,
) -> Result<()> {
    let named: Vec<(&'static str, &Path)> = outputs
        .iter()
        .filter_map(|&(what, p)| Some((what, p?)))
        .collect();
    output::check_all(&named, inputs, stdout_taken)?;
    Ok(())
}

/// True when one of `outputs` is stdout (`-`, `/dev/stdout`): the screen text then goes to
/// stderr, so that stdout carries the output alone (`check --save - | jq`).
pub fn stdout_is_an_output(outputs: &[Option<&Path>]) -> bool {
    outputs
        .iter()
        .flatten()
        .any(|p| output::destination(p).is_ok_and(|d| d.is_stdout()))
}

/// Where the screen text goes: stdout, or stderr when stdout carries an output; through
/// [`Printable`], so no control character from a file or a target reaches the terminal.
pub fn screen(to_stderr: bool) -> Box<dyn Write> {
    if to_stderr {
        Box::new(Printable::new(std::io::stderr(), false))
    } else {
        Box::new(Printable::new(std::io::stdout(), stdout_style().color))
    }
}

/// The render boundary for text: what is written through it reaches `inner` with every
/// control character but newline and tab taken out ([`cpudoctor::render::text::printable`]), SGR colour
/// kept only where cpudoctor colours. Line by line, so output appears as promptly as on
/// stdout itself; the unfinished line is written on flush and on drop.
pub struct Printable<W: Write> {
    inner: W,
    keep_colour: bool,
    pending: Vec<u8>,
}

impl<W: Write> Printable<W> {
    pub fn new(inner: W, keep_colour: bool) -> Self {
        Printable {
            inner,
            keep_colour,
            pending: Vec::new(),
        }
    }

    fn write_through(&mut self, upto: usize) -> std::io::Result<()> {
        let text = String::from_utf8_lossy(&self.pending[..upto]);
        let clean = cpudoctor::render::text::printable(&text, self.keep_colour);
        self.pending.drain(..upto);
        self.inner.write_all(clean.as_bytes())
    }
}

impl<W: Write> Write for Printable<W> {
    fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
        self.pending.extend_from_slice(buf);
        if let Some(last) = self.pending.iter().rposition(|&b| b == b'\n') {
            self.write_through(last + 1)?;
        }
        Ok(buf.len())
    }

    fn flush(&mut self) -> std::io::Result<()> {
        if !self.pending.is_empty() {
            self.write_through(self.pending.len())?;
        }
        self.inner.flush()
    }
}

impl<W: Write> Drop for Printable<W> {
    fn drop(&mut self) {
        let _ = self.flush();
    }
}

/// Stdout for text, through [`Printable`].
pub fn stdout_text() -> Printable<std::io::StdoutLock<'static>> {
    Printable::new(std::io::stdout().lock(), stdout_style().color)
}

/// Writes one output the user named, through [`output::write`] (whole or not at all, symlinks
/// followed, FIFOs and devices written as they are, the old file's mode kept).
pub fn write_output(path: &Path, bytes: &[u8]) -> Result<()> {
    // What was printed before reaches stdout first, should the output be stdout too.
    std::io::stdout().flush()?;
    output::write(path, bytes)
}

/// An output path as a reader is told it: `stdout` for `-`.
pub fn shown(path: &Path) -> String {
    if path.as_os_str() == output::STDOUT {
        "stdout".into()
    } else {
        path.display().to_string()
    }
}

/// A line on stderr that may fail (a terminal hung up by SIGHUP) without ending the run.
pub fn note(line: &str) {
    let line = cpudoctor::render::text::printable(line, false);
    let _ = writeln!(std::io::stderr(), "{line}");
}

/// Set while `diagnose` records and writes, and while `experiment` runs: the first fatal
/// signal stops the workload and lets what was recorded or measured be written ([`STOP`]); a
/// second one within [`SAME_SIGNAL_WITHIN`] is the same request, a later one ends cpudoctor
/// at once, saying so.
pub static DEFER_SIGNALS: AtomicBool = AtomicBool::new(false);
/// What `diagnose`'s recording polls: a fatal signal arrived.
pub static STOP: AtomicBool = AtomicBool::new(false);
/// A signal this soon after the first, while deferring, is taken as the same request.
const SAME_SIGNAL_WITHIN: std::time::Duration = std::time::Duration::from_secs(1);
/// The fatal signal caught while deferring, 0 when none.
static CAUGHT: AtomicI32 = AtomicI32::new(0);

/// Catches SIGHUP, SIGINT, SIGQUIT and SIGTERM for the whole run. Outside `diagnose`'s
/// recording, one removes the temporary file of a write in progress and ends cpudoctor as the
/// signal would have ([`die_by`]).
pub fn handle_fatal_signals() {
    let Ok(mut caught) = process::catch_fatal_signals() else {
        return; // the default actions stay: nothing worse than before
    };
    // Where no thread can start (a pids limit, RLIMIT_NPROC), nothing would read the caught
    // signals: the default actions come back, and the run goes on without the cleanup.
    let reader = std::thread::Builder::new().spawn(move || {
        let mut first: Option<std::time::Instant> = None;
        while let Some(sig) = caught.wait() {
            let sig = sig as i32;
            if DEFER_SIGNALS.load(Ordering::SeqCst) {
                if CAUGHT
                    .compare_exchange(0, sig, Ordering::SeqCst, Ordering::SeqCst)
                    .is_ok()
                {
                    STOP.store(true, Ordering::SeqCst);
                    first = Some(std::time::Instant::now());
                    continue;
                }
                // A second Ctrl-C right after the first (a double tap, `kill` sent twice) is
                // the same request: what was recorded is still written (issue 29: two INTs
                // 50 ms apart saved nothing, silently). Later, one ends cpudoctor now, and
                // says what that loses.
                if first.is_some_and(|t| t.elapsed() < SAME_SIGNAL_WITHIN) {
                    continue;
                }
                note(
                    "stopped by a second signal while writing what was recorded: nothing more \
                     is written",
                );
            }
            output::remove_temporaries();
            die_by(sig);
        }
    });
    if reader.is_err() {
        for sig in process::FATAL_SIGNALS {
            // SAFETY: restoring a signal's default action.
            unsafe { libc::signal(sig as i32, libc::SIG_DFL) };
        }
    }
}

/// Records `sig` as the signal `diagnose` stopped for, unless one came already: main ends by
/// it after the diagnosis is written ([`caught_signal`], [`die_by`]).
pub fn stopped_by(sig: i32) {
    let _ = CAUGHT.compare_exchange(0, sig, Ordering::SeqCst, Ordering::SeqCst);
}

/// The fatal signal `diagnose` stopped for, if one came.
pub fn caught_signal() -> Option<i32> {
    Some(CAUGHT.load(Ordering::SeqCst)).filter(|&s| s != 0)
}

/// Ends cpudoctor as signal `sig` would, so that a shell sees 128 + `sig` (130 after Ctrl-C)
/// and a script's loop stops, as after `perf record`: the default action, raised again.
/// SIGQUIT exits with 131 instead of dumping core.
pub fn die_by(sig: i32) -> ! {
    if sig != libc::SIGQUIT {
        // SAFETY: restoring the default action and raising a signal on ourselves.
        unsafe {
            libc::signal(sig, libc::SIG_DFL);
            let mut set: libc::sigset_t = std::mem::zeroed();
            libc::sigemptyset(&mut set);
            libc::sigaddset(&mut set, sig);
            libc::pthread_sigmask(libc::SIG_UNBLOCK, &set, std::ptr::null_mut());
            libc::raise(sig);
        }
    }
    std::process::exit(128 + sig)
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

/// The one way a saved file's bytes are read ([`json::read_saved`] with the size cap).
pub fn read_saved(r: impl std::io::Read) -> std::io::Result<Vec<u8>> {
    json::read_saved(r, json::SAVED_FILE_MAX_BYTES)
}

/// A saved file read once, whole: `-` is stdin, and FIFOs and `/dev/fd/N` (process
/// substitution) work because nothing opens the path twice.
pub struct Input {
    /// The path as given (`-` for stdin).
    pub path: PathBuf,
    /// Its bytes, or why they could not be read.
    pub bytes: std::io::Result<Vec<u8>>,
}

impl Input {
    /// Reads `path` (stdin for `-`) through [`read_saved`]: one JSON document, never more
    /// than [`json::SAVED_FILE_MAX_BYTES`].
    pub fn read(path: &Path) -> Input {
        let bytes = if path.as_os_str() == output::STDOUT {
            read_saved(std::io::stdin().lock())
        } else {
            std::fs::File::open(path).and_then(read_saved)
        };
        Input {
            path: path.to_path_buf(),
            bytes,
        }
    }

    /// Reads each of `paths` once; stdin may be named once only.
    pub fn read_all(paths: &[&Path]) -> Result<Vec<Input>> {
        if paths
            .iter()
            .filter(|p| p.as_os_str() == output::STDOUT)
            .count()
            > 1
        {
            return Err(InputError::StdinTwice.into());
        }
        Ok(paths.iter().map(|p| Input::read(p)).collect())
    }

    fn shown(&self) -> String {
        if self.path.as_os_str() == output::STDOUT {
            "stdin".into()
        } else {
            self.path.display().to_string()
        }
    }

    /// What the file is, from its content; `None` when it cannot be read or is not JSON.
    pub fn kind(&self) -> Option<SavedKind> {
        let bytes = self.bytes.as_ref().ok()?;
        let v: serde_json::Value = serde_json::from_slice(bytes).ok()?;
        Some(SavedKind::of(&v))
    }

    /// The saved diagnosis; every way the file can be wrong is an [`InputError`] that names it.
    pub fn diagnosis(&self) -> Result<Diagnosis> {
        let shown = self.shown();
        let bytes = self
            .bytes
            .as_ref()
            .map_err(|e| InputError::UnreadableDiagnosis {
                path: shown.clone(),
                reason: read_reason(e),
            })?;
        from_json_bytes(bytes).map_err(|e| {
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

    /// The saved fingerprint; every way the file can be wrong is an [`InputError`] that names
    /// it (a saved diagnosis is said to be one).
    pub fn fingerprint(&self) -> Result<Fingerprint> {
        let shown = self.shown();
        let bytes = self
            .bytes
            .as_ref()
            .map_err(|e| InputError::UnreadableFingerprint {
                path: shown.clone(),
                reason: read_reason(e),
            })?;
        if let Some(kind @ (SavedKind::Diagnosis | SavedKind::Experiment)) = self.kind() {
            return Err(InputError::NotAFingerprint {
                path: shown,
                reason: format!("it is {}", kind.describe()),
            }
            .into());
        }
        json::from_json_bytes(bytes)
            // Judged by this build: saved raw records analysed again, then every hazard
            // (`diff`, `report` and `explain` read the verdicts it gives).
            .map(|fp| cpudoctor::session::judge(&fp))
            .map_err(|e| {
                anyhow::Error::from(match e {
                    json::FingerprintError::NewerSchema { found } => InputError::NewerFingerprint {
                        path: shown,
                        found,
                        known: cpudoctor::schema::SCHEMA_VERSION,
                    },
                    e @ (json::FingerprintError::NoSuchSchema { .. }
                    | json::FingerprintError::Impossible { .. }) => InputError::NotAFingerprint {
                        path: shown,
                        reason: e.to_string(),
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
}

/// Every probe `check` or `probe` ran was skipped or failed: the fingerprint holds no figure. It is
/// printed and saved all the same (it says why each probe did not run), and the exit status is
/// 1, so that a job running `check` on every host notices a host where nothing could be
/// measured; `probe c2c` under `taskset -c 0` alike (issue 29: it exited 0 having measured
/// nothing).
#[derive(Debug, thiserror::Error)]
#[error(
    "nothing was measured: every probe was skipped or failed, for the reasons above (a probe \
     that needs two CPUs skips when only one is allowed, e.g. under `taskset -c 0`)"
)]
pub struct NothingMeasured;

/// Reads a saved fingerprint ([`Input::fingerprint`]).
pub fn load_fingerprint(path: &Path) -> Result<Fingerprint> {
    Input::read(path).fingerprint()
}

/// The outputs of [`OutputArgs`], named by their options.
pub fn outputs_of(o: &OutputArgs) -> [(&'static str, Option<&Path>); 2] {
    [("--save", o.save.as_deref()), ("--prom", o.prom.as_deref())]
}

/// Checks `--save` and `--prom` before minutes of measuring, not after.
pub fn check_output_args(o: &OutputArgs) -> Result<()> {
    check_outputs(&outputs_of(o), &[], o.json.then_some("--json"))
}

/// Prints the fingerprint (summary or JSON) and saves it. The results are printed first, so a
/// save that fails after minutes of measuring loses nothing: the error then says so.
pub fn emit(fp: &Fingerprint, output: &OutputArgs) -> Result<()> {
    emit_with(fp, output, false)
}

/// [`emit`], and with `figures` every probe's figures even without `--verbose` (what
/// `probe` is run for). The summary goes to stderr when an output is stdout (`--save -`).
pub fn emit_with(fp: &Fingerprint, output: &OutputArgs, figures: bool) -> Result<()> {
    let bytes = Json.export(fp);
    let to_stderr = stdout_is_an_output(&[output.save.as_deref(), output.prom.as_deref()]);
    let mut out = screen(to_stderr);
    if output.json {
        out.write_all(&bytes)?;
    } else {
        let style = terminal::Style {
            color: stdout_style().color && !to_stderr,
            ..stdout_style()
        };
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
        write_output(path, &bytes).context(
            "the results above were not saved; fix the path and run again, or keep them \
             with --json > FILE",
        )?;
        if !output.json {
            writeln!(out, "Saved to {}.", shown(path))?;
        }
    }
    if let Some(path) = &output.prom {
        // Read by node_exporter's textfile collector, another user: a new file is 0644.
        std::io::stdout().flush()?;
        output::write_shared(path, &Prometheus.export(fp))
            .context("the Prometheus export was not written; fix the path and run again")?;
        if !output.json {
            writeln!(out, "Prometheus figures written to {}.", shown(path))?;
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn env<'a>(vars: &'a [(&'a str, &'a str)]) -> impl Fn(&str) -> Option<std::ffi::OsString> + 'a {
        move |k| vars.iter().find(|(n, _)| *n == k).map(|(_, v)| v.into())
    }

    /// Issue 29: screens were never narrower than 60 columns, so a 40-column terminal broke
    /// lines in mid-word.
    #[test]
    fn case_width_40_is_kept_and_narrower_stops_at_the_minimum() {
        assert_eq!(width_from(Some(40)), 40);
        assert_eq!(width_from(Some(52)), 52);
        assert_eq!(width_from(Some(10)), MIN_WIDTH);
        assert_eq!(width_from(None), 100);
    }

    /// Issue 29: `TERM=dumb` still got colour.
    #[test]
    fn case_term_dumb_gets_no_colour() {
        assert!(!colour_allowed(env(&[("TERM", "dumb")])));
        assert!(colour_allowed(env(&[("TERM", "xterm-256color")])));
        assert!(colour_allowed(env(&[])));
    }

    #[test]
    fn no_color_turns_colour_off_unless_empty() {
        assert!(!colour_allowed(env(&[
            ("NO_COLOR", "1"),
            ("TERM", "xterm")
        ])));
        assert!(colour_allowed(env(&[("NO_COLOR", "")])));
    }

    /// The writer keeps lines whole across writes and cleans them (issue 29's escapes).
    #[test]
    fn printable_writer_cleans_split_writes() {
        let mut out = Vec::new();
        {
            let mut w = Printable::new(&mut out, true);
            w.write_all(b"host \x1b]0;pw").unwrap();
            w.write_all(b"ned\x07 \x1b[1").unwrap();
            w.write_all(b";31mred\x1b[0m\nlast").unwrap();
        }
        assert_eq!(
            String::from_utf8(out).unwrap(),
            "host ]0;pwned \x1b[1;31mred\x1b[0m\nlast"
        );
    }
}
