//! The line-oriented output the handoff programs print (format 1, specified in
//! `runtimes/handoff/README.md`) and its parser.
//!
//! ```text
//! cpudoctor-handoff 1 runtime=c variant=adaptive
//! run delay_ms=1 rep=0 items=100 work_ms=10 items_done=100 wall_ns=... sender_lock_wait_ns=...
//!     sender_wait_cpu_ns=... worker_wait_cpu_ns=... process_cpu_ns=...
//! end runs=1
//! ```
//!
//! The parser is strict about what it needs (header, every required field, the `end` line
//! that proves the output is complete) and ignores unknown fields, so a program may report
//! more without breaking older readers.
//!
//! A runtime whose threads cannot be timed one by one (Go: goroutines move between OS
//! threads) prints `wait_cpu_ns=N wait_cpu_from=process_minus_busy` in place of the two
//! per-thread fields: the process's CPU time less the busy work it was asked to do.

use crate::schema::probes::handoff::WaitCpuFrom;
use serde::{Deserialize, Serialize};
use std::collections::HashMap;

/// The first word of the header line.
pub const MAGIC: &str = "cpudoctor-handoff";
/// The format version this parser reads.
pub const FORMAT_VERSION: u32 = 1;

/// One run of the handoff at one delay: what a program prints on a `run` line, and what the
/// in-process runtimes return directly.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct RunRecord {
    /// The sender's busy wait after each item, in ms.
    pub delay_ms: f64,
    /// Repetition index at this delay.
    pub rep: u32,
    /// Items sent.
    pub items: u64,
    /// Busy work per item under the lock, in ms.
    pub work_ms: f64,
    /// Items the worker processed.
    pub items_done: u64,
    /// Wall time of the run.
    pub wall_ns: u64,
    /// Wall time the sender spent acquiring the lock, summed over items.
    pub sender_lock_wait_ns: u64,
    /// CPU time burned while waiting, and how it was measured.
    pub wait_cpu: WaitCpu,
    /// CPU time of the whole process over the run (busy work included).
    pub process_cpu_ns: u64,
}

/// CPU time the two threads burned while they waited (for the lock or for work).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum WaitCpu {
    /// Each thread's CPU clock around its waits.
    PerThread {
        /// Sender thread CPU time while acquiring the lock.
        sender_ns: u64,
        /// Worker thread CPU time while acquiring the lock and waiting for work.
        worker_ns: u64,
    },
    /// The process's CPU time less the busy work asked for (`items x (work + delay)`), floored
    /// at 0: what a runtime whose threads cannot be timed one by one can tell. It includes
    /// the runtime's own threads, and preemption inside the busy work lowers it.
    ProcessMinusBusy {
        /// The difference, in ns.
        ns: u64,
    },
}

impl WaitCpu {
    /// A program's `wait_cpu_from` of process CPU less the busy work.
    pub const PROCESS_MINUS_BUSY: &'static str = "process_minus_busy";

    /// The CPU time, in ns.
    pub fn ns(&self) -> u64 {
        match *self {
            WaitCpu::PerThread {
                sender_ns,
                worker_ns,
            } => sender_ns + worker_ns,
            WaitCpu::ProcessMinusBusy { ns } => ns,
        }
    }

    /// How it was measured.
    pub fn source(&self) -> WaitCpuFrom {
        match self {
            WaitCpu::PerThread { .. } => WaitCpuFrom::ThreadClocks,
            WaitCpu::ProcessMinusBusy { .. } => WaitCpuFrom::ProcessMinusBusy,
        }
    }
}

impl RunRecord {
    /// CPU time burned by the two threads while they waited (for the lock or for work).
    pub fn wait_cpu_ns(&self) -> u64 {
        self.wait_cpu.ns()
    }
}

fn wait_cpu(f: &HashMap<String, String>, line_no: usize) -> Result<WaitCpu, String> {
    match f.get("wait_cpu_from").map(String::as_str) {
        None => Ok(WaitCpu::PerThread {
            sender_ns: field(f, "sender_wait_cpu_ns", line_no)?,
            worker_ns: field(f, "worker_wait_cpu_ns", line_no)?,
        }),
        Some(WaitCpu::PROCESS_MINUS_BUSY) => Ok(WaitCpu::ProcessMinusBusy {
            ns: field(f, "wait_cpu_ns", line_no)?,
        }),
        Some(other) => Err(format!(
            "line {line_no}: wait_cpu_from='{other}' is not {}",
            WaitCpu::PROCESS_MINUS_BUSY
        )),
    }
}

/// A program's whole output.
#[derive(Debug, Clone, PartialEq)]
pub struct ProgramOutput {
    /// `runtime=` of the header (`c`, `go`, `java`).
    pub runtime: String,
    /// `variant=` of the header (`default`, `adaptive`, `sync`, ...).
    pub variant: String,
    /// One record per `run` line, in order.
    pub runs: Vec<RunRecord>,
}

fn fields(rest: &[&str], line_no: usize) -> Result<HashMap<String, String>, String> {
    rest.iter()
        .map(|tok| {
            tok.split_once('=')
                .map(|(k, v)| (k.to_string(), v.to_string()))
                .ok_or_else(|| format!("line {line_no}: expected key=value, got '{tok}'"))
        })
        .collect()
}

fn field<T: std::str::FromStr>(
    f: &HashMap<String, String>,
    key: &str,
    line_no: usize,
) -> Result<T, String> {
    let raw = f
        .get(key)
        .ok_or_else(|| format!("line {line_no}: missing field {key}"))?;
    raw.parse()
        .map_err(|_| format!("line {line_no}: field {key}='{raw}' is not a valid number"))
}

/// Parses a program's stdout. The error says which line is wrong and why.
pub fn parse(text: &str) -> Result<ProgramOutput, String> {
    let mut lines = text
        .lines()
        .enumerate()
        .map(|(i, l)| (i + 1, l.trim()))
        .filter(|(_, l)| !l.is_empty());
    let (n, header) = lines.next().ok_or("empty output")?;
    let words: Vec<&str> = header.split_whitespace().collect();
    if words.first() != Some(&MAGIC) {
        return Err(format!(
            "line {n}: expected header '{MAGIC} {FORMAT_VERSION} ...', got '{header}'"
        ));
    }
    let version: u32 = words
        .get(1)
        .and_then(|v| v.parse().ok())
        .ok_or_else(|| format!("line {n}: header has no format version"))?;
    if version != FORMAT_VERSION {
        return Err(format!(
            "line {n}: format version {version}, this build reads {FORMAT_VERSION}"
        ));
    }
    let head = fields(&words[2..], n)?;
    let get = |k: &str| {
        head.get(k)
            .cloned()
            .ok_or_else(|| format!("line {n}: header has no {k}="))
    };
    let (runtime, variant) = (get("runtime")?, get("variant")?);

    let mut runs = Vec::new();
    for (n, line) in lines {
        let words: Vec<&str> = line.split_whitespace().collect();
        let f = fields(&words[1..], n)?;
        match words[0] {
            "run" => runs.push(RunRecord {
                delay_ms: field(&f, "delay_ms", n)?,
                rep: field(&f, "rep", n)?,
                items: field(&f, "items", n)?,
                work_ms: field(&f, "work_ms", n)?,
                items_done: field(&f, "items_done", n)?,
                wall_ns: field(&f, "wall_ns", n)?,
                sender_lock_wait_ns: field(&f, "sender_lock_wait_ns", n)?,
                wait_cpu: wait_cpu(&f, n)?,
                process_cpu_ns: field(&f, "process_cpu_ns", n)?,
            }),
            "end" => {
                let count: usize = field(&f, "runs", n)?;
                if count != runs.len() {
                    return Err(format!(
                        "line {n}: end says {count} runs, {} run lines came before",
                        runs.len()
                    ));
                }
                return Ok(ProgramOutput {
                    runtime,
                    variant,
                    runs,
                });
            }
            other => return Err(format!("line {n}: unknown record '{other}'")),
        }
    }
    Err(format!(
        "output ends after {} run line(s) without 'end runs=N': the program stopped early",
        runs.len()
    ))
}

#[cfg(test)]
mod tests {
    use super::*;

    // A real output of runtimes/handoff/handoff.c on the 2-vCPU EPYC guest.
    const C_OUTPUT: &str = "\
cpudoctor-handoff 1 runtime=c variant=adaptive
run delay_ms=1 rep=0 items=5 work_ms=2 items_done=5 wall_ns=10466117 sender_lock_wait_ns=4299490 sender_wait_cpu_ns=58109 worker_wait_cpu_ns=47992 process_cpu_ns=15400543
run delay_ms=3.5 rep=0 items=5 work_ms=2 items_done=5 wall_ns=15192352 sender_lock_wait_ns=2142 sender_wait_cpu_ns=15874 worker_wait_cpu_ns=47691 process_cpu_ns=25316293
end runs=2
";

    #[test]
    fn parses_a_real_c_output() {
        let out = parse(C_OUTPUT).unwrap();
        assert_eq!(out.runtime, "c");
        assert_eq!(out.variant, "adaptive");
        assert_eq!(out.runs.len(), 2);
        let r = &out.runs[1];
        assert_eq!(r.delay_ms, 3.5);
        assert_eq!(r.items_done, 5);
        assert_eq!(r.wall_ns, 15_192_352);
        assert_eq!(r.wait_cpu_ns(), 15_874 + 47_691);
    }

    #[test]
    fn a_process_minus_busy_wait_cpu_replaces_the_per_thread_fields() {
        let text = C_OUTPUT.replace(
            "sender_wait_cpu_ns=58109 worker_wait_cpu_ns=47992",
            "wait_cpu_ns=1234 wait_cpu_from=process_minus_busy",
        );
        let r = &parse(&text).unwrap().runs[0];
        assert_eq!(r.wait_cpu, WaitCpu::ProcessMinusBusy { ns: 1234 });
        assert_eq!(r.wait_cpu.source(), WaitCpuFrom::ProcessMinusBusy);
        let odd = text.replacen("process_minus_busy", "guesswork", 1);
        assert!(
            parse(&odd)
                .unwrap_err()
                .contains("wait_cpu_from='guesswork'")
        );
        let missing = text.replacen(" wait_cpu_ns=1234", "", 1);
        assert_eq!(
            parse(&missing).unwrap_err(),
            "line 2: missing field wait_cpu_ns"
        );
    }

    #[test]
    fn unknown_fields_are_ignored() {
        let text = C_OUTPUT.replace("items_done=5", "items_done=5 spins=12");
        assert_eq!(parse(&text).unwrap().runs.len(), 2);
    }

    #[test]
    fn truncated_output_is_an_error() {
        let cut: String = C_OUTPUT.lines().take(2).collect::<Vec<_>>().join("\n");
        let e = parse(&cut).unwrap_err();
        assert!(e.contains("stopped early"), "{e}");
    }

    #[test]
    fn a_missing_field_names_the_field_and_line() {
        let text = C_OUTPUT.replace(" wall_ns=10466117", "");
        assert_eq!(parse(&text).unwrap_err(), "line 2: missing field wall_ns");
    }

    #[test]
    fn wrong_counts_headers_and_records_are_errors() {
        assert!(parse(&C_OUTPUT.replace("runs=2", "runs=3")).is_err());
        assert!(parse(&C_OUTPUT.replace("handoff 1", "handoff 2")).is_err());
        assert!(parse(&C_OUTPUT.replace("cpudoctor-handoff", "hello")).is_err());
        assert!(parse(&C_OUTPUT.replace("run delay_ms=1", "walk delay_ms=1")).is_err());
        assert!(parse(&C_OUTPUT.replace("wall_ns=10466117", "wall_ns=fast")).is_err());
        assert!(parse(&C_OUTPUT.replace(" variant=adaptive", "")).is_err());
        assert_eq!(parse("").unwrap_err(), "empty output");
    }
}
