//! The work a diagnosed program did and what it took (issue 31): the loss `diff` measures
//! before it attributes it. One value per run, so several runs give an interval.

use serde::{Deserialize, Serialize};

/// What one run's figure is.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case", tag = "measure")]
pub enum WorkMeasure {
    /// Wall-clock seconds of a started command, spawn to exit; lower is better.
    WallTime,
    /// CPU seconds of a started command and its children (user + system); lower is better.
    CpuTime,
    /// The first capture group (or whole match) of `regex` in the command's output, as a
    /// number.
    Metric {
        /// The regular expression given.
        regex: String,
        /// Whether a higher figure is better (a rate, a score) instead of lower (a time).
        higher_is_better: bool,
    },
    /// A rate the user read elsewhere and named (`--rate`: an attached server's TPS from its
    /// own client); higher is better.
    Rate {
        /// The unit the user gave (`TPS`), or empty.
        unit: String,
    },
}

impl WorkMeasure {
    /// Whether a higher figure is better.
    pub fn higher_is_better(&self) -> bool {
        match self {
            WorkMeasure::WallTime | WorkMeasure::CpuTime => false,
            WorkMeasure::Metric {
                higher_is_better, ..
            } => *higher_is_better,
            WorkMeasure::Rate { .. } => true,
        }
    }
}

/// The work figure of a diagnosis: one value per run.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct WorkRecord {
    /// What each value is.
    #[serde(flatten)]
    pub measure: WorkMeasure,
    /// One value per run, in run order: seconds for wall or CPU time, the metric's value, or
    /// the rate given.
    pub values: Vec<f64>,
    /// True when the values come from runs with the profiler attached (the diagnosed run);
    /// false when they come from runs timed without it (`--runs`), which its overhead does
    /// not touch.
    pub with_profiler: bool,
}

/// The figure `regex` finds in `stdout`: its first capture group (or the whole match) in the
/// first line that matches, as a number; thousands separators (`1,234.5`) are dropped. Shared
/// by `experiment --metric` and `diagnose --metric`.
pub fn extract_metric(regex: &regex::Regex, stdout: &str) -> Option<f64> {
    let caps = regex.captures(stdout)?;
    let text = caps.get(1).or_else(|| caps.get(0))?.as_str();
    text.trim().replace(',', "").parse().ok()
}

/// One `--rate VALUE[UNIT]` as given: a positive finite number, then an optional unit of
/// letters, `/` and `%` (`9388tps`, `9388 TPS`, `1.2e3`, `410req/s`). The unit is kept as
/// written.
pub fn parse_rate(text: &str) -> Result<(f64, String), String> {
    let t = text.trim();
    let b = t.as_bytes();
    let mut split = 0;
    while split < b.len() {
        let c = b[split];
        let exponent = matches!(c, b'e' | b'E')
            && split > 0
            && b[..split].iter().any(u8::is_ascii_digit)
            && b.get(split + 1)
                .is_some_and(|n| n.is_ascii_digit() || matches!(n, b'+' | b'-'));
        if c.is_ascii_digit() || matches!(c, b'.' | b',') || (split == 0 && c == b'+') {
            split += 1;
        } else if exponent {
            split += 2;
        } else {
            break;
        }
    }
    let (number, unit) = t.split_at(split);
    let unit = unit.trim();
    let value: f64 = number
        .trim()
        .replace(',', "")
        .parse()
        .map_err(|_| format!("expected a rate like 9388tps or 410.5, got '{text}'"))?;
    if !(value.is_finite() && value > 0.0) {
        return Err(format!("a rate must be above 0, got '{text}'"));
    }
    if !unit
        .chars()
        .all(|c| c.is_alphanumeric() || matches!(c, '/' | '%' | '_' | '-'))
    {
        return Err(format!(
            "expected a rate like 9388tps or 410.5, got '{text}'"
        ));
    }
    Ok((value, unit.to_string()))
}

/// The rates of repeated `--rate` flags as one record, all in one unit (`9388tps` and
/// `9412TPS` agree; case is not a unit); `Err` with the two units that differ.
pub fn rates_record(rates: &[(f64, String)]) -> Result<Option<WorkRecord>, (String, String)> {
    let Some((_, unit)) = rates.first() else {
        return Ok(None);
    };
    if let Some((_, other)) = rates.iter().find(|(_, u)| !u.eq_ignore_ascii_case(unit)) {
        return Err((unit.clone(), other.clone()));
    }
    Ok(Some(WorkRecord {
        measure: WorkMeasure::Rate { unit: unit.clone() },
        values: rates.iter().map(|(v, _)| *v).collect(),
        // The rate was read while the profiler followed the server.
        with_profiler: true,
    }))
}

/// Most bytes of a command's stdout kept for `--metric` (the rest is passed on and dropped),
/// as `experiment` keeps.
pub const STDOUT_KEEP_BYTES: usize = 16 << 20;

/// A reader of a command's stdout that passes every byte on to `sink` (the user's terminal)
/// as it comes, and keeps the first [`STDOUT_KEEP_BYTES`] for `--metric`.
pub struct Tee {
    kept: std::sync::Arc<std::sync::Mutex<(Vec<u8>, u64)>>,
    reader: std::thread::JoinHandle<()>,
}

impl Tee {
    /// Starts a thread reading `from` to its end.
    pub fn start(
        from: impl std::io::Read + Send + 'static,
        mut sink: Box<dyn std::io::Write + Send>,
    ) -> Tee {
        let kept = std::sync::Arc::new(std::sync::Mutex::new((Vec::new(), 0u64)));
        let k = kept.clone();
        let reader = std::thread::spawn(move || {
            let mut from = from;
            let mut buf = [0u8; 8192];
            let mut sink_ok = true;
            loop {
                let n = match from.read(&mut buf) {
                    Ok(0) => break,
                    Ok(n) => n,
                    Err(e) if e.kind() == std::io::ErrorKind::Interrupted => continue,
                    Err(_) => break,
                };
                // A sink that fails (a closed terminal) stops the passing on, not the reading:
                // the command must not block on a full pipe.
                if sink_ok {
                    sink_ok = sink
                        .write_all(&buf[..n])
                        .and_then(|()| sink.flush())
                        .is_ok();
                }
                let mut g = k.lock().unwrap_or_else(|e| e.into_inner());
                g.1 += n as u64;
                let room = STDOUT_KEEP_BYTES.saturating_sub(g.0.len());
                g.0.extend_from_slice(&buf[..n.min(room)]);
            }
        });
        Tee { kept, reader }
    }

    /// What was read: waits up to `wait` for the end of the output (a process the command
    /// left behind may hold the pipe open), then returns the kept text and how many bytes
    /// were read in all.
    pub fn finish(self, wait: std::time::Duration) -> (String, u64) {
        let until = std::time::Instant::now() + wait;
        while !self.reader.is_finished() && std::time::Instant::now() < until {
            std::thread::sleep(std::time::Duration::from_millis(5));
        }
        if self.reader.is_finished() {
            let _ = self.reader.join();
        }
        let g = self.kept.lock().unwrap_or_else(|e| e.into_inner());
        (String::from_utf8_lossy(&g.0).into_owned(), g.1)
    }
}

/// Where a timed run's stdout goes.
pub enum RunStdout {
    /// Where cpudoctor's own goes.
    Inherit,
    /// To cpudoctor's stderr (its stdout carries JSON).
    ToStderr,
    /// Through a [`Tee`] to this sink, kept for `--metric`.
    Scanned(Box<dyn std::io::Write + Send>),
}

/// One run of the command without the profiler.
#[derive(Debug, Clone, PartialEq)]
pub struct TimedRun {
    /// Seconds from spawn to exit.
    pub wall_s: f64,
    /// User + system CPU seconds of the command and the children it waited for (`wait4`).
    pub cpu_s: f64,
    /// True when it exited with status 0.
    pub success: bool,
    /// How it ended (`exited with status 1`, `killed by SIGKILL`).
    pub ended: String,
    /// Its stdout's first [`STDOUT_KEEP_BYTES`], when scanned.
    pub stdout: Option<String>,
    /// Bytes it wrote to stdout in all, when scanned.
    pub stdout_bytes: u64,
}

/// Runs `command` once, timed, in a process group of its own (stdin from /dev/null, as
/// `experiment`'s runs): what it leaves running is killed when it exits; when `stop` is set
/// (a signal to cpudoctor) the group is killed and the run ends early.
pub fn run_timed(
    command: &[String],
    stdout: RunStdout,
    stop: &std::sync::atomic::AtomicBool,
) -> std::io::Result<TimedRun> {
    use nix::sys::wait::WaitStatus;
    use nix::unistd::Pid;
    use std::process::{Command, Stdio};
    use std::sync::atomic::Ordering;
    use std::time::{Duration, Instant};
    let program = command
        .first()
        .ok_or_else(|| std::io::Error::new(std::io::ErrorKind::InvalidInput, "no command"))?;
    let mut cmd = Command::new(program);
    cmd.args(&command[1..]).stdin(Stdio::null());
    let mut sink = None;
    match stdout {
        RunStdout::Inherit => {}
        RunStdout::ToStderr => {
            cmd.stdout(Stdio::from(std::io::stderr()));
        }
        RunStdout::Scanned(s) => {
            cmd.stdout(Stdio::piped());
            sink = Some(s);
        }
    }
    crate::process::tie_to_parent(&mut cmd);
    crate::process::own_group(&mut cmd);
    let t0 = Instant::now();
    let mut child = cmd.spawn()?;
    let group = crate::process::Group::of_leader(child.id());
    let tee = match (child.stdout.take(), sink) {
        (Some(out), Some(sink)) => Some(Tee::start(out, sink)),
        _ => None,
    };
    let pid = Pid::from_raw(child.id() as i32);
    let (status, usage) = loop {
        if let Some(done) = crate::process::try_reap_with_usage(pid) {
            break done;
        }
        if stop.load(Ordering::SeqCst) {
            group.signal(crate::process::Stop::Kill);
        }
        std::thread::sleep(Duration::from_millis(1));
    };
    let wall_s = t0.elapsed().as_secs_f64();
    drop(group); // what the command left running
    let secs = |t: libc::timeval| t.tv_sec as f64 + t.tv_usec as f64 / 1e6;
    let (stdout, stdout_bytes) = match tee {
        Some(t) => {
            let (text, n) = t.finish(Duration::from_secs(2));
            (Some(text), n)
        }
        None => (None, 0),
    };
    Ok(TimedRun {
        wall_s,
        cpu_s: secs(usage.ru_utime) + secs(usage.ru_stime),
        success: matches!(status, WaitStatus::Exited(_, 0)),
        ended: match status {
            WaitStatus::Exited(_, code) => format!("exited with status {code}"),
            WaitStatus::Signaled(_, sig, _) => format!("killed by {sig}"),
            other => format!("{other:?}"),
        },
        stdout,
        stdout_bytes,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_metric_is_the_first_group_of_the_first_match_without_separators() {
        let re = regex::Regex::new(r"ops/s: ([0-9,.]+)").unwrap();
        assert_eq!(
            extract_metric(&re, "x\nops/s: 1,234.5\nops/s: 9"),
            Some(1234.5)
        );
        let whole = regex::Regex::new(r"[0-9.]+").unwrap();
        assert_eq!(extract_metric(&whole, "took 2.50 s"), Some(2.5));
        assert_eq!(extract_metric(&re, "nothing"), None);
    }

    #[test]
    fn a_rate_is_a_positive_number_with_an_optional_unit() {
        assert_eq!(parse_rate("9388tps"), Ok((9388.0, "tps".into())));
        assert_eq!(parse_rate("9388 TPS"), Ok((9388.0, "TPS".into())));
        assert_eq!(parse_rate("410.5"), Ok((410.5, String::new())));
        assert_eq!(parse_rate("1.2e3req/s"), Ok((1200.0, "req/s".into())));
        assert_eq!(parse_rate("12,500qps"), Ok((12500.0, "qps".into())));
        for bad in ["abc", "", "0tps", "-3", "nan", "inf", "12 t p s", "tps9388"] {
            assert!(parse_rate(bad).is_err(), "{bad} accepted");
        }
    }

    #[test]
    fn repeated_rates_must_share_a_unit() {
        let r = rates_record(&[(9388.0, "tps".into()), (9412.0, "TPS".into())])
            .unwrap()
            .unwrap();
        assert_eq!(r.values, vec![9388.0, 9412.0]);
        assert_eq!(r.measure, WorkMeasure::Rate { unit: "tps".into() });
        assert!(r.measure.higher_is_better());
        assert_eq!(
            rates_record(&[(1.0, "tps".into()), (2.0, "qps".into())]),
            Err(("tps".into(), "qps".into()))
        );
        assert_eq!(rates_record(&[]), Ok(None));
    }

    #[test]
    fn a_timed_run_passes_its_output_on_and_keeps_it_for_the_metric() {
        #[derive(Clone, Default)]
        struct Sink(std::sync::Arc<std::sync::Mutex<Vec<u8>>>);
        impl std::io::Write for Sink {
            fn write(&mut self, b: &[u8]) -> std::io::Result<usize> {
                self.0.lock().unwrap().extend_from_slice(b);
                Ok(b.len())
            }
            fn flush(&mut self) -> std::io::Result<()> {
                Ok(())
            }
        }
        let sink = Sink::default();
        let stop = std::sync::atomic::AtomicBool::new(false);
        let cmd: Vec<String> = ["sh", "-c", "echo 'score: 1,234.5'; exit 3"]
            .map(String::from)
            .to_vec();
        let run = run_timed(&cmd, RunStdout::Scanned(Box::new(sink.clone())), &stop).unwrap();
        assert!(!run.success);
        assert_eq!(run.ended, "exited with status 3");
        assert_eq!(run.stdout.as_deref(), Some("score: 1,234.5\n"));
        assert_eq!(&*sink.0.lock().unwrap(), b"score: 1,234.5\n");
        let re = regex::Regex::new(r"score: ([0-9,.]+)").unwrap();
        assert_eq!(
            extract_metric(&re, run.stdout.as_deref().unwrap()),
            Some(1234.5)
        );
        assert!(run.wall_s > 0.0 && run.cpu_s >= 0.0);
    }
}
