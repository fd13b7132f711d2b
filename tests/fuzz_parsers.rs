//! Property tests of every parser of outside input (issue 23): saved fingerprints and
//! diagnoses (arbitrary bytes, and real fixtures with bytes or JSON values changed), perf maps,
//! `/proc` files (cpuinfo, smaps, smaps_rollup, meminfo, status, stat, schedstat, maps), and
//! the size, number and CPU-list arguments. None may panic; what parses must make sense.
//!
//! `cargo test` runs each briefly (PROPTEST_CASES, default 64 per property); `bench/fuzz.sh`
//! runs them long and prints how many inputs were tried. A failure prints the input.

use cpudoctor::diagnose;
use cpudoctor::diagnose::stacks::LeafOffsets;
use cpudoctor::diagnose::symbolize::symbols;
use cpudoctor::format;
use cpudoctor::machine::{cpuinfo, meminfo, smaps, topology};
use cpudoctor::render::export::{Export, Folded, Pprof};
use cpudoctor::schema::json;
use proptest::prelude::*;
use proptest::test_runner::Config;
use serde_json::Value;
use std::sync::atomic::{AtomicU64, Ordering};

mod common;
use common::fixture;

/// Inputs tried by every property of this run, printed by each property as it ends.
static TRIED: AtomicU64 = AtomicU64::new(0);

fn tried() {
    TRIED.fetch_add(1, Ordering::Relaxed);
}

fn config() -> Config {
    let cases = std::env::var("PROPTEST_CASES")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(64);
    Config {
        cases,
        failure_persistence: None,
        ..Config::default()
    }
}

/// Fixture directories read so far, with their files.
type Files = Vec<(&'static str, &'static [Vec<u8>])>;

/// The saved files of one fixture directory, read once per test binary.
fn fixtures(dir: &'static str) -> &'static [Vec<u8>] {
    static CACHE: std::sync::Mutex<Files> = std::sync::Mutex::new(Vec::new());
    let mut cache = CACHE.lock().unwrap();
    if let Some((_, files)) = cache.iter().find(|(d, _)| *d == dir) {
        return files;
    }
    let files: &'static [Vec<u8>] = Vec::leak(read_fixtures(dir));
    cache.push((dir, files));
    files
}

fn read_fixtures(dir: &str) -> Vec<Vec<u8>> {
    let dir = fixture(dir);
    let mut files: Vec<_> = std::fs::read_dir(&dir)
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter(|p| p.extension().is_some_and(|x| x == "json"))
        .collect();
    files.sort();
    files.iter().map(|p| std::fs::read(p).unwrap()).collect()
}

fn fixture_text(rel: &str) -> String {
    std::fs::read_to_string(fixture(rel)).unwrap()
}

/// A byte-level change to a file: flip, insert, delete or truncate at a fraction of its length.
#[derive(Debug, Clone)]
enum ByteEdit {
    Set(f64, u8),
    Insert(f64, u8),
    Delete(f64),
    Truncate(f64),
}

fn byte_edit() -> impl Strategy<Value = ByteEdit> {
    prop_oneof![
        (0.0..1.0, any::<u8>()).prop_map(|(f, b)| ByteEdit::Set(f, b)),
        (0.0..1.0, any::<u8>()).prop_map(|(f, b)| ByteEdit::Insert(f, b)),
        (0.0..1.0f64).prop_map(ByteEdit::Delete),
        (0.0..1.0f64).prop_map(ByteEdit::Truncate),
    ]
}

fn apply(mut bytes: Vec<u8>, edits: &[ByteEdit]) -> Vec<u8> {
    for e in edits {
        let at = |f: f64, len: usize| ((f * len as f64) as usize).min(len.saturating_sub(1));
        match *e {
            ByteEdit::Set(f, b) if !bytes.is_empty() => {
                let i = at(f, bytes.len());
                bytes[i] = b;
            }
            ByteEdit::Insert(f, b) => {
                let i = ((f * bytes.len() as f64) as usize).min(bytes.len());
                bytes.insert(i, b);
            }
            ByteEdit::Delete(f) if !bytes.is_empty() => {
                let i = at(f, bytes.len());
                bytes.remove(i);
            }
            ByteEdit::Truncate(f) => bytes.truncate((f * bytes.len() as f64) as usize),
            _ => {}
        }
    }
    bytes
}

/// JSON values a field may be replaced with: every type, and numbers at the extremes.
fn odd_value() -> impl Strategy<Value = Value> {
    prop_oneof![
        Just(Value::Null),
        any::<bool>().prop_map(Value::from),
        Just(Value::from(u64::MAX)),
        Just(Value::from(i64::MIN)),
        Just(Value::from(0)),
        Just(Value::from(-1)),
        Just(Value::from(1e300)),
        Just(Value::from(-1e300)),
        Just(Value::from(f64::MIN_POSITIVE)),
        any::<i64>().prop_map(Value::from),
        any::<f64>()
            .prop_filter("JSON has no NaN", |v| v.is_finite())
            .prop_map(Value::from),
        ".{0,12}".prop_map(Value::from),
        Just(Value::Array(Vec::new())),
        Just(Value::Object(serde_json::Map::new())),
        Just(serde_json::json!([[], {}, null, 1])),
    ]
}

/// Every place in a JSON document, as a JSON pointer.
fn pointers(v: &Value, at: String, out: &mut Vec<String>) {
    match v {
        Value::Object(m) => {
            for (k, x) in m {
                let p = format!("{at}/{}", k.replace('~', "~0").replace('/', "~1"));
                out.push(p.clone());
                pointers(x, p, out);
            }
        }
        Value::Array(a) => {
            for (i, x) in a.iter().enumerate() {
                let p = format!("{at}/{i}");
                out.push(p.clone());
                pointers(x, p, out);
            }
        }
        _ => {}
    }
}

/// `doc` with the values at fractions `places` of its places replaced (or removed, for None).
fn change_values(doc: &Value, places: &[(f64, Option<Value>)]) -> Value {
    let mut doc = doc.clone();
    for (f, new) in places {
        let mut all = Vec::new();
        pointers(&doc, String::new(), &mut all);
        if all.is_empty() {
            break;
        }
        let p = &all[((f * all.len() as f64) as usize).min(all.len() - 1)];
        match new {
            Some(v) => {
                if let Some(slot) = doc.pointer_mut(p) {
                    *slot = v.clone();
                }
            }
            None => {
                let (parent, key) = p.rsplit_once('/').unwrap();
                match doc.pointer_mut(parent) {
                    Some(Value::Object(m)) => {
                        m.remove(&key.replace("~1", "/").replace("~0", "~"));
                    }
                    Some(Value::Array(a)) => {
                        if let Ok(i) = key.parse::<usize>()
                            && i < a.len()
                        {
                            a.remove(i);
                        }
                    }
                    _ => {}
                }
            }
        }
    }
    doc
}

fn value_changes() -> impl Strategy<Value = Vec<(f64, Option<Value>)>> {
    prop::collection::vec((0.0..1.0f64, prop::option::of(odd_value())), 1..4)
}

/// Loads a fingerprint as `diff`, `report` and `explain` do, and when it loads, renders it as
/// they would: neither may panic.
fn load_fingerprint(bytes: &[u8]) {
    tried();
    if let Ok(fp) = json::from_json_bytes(bytes) {
        let style = cpudoctor::render::terminal::Style {
            width: 100,
            color: false,
        };
        let _ = cpudoctor::render::terminal::render_check(&fp, style, true);
        let d = cpudoctor::compare::fingerprint::diff(&fp, &fp, "a", "b");
        let _ = cpudoctor::render::diff::render_diff_with(&d, 100, true);
    }
    // What `fleet` reads of each host.
    let _ = serde_json::from_slice::<cpudoctor::compare::fleet::HostFingerprint>(bytes);
}

/// Loads a diagnosis as `diff`, `report` and `diagnose --from` do, and renders it.
fn load_diagnosis(bytes: &[u8]) {
    tried();
    if let Ok(d) = diagnose::from_json_bytes(bytes) {
        let _ = cpudoctor::render::diagnosis::render(&d, 100);
        let _ = Folded(LeafOffsets::Keep).export(&d);
        let _ = Pprof.export(&d);
        // What `diff` and `report` do with it, wall-clock view included.
        let diff = cpudoctor::compare::profile::compare(&d, &d, "a", "b");
        let _ = cpudoctor::render::profile_diff::render(&diff, 100, true);
        let _ = cpudoctor::render::flame::wall_flame_graph(&d, "t", "f");
    }
}

/// The keys of `v` that hold an unsigned integer somewhere, version fields left out.
fn count_keys(v: &Value, out: &mut std::collections::BTreeSet<String>) {
    match v {
        Value::Object(m) => {
            for (k, x) in m {
                if x.is_u64() && !k.ends_with("_version") {
                    out.insert(k.clone());
                }
                count_keys(x, out);
            }
        }
        Value::Array(a) => a.iter().for_each(|x| count_keys(x, out)),
        _ => {}
    }
}

/// `v` with every unsigned integer held by key `key` (in arrays under it too) at `u64::MAX`.
fn key_at_max(v: &mut Value, key: &str) {
    fn all(v: &mut Value) {
        match v {
            Value::Array(a) => a.iter_mut().for_each(all),
            Value::Number(n) if n.is_u64() => *v = Value::from(u64::MAX),
            _ => {}
        }
    }
    match v {
        Value::Object(m) => {
            for (k, x) in m.iter_mut() {
                if k == key {
                    all(x);
                }
                key_at_max(x, key);
            }
        }
        Value::Array(a) => a.iter_mut().for_each(|x| key_at_max(x, key)),
        _ => {}
    }
}

/// Guards the CI failure of 2026-11-27: one stack's count at `u64::MAX` overflowed the
/// profile diff's sum (`compare::profile`); a throttled-period count did the same in the
/// disturbance banner. Here every count of every real file that still loads at `u64::MAX` is
/// set there at once (key by key, keeping those the layout accepts), so the next sum of a
/// file's counts is caught every run rather than by chance.
#[test]
fn saved_files_with_their_counts_at_u64_max_load_and_render_without_overflow() {
    let loads_diagnosis = |b: &[u8]| diagnose::from_json_bytes(b).is_ok();
    let loads_fingerprint = |b: &[u8]| json::from_json_bytes(b).is_ok();
    for (dir, loads, render) in [
        (
            "diagnose",
            &loads_diagnosis as &dyn Fn(&[u8]) -> bool,
            load_diagnosis as fn(&[u8]),
        ),
        ("fingerprints", &loads_fingerprint, load_fingerprint),
    ] {
        for file in fixtures(dir) {
            let mut doc: Value = serde_json::from_slice(file).unwrap();
            let mut keys = std::collections::BTreeSet::new();
            count_keys(&doc, &mut keys);
            let mut at_max = 0;
            for k in &keys {
                let mut tried = doc.clone();
                key_at_max(&mut tried, k);
                if loads(&serde_json::to_vec(&tried).unwrap()) {
                    doc = tried;
                    at_max += 1;
                }
            }
            assert!(
                at_max * 2 >= keys.len(),
                "{dir}: only {at_max} of {} count fields load at u64::MAX",
                keys.len()
            );
            render(&serde_json::to_vec(&doc).unwrap());
        }
    }
}

proptest! {
    #![proptest_config(config())]

    #[test]
    fn fingerprint_loading_never_panics_on_arbitrary_bytes(
        bytes in prop::collection::vec(any::<u8>(), 0..512)
    ) {
        load_fingerprint(&bytes);
    }

    #[test]
    fn fingerprint_loading_never_panics_on_changed_bytes_of_real_files(
        which in any::<prop::sample::Index>(),
        edits in prop::collection::vec(byte_edit(), 1..6),
    ) {
        let file = which.get(fixtures("fingerprints")).clone();
        load_fingerprint(&apply(file, &edits));
    }

    #[test]
    fn fingerprint_loading_never_panics_on_changed_values_of_real_files(
        which in any::<prop::sample::Index>(),
        changes in value_changes(),
    ) {
        let doc: Value = serde_json::from_slice(which.get::<Vec<u8>>(fixtures("fingerprints"))).unwrap();
        load_fingerprint(&serde_json::to_vec(&change_values(&doc, &changes)).unwrap());
    }

    #[test]
    fn diagnosis_loading_never_panics_on_arbitrary_bytes(
        bytes in prop::collection::vec(any::<u8>(), 0..512)
    ) {
        load_diagnosis(&bytes);
    }

    #[test]
    fn diagnosis_loading_never_panics_on_changed_bytes_of_real_files(
        which in any::<prop::sample::Index>(),
        edits in prop::collection::vec(byte_edit(), 1..6),
    ) {
        let file = which.get(fixtures("diagnose")).clone();
        load_diagnosis(&apply(file, &edits));
    }

    #[test]
    fn diagnosis_loading_never_panics_on_changed_values_of_real_files(
        which in any::<prop::sample::Index>(),
        changes in value_changes(),
    ) {
        let doc: Value = serde_json::from_slice(which.get::<Vec<u8>>(fixtures("diagnose"))).unwrap();
        load_diagnosis(&serde_json::to_vec(&change_values(&doc, &changes)).unwrap());
    }

    #[test]
    fn perf_map_lines_parse_into_sorted_symbols_that_lookups_survive(
        lines in prop::collection::vec(
            prop_oneof![
                ".{0,40}",
                "(0x)?[0-9a-fA-F]{1,17} (0x)?[0-9a-fA-F]{1,17} [ -~]{0,20}",
                Just("ffffffffffffffff ffffffffffffffff top".to_string()),
            ],
            0..20,
        ),
        addrs in prop::collection::vec(any::<u64>(), 0..8),
    ) {
        tried();
        let syms = symbols::parse_perf_map(&lines.join("\n"));
        prop_assert!(syms.windows(2).all(|w| w[0].addr <= w[1].addr));
        prop_assert!(syms.iter().all(|s| !s.name.is_empty()));
        for a in addrs.into_iter().chain([0, u64::MAX]) {
            let _ = symbols::symbol_containing(&syms, a);
        }
    }

    #[test]
    fn proc_maps_lines_never_panic(
        lines in prop::collection::vec(
            prop_oneof![
                ".{0,60}",
                "[0-9a-f]{1,17}-[0-9a-f]{1,17} [r-][w-][x-][ps] [0-9a-f]{1,17} [0-9:]{5} [0-9]{1,8} [ -~]{0,20}",
            ],
            0..20,
        ),
    ) {
        tried();
        let maps = symbols::parse_proc_maps(&lines.join("\n"));
        let mut spaces = symbols::AddressSpaces::default();
        for m in maps {
            spaces.add(1, m);
        }
        for a in [0, 1, 0x400000, u64::MAX] {
            let _ = spaces.locate(1, a);
        }
    }

    #[test]
    fn cpuinfo_never_panics_and_real_cpuinfo_survives_changes(
        text in ".{0,400}",
        which in 0..2usize,
        edits in prop::collection::vec(byte_edit(), 0..6),
    ) {
        tried();
        let _ = cpuinfo::parse_cpuinfo(&text);
        let real = fixture_text(["cpuinfo/amd-zen4-epyc-kvm.txt", "cpuinfo/intel-haswell-i7-4790k.txt"][which]);
        let changed = String::from_utf8_lossy(&apply(real.into_bytes(), &edits)).into_owned();
        if let Some(c) = cpuinfo::parse_cpuinfo(&changed) {
            let _ = c.has_flag("pause");
        }
    }

    #[test]
    fn smaps_and_rollup_never_panic_and_their_figures_are_what_was_written(
        text in ".{0,400}",
        which in 0..3usize,
        edits in prop::collection::vec(byte_edit(), 0..6),
        kb in any::<u64>(),
    ) {
        tried();
        let _ = smaps::parse_smaps(&text);
        let _ = smaps::parse_rollup(&text);
        let real = fixture_text([
            "proc/smaps-thp-madvise.txt",
            "proc/smaps-hugetlb-2m-and-nohugepage.txt",
            "proc/smaps_rollup.txt",
        ][which]);
        let changed = String::from_utf8_lossy(&apply(real.into_bytes(), &edits)).into_owned();
        let maps = smaps::parse_smaps(&changed);
        for a in [0, 0x7f00_0000_0000, u64::MAX] {
            let _ = smaps::mapping_containing(&maps, a);
        }
        let _ = cpudoctor::diagnose::record::memory::ProcessMemory::from_rollup(1, "x", &changed);
        let rollup = smaps::parse_rollup(&format!("AnonHugePages: {kb} kB\n"));
        prop_assert_eq!(rollup.get("AnonHugePages"), Some(&kb));
    }

    #[test]
    fn meminfo_never_panics_even_at_u64_max(
        text in ".{0,300}",
        kb in any::<u64>(),
        edits in prop::collection::vec(byte_edit(), 0..6),
    ) {
        tried();
        let _ = meminfo::mem_available_bytes(&meminfo::parse_meminfo(&text));
        let m = meminfo::parse_meminfo(&format!("MemAvailable: {kb} kB\n"));
        prop_assert_eq!(meminfo::mem_available_bytes(&m), Some(kb.saturating_mul(1024)));
        let real = fixture_text("proc/meminfo.txt");
        let changed = String::from_utf8_lossy(&apply(real.into_bytes(), &edits)).into_owned();
        let _ = meminfo::mem_available_bytes(&meminfo::parse_meminfo(&changed));
    }

    #[test]
    fn proc_status_stat_and_schedstat_never_panic(
        text in ".{0,300}",
        edits in prop::collection::vec(byte_edit(), 0..6),
    ) {
        tried();
        use cpudoctor::diagnose::record::threads;
        let _ = threads::parse_switches(&text);
        let _ = threads::parse_stat(&text);
        let _ = threads::parse_schedstat(&text);
        for f in ["proc/task/status.txt", "proc/task/stat.txt", "proc/task/schedstat.txt"] {
            let real = fixture_text(f);
            let changed = String::from_utf8_lossy(&apply(real.into_bytes(), &edits)).into_owned();
            let _ = threads::parse_switches(&changed);
            let _ = threads::parse_stat(&changed);
            let _ = threads::parse_schedstat(&changed);
        }
    }

    #[test]
    fn sizes_parse_exactly_or_not_at_all(
        n in any::<u64>(),
        unit in prop::sample::select(vec!["", "b", "k", "K", "KiB", "m", "MB", "g", "GiB", "t", "T", "x", "kk"]),
        junk in ".{0,12}",
    ) {
        tried();
        let _ = format::parse_size(&junk);
        let shift = match unit.to_ascii_lowercase().as_str() {
            "" | "b" => Some(0),
            "k" | "kib" => Some(10),
            "m" | "mb" => Some(20),
            "g" | "gib" => Some(30),
            "t" => Some(40),
            _ => None,
        };
        let want = shift
            .and_then(|s| n.checked_mul(1u64 << s))
            .filter(|&v| v > 0);
        prop_assert_eq!(format::parse_size(&format!("{n}{unit}")), want);
    }

    #[test]
    fn numbers_parse_into_their_range_or_say_the_range(
        text in prop_oneof![
            ".{0,12}",
            any::<f64>().prop_map(|v| v.to_string()),
            any::<u64>().prop_map(|v| v.to_string()),
            any::<i64>().prop_map(|v| v.to_string()),
            prop::sample::select(vec!["NaN", "inf", "-inf", "1e30", "-0", "0", "1e-320"]).prop_map(String::from),
        ],
        max in prop::sample::select(vec![86_400.0, 86_400_000.0, 10_000.0]),
    ) {
        tried();
        match format::parse_positive_at_most(&text, max) {
            Ok(v) => prop_assert!(v.is_finite() && v > 0.0 && v <= max, "{text} -> {v}"),
            Err(e) => prop_assert!(e.contains(&format!("above 0 and at most {max}")), "{e}"),
        }
    }

    #[test]
    fn cpu_lists_never_panic_or_grow_without_bound(
        text in prop_oneof![
            ".{0,20}",
            "[0-9]{1,20}(-[0-9]{1,20})?(,[0-9]{1,20}(-[0-9]{1,20})?){0,3}",
        ],
    ) {
        tried();
        if let Some(cpus) = topology::parse_cpu_list(&text) {
            prop_assert!(cpus.len() <= topology::MAX_CPUS);
            prop_assert!(cpus.iter().all(|&c| c < topology::MAX_CPUS));
        }
    }
}

#[test]
fn zz_inputs_tried_so_far() {
    // Printed with --nocapture (bench/fuzz.sh); the count covers the properties that ran
    // before this one in this process.
    eprintln!(
        "fuzz_parsers: {} inputs tried (crashes: the failed properties above)",
        TRIED.load(Ordering::Relaxed)
    );
}
