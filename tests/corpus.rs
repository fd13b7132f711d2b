//! The corpus of real machines (`tests/fixtures/machines/`): one directory per CPU and
//! hypervisor met, each holding `check --runs 3 --save` fingerprints (`check-*.json`) and,
//! where they were taken in the same minutes, independent references (`refs*.txt`, written by
//! `bench/reference.sh`: plain C loops for PAUSE, split locks, false sharing and a pointer
//! chase). Every machine is judged again by this build (`session::judge`: today's analysis
//! of the saved samples, today's rules), and each verdict is held to what that machine's
//! references imply, so a change that is right on the machine in hand and wrong on another
//! (the first Intel machine broke three verdicts) fails here.

use cpudoctor::schema::json::from_json_bytes;
use cpudoctor::schema::{Fingerprint, Level, Verdict};
use std::path::{Path, PathBuf};

/// One corpus machine: its directory name, its checks, and its references where taken (one
/// `refs*.txt` for each time they were, each beside its own checks).
struct CorpusMachine {
    name: String,
    checks: Vec<(String, Fingerprint)>,
    refs: Vec<(String, Refs)>,
}

/// References hold only checks taken within this long of them: a host moves vCPUs and loads
/// memory from day to day (the Zen 4 guest's 2026-11-22 check read DRAM at 395 ns, its C chase
/// 157 ns three days later).
const SAME_MINUTES_S: u64 = 3600;

impl CorpusMachine {
    /// Each set of references with the checks taken beside it.
    fn referenced(&self) -> Vec<(&Refs, Vec<&(String, Fingerprint)>)> {
        self.refs
            .iter()
            .map(|(_, refs)| {
                let beside = self
                    .checks
                    .iter()
                    .filter(|(_, fp)| {
                        fp.created_unix_s.abs_diff(refs.taken_unix_s) <= SAME_MINUTES_S
                    })
                    .collect();
                (refs, beside)
            })
            .collect()
    }

    /// The references taken nearest in time to a check (any day: what a mechanism is does
    /// not move with the host's load), if any were.
    fn nearest_refs(&self, fp: &Fingerprint) -> Option<&Refs> {
        self.refs
            .iter()
            .map(|(_, r)| r)
            .min_by_key(|r| fp.created_unix_s.abs_diff(r.taken_unix_s))
    }
}

fn corpus_dir() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/machines")
}

/// The files of `dir` whose names start with `prefix` and end with `suffix`, by name.
fn files_named(dir: &Path, prefix: &str, suffix: &str) -> Vec<(String, PathBuf)> {
    let mut files: Vec<(String, PathBuf)> = std::fs::read_dir(dir)
        .unwrap()
        .map(|e| e.unwrap().path())
        .map(|p| (p.file_name().unwrap().to_string_lossy().into_owned(), p))
        .filter(|(n, _)| n.starts_with(prefix) && n.ends_with(suffix))
        .collect();
    files.sort();
    files
}

fn corpus() -> Vec<CorpusMachine> {
    let mut out = Vec::new();
    let mut dirs: Vec<PathBuf> = std::fs::read_dir(corpus_dir())
        .expect("tests/fixtures/machines exists")
        .map(|e| e.unwrap().path())
        .filter(|p| p.is_dir())
        .collect();
    dirs.sort();
    for dir in dirs {
        let checks = files_named(&dir, "check", ".json")
            .into_iter()
            .map(|(name, f)| {
                let fp = from_json_bytes(&std::fs::read(&f).unwrap())
                    .unwrap_or_else(|e| panic!("{}: {e}", f.display()));
                (name, cpudoctor::session::judge(&fp))
            })
            .collect();
        let refs = files_named(&dir, "refs", ".txt")
            .into_iter()
            .map(|(name, f)| (name, Refs::parse(&std::fs::read_to_string(f).unwrap())))
            .collect();
        out.push(CorpusMachine {
            name: dir.file_name().unwrap().to_string_lossy().into_owned(),
            checks,
            refs,
        });
    }
    out
}

/// The figures of a `refs.txt` (the format `bench/reference.sh` prints; the Emerald Rapids
/// entry's older layout too).
#[derive(Debug, Default)]
struct Refs {
    /// When `bench/reference.sh` ran (its header's UTC time).
    taken_unix_s: u64,
    /// ns per PAUSE, one per CPU.
    pause_ns: Vec<f64>,
    /// Mean ns per aligned `lock add`, one per round.
    aligned_lock_ns: Vec<f64>,
    /// Mean ns per split `lock add`, one per round (and per-op means where given).
    split_lock_ns: Vec<f64>,
    /// Median per-op split lock in ns, one per round that timed ops one by one.
    split_lock_p50_ns: Vec<f64>,
    /// (offset bytes, mode, ns/op): mode 0 plain and 1 atomic (the slower thread), 2 the
    /// reader of a line the other thread writes.
    sharing: Vec<(u32, u32, f64)>,
    /// (MiB, THP ns, 4 KiB ns) per chase size.
    chase: Vec<(u64, f64, f64)>,
}

impl Refs {
    fn parse(text: &str) -> Refs {
        let mut r = Refs::default();
        let mut section = "";
        let num = |w: &str| w.trim_end_matches([',', ';']).parse::<f64>().ok();
        for line in text.lines() {
            if let Some(h) = line.strip_prefix("# ") {
                r.taken_unix_s = h
                    .split([',', ' '])
                    .find_map(unix_s_of_utc)
                    .unwrap_or_default();
                continue;
            }
            if let Some(h) = line.strip_prefix("## ") {
                section = if h.starts_with("PAUSE") {
                    "pause"
                } else if h.starts_with("split lock") {
                    "split"
                } else if h.starts_with("false sharing") {
                    "sharing"
                } else if h.starts_with("pointer chase") {
                    "chase"
                } else {
                    ""
                };
                continue;
            }
            let w: Vec<&str> = line.split_whitespace().collect();
            let after = |key: &str| {
                w.iter()
                    .position(|x| *x == key)
                    .and_then(|i| w.get(i + 1))
                    .and_then(|x| num(x))
            };
            match section {
                "pause" if w.len() >= 2 && w[0].starts_with("cpu") => {
                    r.pause_ns.extend(num(w[1]));
                }
                "split" => {
                    if w.first() == Some(&"aligned") {
                        r.aligned_lock_ns.extend(after("aligned"));
                        r.split_lock_ns.extend(after("split"));
                    }
                    if line.contains("percentiles (us)") {
                        r.split_lock_p50_ns.extend(after("p50").map(|us| us * 1e3));
                    }
                }
                "sharing" if w.first().is_some_and(|x| x.starts_with("off=")) => {
                    let field = |k: &str| {
                        w.iter()
                            .find_map(|x| x.strip_prefix(k))
                            .and_then(|x| x.parse::<u32>().ok())
                    };
                    if let (Some(off), Some(mode), Some(t0), Some(t1)) =
                        (field("off="), field("mode="), after("t0"), after("t1"))
                    {
                        // Mode 2 times the reader (thread 1); the others, the slower thread.
                        r.sharing
                            .push((off, mode, if mode == 2 { t1 } else { t0.max(t1) }));
                    }
                }
                "chase" if w.len() >= 5 && w[1] == "MiB" => {
                    if let (Some(mib), Some(thp), Some(small)) =
                        (num(w[0]), after("THP:"), after("4K:"))
                    {
                        r.chase.push((mib as u64, thp, small));
                    }
                }
                _ => {}
            }
        }
        r.chase.sort_by_key(|c| c.0);
        r
    }

    /// Packed (8 bytes apart) over padded (128 bytes apart) for one sharing mode: the median of
    /// the rounds' slower threads on each side.
    fn sharing_ratio(&self, mode: u32) -> Option<f64> {
        let side = |off| {
            median(
                self.sharing
                    .iter()
                    .filter(|s| s.0 == off && s.1 == mode)
                    .map(|s| s.2)
                    .collect(),
            )
        };
        Some(side(8)? / side(128)?)
    }
}

/// Seconds since 1970 of a `YYYY-MM-DDTHH:MM:SSZ` time (days from the civil date as in Howard
/// Hinnant's `days_from_civil`, http://howardhinnant.github.io/date_algorithms.html).
fn unix_s_of_utc(t: &str) -> Option<u64> {
    let t = t.strip_suffix('Z')?;
    let (date, time) = t.split_once('T')?;
    let d: Vec<i64> = date
        .split('-')
        .map(|x| x.parse().ok())
        .collect::<Option<_>>()?;
    let h: Vec<i64> = time
        .split(':')
        .map(|x| x.parse().ok())
        .collect::<Option<_>>()?;
    let [y, m, day] = d[..] else { return None };
    let [hh, mm, ss] = h[..] else { return None };
    let y = if m <= 2 { y - 1 } else { y };
    let era = y.div_euclid(400);
    let yoe = y - era * 400;
    let doy = (153 * (if m > 2 { m - 3 } else { m + 9 }) + 2) / 5 + day - 1;
    let doe = yoe * 365 + yoe / 4 - yoe / 100 + doy;
    let days = era * 146097 + doe - 719468;
    u64::try_from(days * 86400 + hh * 3600 + mm * 60 + ss).ok()
}

fn median(mut v: Vec<f64>) -> Option<f64> {
    if v.is_empty() {
        return None;
    }
    v.sort_by(f64::total_cmp);
    let n = v.len();
    Some(if n % 2 == 1 {
        v[n / 2]
    } else {
        (v[n / 2 - 1] + v[n / 2]) / 2.0
    })
}

fn verdict<'a>(fp: &'a Fingerprint, hazard: &str) -> Option<&'a Verdict> {
    fp.verdicts.iter().find(|v| v.hazard == hazard)
}

fn metric(fp: &Fingerprint, probe: &str, name: &str) -> Option<f64> {
    fp.metric(probe, name).map(|m| m.value)
}

/// The highest level a verdict reaches, its borderline neighbour included.
fn reach(v: &Verdict) -> Level {
    v.borderline.map_or(v.level, |b| b.max(v.level))
}

#[test]
fn the_corpus_holds_every_machine_met_and_parses() {
    let machines = corpus();
    let names: Vec<&str> = machines.iter().map(|m| m.name.as_str()).collect();
    for expected in [
        "emerald-rapids-kvm",
        "emerald-rapids-kvm-trap",
        "zen2-kvm",
        "zen3-kvm",
        "zen4-kvm",
        "zen5-kvm",
    ] {
        assert!(names.contains(&expected), "{names:?}");
    }
    for m in &machines {
        assert!(!m.checks.is_empty(), "{}: no check-*.json", m.name);
        for ((file, r), (_, beside)) in m.refs.iter().zip(m.referenced()) {
            assert!(!r.pause_ns.is_empty(), "{}: refs without PAUSE", m.name);
            assert!(
                !r.split_lock_ns.is_empty(),
                "{}: refs without split locks",
                m.name
            );
            assert!(!r.sharing.is_empty(), "{}: refs without sharing", m.name);
            assert!(!r.chase.is_empty(), "{}: refs without a chase", m.name);
            // References judge only the checks taken beside them: none would hold nothing.
            assert!(
                !beside.is_empty(),
                "{}: no check within {SAME_MINUTES_S} s of {file}",
                m.name
            );
        }
    }
}

#[test]
fn the_emerald_rapids_references_parse_to_their_figures() {
    let text = std::fs::read_to_string(corpus_dir().join("emerald-rapids-kvm/refs.txt")).unwrap();
    let r = Refs::parse(&text);
    assert_eq!(r.pause_ns, [16.754, 14.316]);
    assert_eq!(r.aligned_lock_ns, [6.1, 6.0, 6.0]);
    assert_eq!(r.split_lock_ns, [99123.4, 70300.9, 67510.9]);
    assert_eq!(r.split_lock_p50_ns.len(), 3);
    let atomic = r.sharing_ratio(1).unwrap();
    assert!((4.5..5.0).contains(&atomic), "{atomic}");
    assert_eq!(r.chase.first().map(|c| c.0), Some(4));
    assert_eq!(r.chase.last().map(|c| c.0), Some(2048));
}

#[test]
fn every_hazard_is_judged_on_every_corpus_machine() {
    // A check runs every probe: a hazard with no verdict there is a gap in the tool, not in
    // the machine (the Emerald Rapids guest lost its 4 KiB page penalty verdict silently).
    for m in corpus() {
        for (file, fp) in &m.checks {
            for rule in cpudoctor::hazards::all() {
                assert!(
                    verdict(fp, rule.id()).is_some(),
                    "{}/{file}: {} not judged: {:?}",
                    m.name,
                    rule.id(),
                    fp.not_judged
                );
            }
        }
    }
}

#[test]
fn pause_agrees_with_the_c_loop() {
    for m in corpus() {
        for (r, checks) in m.referenced() {
            // The check reports the fastest CPU; the C loop ran on each.
            let reference = r.pause_ns.iter().copied().fold(f64::INFINITY, f64::min);
            for (file, fp) in checks.iter().copied() {
                let ours = metric(fp, "pause", "pause_ns").unwrap();
                let ratio = ours / reference;
                assert!(
                    (0.6..1.6).contains(&ratio),
                    "{}/{file}: PAUSE {ours:.1} ns vs the C loop's {reference:.1} ns",
                    m.name
                );
            }
        }
    }
}

#[test]
fn split_locks_are_named_by_the_mechanism_the_references_show() {
    // Written here, not taken from the library, so a change to the tool's boundary cannot
    // move the expectation with it: the slowest bus lock on record is ~7 us (Alder Lake
    // P-cores), the fastest trap the Emerald Rapids host's 100 us.
    const TRAPPED_FROM_NS: f64 = 10_000.0;
    for m in corpus() {
        for (file, fp) in &m.checks {
            let v = verdict(fp, "split_lock").unwrap();
            let at = format!("{}/{file}: {} | {}", m.name, v.figure, v.explanation);
            let trapped_by_host = v.figure.starts_with("trapped by the host");
            match m.nearest_refs(fp) {
                // The C loop's mean per split lock: a guest paying 10 us or more has them
                // trapped by its host (the Emerald Rapids guest: 67-186 us, bimodal 2 us /
                // 100-500 us); below, they are bus locks at hardware cost.
                Some(r) => {
                    let reference = median(r.split_lock_ns.clone()).unwrap();
                    let guest = fp.machine.hypervisor.is_some();
                    let kernel_acts = fp.machine.split_lock.effective.kernel_acts();
                    if guest && !kernel_acts && reference >= TRAPPED_FROM_NS {
                        assert!(trapped_by_host, "{at}");
                        assert!(!v.explanation.contains("every tenant"), "{at}");
                    } else {
                        assert!(!trapped_by_host, "{at}");
                    }
                    // A kernel that acts and a C loop paying 10 us or more: this kernel's
                    // penalty (the Emerald Rapids guest with #DB bus-lock detection: ~1 ms).
                    if kernel_acts && reference >= TRAPPED_FROM_NS {
                        assert!(
                            v.summary.starts_with("the kernel traps split locks"),
                            "{at}"
                        );
                        assert!(
                            v.explanation.contains("measured: this kernel traps them"),
                            "{at}"
                        );
                        // The neighbour is spared because the trap throttles the locker.
                        assert!(
                            v.explanation.contains("so the bus is rarely locked"),
                            "{at}"
                        );
                    }
                    if reference < TRAPPED_FROM_NS {
                        assert!(
                            v.explanation
                                .contains("measured: a bus lock at hardware cost"),
                            "{at}"
                        );
                    }
                    if reference >= 1000.0 {
                        assert_eq!(v.level, Level::Hazard, "{at}");
                    }
                }
                // The AMD guests without same-minute references: 1.1-1.6 us bus locks that
                // slowed the other core's DRAM accesses 4.7-9.9x.
                None => {
                    assert!(!trapped_by_host, "{at}");
                    assert_eq!(v.level, Level::Hazard, "{at}");
                    assert!(v.explanation.contains("slow every tenant"), "{at}");
                }
            }
            // What the neighbour felt is said as measured: never "every tenant" when the
            // neighbour's DRAM latency did not move.
            if let Some(ratio) = metric(
                fp,
                "split-lock-neighbour",
                "split_lock_neighbour_latency_ratio",
            ) && ratio < 1.25
            {
                assert!(!v.explanation.contains("every tenant"), "{at}");
            }
        }
    }
}

#[test]
fn the_split_lock_cost_agrees_with_the_c_loop_timed_whole() {
    // What one thread pays a split lock, traps included wherever their cost lands. Regression,
    // the Emerald Rapids guest whose host traps them: ops timed one by one summed to 78.5 us
    // an op where the C loop timed whole took 163-182 us (and the corpus's split-lock program
    // 134-185 us an add).
    for m in corpus() {
        for (r, checks) in m.referenced() {
            let reference = median(r.split_lock_ns.clone()).unwrap();
            for (file, fp) in checks {
                let seen = fp.split_lock_seen().unwrap();
                let Some(cost) = seen.cost_ns else {
                    panic!("{}/{file}: no split-lock cost", m.name);
                };
                // A host's trap costs what the host makes it, which moved 67-186 us an op
                // within the hour on that guest (its README): a wider band there, still
                // holding the regression's 0.44x.
                let band = if seen.mechanism.trapped() {
                    0.5..2.0
                } else {
                    0.6..1.6
                };
                assert!(
                    band.contains(&(cost / reference)),
                    "{}/{file}: split lock {cost:.0} ns vs the C loop's {reference:.0} ns",
                    m.name
                );
            }
        }
    }
}

#[test]
fn false_sharing_is_judged_on_the_worst_pattern_the_references_show() {
    const PATTERNS: [(u32, &str); 3] = [(0, "plain"), (1, "atomic"), (2, "reader")];
    for m in corpus() {
        for (r, checks) in m.referenced() {
            let ratios: Vec<(f64, &str)> = PATTERNS
                .iter()
                .filter_map(|(mode, name)| Some((r.sharing_ratio(*mode)?, *name)))
                .collect();
            let (worst, worst_name) = ratios
                .iter()
                .copied()
                .max_by(|a, b| a.0.total_cmp(&b.0))
                .unwrap();
            for (file, fp) in checks.iter().copied() {
                let v = verdict(fp, "false_sharing").unwrap();
                let at = format!(
                    "{}/{file}: {} ({:?}) vs references {ratios:?}",
                    m.name, v.figure, v.level
                );
                // The Netflix case's 3x is a hazard; from 1.5x a notice. A verdict may sit on the
                // line between two levels (borderline), but never below what the worst pattern
                // the C program measured implies by a whole level.
                if worst >= 3.0 {
                    assert!(v.level >= Level::Notice, "{at}");
                } else if worst >= 1.5 {
                    assert!(reach(v) >= Level::Notice, "{at}");
                } else {
                    assert!(v.level <= Level::Notice, "{at}");
                }
                // The pattern named first is the worst here too (or within 30% of it: two
                // patterns of one machine often cost alike). Files from before the atomic and
                // reader patterns were measured name their one atomic written from two cores.
                let named = v.figure.split_whitespace().next().unwrap_or("");
                let close: Vec<&str> = ratios
                    .iter()
                    .filter(|(x, _)| *x >= worst / 1.3)
                    .map(|(_, n)| *n)
                    .collect();
                if fp.metric("sharing", "false_sharing_atomic_ratio").is_some() {
                    assert!(close.contains(&named), "{at}: named {named}");
                } else if worst_name == "atomic" {
                    assert!(v.figure.contains("atomic"), "{at}");
                }
            }
        }
    }
}

#[test]
fn dram_and_the_4k_page_penalty_agree_with_the_c_chase() {
    for m in corpus() {
        for (r, checks) in m.referenced() {
            // The C chase's DRAM: the median THP latency of the sizes up to 512 MiB (before
            // huge-page walks lift it) within 20% of the 512 MiB one, found from the curve as
            // the tool must (the Emerald Rapids guest's plateau starts at 16 MiB, inside the L3
            // it reports; the Zen 5 guest's at 64 MiB, past its 32 MiB L3).
            let top = r.chase.iter().find(|c| c.0 == 512).unwrap().1;
            let plateau = median(
                r.chase
                    .iter()
                    .filter(|c| c.0 <= 512 && c.1 >= top * 0.8)
                    .map(|c| c.1)
                    .collect(),
            )
            .unwrap();
            for (file, fp) in checks.iter().copied() {
                let at = format!("{}/{file}", m.name);
                let dram = metric(fp, "mem-latency", "dram_latency_ns")
                    .unwrap_or_else(|| panic!("{at}: no DRAM latency: {:?}", fp.not_judged));
                // DRAM found from the curve, not from the sizes sysfs reports: the Emerald Rapids
                // guest's 260 MiB L3 hid a 140-155 ns DRAM plateau from 16 MiB on.
                assert!(
                    (0.7..1.5).contains(&(dram / plateau)),
                    "{at}: DRAM {dram:.0} ns vs the C chase's {plateau:.0} ns"
                );
                // The penalty at the size the check read it, against the C chase's at the nearest
                // size: same side of the notice line, same order.
                let ours = metric(fp, "mem-latency", "tlb_penalty_ratio").unwrap();
                let size_mib = metric(fp, "mem-latency", "tlb_penalty_size_bytes")
                    .map_or(512, |b| (b as u64) >> 20);
                let (_, thp, small) = r
                    .chase
                    .iter()
                    .min_by_key(|c| c.0.abs_diff(size_mib))
                    .copied()
                    .unwrap();
                let theirs = small / thp;
                assert!(
                    (0.6..1.5).contains(&(ours / theirs)),
                    "{at}: 4 KiB penalty {ours:.2}x at {size_mib} MiB vs the C chase's {theirs:.2}x"
                );
                let v = verdict(fp, "small_page_penalty").unwrap();
                if theirs >= 1.5 {
                    assert!(reach(v) >= Level::Notice, "{at}: {v:?}");
                }
            }
        }
    }
}

#[test]
fn the_machine_line_the_verdict_and_diagnose_tell_one_split_lock_mechanism_and_figure() {
    // Regression, the Emerald Rapids guest whose kernel traps bus locks: the check measured
    // 1.5 ms a split lock "trapped by the kernel" while its machine line and diagnose's finding
    // said "split locks are logged once per task and otherwise run at hardware cost" (what
    // the kernel's warn mode was modelled to do). Every place says what was measured.
    use cpudoctor::format::human_ns;
    for m in corpus() {
        for (file, fp) in &m.checks {
            let at = format!("{}/{file}", m.name);
            let seen = fp
                .split_lock_seen()
                .unwrap_or_else(|| panic!("{at}: no split-lock mechanism"));
            let words = cpudoctor::words::machine::split_lock_words(
                fp.machine.split_lock.effective,
                Some(seen.mechanism),
            );
            let line = cpudoctor::render::terminal::machine_lines(fp, u16::MAX);
            assert!(line.contains(&words), "{at}: {line:?} lacks {words:?}");
            let v = verdict(fp, "split_lock").unwrap();
            let cost = human_ns(seen.cost_ns.unwrap());
            let kernel = v
                .explanation
                .split(" Kernel: ")
                .nth(1)
                .unwrap_or_else(|| panic!("{at}: no Kernel: in {}", v.explanation));
            assert!(
                kernel.contains("measured: ") && kernel.contains(&format!("{cost} each")),
                "{at}: {kernel}"
            );
            // The same figure is the verdict's own: in its figure, its summary, or its
            // explanation before the kernel's sentence (a bus lock's core-to-core figure
            // heads the verdict, one thread's per-op cost follows it).
            let before = v.explanation.split(" Kernel: ").next().unwrap_or("");
            assert!(
                v.figure.contains(&cost) || v.summary.contains(&cost) || before.contains(&cost),
                "{at}: {} / {} / {before} vs {cost}",
                v.figure,
                v.summary
            );
            assert!(!kernel.contains("otherwise run at hardware cost"), "{at}");
        }
    }
    // Diagnose's words on that machine, from the costs its saved diagnosis of the split-lock
    // program carries (the finding itself is judged again in the rules' unit tests): the same
    // mechanism and the check's figure.
    let d = cpudoctor::diagnose::from_json_bytes(
        &std::fs::read(corpus_dir().join("emerald-rapids-kvm-trap/regression/split_lock.json"))
            .unwrap(),
    )
    .unwrap();
    let check = from_json_bytes(
        &std::fs::read(corpus_dir().join("emerald-rapids-kvm-trap/regression/check.json")).unwrap(),
    )
    .unwrap();
    let machine = &check.machine;
    let costs = d.machine.costs.as_ref().unwrap();
    let summary = cpudoctor::words::machine::split_lock_summary(
        &machine.split_lock,
        costs.split_lock_seen(machine).as_ref(),
    );
    assert!(
        summary.contains("measured: this kernel traps them"),
        "{summary}"
    );
    assert!(summary.contains("1.1 ms each"), "{summary}");
}

#[test]
fn an_idle_machine_is_not_called_disturbed_by_what_its_counters_cannot_resolve() {
    // Regression, the idle Emerald Rapids guest (load 0.0): every check opened with "Measured
    // while disturbed": c2c's 10 ms window read other tasks busy 0.86 CPU (one 10 ms tick),
    // the split-lock probe's 0.14 s read steal 9.5% (under three ticks). Judged again by this
    // build, neither is a disturbance; the single checks' c2c and split-lock probes are not
    // marked.
    for m in corpus() {
        for (file, fp) in &m.checks {
            for p in &fp.probes {
                let Some(d) = &p.disturbance else { continue };
                let r =
                    cpudoctor::schema::disturbance::Resolution::of(d.wall_s, d.cpus.len(), None);
                for b in &d.by {
                    use cpudoctor::schema::disturbance::*;
                    let beyond = match b {
                        DisturbedBy::OtherTasks => {
                            d.others_busy_cpus.unwrap() - r.others_busy_cpus
                                >= OTHERS_BUSY_CPUS_LIMIT
                        }
                        DisturbedBy::Steal => {
                            d.steal_ratio.unwrap() - r.steal_ratio >= STEAL_RATIO_LIMIT
                        }
                        _ => true,
                    };
                    assert!(
                        beyond,
                        "{}/{file}: {} called {b:?} within resolution: {d:?}",
                        m.name, p.name
                    );
                }
            }
        }
    }
    let trap = corpus()
        .into_iter()
        .find(|m| m.name == "emerald-rapids-kvm-trap")
        .unwrap();
    for (file, fp) in trap
        .checks
        .iter()
        .filter(|(f, _)| f.starts_with("check-single"))
    {
        for name in ["c2c", "split-lock"] {
            let p = fp.probe(name).unwrap();
            assert!(
                p.disturbed().is_none(),
                "{file}: {name} {:?}",
                p.disturbance
            );
        }
    }
}
