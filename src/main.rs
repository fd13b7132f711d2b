//! The `cpudoctor` binary: parses arguments, hands each subcommand to its handler in `cmd`,
//! and prints the error chain once. The only place that exits.

mod cmd;

use clap::{CommandFactory, Parser, Subcommand};
use cpudoctor::error::InputError;
use std::process::ExitCode;

#[derive(Parser)]
#[command(
    name = "cpudoctor",
    version,
    about = "Measures the CPU behaviours software trips on, and says what they mean.",
    long_about = "Measures the CPU behaviours software trips on (slow PAUSE, cache-line \
        transfers, split locks, page size and TLB reach) on this machine, judges each against \
        reference figures, and says what it means for software.\n\n\
        Start with `cpudoctor check`. Results are saved as a versioned JSON fingerprint \
        (--save) so machines can be compared later."
)]
struct Cli {
    #[command(subcommand)]
    command: Command,
}

#[derive(Subcommand)]
enum Command {
    /// Quick battery of every probe (seconds), then one screen of verdicts. The main job.
    #[command(
        long_about = "Runs every probe in its quick profile (a few seconds), then prints one \
            screen: the machine in two lines and, per hazard, its level (ok, notice, HAZARD; \
            two levels such as notice/HAZARD when the figure's interval spans a threshold), \
            the measured figure and one line on what it means for software.\n\n\
            --verbose adds every verdict in full (the reference it is judged against, the \
            explanation in this machine's figures), the machine facts and every probe's \
            figures with their spread. `cpudoctor explain HAZARD` prints one verdict in \
            full.\n\nExamples: cpudoctor check\n          \
            cpudoctor check --save this-host.json\n          \
            cpudoctor check --json | jq '.verdicts[] | select(.level == \"hazard\")'\n          \
            cpudoctor check --skip split-lock --skip split-lock-neighbour \\\n            \
            --prom /var/lib/prometheus/node-exporter/cpudoctor.prom   (on every host of a fleet)"
    )]
    Check(cmd::check::CheckArgs),
    /// One hazard in full: its figure, reference, meaning and remedies.
    #[command(
        long_about = "Prints one hazard in full: the measured figure, the reference it is \
            judged against and its sources, what it means for software in this machine's \
            figures, and the patterns it hurts. Measures only the probes that hazard reads, \
            or reads a saved fingerprint. Without a hazard, lists them.\n\n\
            Examples: cpudoctor explain slow_pause\n          \
            cpudoctor explain false_sharing old-host.json"
    )]
    Explain(cmd::explain::ExplainArgs),
    /// Run the full microbenchmarks, with their knobs.
    #[command(
        long_about = "Runs the named probes (all when none is named) in their full profile: \
            more repetitions, longer runs. `--list` shows the probes.\n\n\
            Example: cpudoctor probe pause --cpus 0-3 --json"
    )]
    Probe(cmd::probe::ProbeArgs),
    /// How long each runtime's locks spin on PAUSE before blocking, on this CPU or a modelled one.
    #[command(
        long_about = "Models spin-before-block for glibc, Go, Rust std, parking_lot, crossbeam, \
            oneTBB, HotSpot, folly and .NET (legacy and normalized) at this machine's measured \
            PAUSE cost, or at --pause-ns to model another CPU. Includes the .NET legacy \
            schedule of the Skylake case in full: its rounds, total spin, and the last round, \
            which is the worst extra delay a waiter adds after a lock is freed.\n\n\
            With --handoff, runs the Skylake PAUSE case's producer/consumer handoff (a worker holding a lock \
            10 ms per item, a sender waiting 1-9 ms) on C pthread, Rust std, Go and Java locks \
            and on a model lock with .NET's legacy and normalized spin, and saves it as probe \
            `handoff`. A full run takes minutes (so `check` does not run it); --quick is \
            shorter.\n\n\
            Example (the Skylake PAUSE case's Xeon Gold 6126): cpudoctor spin --pause-ns 43 --cores 24\n\
            Handoff on the same model: cpudoctor spin --handoff --pause-ns 43 --cores 24"
    )]
    Spin(cmd::spin::SpinArgs),
    /// Compare two saved fingerprints (what got worse first) or two saved diagnoses (which functions grew).
    #[command(
        long_about = "Compares two fingerprints saved with --save, without access to either \
            machine, in the order a reader needs: the machine facts that differ; the figures \
            worse in NEW (a change counts only beyond both runs' noise; direction-aware, so \
            higher latency is worse and higher bandwidth better), better, or changed; for \
            each hazard that reads a moved figure, what it costs software on both machines \
            in their own figures; the verdicts that changed; then one line counting what did \
            not change (--all lists it). Figures measured in one run only are never called a \
            regression.\n\n\
            Two diagnoses saved with `diagnose --save` (told from the files' content) compare \
            the other way: CPU time and share per function and module on each side, ranked by \
            growth (by share and by CPU time per second of wall time, so runs of different \
            length compare; the rule is printed), each grown function's hot instruction, \
            machine and callers side by side, and the findings present on one side only.\n\n\
            Exit status: 0, or 3 with --fail-on worse when NEW is worse.\n\n\
            Examples: cpudoctor diff old-host.json new-host.json\n          \
            cpudoctor diff baseline.json today.json --fail-on worse"
    )]
    Diff(cmd::diff::DiffArgs),
    /// Write one self-contained HTML page with tables and charts for fingerprints or diagnoses.
    #[command(
        long_about = "Writes one HTML file (inline SVG and CSS, no script, nothing fetched) with \
            the machine facts, the verdict table, the metrics and a chart for every series: \
            latency curves (log size axis), core-to-core heatmaps, bandwidth bars, PAUSE per \
            CPU, spin-before-block per runtime. With two or more files the charts overlay \
            them and the page adds the diff of the first against each other one.\n\n\
            Saved diagnoses (`diagnose --save`) give a page with their findings first, a flame \
            graph each (inferno), and for each after the first the function diff beside a \
            differential flame graph (red grew, blue shrank).\n\n\
            Examples: cpudoctor report old-host.json new-host.json -o report.html\n          \
            cpudoctor report old-diagnosis.json new-diagnosis.json -o profile.html"
    )]
    Report(cmd::report::ReportArgs),
    /// Bands across many hosts' saved fingerprints: which figures split alike hosts.
    #[command(
        long_about = "Reads many saved fingerprints (files, or directories of `check --save` \
            output; thousands are fine), groups hosts that should be alike (the same CPU by \
            CPUID vendor, family, model and stepping, not by its brand string, which a guest \
            shares across generations; same microcode, kernel and hypervisor) and, for every figure, finds whether the hosts \
            split into bands, as the Netflix JVM case's fleet did (a fast minority of nodes \
            for the life of each JVM). Each band's centre, share of hosts and the hosts of the \
            smaller bands; which verdicts differ between them. A file that cannot be read is \
            named on stderr and skipped.\n\n\
            Examples: cpudoctor fleet /srv/fingerprints/\n          \
            cpudoctor fleet --json hosts/*.json | jq '.groups[].banded[].metric'"
    )]
    Fleet(cmd::fleet::FleetArgs),
    /// Where a workload spends its time: spin-waits, contended atomics, page size; with or without a PMU.
    #[command(
        long_about = "Runs CMD (following its threads and children) or attaches to --pid for a \
            duration, samples it with perf_event_open (cpu-clock where there is no hardware \
            PMU, cycles where there is), names the samples (ELF symbols, DWARF lines, JIT \
            perf maps in /tmp/perf-PID.map), disassembles the hot code, and reports findings: \
            spin-waits on PAUSE (with this machine's PAUSE cost), spins without PAUSE, \
            contended locked instructions, split locks, large memory on 4 KiB pages; per-thread \
            CPU time, context switches and faults; hardware counters when a PMU exists.\n\n\
            Needs perf_event_open: root, CAP_PERFMON, or kernel.perf_event_paranoid <= 2 for \
            your own processes.\n\n\
            --pprof FILE and --folded FILE export the samples (pprof's profile.proto, \
            gzipped; folded stacks for flame graphs); --from SAVED.json converts a saved \
            diagnosis instead of recording.\n\n\
            Examples: cpudoctor diagnose -- ./server --port 8080\n          \
            cpudoctor diagnose --pid 1234 --duration 5 --json\n          \
            cpudoctor diagnose --save new.json --pprof new.pb.gz -- ./test\n          \
            cpudoctor diagnose --from old.json --folded old.folded"
    )]
    Diagnose(cmd::diagnose::DiagnoseArgs),
    /// Run your command under controlled variants (pages, a noisy neighbour, placement, CPU count): each effect as a ratio with its interval.
    #[command(
        long_about = "Runs CMD under controlled variants, interleaved (A B A B ..., so drift \
            hits every variant alike) and repeated, and reports each variant's effect as a \
            ratio with a 95% interval and a line of meaning: the experiments the four cases \
            each ran by hand, on your program.\n\n\
            --pages: transparent huge pages off (PR_SET_THP_DISABLE) against asked for \
            (GLIBC_TUNABLES=glibc.malloc.hugetlb=1), with the huge pages the command got.\n\
            --neighbour split-locks|memory|atomics: the probes' aggressors on a CPU the \
            command does not use (the split-lock case's noisy neighbour; a host that traps \
            split locks is named).\n\
            --placement: two CPUs as SMT siblings, sharing a cache, across a cache or NUMA \
            boundary (those the machine has).\n\
            --cpus 1,2,4: a scaling curve against the ideal line (the Netflix JVM case's \
            question).\n\n\
            The measure is wall time, or --metric REGEX from the command's stdout \
            (--higher-is-better for rates and scores). A variant this machine cannot do, or \
            a run that fails, is one line; the rest still runs. Exit status 1 when nothing \
            could be measured.\n\n\
            Examples: cpudoctor experiment --pages -- ./chase 1024\n          \
            cpudoctor experiment --neighbour split-locks --runs 20 -- sysbench memory run\n          \
            cpudoctor experiment --cpus 1,2,4,8 --metric 'ops/s: ([0-9.]+)' \\\n            \
            --higher-is-better --save scaling.json -- ./server-bench"
    )]
    Experiment(cmd::experiment::ExperimentArgs),
    /// Print a shell completion script (bash, zsh, fish, elvish, powershell).
    #[command(long_about = "Prints a completion script for SHELL on stdout.\n\n\
            Examples: cpudoctor completions bash > ~/.local/share/bash-completion/completions/cpudoctor\n          \
            cpudoctor completions zsh > \"${fpath[1]}/_cpudoctor\"")]
    Completions {
        /// The shell to complete for.
        shell: clap_complete::Shell,
    },
    /// Print the manual page (roff) on stdout.
    #[command(long_about = "Prints the manual page in roff on stdout.\n\n\
            Example: cpudoctor man > /usr/local/share/man/man1/cpudoctor.1")]
    Man,
}

/// Notes which of stdin, stdout and stderr were closed when cpudoctor was started (`>&-`),
/// before Rust's runtime opens /dev/null on them: a `--save -` to a closed stdout then fails
/// instead of being written to /dev/null and reported saved. Runs from `.init_array`, before
/// `main` and before the runtime's start-up.
extern "C" fn note_closed_standard_fds() {
    cpudoctor::output::note_closed_standard_fds();
}

#[used]
#[unsafe(link_section = ".init_array")]
static NOTE_CLOSED_STANDARD_FDS: extern "C" fn() = note_closed_standard_fds;

fn main() -> ExitCode {
    let cli = Cli::parse();
    cmd::handle_fatal_signals();
    let result = match cli.command {
        Command::Check(a) => cmd::check::run(a),
        Command::Probe(a) => cmd::probe::run(a),
        Command::Spin(a) => cmd::spin::run(a),
        Command::Diff(a) => cmd::diff::run(a),
        Command::Report(a) => cmd::report::run(a),
        Command::Fleet(a) => cmd::fleet::run(a),
        Command::Diagnose(a) => cmd::diagnose::run(a),
        Command::Experiment(a) => cmd::experiment::run(a),
        Command::Explain(a) => cmd::explain::run(a),
        // Both are made in memory and written in one go: clap_complete panics on a write
        // error (a full disk, `> /dev/full`), and a failed write is an error like any other.
        Command::Completions { shell } => {
            let mut script = Vec::new();
            clap_complete::generate(shell, &mut Cli::command(), "cpudoctor", &mut script);
            to_stdout(&script)
        }
        Command::Man => {
            let mut page = Vec::new();
            clap_mangen::Man::new(Cli::command())
                .render(&mut page)
                .map_err(anyhow::Error::from)
                .and_then(|()| to_stdout(&page))
        }
    };
    // `diagnose` stopped for a signal and wrote what it recorded: end as that signal would
    // have ended us, after saying what went wrong, if anything did.
    if let Some(sig) = cmd::caught_signal() {
        if let Err(e) = &result {
            cmd::note(&format!("error: {e:#}"));
        }
        cmd::die_by(sig);
    }
    match result {
        Ok(()) => ExitCode::SUCCESS,
        // A reader that stopped reading (`| head`) is not an error: end quietly, as ripgrep
        // does.
        Err(e) if closed_pipe(&e) => ExitCode::SUCCESS,
        Err(e) => {
            cmd::note(&format!("error: {e:#}"));
            if e.downcast_ref::<cmd::diff::Regressed>().is_some() {
                ExitCode::from(3)
            } else if e.downcast_ref::<InputError>().is_some() {
                ExitCode::from(2)
            } else {
                ExitCode::from(1)
            }
        }
    }
}

/// Writes `bytes` to stdout, an error (not a panic) when stdout is full or closed.
fn to_stdout(bytes: &[u8]) -> anyhow::Result<()> {
    use anyhow::Context;
    use std::io::Write;
    let mut out = std::io::stdout().lock();
    out.write_all(bytes)
        .and_then(|()| out.flush())
        .context("cannot write to stdout")
}

/// Whether `e` is a write to a pipe whose reader has gone (directly, or inside a JSON writer's
/// error).
fn closed_pipe(e: &anyhow::Error) -> bool {
    e.chain().any(|c| {
        c.downcast_ref::<std::io::Error>()
            .map(|io| io.kind())
            .or_else(|| c.downcast_ref::<serde_json::Error>()?.io_error_kind())
            == Some(std::io::ErrorKind::BrokenPipe)
    })
}
