//! What `diagnose` says about its recording beyond the findings: the processes it followed
//! (the screen's header line) and why one was left out (notes saved with the diagnosis).

use crate::format::pct;

/// The processes of one command name a recording followed, as the header says them.
#[derive(Debug, Clone, PartialEq)]
pub struct CommandFollowed<'a> {
    /// Command name.
    pub command: &'a str,
    /// Processes of that name.
    pub processes: u64,
    /// Of them, those running when diagnose attached.
    pub at_attach: u64,
    /// Of them, those started while recording.
    pub started: u64,
    /// Of them, those that had exited when the recording stopped.
    pub exited: u64,
    /// Their share of all samples, 0 to 1.
    pub sample_share: f64,
}

/// Commands named one by one on the header line; the rest are counted.
const COMMANDS_NAMED: usize = 6;

/// One line: `35 processes followed: postgres x34 (32 running at attach, 2 started, 2 exited;
/// 96.1% of samples), pgbench (3.9% of samples)`. `attached` when diagnose attached (a
/// started command's processes all started while recording, which goes without saying);
/// `no_children` when `--no-children` kept it to the process itself.
pub fn processes_followed(groups: &[CommandFollowed], attached: bool, no_children: bool) -> String {
    let total: u64 = groups.iter().map(|g| g.processes).sum();
    let named: Vec<String> = groups
        .iter()
        .take(COMMANDS_NAMED)
        .map(|g| {
            let mut parts = Vec::new();
            if attached && g.at_attach > 0 {
                parts.push(format!("{} running at attach", g.at_attach));
            }
            if attached && g.started > 0 {
                parts.push(format!("{} started", g.started));
            }
            if g.exited > 0 {
                parts.push(format!("{} exited", g.exited));
            }
            let mut said = parts.join(", ");
            if g.sample_share > 0.0 {
                if !said.is_empty() {
                    said.push_str("; ");
                }
                said.push_str(&format!("{} of samples", pct(g.sample_share, 1)));
            }
            let times = if g.processes > 1 {
                format!(" x{}", g.processes)
            } else {
                String::new()
            };
            if said.is_empty() {
                format!("{}{times}", g.command)
            } else {
                format!("{}{times} ({said})", g.command)
            }
        })
        .collect();
    let mut line = format!(
        "{total} process{} followed: {}",
        if total == 1 { "" } else { "es" },
        named.join(", ")
    );
    let rest = &groups[groups.len().min(COMMANDS_NAMED)..];
    if !rest.is_empty() {
        let processes: u64 = rest.iter().map(|g| g.processes).sum();
        line.push_str(&format!(
            ", and {} more command{} ({processes} process{})",
            rest.len(),
            if rest.len() == 1 { "" } else { "s" },
            if processes == 1 { "" } else { "es" }
        ));
    }
    if no_children {
        line.push_str("; its child processes were not followed (--no-children)");
    }
    line
}

/// A note: a child of the attached process that belongs to another user (a setuid helper)
/// cannot be sampled by this one.
pub fn child_not_followed(pid: u32, command: &str, uid: u32) -> String {
    format!(
        "child process {pid} ({command}) belongs to uid {uid} and was not followed; run \
         cpudoctor as that user or as root to follow it"
    )
}

/// A note: `--no-children` on a kernel without `inherit_thread` (before Linux 5.13), which
/// passes the events to every process the attached one forks.
pub fn children_inherit_on_old_kernel() -> String {
    "this kernel (before Linux 5.13) passes the events to processes the attached one forks: \
     their samples are left out, but the hardware counters include them"
        .to_string()
}

/// A note: CPU-wide sampling was not permitted, so each followed thread had its own events,
/// and the workload switched often enough (`switches_per_s`, all followed threads) for that to
/// slow it. `paranoid`: `kernel.perf_event_paranoid`, when read.
pub fn per_task_at_switch_rate(switches_per_s: f64, paranoid: Option<i32>) -> String {
    format!(
        "sampled per task: CPU-wide sampling needs root, CAP_PERFMON or \
         kernel.perf_event_paranoid <= 0{}. The kernel stops and starts a thread's sampling \
         timer at each of its context switches ({} a second here), an exit to the hypervisor \
         each time in a VM: PostgreSQL switching {} times a second lost {} of its throughput \
         so, against {} CPU-wide",
        paranoid
            .map(|p| format!(" (it is {p})"))
            .unwrap_or_default(),
        crate::format::group_thousands(switches_per_s.round() as u64),
        crate::format::group_thousands(crate::reference::PGBENCH_SWITCHES_PER_S as u64),
        pct(crate::reference::PGBENCH_PER_TASK_SAMPLING_LOSS, 0),
        pct(crate::reference::PGBENCH_CPU_WIDE_SAMPLING_LOSS, 0),
    )
}

/// A note: the kernel refused CPU-wide events for a reason other than permission (`error`).
pub fn cpu_wide_refused(error: &str) -> String {
    format!("the kernel refused CPU-wide sampling events ({error}); sampled per task")
}

/// A note: most samples of the CPU-wide events were of processes not followed (`other` of
/// `other + followed`), each interrupted and its stack copied as the workload's are.
pub fn cpu_wide_mostly_others(other: u64, followed: u64) -> String {
    let share = other as f64 / (other + followed).max(1) as f64;
    format!(
        "sampled CPU-wide: {} samples ({} of all) were of processes not followed and were \
         dropped; each cost the process it interrupted what a sample costs the workload (a \
         timer interrupt and a 16 KiB stack copy). --per-task samples the followed threads \
         only, at a cost to them at each context switch",
        crate::format::group_thousands(other),
        pct(share, 1),
    )
}

/// Above this share of records lost, diagnose fell behind (stopped, or short of CPU) rather
/// than dropping a few in a burst, and the note says how to lose fewer.
pub const LOST_SHARE_FELL_BEHIND: f64 = 0.05;

/// The note on records the kernel dropped because diagnose's ring buffers were full: how
/// many, and the most any share can be off by. Were every lost record one of the workload's
/// `kept` samples, a fraction f = lost / (lost + kept) of them is missing, which moves any
/// share by at most f (in points): the lost records could all have been of one function, or
/// none of it. (Issue 29: a diagnose stopped for 5 s lost 76% of its records
/// and said the shares were "still representative".)
pub fn records_lost(lost: u64, kept: u64) -> String {
    let share = lost as f64 / (lost + kept).max(1) as f64;
    let points = (share * 100.0).ceil();
    let mut s = format!(
        "{lost} records lost (ring buffer full; up to {} of the workload's samples): each \
         share may be off by up to {points:.0} point{}",
        pct(share, 0),
        if points == 1.0 { "" } else { "s" }
    );
    if share > LOST_SHARE_FELL_BEHIND {
        s.push_str(
            "; diagnose fell behind reading them (it was stopped, or short of CPU): a lower \
             --frequency loses fewer",
        );
    }
    s
}

/// Where the PAUSE figure on the screen's machine line came from, in brackets after it:
/// `from check.json` (`saved_file`, a saved check), `measured now, quick pause probe`, or,
/// `disturbed` with the CPUs `busy_share` busy while it was measured, `measured now while the
/// CPUs were 95% busy: may read low`.
pub fn pause_source(saved_file: Option<&str>, busy_share: Option<f64>, disturbed: bool) -> String {
    match (saved_file, busy_share) {
        (Some(file), _) => format!("from {file}"),
        (None, Some(busy)) if disturbed => format!(
            "measured now while the CPUs were {} busy: may read low",
            pct(busy, 0)
        ),
        (None, _) if disturbed => "measured now while the CPUs were busy: may read low".into(),
        (None, _) => "measured now, quick pause probe".to_string(),
    }
}

/// The note of a PAUSE figure measured while other tasks kept the CPUs busy (an attached
/// server still under its load, issue 30: 49 cycles where idle it is 78).
pub fn pause_under_load(busy_share: Option<f64>, attached: bool) -> String {
    let busy = busy_share
        .map(|b| format!("{} busy", pct(b, 0)))
        .unwrap_or_else(|| "busy".to_string());
    let why = if attached {
        " (the attached process kept running)"
    } else {
        ""
    };
    format!(
        "PAUSE was measured while the CPUs were {busy}{why}: its cost and the core clock may \
         read low, and the spin's cost in cycles with them; `cpudoctor check --save FILE` on \
         an idle machine, then `diagnose --check FILE`, gives an idle figure"
    )
}

/// Kernel time of a diagnosis whose samples include kernel code, as the header says it.
#[derive(Debug, Clone, PartialEq)]
pub struct KernelShare<'a> {
    /// Share of all samples in kernel code, 0 to 1.
    pub share: f64,
    /// The processes' own kernel shares, most samples first: (name, share of its samples).
    pub processes: Vec<(&'a str, f64)>,
    /// Where user space entered the kernel (`write`, `page faults in memcpy`), with its share
    /// of all samples.
    pub entries: Vec<(String, f64)>,
    /// The hottest kernel functions: (name, share of all samples).
    pub functions: Vec<(&'a str, f64)>,
    /// The kernel's own accounting: system time over CPU time of the followed threads.
    pub system_share: Option<f64>,
    /// Why kernel code is unnamed, when it is.
    pub unnamed_because: Option<&'a str>,
}

/// Kernel functions named on the header line.
const KERNEL_FUNCTIONS_NAMED: usize = 4;
/// Entries into the kernel named on the header line, and the least share of all samples
/// one needs to be named (a timer interrupt in user code is no way in worth a word).
const KERNEL_ENTRIES_NAMED: usize = 4;
const KERNEL_ENTRY_MIN_SHARE: f64 = 0.01;
/// Processes named on the header line.
const KERNEL_PROCESSES_NAMED: usize = 3;

/// `62.3% of samples in kernel code (redis-server 65.0%, ...); entered from write 40.1%, ...;
/// hottest kernel functions tcp_sendmsg 8.1%, ...; by the kernel's own accounting (/proc
/// stime) 58.0% of the threads' CPU time`.
pub fn kernel_sampled(k: &KernelShare) -> String {
    let mut line = format!("{} of samples in kernel code", pct(k.share, 1));
    if k.processes.len() > 1 {
        let named: Vec<String> = k
            .processes
            .iter()
            .take(KERNEL_PROCESSES_NAMED)
            .map(|(name, share)| format!("{name} {}", pct(*share, 1)))
            .collect();
        line.push_str(&format!(" ({})", named.join(", ")));
    }
    if k.entries
        .iter()
        .any(|(_, share)| *share >= KERNEL_ENTRY_MIN_SHARE)
    {
        let named: Vec<String> = k
            .entries
            .iter()
            .filter(|(_, share)| *share >= KERNEL_ENTRY_MIN_SHARE)
            .take(KERNEL_ENTRIES_NAMED)
            .map(|(from, share)| format!("{from} {}", pct(*share, 1)))
            .collect();
        line.push_str(&format!("; entered from {}", named.join(", ")));
    }
    if !k.functions.is_empty() && k.unnamed_because.is_none() {
        let named: Vec<String> = k
            .functions
            .iter()
            .take(KERNEL_FUNCTIONS_NAMED)
            .map(|(name, share)| format!("{name} {}", pct(*share, 1)))
            .collect();
        line.push_str(&format!("; hottest kernel functions {}", named.join(", ")));
    }
    if let Some(system) = k.system_share {
        line.push_str(&format!(
            "; by the kernel's own accounting (/proc stime) {} of the threads' CPU time",
            pct(system, 1)
        ));
    }
    if let Some(why) = k.unnamed_because {
        line.push_str(&format!("; kernel code unnamed: {why}"));
    }
    line
}

/// Why kernel code was not sampled.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum KernelNotSampled {
    /// `--user-only`.
    Asked,
    /// The kernel refused it; `perf_event_paranoid` then.
    Refused(Option<i32>),
}

/// What a diagnosis without kernel samples leaves out: `samples cover 0.37 s of 2.1 s of CPU;
/// 1.7 s in the kernel was not sampled (kernel sampling needs root, CAP_PERFMON or
/// kernel.perf_event_paranoid <= 1; it is 2)`. `cpu_s` and `system_s` from /proc, `sampled_s`
/// the samples over the frequency; `None` figures when /proc gave no split.
pub fn kernel_not_sampled(
    why: KernelNotSampled,
    cpu_s: Option<f64>,
    system_s: Option<f64>,
    sampled_s: f64,
) -> String {
    let because = match why {
        KernelNotSampled::Asked => "--user-only".to_string(),
        KernelNotSampled::Refused(paranoid) => format!(
            "kernel sampling needs root, CAP_PERFMON or kernel.perf_event_paranoid <= 1{}",
            paranoid.map(|p| format!("; it is {p}")).unwrap_or_default()
        ),
    };
    let secs = |s: f64| format!("{s:.2} s");
    match (cpu_s, system_s) {
        (Some(cpu), Some(system)) => format!(
            "user space only: samples cover {} of {} of CPU; {} in the kernel ({} of the \
             threads' CPU time) was not sampled ({because})",
            secs(sampled_s.min(cpu)),
            secs(cpu),
            secs(system),
            pct(system / cpu.max(1e-9), 0),
        ),
        _ => format!(
            "user space only: samples cover {} of CPU; time in the kernel was not sampled \
             ({because})",
            secs(sampled_s)
        ),
    }
}

/// Why kernel code was sampled but goes unnamed: `kptr_restrict` (its value) hides
/// `/proc/kallsyms`'s addresses, or the file could not be read.
pub fn kernel_unnamed(hidden: bool, kptr_restrict: Option<i32>) -> String {
    if hidden {
        format!(
            "/proc/kallsyms shows zero addresses (kernel.kptr_restrict{}; 1 hides them from \
             users without CAP_SYSLOG, 2 from everyone)",
            kptr_restrict
                .map(|k| format!(" is {k}"))
                .unwrap_or_default()
        )
    } else {
        "/proc/kallsyms could not be read".to_string()
    }
}

/// The sentence when no finding was made. `not_enough`: the share of samples analysed when it
/// was too little to say "No findings" (`diagnose::analyse::hotspots::coverage::ENOUGH_ANALYSED`):
/// then that nothing is said of the rest.
pub fn no_findings(not_enough: Option<f64>) -> String {
    match not_enough {
        None => "No findings: no spin-wait, locked hotspot or page-size problem stands out.".into(),
        Some(analysed) => format!(
            "No findings in the {} of samples analysed; {} were not analysed, so nothing is \
             said of them: see \"Not analysed\" for why and how to fix it.",
            pct(analysed, 1),
            pct(1.0 - analysed, 1)
        ),
    }
}

/// The heading of the coverage section: `Not analysed: 98.4% of 1,334 samples` when too little
/// was analysed (`enough` false), else how much was, before the gaps.
pub fn coverage_heading(enough: bool, analysed: f64, samples: u64) -> String {
    if enough {
        format!(
            "Analysed: {} of {} samples; not analysed or not named:",
            pct(analysed, 1),
            crate::format::group_thousands(samples)
        )
    } else {
        format!(
            "Not analysed: {} of {} samples",
            pct(1.0 - analysed, 1),
            crate::format::group_thousands(samples)
        )
    }
}

/// JIT code of `runtime` in `module` of process `pid` that no perf map names.
pub fn gap_jit_without_perf_map(runtime: &str, module: &str, pid: u32) -> String {
    format!(
        "JIT code of {runtime} with no perf map ({module}, pid {pid}): not named, not disassembled."
    )
}

/// Code of `module` with no symbol; `bounded` of it (0 to 1) in functions its CFI bounds,
/// which were disassembled.
pub fn gap_no_symbol(module: &str, bounded: f64) -> String {
    let file = module.rsplit('/').next().unwrap_or(module);
    if bounded >= 1.0 {
        format!(
            "{module} has no symbols: its functions are known by their code bounds only \
             (`{file}@0x...`), still disassembled."
        )
    } else if bounded > 0.0 {
        format!(
            "{module} has no symbols: {} of its samples are in functions known by their code \
             bounds only (`{file}@0x...`), the rest in code nothing bounds, not disassembled.",
            pct(bounded, 0)
        )
    } else {
        format!("{module} has no symbols for this code, and no CFI bounds it: not disassembled.")
    }
}

/// Named functions of `module` hot enough to be disassembled that were not.
pub fn gap_not_disassembled(module: &str) -> String {
    format!(
        "named functions of {module} not disassembled (their code could not be read, or more \
         functions were hot than are decoded)."
    )
}

/// CPython's interpreter in `module` of process `pid` running Python code no perf map names.
pub fn gap_interpreter_without_names(module: &str, pid: u32) -> String {
    format!(
        "CPython's interpreter ({module}, pid {pid}) ran Python code whose functions are not \
         named: the samples show its C functions only (analysed)."
    )
}

/// Addresses outside every known mapping.
pub fn gap_outside_mappings() -> String {
    "addresses outside every mapping the recording knew (code unmapped before it was read, or \
     records lost)."
        .into()
}

/// A gap's sentence with its fix.
pub fn gap_with_fix(what: &str, fix: &str) -> String {
    format!("{what} Fix: {fix}")
}

/// Node: a perf map from V8.
pub fn fix_node_perf_map() -> String {
    "start node with --perf-basic-prof (or --perf-prof), which writes /tmp/perf-PID.map naming \
     V8's compiled functions."
        .into()
}

/// CPython: `-X perf`; `old_version` when the process runs a CPython before 3.12.
pub fn fix_python_perf(old_version: Option<&str>) -> String {
    match old_version {
        Some(v) => format!(
            "CPython {v} cannot name its functions for profilers; CPython 3.12 or later run \
             with -X perf (or PYTHONPERFSUPPORT=1) can."
        ),
        None => "run python with -X perf (or PYTHONPERFSUPPORT=1; CPython 3.12 or later), which \
                 writes /tmp/perf-PID.map naming Python functions."
            .into(),
    }
}

/// HotSpot: a perf map from jcmd, or at exit, and frame pointers.
pub fn fix_hotspot_perf_map(pid: u32) -> String {
    format!(
        "run `jcmd {pid} Compiler.perfmap` while it runs (JDK 17+), or start it with \
         -XX:+UnlockDiagnosticVMOptions -XX:+DumpPerfMapAtExit; add -XX:+PreserveFramePointer \
         for stacks through compiled Java code."
    )
}

/// .NET: its perf map.
pub fn fix_dotnet_perf_map() -> String {
    "start it with DOTNET_PerfMapEnabled=1, which writes /tmp/perf-PID.map.".into()
}

/// Another JIT: a perf map.
pub fn fix_perf_map() -> String {
    "have the JIT write /tmp/perf-PID.map (one `START SIZE name` line per compiled function)."
        .into()
}

/// A stripped binary: its debug package (`package` installed it, `debug_package` has its
/// symbols) and build-id, where known.
pub fn fix_debug_symbols(
    build_id: Option<&str>,
    package: Option<&str>,
    debug_package: Option<&str>,
) -> String {
    let mut s = match (package, debug_package) {
        (Some(p), Some(d)) => format!(
            "install its debug symbols: `apt-get install {d}` (from Debian's debug archive; {p} \
             installed the binary)"
        ),
        _ => "install its debug symbols (the distribution's debug package for it, under \
              /usr/lib/debug)"
            .to_string(),
    };
    if let Some(id) = build_id {
        s.push_str(&format!(
            "; its build-id is {id} (`debuginfod-find debuginfo {id}` fetches them)"
        ));
    }
    s.push('.');
    s
}

#[cfg(test)]
mod tests {
    use super::*;

    fn group(
        command: &str,
        processes: u64,
        at_attach: u64,
        exited: u64,
        share: f64,
    ) -> CommandFollowed<'_> {
        CommandFollowed {
            command,
            processes,
            at_attach,
            started: processes - at_attach,
            exited,
            sample_share: share,
        }
    }

    #[test]
    fn a_server_tree_is_one_line_by_command_with_what_ran_before_and_what_started() {
        let groups = [
            group("postgres", 34, 32, 2, 0.961),
            group("psql", 1, 0, 1, 0.0),
        ];
        assert_eq!(
            processes_followed(&groups, true, false),
            "35 processes followed: postgres x34 (32 running at attach, 2 started, 2 exited; \
             96.1% of samples), psql (1 started, 1 exited)"
        );
    }

    #[test]
    fn the_process_alone_says_its_children_were_left_out() {
        let line = processes_followed(&[group("fork_children", 1, 1, 0, 0.0)], true, true);
        assert_eq!(
            line,
            "1 process followed: fork_children (1 running at attach); its child processes \
             were not followed (--no-children)"
        );
    }

    #[test]
    fn a_started_command_says_no_attach_and_counts_commands_past_six() {
        let groups: Vec<CommandFollowed> =
            ["sh", "make", "cc1", "as", "ld", "collect2", "rm", "mv"]
                .iter()
                .map(|c| group(c, 1, 0, 1, 0.1))
                .collect();
        let line = processes_followed(&groups, false, false);
        assert!(
            line.starts_with("8 processes followed: sh (1 exited; 10.0% of samples), make"),
            "{line}"
        );
        assert!(
            !line.contains("attach") && !line.contains("started"),
            "{line}"
        );
        assert!(
            line.ends_with(", and 2 more commands (2 processes)"),
            "{line}"
        );
        assert!(!line.contains("rm ("), "{line}");
    }

    #[test]
    fn sampling_per_task_at_a_high_switch_rate_says_what_it_costs_and_what_permits_cpu_wide() {
        let n = per_task_at_switch_rate(12_345.4, Some(2));
        assert!(
            n.starts_with("sampled per task: CPU-wide sampling needs root"),
            "{n}"
        );
        assert!(n.contains("perf_event_paranoid <= 0 (it is 2)"), "{n}");
        assert!(n.contains("(12,345 a second here)"), "{n}");
        assert!(
            n.contains("lost 20% of its throughput so, against 12% CPU-wide"),
            "{n}"
        );
        assert!(!per_task_at_switch_rate(6_000.0, None).contains("(it is"));
    }

    #[test]
    fn most_samples_of_other_processes_are_counted_with_their_share() {
        let n = cpu_wide_mostly_others(3_000, 1_000);
        assert!(n.contains("3,000 samples (75.0% of all)"), "{n}");
        assert!(n.contains("--per-task"), "{n}");
    }

    /// Issue 29: 76% of the records lost was called "still representative".
    #[test]
    fn case_most_records_lost_is_not_called_representative() {
        let s = records_lost(76, 24);
        assert!(s.contains("up to 76% of the workload's samples"), "{s}");
        assert!(s.contains("off by up to 76 points"), "{s}");
        assert!(s.contains("fell behind"), "{s}");
        assert!(!s.contains("representative"), "{s}");
        let few = records_lost(1, 999);
        assert!(few.contains("off by up to 1 point"), "{few}");
        assert!(!few.contains("fell behind"), "{few}");
    }

    #[test]
    fn the_busy_attached_server_case_says_pause_may_read_low() {
        // Issue 30: PAUSE 24.1 ns = 49 cycles measured while the attached MariaDB kept both
        // vCPUs busy, where idle it is 78 cycles; nothing warned.
        assert_eq!(
            pause_source(None, Some(0.95), true),
            "measured now while the CPUs were 95% busy: may read low"
        );
        let note = pause_under_load(Some(0.95), true);
        assert!(
            note.contains("95% busy (the attached process kept running)"),
            "{note}"
        );
        assert!(note.contains("diagnose --check FILE"), "{note}");
        assert_eq!(
            pause_source(None, Some(0.05), false),
            "measured now, quick pause probe"
        );
        assert_eq!(
            pause_source(Some("idle.json"), None, false),
            "from idle.json"
        );
    }

    /// The Redis case: a server in network system calls, sampled as root.
    #[test]
    fn a_kernel_share_names_its_processes_functions_and_the_kernels_own_figure() {
        let k = KernelShare {
            share: 0.623,
            processes: vec![("redis-server", 0.65), ("redis-benchmark", 0.4)],
            entries: vec![
                ("write".into(), 0.4),
                ("page faults in memcpy".into(), 0.01),
            ],
            functions: vec![("tcp_sendmsg", 0.081), ("__x64_sys_epoll_wait", 0.05)],
            system_share: Some(0.58),
            unnamed_because: None,
        };
        let line = kernel_sampled(&k);
        assert!(
            line.starts_with("62.3% of samples in kernel code (redis-server 65.0%, "),
            "{line}"
        );
        assert!(
            line.contains("; entered from write 40.0%, page faults in memcpy 1.0%; hottest"),
            "{line}"
        );
        assert!(
            line.contains("functions tcp_sendmsg 8.1%, __x64_sys_epoll_wait 5.0%"),
            "{line}"
        );
        assert!(line.contains("(/proc stime) 58.0%"), "{line}");
        let hidden = KernelShare {
            unnamed_because: Some("hidden"),
            ..k
        };
        assert!(!kernel_sampled(&hidden).contains("tcp_sendmsg"));
        assert!(kernel_sampled(&hidden).ends_with("kernel code unnamed: hidden"));
    }

    /// The Redis case as a user without privileges sees it: "2.1 s of 5.0 s" of thread CPU
    /// beside 0.37 s of samples, without a word.
    #[test]
    fn case_redis_without_kernel_samples_says_what_the_samples_do_not_cover() {
        let s = kernel_not_sampled(
            KernelNotSampled::Refused(Some(2)),
            Some(2.1),
            Some(1.7),
            0.37,
        );
        assert!(s.contains("samples cover 0.37 s of 2.10 s of CPU"), "{s}");
        assert!(
            s.contains("1.70 s in the kernel (81% of the threads' CPU time)"),
            "{s}"
        );
        assert!(s.contains("perf_event_paranoid <= 1; it is 2"), "{s}");
        let asked = kernel_not_sampled(KernelNotSampled::Asked, None, None, 1.0);
        assert!(asked.contains("(--user-only)"), "{asked}");
        assert!(kernel_unnamed(true, Some(1)).contains("kptr_restrict is 1"));
    }
}
