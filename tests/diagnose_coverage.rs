//! What `diagnose` could not analyse, and stacks it can trust, on runtimes nobody here wrote
//! (issue 30): Node without a perf map says so and names `--perf-basic-prof`; with one, its JIT
//! code is named, one row per function, and worker threads' stacks count as full; CPython
//! 3.12 with `-X perf` gets no caller frames from the kernel's frame-pointer chain through
//! libpython (thread-stack addresses, `[unknown]`). A missing runtime fails the test (or, with
//! CPUDOCTOR_ALLOW_SKIP=1, skips it, saying so). Assertions are on names and shares of samples
//! far from their bars, never on times.

use serde_json::Value;
use std::collections::BTreeSet;
use std::path::{Path, PathBuf};
use std::process::Command;

mod common;
use common::*;

/// `node`, when it runs.
fn node() -> Option<&'static str> {
    Command::new("node")
        .arg("--version")
        .output()
        .ok()
        .filter(|o| o.status.success())
        .map(|_| "node")
}

/// A CPython 3.12 or later: `CPUDOCTOR_PYTHON312`, else `python3.12` on the PATH, else
/// pyenv's (`$PYENV_ROOT` or `~/.pyenv`, `versions/3.12*/bin/python3.12`, else `pyenv which`
/// with `PYENV_VERSION=3.12.1`). Each is asked its version.
fn python312() -> Option<PathBuf> {
    let is_312_or_later = |p: &Path| {
        Command::new(p)
            .args([
                "-c",
                "import sys; sys.exit(0 if sys.version_info >= (3, 12) else 1)",
            ])
            .env_remove("PYENV_VERSION")
            .output()
            .is_ok_and(|o| o.status.success())
    };
    let mut candidates: Vec<PathBuf> = Vec::new();
    if let Some(p) = std::env::var_os("CPUDOCTOR_PYTHON312") {
        candidates.push(p.into());
    }
    if let Some(path) = std::env::var_os("PATH") {
        candidates.extend(std::env::split_paths(&path).map(|d| d.join("python3.12")));
    }
    let root = std::env::var_os("PYENV_ROOT")
        .map(PathBuf::from)
        .or_else(|| std::env::var_os("HOME").map(|h| PathBuf::from(h).join(".pyenv")));
    if let Some(versions) = root.map(|r| r.join("versions"))
        && let Ok(dir) = std::fs::read_dir(versions)
    {
        let mut found: Vec<PathBuf> = dir
            .filter_map(|e| e.ok())
            .filter(|e| e.file_name().to_string_lossy().starts_with("3.12"))
            .map(|e| e.path().join("bin/python3.12"))
            .collect();
        found.sort();
        candidates.extend(found.into_iter().rev());
    }
    if let Ok(o) = Command::new("pyenv")
        .args(["which", "python3.12"])
        .env("PYENV_VERSION", "3.12.1")
        .output()
        && o.status.success()
    {
        candidates.push(String::from_utf8_lossy(&o.stdout).trim().into());
    }
    candidates
        .into_iter()
        .find(|p| p.is_file() && is_312_or_later(p))
}

/// Runs `diagnose ARGS` with the screen at 80 columns and the diagnosis saved: (screen,
/// diagnosis).
fn diagnose_screen_and_json(args: &[&str]) -> (String, Value) {
    let dir = tempfile::tempdir().unwrap();
    let saved = dir.path().join("d.json");
    // In the temporary directory: node with --perf-basic-prof leaves `isolate-*-v8.log` files
    // in its working directory.
    let screen = stdout_text(
        cpudoctor()
            .current_dir(dir.path())
            .env("COLUMNS", "80")
            .args(["diagnose", "--save"])
            .arg(&saved)
            .args(args),
    );
    let d: Value = serde_json::from_slice(&std::fs::read(&saved).unwrap()).unwrap();
    (screen, d)
}

fn gaps(d: &Value) -> Vec<&Value> {
    d["coverage"]["gaps"]
        .as_array()
        .map(|a| a.iter().collect())
        .unwrap_or_default()
}

/// Share of samples in JIT code no perf map named.
fn unnamed_jit_share(d: &Value) -> f64 {
    gaps(d)
        .iter()
        .filter(|g| g["cause"] == "jit-without-perf-map")
        .map(|g| g["share"].as_f64().unwrap())
        .sum()
}

fn analysed_share(d: &Value) -> f64 {
    let c = &d["coverage"];
    c["analysed"].as_f64().unwrap() / c["samples"].as_f64().unwrap().max(1.0)
}

#[test]
fn node_without_a_perf_map_says_its_jit_code_was_not_analysed_and_names_perf_basic_prof() {
    // The `diagnose -- node hot.js` case: 98.4% of samples in one anonymous JIT mapping, zero
    // hot sites, and the screen said "No findings".
    let _serial = serial();
    let Some(node) = node() else {
        return missing_tool("node", "apt-get install nodejs");
    };
    let (screen, d) =
        diagnose_screen_and_json(&["--", node, source("node/crunch.js").to_str().unwrap()]);
    let jit = unnamed_jit_share(&d);
    assert!(
        jit >= 0.5,
        "JIT share not analysed {jit}: {:#}",
        d["coverage"]
    );
    let g = gaps(&d)
        .into_iter()
        .find(|g| g["cause"] == "jit-without-perf-map")
        .unwrap();
    assert_eq!(g["runtime"], "node", "{g:#}");
    assert_eq!(g["fix"]["kind"], "node-perf-map", "{g:#}");
    assert!(analysed_share(&d) < 0.8, "{:#}", d["coverage"]);
    assert!(screen.contains("Not analysed:"), "{screen}");
    assert!(screen.contains("--perf-basic-prof"), "{screen}");
    assert!(
        !screen.contains("No findings: no spin-wait"),
        "said there were no findings with most samples not analysed:\n{screen}"
    );
    for line in screen.lines() {
        assert!(line.chars().count() <= 80, "wider than 80 columns: {line}");
    }
}

#[test]
fn node_with_perf_basic_prof_is_analysed_one_row_per_function_and_workers_stacks_are_full() {
    // The two Node workers case: "full stacks 3%" while most stacks reached start_thread (the
    // chain lacks clone3), and one V8 function in three rows (compiled three times).
    let _serial = serial();
    let Some(node) = node() else {
        return missing_tool("node", "apt-get install nodejs");
    };
    let (_, d) = diagnose_screen_and_json(&[
        "--",
        node,
        "--perf-basic-prof",
        source("node/crunch.js").to_str().unwrap(),
        "2",
    ]);
    let jit = unnamed_jit_share(&d);
    assert!(jit < 0.2, "JIT code left unnamed: {:#}", d["coverage"]);
    assert!(analysed_share(&d) >= 0.8, "{:#}", d["coverage"]);
    let functions = d["functions"].as_array().unwrap();
    assert!(
        functions
            .iter()
            .any(|f| f["symbol"].as_str().unwrap().contains("crunch")),
        "{functions:#?}"
    );
    let mut rows = BTreeSet::new();
    for f in functions {
        let key = (f["module"].to_string(), f["symbol"].to_string());
        assert!(rows.insert(key.clone()), "two rows for {key:?}");
    }
    let u = &d["sampling"]["stacks"];
    let full = u["full_stacks"].as_f64().unwrap() / u["samples"].as_f64().unwrap().max(1.0);
    assert!(full >= 0.5, "full stacks {full}: {u:#}");
    no_map_left(&d);
}

/// The perf map V8 wrote is the user's (they asked for it): diagnose leaves it, and the test
/// removes it.
fn no_map_left(d: &Value) {
    let pid = d["target"]["pid"].as_u64().unwrap();
    let _ = std::fs::remove_file(format!("/tmp/perf-{pid}.map"));
}

#[test]
fn cpython_312_perf_trampolines_get_no_callers_from_thread_stacks() {
    // The `python3.12 -X perf` case: the samples whose stack came from the kernel's
    // frame-pointer chain (libpython keeps no frame pointers) got `[unknown]` callers at
    // thread-stack addresses; `perf --call-graph dwarf` names py::crunch_numbers for them.
    let _serial = serial();
    let Some(python) = python312() else {
        return missing_tool(
            "CPython 3.12 (python3.12)",
            "pyenv install 3.12.1, or CPUDOCTOR_PYTHON312=/path/to/python3.12",
        );
    };
    let d = diagnose_json(&[
        "--",
        python.to_str().unwrap(),
        "-X",
        "perf",
        source("python/crunch.py").to_str().unwrap(),
    ]);
    let stacks = d["stacks"].as_array().unwrap();
    let all: u64 = stacks.iter().map(|s| s["samples"].as_u64().unwrap()).sum();
    let mut named_python = 0;
    for s in stacks {
        let frames = s["frames"].as_array().unwrap();
        for f in &frames[1..] {
            assert_ne!(
                f["module"], "[unknown]",
                "a caller outside every mapping (a stack address): {s:#}"
            );
        }
        if frames.iter().any(|f| {
            f["function"]
                .as_str()
                .is_some_and(|n| n.starts_with("py::crunch_numbers"))
        }) {
            named_python += s["samples"].as_u64().unwrap();
        }
    }
    assert!(
        named_python as f64 >= 0.5 * all as f64,
        "py::crunch_numbers in {named_python} of {all} samples"
    );
    assert!(
        d["sampling"]["stacks"]["rejected_chains"].is_u64(),
        "{:#}",
        d["sampling"]["stacks"]
    );
    let _ = std::fs::remove_file(format!(
        "/tmp/perf-{}.map",
        d["target"]["pid"].as_u64().unwrap()
    ));
    assert!(
        !gaps(&d)
            .iter()
            .any(|g| g["cause"] == "interpreter-without-names"),
        "{:#}",
        d["coverage"]
    );
    // Without -X perf the Python functions have no names: the diagnosis says how to get them.
    let d = diagnose_json(&[
        "--",
        python.to_str().unwrap(),
        source("python/crunch.py").to_str().unwrap(),
    ]);
    let g = gaps(&d)
        .into_iter()
        .find(|g| g["cause"] == "interpreter-without-names")
        .unwrap_or_else(|| panic!("no interpreter gap: {:#}", d["coverage"]));
    assert!(g["share"].as_f64().unwrap() >= 0.5, "{g:#}");
    assert_eq!(g["fix"]["kind"], "python-perf", "{g:#}");
}
