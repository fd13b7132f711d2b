//! The regression corpus (issue 31, "why is it slower here?"): each machine of the corpus
//! (`tests/fixtures/machines/NAME/`) that has a `regression/` directory holds a saved `check`
//! and saved diagnoses of the fixed-work programs of `tests/programs/regression/`, written by
//! `bench/regression_corpus.sh` on that machine. `cpudoctor diff OLD NEW` on two of them must
//! say why one is slower: the mechanism of the program's hot function and the machine figure
//! that governs it, with the change that figure predicts beside the change observed.
//!
//! Two checks, in one test so that it always checks something:
//! - (b) on every machine, the same-machine changed-setting pair: the chase on huge pages
//!   (`chase-huge`, glibc's hugetlb tunable under THP `madvise`) against the same chase on
//!   4 KiB pages (`chase-4k`): the page walks named, and their predicted change (from the
//!   check's 4 KiB penalty) within [`PAGE_WALK_FACTOR`] of the observed. The test fails when no
//!   machine has such a pair.
//! - (a) every pair of machines, for each program both have: the mechanism named for its hot
//!   function, and its predicted change within 1.25x of the program's observed change for
//!   the programs whose figure is stable (all but the chase: see [`HELD`]).
//!   With one machine in the corpus there is no pair: the test says so on its output and
//!   counts nothing for (a).
//!
//! A new machine adds its directory with (on that machine, quiet: no build running)
//! `cargo build --release && bash bench/regression_corpus.sh NAME`, NAME as the corpus names
//! machines (`zen3-kvm`; the default is the check's microarchitecture and hypervisor), then
//! runs `cargo test --test regression_corpus`: every pair it forms is checked from then on.

use serde_json::Value;
use std::path::{Path, PathBuf};

mod common;
use common::{cpudoctor, json_of};

/// One program of the corpus: its saved file's name, the function its time is spent in, and
/// the mechanisms `diff` may name for that function.
struct Program {
    file: &'static str,
    function: &'static str,
    mechanisms: &'static [&'static str],
}

/// The programs `bench/regression_corpus.sh` saves. The chase is DRAM-bound on huge pages and
/// page-walk bound on 4 KiB pages; across machines either may dominate the change.
const PROGRAMS: [Program; 6] = [
    Program {
        file: "pause_rounds",
        function: "spin_round",
        mechanisms: &["pause_spin"],
    },
    Program {
        file: "contended_atomic",
        function: "contended_add",
        mechanisms: &["locked_rmw"],
    },
    Program {
        file: "split_lock",
        function: "split_locked_add",
        mechanisms: &["split_lock"],
    },
    Program {
        file: "chase-huge",
        function: "chase",
        mechanisms: &["dram_loads", "page_walks_4k"],
    },
    Program {
        file: "chase-4k",
        function: "chase",
        mechanisms: &["dram_loads", "page_walks_4k"],
    },
    Program {
        file: "compute",
        function: "compute",
        mechanisms: &["computation"],
    },
];

/// The files every machine's `regression/` must hold (the chase depends on its THP mode: at
/// least one of the two).
const REQUIRED: [&str; 5] = [
    "check",
    "pause_rounds",
    "contended_atomic",
    "split_lock",
    "compute",
];

/// The factor within which the chase's change from huge to 4 KiB pages on one machine is
/// predicted from the check's 4 KiB penalty (`dram_latency_4k_ns / dram_latency_huge_ns`).
/// Measured on the Zen 4 guest (2026-11-27, by hand): the check read the penalty 1.81x while
/// other work loaded the machine, where 5 interleaved runs of the chase read 1.55-2.01x
/// (median 1.64x, its own CPU time per load); quiet, its checks read 1.36-1.52x at the same
/// 1 GiB and a C chase 1.41x (refs.txt). Predicted over observed came to 0.96-1.10: 1.25
/// leaves room for a check and a chase taken minutes apart, and still fails a model that
/// predicts no change where the chase slowed 1.4x or more. A check taken while other work
/// loads the machine can read the penalty far off: one at load 6 read 2.57x (618 vs 241 ns)
/// beside a chase at 1.73x, 1.49 apart, and this test fails on such a corpus, as it should:
/// record it on a quiet machine (bench/regression_corpus.sh warns when its check was
/// disturbed).
const PAGE_WALK_FACTOR: f64 = 1.25;

fn corpus_dir() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/machines")
}

/// The machines with a regression corpus: (name, its `regression/` directory), by name.
fn machines() -> Vec<(String, PathBuf)> {
    let mut out: Vec<(String, PathBuf)> = std::fs::read_dir(corpus_dir())
        .expect("tests/fixtures/machines exists")
        .map(|e| e.unwrap().path().join("regression"))
        .filter(|p| p.is_dir())
        .map(|p| {
            let name = p.parent().unwrap().file_name().unwrap();
            (name.to_string_lossy().into_owned(), p)
        })
        .collect();
    out.sort();
    out
}

fn saved(dir: &Path, file: &str) -> PathBuf {
    dir.join(format!("{file}.json"))
}

/// `diff OLD NEW --json --machines OLD_CHECK NEW_CHECK`'s `why` section: each side's figures
/// from the check its diagnoses were recorded with (`regression/check.json`), which also gives
/// what diagnoses saved before a figure existed lack (the shared atomic, the latency curve).
fn why(old: &Path, new: &Path) -> Value {
    let check = |p: &Path| p.parent().unwrap().join("check.json");
    let d = json_of(
        cpudoctor()
            .arg("diff")
            .arg(old)
            .arg(new)
            .arg("--json")
            .arg("--machines")
            .arg(check(old))
            .arg(check(new)),
    );
    let why = d["why"].clone();
    assert!(
        why.is_object(),
        "diff {} {} --json has no `why` section: {d:#}",
        old.display(),
        new.display()
    );
    why
}

/// The `why` entry of `function`, which must be there.
fn function<'a>(why: &'a Value, function: &str, what: &str) -> &'a Value {
    why["functions"]
        .as_array()
        .unwrap_or_else(|| panic!("{what}: no `functions` in {why:#}"))
        .iter()
        .find(|f| f["name"] == function)
        .unwrap_or_else(|| panic!("{what}: no entry for {function} in {:#}", why["functions"]))
}

/// A number of a `why` entry, which must be there.
fn number(f: &Value, key: &str, what: &str) -> f64 {
    f[key]
        .as_f64()
        .unwrap_or_else(|| panic!("{what}: no {key} in {f:#}"))
}

/// The AnonHugePages the diagnosed chase printed (its screen, `NAME.txt`), KiB.
fn anon_huge_kib(dir: &Path, file: &str) -> i64 {
    let text = std::fs::read_to_string(dir.join(format!("{file}.txt")))
        .unwrap_or_else(|e| panic!("{}/{file}.txt: {e}", dir.display()));
    text.lines()
        .filter_map(|l| l.strip_prefix("anon_huge_kib: "))
        .next_back()
        .and_then(|v| v.trim().parse().ok())
        .unwrap_or_else(|| panic!("{}/{file}.txt prints no anon_huge_kib", dir.display()))
}

/// (b) One machine's chase on huge pages against the same chase on 4 KiB pages: the
/// same-machine changed-setting case of the issue (THP advised, then not). Observed: the chase
/// function's ratio in the two profiled runs, which the figures (short timed chases) match;
/// the program's own unprofiled ratio is printed beside it: the Emerald Rapids guest's
/// profiler slows its 4 KiB chase (319 against 260 ns a load) and not its huge one, so there
/// the two read 1.58x and 1.21x.
fn check_page_walk_pair(name: &str, dir: &Path) {
    let what = format!("{name}: chase-huge -> chase-4k");
    // The setting took: the pair is what its names say (a 1 GiB buffer).
    let (huge, small) = (
        anon_huge_kib(dir, "chase-huge"),
        anon_huge_kib(dir, "chase-4k"),
    );
    assert!(
        huge >= 900 * 1024 && small == 0,
        "{what}: the huge run got {huge} KiB of huge pages, the 4 KiB run {small} KiB"
    );
    let why = why(&saved(dir, "chase-huge"), &saved(dir, "chase-4k"));
    let f = function(&why, "chase", &what);
    assert_eq!(f["mechanism"], "page_walks_4k", "{what}: {f:#}");
    let predicted = number(f, "predicted_ratio", &what);
    let observed = number(f, "observed_ratio", &what);
    assert!(
        observed > 1.1,
        "{what}: the chase did not slow on 4 KiB pages ({observed:.2}x): {f:#}"
    );
    assert!(
        predicted > 1.0,
        "{what}: no slowdown predicted ({predicted:.2}x): {f:#}"
    );
    let factor = (predicted / observed).max(observed / predicted);
    assert!(
        factor <= PAGE_WALK_FACTOR,
        "{what}: predicted {predicted:.2}x, observed {observed:.2}x: {factor:.2} apart, more \
         than {PAGE_WALK_FACTOR}: {f:#}"
    );
    assert!(
        !why["loss"].is_null(),
        "{what}: the chase's metric gave no loss: {why:#}"
    );
    eprintln!(
        "{what}: page_walks_4k, predicted {predicted:.2}x, observed {observed:.2}x \
         (within {factor:.2} of each other; unprofiled {:.2}x)",
        number(&why["loss"], "ratio", &what)
    );
}

/// How far a cross-machine prediction may be from what was observed: the why section's own
/// hold factor.
const HOLD_FACTOR: f64 = 1.25;

/// The programs whose cross-machine prediction is held to [`HOLD_FACTOR`]: those whose figure
/// reads the same from one measurement to the next (PAUSE within 3%, the shared atomic add
/// 9-11 ns, a split lock within 5%, the clock within 2% on the Zen 4 guest). Not the chase:
/// DRAM latency on these guests moves with the host from minute to minute by more than the
/// bound allows (the Zen 4 guest's huge-page load at 1 GiB read 210-296 ns in nine quick
/// probe runs within ten minutes, 2026-12-02, quiet; its corpus's check 198 ns beside a
/// chase of 284 ns), so a check taken before the chase predicts it within 1.25x one recording
/// and not the next (1.18 and 1.55 apart in two). Its mechanism is asserted and its prediction
/// printed. The Emerald Rapids check's 4 KiB figure also reads its own chase high (375 ns at
/// 1 GiB against 260 ns unprofiled and the C chase's 274 ns), which the Zen 4 guest does not
/// reproduce (its probe and the C chase agree at every load count from 16 Ki to 4 Mi loads a
/// sample): that waits for the machine (issue 42).
const HELD: [&str; 4] = ["pause_rounds", "contended_atomic", "split_lock", "compute"];

/// (a) One program diffed across two machines: the mechanism of its hot function, and its
/// prediction within [`HOLD_FACTOR`] of the program's observed change: the ratio of its work
/// measure (CPU time, or the chase's CPU ns per load), 5 runs without the profiler on each
/// side, with its 95% interval, which is the program's whole time where it has one mechanism
/// (the programs of [`HELD`]; the others' is printed). (The hot function's own
/// sampled ratio is of one profiled run: the Emerald Rapids split-lock program's #DB handler
/// takes 62% of its samples, so the locking function alone reads 0.008x where the program
/// took 0.0012x.) Returns whether the prediction held.
fn check_across(old: &(String, PathBuf), new: &(String, PathBuf), p: &Program) -> bool {
    let what = format!("{}: {} -> {}", p.file, old.0, new.0);
    let why = why(&saved(&old.1, p.file), &saved(&new.1, p.file));
    let f = function(&why, p.function, &what);
    let mechanism = f["mechanism"].as_str().unwrap_or_default();
    assert!(
        p.mechanisms.contains(&mechanism),
        "{what}: {} named {mechanism:?}, wanted one of {:?}: {f:#}",
        p.function,
        p.mechanisms
    );
    if p.file == "pause_rounds" {
        assert_eq!(f["figure"], "pause_ns", "{what}: {f:#}");
    }
    if p.file == "contended_atomic" {
        assert_eq!(f["figure"], "shared_atomic_ns", "{what}: {f:#}");
    }
    if p.file == "split_lock" {
        // Where one side's kernel traps split locks (the Emerald Rapids guest: 62% of the
        // samples in its #DB handler, entered from the locking function), the trap is the
        // split lock's cost: every kernel function of the trap is the split-lock mechanism,
        // and the split-lock figure accounts for the change, not "kernel, no figure".
        let split: f64 = why["mechanisms"]
            .as_array()
            .unwrap()
            .iter()
            .filter(|m| m["mechanism"] == "split_lock")
            .map(|m| m["explained_points"].as_f64().unwrap_or(0.0))
            .sum();
        let total = number(&why, "total_points", &what);
        let trapped = |d: &Path| {
            std::fs::read_to_string(saved(d, p.file))
                .unwrap()
                .contains("\"exc_debug_user\"")
        };
        if trapped(&old.1) || trapped(&new.1) {
            assert!(
                split.abs() >= 0.9 * total.abs(),
                "{what}: the split-lock figure explains {split:.1} of {total:.1} points: {why:#}"
            );
        }
    }
    let observed = number(&why["loss"], "ratio", &what);
    let (low, high) = (
        number(&why["loss"], "low", &what),
        number(&why["loss"], "high", &what),
    );
    let predicted = number(f, "predicted_ratio", &what);
    // How far the prediction is from the observed change's interval (1 inside it): the
    // program's own runs vary from one recording to the next beyond what a 1.25x bound on two
    // points allows (the Zen 4 guest's contended add read 8.4-12.4 ns a run, medians 9.0 and
    // 11.0 ns in two recordings an hour apart, quiet), and the interval says by how much.
    let factor = if predicted < low {
        low / predicted
    } else if predicted > high {
        predicted / high
    } else {
        1.0
    };
    let held = factor <= HOLD_FACTOR;
    let asserted = HELD.contains(&p.file);
    eprintln!(
        "{what}: {} {mechanism}, observed {observed:.3}x ({low:.3}-{high:.3}x), predicted \
         {predicted:.3}x ({factor:.2} from the interval{})",
        p.function,
        if asserted { "" } else { ", printed only" }
    );
    assert!(
        held || !asserted,
        "{what}: predicted {predicted:.3}x, observed {observed:.3}x ({low:.3}-{high:.3}x): \
         {factor:.2} from the interval, more than {HOLD_FACTOR}: {f:#}"
    );
    held
}

/// Every machine's corpus is complete, every machine's setting pair is explained (b), and
/// every pair of machines is explained program by program (a). Guards the Skylake case of
/// issue 31 (a spin of a fixed PAUSE count, 14x slower where PAUSE is 14x slower) and the
/// THP case (a chase on 4 KiB pages, slower by its page walks).
#[test]
fn every_machine_pair_and_setting_pair_of_the_regression_corpus_is_explained() {
    let machines = machines();
    assert!(
        !machines.is_empty(),
        "no machine under tests/fixtures/machines has a regression/ directory"
    );
    for (name, dir) in &machines {
        for file in REQUIRED {
            assert!(
                saved(dir, file).is_file(),
                "{name}: regression/{file}.json is missing (bench/regression_corpus.sh)"
            );
        }
        assert!(
            saved(dir, "chase-huge").is_file() || saved(dir, "chase-4k").is_file(),
            "{name}: regression/ has no chase"
        );
    }

    // (b) Inside each machine: the chase on huge pages against 4 KiB pages.
    let mut setting_pairs = 0;
    for (name, dir) in &machines {
        if saved(dir, "chase-huge").is_file() && saved(dir, "chase-4k").is_file() {
            check_page_walk_pair(name, dir);
            setting_pairs += 1;
        } else {
            eprintln!(
                "{name}: no chase pair, one of chase-huge and chase-4k only (its README says \
                 why: THP not `madvise` when recorded)"
            );
        }
    }
    assert!(
        setting_pairs > 0,
        "no machine has both chase-huge and chase-4k: the same-machine case is unchecked"
    );

    // (a) Across machines: every pair, every program both have.
    let mut machine_pairs = 0;
    let mut program_diffs = 0;
    let mut held = 0;
    for (i, old) in machines.iter().enumerate() {
        for new in &machines[i + 1..] {
            machine_pairs += 1;
            for p in &PROGRAMS {
                if saved(&old.1, p.file).is_file() && saved(&new.1, p.file).is_file() {
                    held += usize::from(check_across(old, new, p));
                    program_diffs += 1;
                }
            }
        }
    }
    let names: Vec<&str> = machines.iter().map(|(n, _)| n.as_str()).collect();
    eprintln!(
        "regression corpus: {} machine(s) ({}); same-machine setting pairs checked: \
         {setting_pairs}",
        machines.len(),
        names.join(", ")
    );
    if machine_pairs == 0 {
        eprintln!(
            "NO CROSS-MACHINE PAIR: the corpus has one machine, so nothing was checked across \
             machines; add one with bench/regression_corpus.sh (tests/fixtures/machines/README.md)"
        );
    } else {
        eprintln!(
            "cross-machine pairs checked: {machine_pairs} ({program_diffs} program diffs, \
             {held} predicted within {HOLD_FACTOR}x)"
        );
    }
}

/// The premise of the same-machine pair, live and without timing anything: the corpus's chase
/// (64 MiB here) gets huge pages when it advises them (`CHASE_MADVISE=1`) under THP `madvise`
/// and none without, as its own AnonHugePages (smaps_rollup, printed while its buffer is live) say.
/// Where THP is not `madvise` the pair cannot be made here: the test fails (or skips with
/// CPUDOCTOR_ALLOW_SKIP=1) as for missing hardware.
#[test]
fn the_chase_gets_huge_pages_when_it_advises_them_and_none_without() {
    let thp =
        std::fs::read_to_string("/sys/kernel/mm/transparent_hugepage/enabled").unwrap_or_default();
    if !thp.contains("[madvise]") {
        common::missing_hardware("THP in `madvise` mode", &format!("THP is {}", thp.trim()));
        return;
    }
    let Some(chase) = common::program("regression/chase", common::Build::Distribution) else {
        return;
    };
    let kib = |advised: bool| -> i64 {
        let mut cmd = std::process::Command::new(&chase);
        cmd.args(["64", "100000"])
            .env_remove("GLIBC_TUNABLES")
            .env_remove("CHASE_MADVISE");
        if advised {
            cmd.env("CHASE_MADVISE", "1");
        }
        let out = cmd.output().unwrap();
        assert!(out.status.success(), "{out:?}");
        String::from_utf8_lossy(&out.stdout)
            .lines()
            .find_map(|l| l.strip_prefix("anon_huge_kib: "))
            .and_then(|v| v.trim().parse().ok())
            .unwrap_or_else(|| panic!("no anon_huge_kib in {out:?}"))
    };
    // Advised by the program itself, not through GLIBC_TUNABLES=glibc.malloc.hugetlb=1:
    // Debian 12's glibc (2.36) takes that tunable in some runs only (it compares THP's mode,
    // `always [madvise] never\n` read into a 24-byte buffer, as a string it never ends, so
    // the stack's next byte decides): 4 of 6 runs from a shell on the Zen 2 guest advised
    // huge pages, 0 of 8 from this test (strace: no madvise at all).
    let (huge, small) = (kib(true), kib(false));
    assert!(
        huge >= 32 * 1024,
        "with CHASE_MADVISE=1 the 64 MiB chase got {huge} KiB of huge pages"
    );
    assert_eq!(
        small, 0,
        "without the tunable the chase got {small} KiB of huge pages"
    );
}
