//! The library's layers import only downward, and no two `cmd` handlers import each other.
//!
//! The order (lowest first) is the one `CONTRIBUTING.md` draws: a module may name any module
//! below it and none above. `cmd/` and `main.rs` wire everything and may name anything. The
//! test reads the source: every `crate::module` path (in `use` lines, grouped `use
//! crate::{a, b}`, and inline paths) and every `super::` that climbs to the crate root counts.

use std::collections::{BTreeMap, BTreeSet};
use std::fs;
use std::path::{Path, PathBuf};

/// The layers, lowest first. One module per rank, so two layers can never import each other.
const LAYERS: [&str; 20] = [
    "error",      // input errors, the one thiserror enum every layer may return
    "format",     // numbers and units as text
    "names",      // probe and metric identifiers, each written once
    "stats",      // numbers only: medians, intervals, MAD, binomial error, ckmeans, paired ratios
    "output",     // the one writer of named outputs: symlinks, FIFOs, modes, temp files
    "process",    // child processes: deadline, SIGTERM, SIGKILL, reap
    "arch",       // inline assembly
    "machine",    // host facts: CPU, topology, kernel, memory, PMU, the CPUs we may use
    "measure",    // clocks, pinning, buffers (which read smaps to see what took), chases
    "spin",       // runtimes' spin policies, pure arithmetic
    "reference",  // reference figures, each with its source
    "schema",     // the fingerprint's typed vocabulary (what probes write, everything reads)
    "words",      // every sentence a verdict, finding or comparison prints
    "probes",     // measurements into the schema
    "hazards",    // verdicts from a fingerprint
    "diagnose",   // a running workload's profile and findings
    "experiment", // the user's command under variants: ratios with intervals
    "compare",    // fingerprints, profiles, fleets compared: typed results, no prose
    "render",     // text and HTML from typed results: terminal, diff, HTML, Prometheus, fleet
    "session",    // runs probes and judges hazards into one fingerprint
];

fn rank(module: &str) -> Option<usize> {
    LAYERS.iter().position(|l| *l == module)
}

fn rust_files(dir: &Path, out: &mut Vec<PathBuf>) {
    for e in fs::read_dir(dir).unwrap() {
        let p = e.unwrap().path();
        if p.is_dir() {
            rust_files(&p, out);
        } else if p.extension().is_some_and(|x| x == "rs") {
            out.push(p);
        }
    }
}

/// Module path of a file under `src/` (`src/hazards/pause.rs` -> `["hazards", "pause"]`).
fn module_path(src: &Path, file: &Path) -> Vec<String> {
    let rel = file.strip_prefix(src).unwrap().with_extension("");
    let mut parts: Vec<String> = rel
        .components()
        .map(|c| c.as_os_str().to_string_lossy().into_owned())
        .collect();
    if parts.last().is_some_and(|p| p == "mod") {
        parts.pop();
    }
    parts
}

/// The text without `//` comments (doc links name modules without importing them).
fn code_of(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    for line in text.lines() {
        let mut in_str = false;
        let mut prev = ' ';
        let mut cut = line.len();
        for (i, c) in line.char_indices() {
            if c == '"' && prev != '\\' {
                in_str = !in_str;
            }
            if !in_str && c == '/' && prev == '/' {
                cut = i - 1;
                break;
            }
            prev = c;
        }
        out.push_str(&line[..cut]);
        out.push('\n');
    }
    out
}

fn ident_at(s: &str) -> &str {
    let end = s
        .find(|c: char| !(c.is_alphanumeric() || c == '_'))
        .unwrap_or(s.len());
    &s[..end]
}

/// The names a path continues with at the start of `rest`: `x` for `x::..`, each item's
/// first name for a group `{x, y::z}`.
fn names_at(rest: &str) -> Vec<String> {
    let Some(group) = rest.strip_prefix('{') else {
        return vec![ident_at(rest).to_string()];
    };
    let mut out = Vec::new();
    let mut depth = 0;
    let mut item_start = true;
    for (j, c) in group.char_indices() {
        match c {
            '{' => depth += 1,
            '}' if depth == 0 => break,
            '}' => depth -= 1,
            ',' if depth == 0 => item_start = true,
            c if c.is_alphabetic() && item_start && depth == 0 => {
                out.push(ident_at(&group[j..]).to_string());
                item_start = false;
            }
            _ => {}
        }
    }
    out
}

/// Top-level modules a file at module depth `depth` names: through `crate::` (not a macro's
/// `$crate::`), or by climbing `depth` times with `super::` to the crate root.
fn named_modules(code: &str, depth: usize) -> BTreeSet<String> {
    let mut out = BTreeSet::new();
    for (i, _) in code.match_indices("crate::") {
        let before = code[..i].chars().next_back().unwrap_or(' ');
        if !(before.is_alphanumeric() || before == '_' || before == '$') {
            out.extend(names_at(&code[i + "crate::".len()..]));
        }
    }
    for (i, _) in code.match_indices("super::") {
        if code[..i].ends_with("super::") {
            continue; // counted from the start of its chain
        }
        let mut rest = &code[i..];
        let mut climbs = 0;
        while let Some(r) = rest.strip_prefix("super::") {
            climbs += 1;
            rest = r;
        }
        if climbs == depth {
            out.extend(names_at(rest));
        }
    }
    out
}

/// The modules `lib.rs` declares.
fn declared_modules(src: &Path) -> BTreeSet<String> {
    code_of(&fs::read_to_string(src.join("lib.rs")).unwrap())
        .lines()
        .filter_map(|l| {
            l.trim()
                .strip_prefix("pub mod ")
                .or(l.trim().strip_prefix("mod "))
        })
        .map(|m| m.trim_end_matches(';').trim().to_string())
        .collect()
}

#[test]
fn library_layers_import_only_downward() {
    let src = Path::new(env!("CARGO_MANIFEST_DIR")).join("src");
    let mut files = Vec::new();
    rust_files(&src, &mut files);
    files.sort();
    let modules = declared_modules(&src);
    let mut upward = Vec::new();
    let unplaced: BTreeSet<String> = modules
        .iter()
        .filter(|m| rank(m).is_none())
        .cloned()
        .collect();
    for file in &files {
        let path = module_path(&src, file);
        let Some(top) = path.first() else { continue };
        if ["lib", "main", "cmd"].contains(&top.as_str()) {
            continue; // lib.rs declares the layers; main.rs and cmd/ wire them
        }
        let Some(own) = rank(top) else { continue };
        let code = code_of(&fs::read_to_string(file).unwrap());
        for m in named_modules(&code, path.len()) {
            if m == *top || !modules.contains(&m) {
                continue; // its own layer, or a root item that is no module (a macro)
            }
            match rank(&m) {
                Some(r) if r < own => {}
                Some(_) => upward.push(format!(
                    "{} ({top}) imports {m}, a layer above it",
                    file.strip_prefix(&src).unwrap().display()
                )),
                None => {}
            }
        }
    }
    assert!(
        unplaced.is_empty(),
        "modules with no place in LAYERS (add them where they belong, and to CONTRIBUTING.md): \
         {unplaced:?}"
    );
    assert!(upward.is_empty(), "upward imports:\n{}", upward.join("\n"));
}

/// The analyses' entry points. A renderer gets their typed results from `cmd/` and never runs
/// one itself, so the diff path goes compare, then render, and never back.
const ANALYSES: &[&str] = &[
    "fingerprint::diff(",
    "Compared::new(",
    "session::judge(",
    "judge_into(",
    ".judge(",
    "spin_cost(",
    "machine_facts(",
    "fleet::analyse(",
    "profile::compare(",
    "wall::compare(",
    "differential_folded(",
];

#[test]
fn renderers_never_run_an_analysis() {
    let src = Path::new(env!("CARGO_MANIFEST_DIR")).join("src");
    let render = src.join("render");
    let mut files = Vec::new();
    rust_files(&render, &mut files);
    let mut found = Vec::new();
    for file in files {
        let text = fs::read_to_string(&file).unwrap();
        // Tests may build their inputs with the analyses.
        let code = code_of(text.split("#[cfg(test)]").next().unwrap_or_default());
        for a in ANALYSES {
            // A call, not the tail of a longer name (`diff_machine_facts(`).
            let called = code.match_indices(a).any(|(i, _)| {
                a.starts_with('.')
                    || !code[..i]
                        .chars()
                        .next_back()
                        .is_some_and(|c| c.is_alphanumeric() || c == '_')
            });
            if called {
                found.push(format!("{} calls {a}", file.display()));
            }
        }
    }
    assert!(
        found.is_empty(),
        "renderers running analyses:\n{}",
        found.join("\n")
    );
}

#[test]
fn no_two_cmd_handlers_import_each_other() {
    let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("src/cmd");
    let mut files = Vec::new();
    rust_files(&dir, &mut files);
    let handlers: BTreeSet<String> = files
        .iter()
        .map(|f| f.file_stem().unwrap().to_string_lossy().into_owned())
        .filter(|n| n != "mod")
        .collect();
    let mut imports: BTreeMap<String, BTreeSet<String>> = BTreeMap::new();
    for f in &files {
        let name = f.file_stem().unwrap().to_string_lossy().into_owned();
        if name == "mod" {
            continue;
        }
        let code = code_of(&fs::read_to_string(f).unwrap());
        // A handler is `cmd::name`: one `super::` reaches its siblings.
        let mut named = named_modules(&code, 1);
        for (i, _) in code.match_indices("crate::cmd::") {
            named.extend(names_at(&code[i + "crate::cmd::".len()..]));
        }
        named.retain(|n| handlers.contains(n) && *n != name);
        imports.insert(name, named);
    }
    let mut mutual = Vec::new();
    for (a, named) in &imports {
        for b in named {
            if a < b && imports.get(b).is_some_and(|n| n.contains(a)) {
                mutual.push(format!("cmd/{a}.rs and cmd/{b}.rs"));
            }
        }
    }
    assert!(
        mutual.is_empty(),
        "handlers that import each other (move what they share to cmd/mod.rs or the library): \
         {mutual:?}"
    );
}

/// The scanner itself: a grouped `use`, a climb to the root, and a comment that names a
/// module without importing it.
#[test]
fn the_import_scanner_sees_grouped_uses_and_root_climbs_and_skips_comments() {
    let code = code_of(
        "use crate::{render::terminal, schema::{Level, Verdict}};\n\
         let x = crate::machine::Machine::detect(); // crate::session\n\
         use super::super::probes::c2c;\n\
         let s = \"//anon\"; let y = crate::spin::SpinCost::default();\n",
    );
    let names = |depth| named_modules(&code, depth).into_iter().collect::<Vec<_>>();
    assert_eq!(names(3), ["machine", "render", "schema", "spin"]);
    assert_eq!(names(2), ["machine", "probes", "render", "schema", "spin"]);
}
