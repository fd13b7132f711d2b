//! What `diagnose` says about the work measure (issue 31): a run that gave no figure, a work
//! measure that cannot be taken.

/// A run whose output held no number matching `--metric` (`which`: `the diagnosed run`, `run
/// 2 of 3`); `over_kept` when it wrote more than the bytes read for the metric.
pub fn metric_not_found(which: &str, regex: &str, over_kept: Option<&str>) -> String {
    match over_kept {
        Some(kept) => format!(
            "{which} printed no number matching /{regex}/ in the first {kept} of its output \
             (--metric reads that much; print the figure earlier): the work was not recorded"
        ),
        None => format!(
            "{which} printed no number matching /{regex}/ on stdout: the work was not \
             recorded; check the expression against the command's output"
        ),
    }
}

/// A run timed without the profiler that did not exit with status 0.
pub fn run_failed(which: &str, ended: &str) -> String {
    format!("{which} {ended}: the work was not recorded (a failed run's time is not its work)")
}

/// A run that could not be started again.
pub fn run_not_started(which: &str, error: &str) -> String {
    format!("{which} could not be started: {error}: the work was not recorded")
}

/// Before the figures measured after the recording (`labels`: `core clock`, `DRAM (4 KiB)`).
/// `again`: of those, the ones a saved check had only as measured while disturbed.
pub fn measuring_figures(labels: &[&str], again: &[&str]) -> String {
    let again = if again.is_empty() {
        String::new()
    } else {
        format!(
            " ({} again: the saved check measured {} while disturbed)",
            again.join(", "),
            if again.len() == 1 { "it" } else { "them" }
        )
    };
    format!(
        "measuring this machine's figures for the saved diagnosis: {}{again}",
        labels.join(", ")
    )
}

/// Before `--runs N`.
pub fn timing_runs(n: u32) -> String {
    format!(
        "running the command {n} more time{} without the profiler, timed (--runs)",
        if n == 1 { "" } else { "s" }
    )
}

/// `--runs` stopped by a signal after `done` of `n` runs.
pub fn runs_stopped(done: u32, n: u32) -> String {
    format!("stopped after {done} of {n} runs without the profiler: the work was not recorded")
}
