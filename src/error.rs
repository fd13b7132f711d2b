//! Input errors: what the user asked for is wrong, and the message says how to fix it.
//! Everything else travels as `anyhow` errors with context.

use thiserror::Error;

/// A request cpudoctor cannot act on.
#[derive(Debug, Error, PartialEq, Eq)]
pub enum InputError {
    /// `probe NAME` with a name no probe has.
    #[error("unknown probe '{name}'; known probes: {known} (see `cpudoctor probe --list`)")]
    UnknownProbe {
        /// The name given.
        name: String,
        /// Comma-separated names of all probes.
        known: String,
    },
    /// `--cpus` that does not parse.
    #[error("invalid CPU list '{0}': expected numbers and ranges like 0,2-3")]
    BadCpuList(String),
    /// `--cpus` naming CPUs this process may not use.
    #[error(
        "CPU {cpus} not available to this process (allowed: {allowed}); pick from the allowed set"
    )]
    CpusNotAllowed {
        /// The offending CPUs.
        cpus: String,
        /// The allowed set.
        allowed: String,
    },
    /// A non-positive or non-finite number where a positive one is needed.
    #[error("{what} must be a positive number, got {value}")]
    NotPositive {
        /// Which option.
        what: &'static str,
        /// The value given.
        value: String,
    },
    /// A fingerprint file that is missing or cannot be read.
    #[error(
        "cannot read fingerprint {path}: {reason}; give a file saved with \
         `cpudoctor check --save FILE`"
    )]
    UnreadableFingerprint {
        /// The path given.
        path: String,
        /// What went wrong (`no such file`, `permission denied`, ...).
        reason: String,
    },
    /// A file that is not JSON, or JSON that is not a fingerprint.
    #[error(
        "{path} is not a cpudoctor fingerprint ({reason}); give a file saved with \
         `cpudoctor check --save FILE`"
    )]
    NotAFingerprint {
        /// The path given.
        path: String,
        /// The parser's complaint.
        reason: String,
    },
    /// A fingerprint written by a newer cpudoctor, whose layout this build does not know.
    #[error(
        "{path} has fingerprint schema_version {found}, newer than this cpudoctor reads \
         ({known}); upgrade cpudoctor to read it"
    )]
    NewerFingerprint {
        /// The path given.
        path: String,
        /// The version in the file.
        found: u64,
        /// The newest version this build reads.
        known: u32,
    },
    /// An output file whose directory does not exist.
    #[error("cannot write {path}: directory {dir} does not exist; create it or pick another path")]
    OutputDirMissing {
        /// The path given.
        path: String,
        /// Its directory.
        dir: String,
    },
    /// An output file that cannot be written (a write test in its directory failed).
    #[error("cannot write {path}: {reason}; pick another path")]
    OutputNotWritable {
        /// The path given.
        path: String,
        /// Why not.
        reason: String,
    },
    /// Two outputs of one command naming the same file (one would silently replace the other).
    #[error("{first} and {second} both name {path}; give each output its own file")]
    SameOutput {
        /// The option that named it first.
        first: &'static str,
        /// The option that named it again.
        second: &'static str,
        /// The path as given the second time.
        path: String,
    },
    /// An output that is also one of the command's inputs.
    #[error(
        "{what} {path} is also an input: writing it would replace what is read; pick another path"
    )]
    OutputIsInput {
        /// The option that named it.
        what: &'static str,
        /// The path as given.
        path: String,
    },
    /// An output to stdout (`-`) when something else already prints there.
    #[error(
        "{what} - writes to stdout, where {by} already prints; drop one, or give {what} a file"
    )]
    StdoutTaken {
        /// The option given `-`.
        what: &'static str,
        /// What prints on stdout already (`--json`, another output).
        by: &'static str,
    },
    /// `check --skip` naming every probe.
    #[error("--skip leaves no probe to run; skip fewer (see `cpudoctor probe --list`)")]
    EverythingSkipped,
    /// Two inputs read from stdin (`-` given twice).
    #[error("stdin (-) can be read once only; give a file for the other input")]
    StdinTwice,
    /// `explain` with a hazard no rule has.
    #[error("unknown hazard '{name}'; known hazards: {known}")]
    UnknownHazard {
        /// The name given.
        name: String,
        /// Comma-separated identifiers of all hazards.
        known: String,
    },
    /// `explain HAZARD FILE` where the file has no verdict for the hazard.
    #[error(
        "{path} has no {hazard} verdict: the probes it reads ({probes}) did not run ok there; \
         run `cpudoctor explain {hazard}` to measure them here"
    )]
    NoVerdict {
        /// The fingerprint file.
        path: String,
        /// The hazard asked for.
        hazard: String,
        /// The probes that hazard reads.
        probes: String,
    },
    /// `diagnose` with neither a command nor `--pid`.
    #[error(
        "nothing to diagnose: give a command to run (`cpudoctor diagnose -- ./server`) or a \
         running process (`cpudoctor diagnose --pid 1234`)"
    )]
    NothingToDiagnose,
    /// `spin --runtimes` naming a runtime (or group) the handoff does not have.
    #[error("unknown runtime '{name}'; known: {known} (or a group: c, rust, go, java, model)")]
    UnknownRuntime {
        /// The name given.
        name: String,
        /// Comma-separated names of all runtimes.
        known: String,
    },
    /// `diagnose -- CMD` with a command that cannot be started.
    #[error("cannot start '{program}': {reason}; check the command name and PATH")]
    CommandNotStarted {
        /// The program as given.
        program: String,
        /// Why it could not start.
        reason: String,
    },
    /// `diagnose` refused by the kernel because the target is not dumpable (issue 29: it was
    /// blamed on a seccomp or LSM policy).
    #[error(
        "process {0} is not dumpable (it called prctl(PR_SET_DUMPABLE, 0), changed its user, \
         or runs a setuid or file-capability program): the kernel lets only root \
         (CAP_SYS_PTRACE) sample it; run cpudoctor as root"
    )]
    TargetNotDumpable(i32),
    /// `diagnose --pid` with a PID no process has.
    #[error("no process with PID {0}; check the PID with `ps -p {0}`")]
    NoSuchProcess(i32),
    /// `diagnose --pid` on another user's process.
    #[error("process {pid} belongs to uid {uid}; run cpudoctor as that user or as root to attach")]
    ProcessNotOwned {
        /// The PID.
        pid: i32,
        /// Its owner.
        uid: u32,
    },
    /// `perf_event_open` refused: by `kernel.perf_event_paranoid` above 2, or (at 2 or below,
    /// which already allow user-space sampling of one's own processes) by a seccomp or LSM
    /// policy. The message names the least privilege that fixes it.
    #[error("{}", perf_not_permitted(*paranoid))]
    PerfNotPermitted {
        /// The sysctl's value, when readable.
        paranoid: Option<i32>,
    },
    /// A size option that does not parse.
    #[error(
        "invalid size '{value}' for {what}: expected a number of bytes or one like 16K, 512M, 1G"
    )]
    BadSize {
        /// Which option.
        what: &'static str,
        /// The value given.
        value: String,
    },
    /// A buffer size below the smallest a pointer chase can walk (issue 29: `--sizes 1` was
    /// skipped as if above the maximum).
    #[error(
        "{what} {value} is below the smallest buffer the memory probes walk ({min}: two cache \
         lines); pick 128 or more, like 16K"
    )]
    SizeTooSmall {
        /// Which option.
        what: &'static str,
        /// The value given.
        value: String,
        /// The smallest accepted, in words.
        min: String,
    },
    /// A buffer size larger than the memory the kernel can hand out.
    #[error("{what} {requested} is more than {available}; pick a smaller {what}")]
    MoreThanAvailableMemory {
        /// Which option.
        what: &'static str,
        /// The size asked for, formatted.
        requested: String,
        /// The room, in words: `the 22 GiB of memory available (MemAvailable in
        /// /proc/meminfo)`, `the 500 MiB that the cgroup memory limit leaves`.
        available: String,
    },
    /// A page kind that does not exist.
    #[error("unknown page kind '{0}': expected 4k, thp, hugetlb-2m or hugetlb-1g")]
    BadPageKind(String),
    /// `diagnose --frequency` above what the kernel allows (EINVAL from `perf_event_open`).
    #[error(
        "--frequency {requested} Hz is above kernel.perf_event_max_sample_rate={max} (the kernel \
         lowers it at run time when sampling interrupts take too long); pick --frequency {max} \
         or less"
    )]
    SampleRateTooHigh {
        /// The frequency asked for.
        requested: u64,
        /// The sysctl's value now.
        max: u64,
    },
    /// Out of file descriptors opening perf events (EMFILE): one event per thread and CPU.
    #[error(
        "out of file descriptors: following {threads} thread(s) of {processes} process(es) on \
         {cpus} CPUs takes about {needed} perf events, and the open-file limit is {limit} \
         (already raised to the hard limit); raise the hard limit (`ulimit -Hn`, LimitNOFILE= \
         for a service, as root){}",
        if *processes > 1 {
            ", or follow the process alone with --no-children"
        } else {
            ""
        }
    )]
    TooManyOpenFiles {
        /// Threads followed, of every process.
        threads: usize,
        /// Processes followed (an attached process and its children).
        processes: usize,
        /// CPUs the events are opened on.
        cpus: usize,
        /// Descriptors needed, roughly.
        needed: usize,
        /// `RLIMIT_NOFILE` now.
        limit: u64,
    },
    /// A list option that names the same value twice.
    #[error("{what} lists {value} twice; give each value once")]
    RepeatedValue {
        /// Which option.
        what: &'static str,
        /// The repeated value.
        value: String,
    },
    /// A duration beyond what an option allows (bus locking that would slow a shared host
    /// for too long).
    #[error("{what} {value} s is more than the {max} s allowed: {why}; pick at most {max}")]
    TooLong {
        /// Which option.
        what: &'static str,
        /// The value given.
        value: String,
        /// The largest value allowed, in seconds.
        max: u32,
        /// Why there is a limit.
        why: &'static str,
    },
    /// A saved diagnosis that is missing or cannot be read.
    #[error(
        "cannot read diagnosis {path}: {reason}; give a file saved with \
         `cpudoctor diagnose --save FILE`"
    )]
    UnreadableDiagnosis {
        /// The path given.
        path: String,
        /// What went wrong (`no such file`, `permission denied`, ...).
        reason: String,
    },
    /// A file that is not JSON (a truncated or binary file), or JSON that is not a diagnosis.
    #[error(
        "{path} is not a cpudoctor diagnosis ({reason}); give a file saved with \
         `cpudoctor diagnose --save FILE`"
    )]
    NotADiagnosis {
        /// The path given.
        path: String,
        /// What it is instead, or the parser's complaint.
        reason: String,
    },
    /// A diagnosis written by a newer cpudoctor.
    #[error(
        "{path} has diagnosis_version {found}, newer than this cpudoctor reads ({known}); \
         upgrade cpudoctor to read it"
    )]
    NewerDiagnosis {
        /// The path given.
        path: String,
        /// The version in the file.
        found: u64,
        /// The newest version this build reads.
        known: u32,
    },
    /// `diff` or `report` given a saved diagnosis and a saved fingerprint.
    #[error(
        "{diagnosis} is a saved diagnosis and {fingerprint} a saved fingerprint: {command} \
         fingerprints (`check --save`) or diagnoses (`diagnose --save`), not both"
    )]
    MixedKinds {
        /// A diagnosis file.
        diagnosis: String,
        /// A fingerprint file.
        fingerprint: String,
        /// What the command takes: `diff compares two`, `report shows`.
        command: &'static str,
    },
    /// `diff --fail-on` on two diagnoses, which have no figures or verdicts to gate on.
    #[error(
        "--fail-on gates on the figures and verdicts of two fingerprints; two diagnoses have \
         none: drop --fail-on"
    )]
    FailOnDiagnoses,
    /// `diff --machines` or `report --machines` was given fingerprints.
    #[error(
        "--machines gives saved diagnoses the figures of their machines; fingerprints carry \
         their own: drop --machines"
    )]
    MachinesForFingerprints,
    /// `report --machines` was given another number of checks than diagnoses.
    #[error(
        "--machines takes one saved check per diagnosis, in the same order: {checks} check(s) \
         for {diagnoses} diagnos(es)"
    )]
    MachinesCount {
        /// Checks given.
        checks: usize,
        /// Diagnoses given.
        diagnoses: usize,
    },
    /// `fleet` found no fingerprint it could read among the paths given.
    #[error(
        "no fingerprint could be read from {given} ({skipped} file(s) skipped, each named \
         above); give files or directories of `cpudoctor check --save` output"
    )]
    NoFleet {
        /// The paths as given.
        given: String,
        /// Files skipped.
        skipped: usize,
    },
    /// `experiment` without a command after `--`.
    #[error(
        "nothing to run: give the command after -- (`cpudoctor experiment --pages -- ./bench`)"
    )]
    NoExperimentCommand,
    /// `experiment` with no variant to compare.
    #[error(
        "nothing to vary: give --pages, --neighbour split-locks|memory|atomics, --placement or \
         --cpus 1,2,4"
    )]
    NoVariant,
    /// `experiment` where no variant asked can run on this machine (`--cpus 99` on two CPUs):
    /// a request that cannot be acted on, exit 2 as the README says (issue 29: it was 1).
    #[error("nothing this machine can run of the variants asked (each said above)")]
    NothingRunnable,
    /// `report` given an experiment beside files of another kind.
    #[error("{experiment} is an experiment and {other} is not; a report shows experiments alone")]
    MixedExperiment {
        /// The experiment file.
        experiment: String,
        /// The other file.
        other: String,
    },
    /// An experiment file this build cannot read (newer schema, or damaged).
    #[error("{path} is not an experiment this cpudoctor reads ({reason})")]
    BadExperiment {
        /// The path given.
        path: String,
        /// Why.
        reason: String,
    },
    /// `experiment --metric` with an expression that does not compile.
    #[error("--metric '{regex}' is not a regular expression: {reason}")]
    BadMetric {
        /// The expression given.
        regex: String,
        /// The parser's complaint, on one line.
        reason: String,
    },
    /// `diagnose --rate` given in two units: one record holds one kind of rate.
    #[error("--rate is given in {first} and in {second}; give every rate in one unit")]
    MixedRateUnits {
        /// The first rate's unit (`none` without one).
        first: String,
        /// A later rate's, different.
        second: String,
    },
}

fn perf_not_permitted(paranoid: Option<i32>) -> String {
    match paranoid {
        Some(p) if p <= 2 => format!(
            "perf_event_open is refused although kernel.perf_event_paranoid={p} allows \
             user-space sampling of your own processes: a seccomp or LSM policy (a container's, \
             for one) blocks it; allow perf_event_open there, or run cpudoctor with CAP_PERFMON"
        ),
        _ => format!(
            "perf_event_open is not permitted (kernel.perf_event_paranoid={}); \
             `sysctl kernel.perf_event_paranoid=2` (as root) lets users sample their own \
             processes in user space, which is all diagnose needs; or run cpudoctor with \
             CAP_PERFMON",
            paranoid.map_or("?".to_string(), |p| p.to_string())
        ),
    }
}
