//! Names and code for stripped binaries: a test program built with `-g`, then stripped, gets
//! its names back from a separate debug file (by build-id under a debug root, by
//! `.gnu_debuglink` beside it) or from MiniDebugInfo (`.gnu_debugdata`, built the way Fedora
//! builds it); with nothing, its hot code is grouped per function by CFI (`name@0xSTART`) and
//! still disassembled. Debian's stripped libc: a contended `pthread_mutex_lock` gets function
//! groups, and names where libc6-dbg is installed.

use cpudoctor::diagnose::symbolize::symbols::{DebugDirs, ElfModule, NameSource};
use serde_json::Value;
use std::path::Path;
use std::process::Command;

mod common;
use common::*;

/// Runs a tool; `None` (the test fails, or skips with CPUDOCTOR_ALLOW_SKIP=1) when it is
/// missing.
fn tool(cmd: &mut Command, what: &str, install: &str) -> Option<()> {
    match cmd.status() {
        Ok(s) => {
            assert!(s.success(), "{cmd:?} failed");
            Some(())
        }
        Err(_) => {
            missing_tool(what, install);
            None
        }
    }
}

fn binutils(dir: &Path, args: &[&str]) -> Option<()> {
    tool(
        Command::new(args[0]).args(&args[1..]).current_dir(dir),
        args[0],
        "apt-get install binutils",
    )
}

/// The address of function `name` in an unstripped module.
fn address_of(m: &ElfModule, name: &str) -> u64 {
    m.symbols
        .iter()
        .find(|s| s.name == name)
        .unwrap_or_else(|| panic!("{name} in the unstripped build"))
        .addr
}

fn no_roots() -> DebugDirs {
    DebugDirs { roots: vec![] }
}

#[test]
fn a_stripped_program_gets_its_names_from_a_debug_file_by_build_id() {
    let dir = tempfile::tempdir().unwrap();
    let Some(prog) = program_in(dir.path(), "locked_counter", Build::Distribution) else {
        return;
    };
    let full = ElfModule::load_with(prog.to_str().unwrap(), &no_roots()).unwrap();
    let f = address_of(&full, "contended_increment");
    assert_eq!(full.names_from, NameSource::OwnSymbols);
    let Some(()) = binutils(
        dir.path(),
        &[
            "objcopy",
            "--only-keep-debug",
            "locked_counter",
            "full.debug",
        ],
    ) else {
        return;
    };
    binutils(dir.path(), &["strip", "--strip-all", "locked_counter"]).unwrap();
    let stripped = ElfModule::load_with(prog.to_str().unwrap(), &no_roots()).unwrap();
    assert!(
        stripped
            .symbols
            .iter()
            .all(|s| s.name != "contended_increment")
    );
    // /usr/lib/debug's layout under a temporary root.
    let id = build_id(&prog);
    let root = dir.path().join("debug");
    let by_id = root.join(format!(".build-id/{}", &id[..2]));
    std::fs::create_dir_all(&by_id).unwrap();
    std::fs::copy(
        dir.path().join("full.debug"),
        by_id.join(format!("{}.debug", &id[2..])),
    )
    .unwrap();
    let m = ElfModule::load_with(
        prog.to_str().unwrap(),
        &DebugDirs {
            roots: vec![root.clone()],
        },
    )
    .unwrap();
    assert!(
        matches!(&m.names_from, NameSource::DebugFile(p) if p.contains(".build-id")),
        "{:?}",
        m.names_from
    );
    assert_eq!(address_of(&m, "contended_increment"), f);
    let line = m.source_line(f + 4).expect("lines from the debug file");
    assert!(line.contains("locked_counter.c"), "{line}");
}

/// The GNU build-id of an ELF file, as hex.
fn build_id(path: &Path) -> String {
    let out = Command::new("readelf")
        .args(["-n"])
        .arg(path)
        .output()
        .expect("readelf (binutils)");
    let text = String::from_utf8_lossy(&out.stdout);
    text.lines()
        .find_map(|l| l.trim().strip_prefix("Build ID: "))
        .expect("a build-id note")
        .trim()
        .to_string()
}

#[test]
fn a_stripped_program_gets_its_names_from_its_debuglink_and_the_crc_is_checked() {
    let dir = tempfile::tempdir().unwrap();
    let Some(prog) = program_in(dir.path(), "locked_counter", Build::Distribution) else {
        return;
    };
    let Some(()) = binutils(
        dir.path(),
        &[
            "objcopy",
            "--only-keep-debug",
            "locked_counter",
            "locked_counter.debug",
        ],
    ) else {
        return;
    };
    binutils(dir.path(), &["strip", "--strip-all", "locked_counter"]).unwrap();
    binutils(
        dir.path(),
        &[
            "objcopy",
            "--add-gnu-debuglink=locked_counter.debug",
            "locked_counter",
        ],
    )
    .unwrap();
    let p = prog.to_str().unwrap();
    let m = ElfModule::load_with(p, &no_roots()).unwrap();
    assert!(
        matches!(&m.names_from, NameSource::DebugFile(d) if d.ends_with("locked_counter.debug")),
        "{:?}",
        m.names_from
    );
    assert!(m.symbols.iter().any(|s| s.name == "contended_increment"));
    // In `.debug/` beside it too.
    std::fs::create_dir(dir.path().join(".debug")).unwrap();
    std::fs::rename(
        dir.path().join("locked_counter.debug"),
        dir.path().join(".debug/locked_counter.debug"),
    )
    .unwrap();
    let m = ElfModule::load_with(p, &no_roots()).unwrap();
    assert!(m.symbols.iter().any(|s| s.name == "contended_increment"));
    // A file by that name whose CRC differs is another build's: not used.
    let mut other = std::fs::read(dir.path().join(".debug/locked_counter.debug")).unwrap();
    let last = other.len() - 1;
    other[last] ^= 0xff;
    std::fs::write(dir.path().join(".debug/locked_counter.debug"), other).unwrap();
    let m = ElfModule::load_with(p, &no_roots()).unwrap();
    assert_eq!(m.names_from, NameSource::DynamicOnly);
    assert!(m.symbols.iter().all(|s| s.name != "contended_increment"));
}

#[test]
fn minidebuginfo_built_the_fedora_way_gives_the_names_of_a_stripped_program() {
    // No package installed here carries .gnu_debugdata (Debian does not build it), so this
    // builds one as Fedora's find-debuginfo does: the function symbols that are not dynamic,
    // kept in a symbol-table-only ELF, xz-compressed, added as .gnu_debugdata.
    let dir = tempfile::tempdir().unwrap();
    let Some(prog) = program_in(dir.path(), "locked_counter", Build::Distribution) else {
        return;
    };
    let d = dir.path();
    let Some(()) = binutils(
        d,
        &["objcopy", "--only-keep-debug", "locked_counter", "dbg"],
    ) else {
        return;
    };
    let script = "nm -D locked_counter --format=posix --defined-only | awk '{print $1}' | sort > dynsyms && \
        nm dbg --format=posix --defined-only | awk '$2 ~ /^[Tt]$/ {print $1}' | sort > funcsyms && \
        comm -13 dynsyms funcsyms > keep && \
        objcopy -S --remove-section .gdb_index --remove-section .comment --keep-symbols=keep dbg mini && \
        xz -f mini && \
        strip --strip-all locked_counter && \
        objcopy --add-section .gnu_debugdata=mini.xz locked_counter";
    let Some(()) = tool(
        Command::new("sh").args(["-c", script]).current_dir(d),
        "sh, nm, objcopy and xz",
        "apt-get install binutils xz-utils",
    ) else {
        return;
    };
    let m = ElfModule::load_with(prog.to_str().unwrap(), &no_roots()).unwrap();
    assert_eq!(m.names_from, NameSource::MiniDebugInfo);
    assert!(m.symbols.iter().any(|s| s.name == "contended_increment"));
    assert!(m.symbols.iter().any(|s| s.name == "main"));
}

#[test]
fn without_debug_info_cfi_bounds_each_function() {
    let dir = tempfile::tempdir().unwrap();
    let Some(prog) = program_in(dir.path(), "locked_counter", Build::Distribution) else {
        return;
    };
    let p = prog.to_str().unwrap();
    let full = ElfModule::load_with(p, &no_roots()).unwrap();
    let f = full
        .symbols
        .iter()
        .find(|s| s.name == "contended_increment")
        .unwrap()
        .clone();
    let Some(()) = binutils(dir.path(), &["strip", "--strip-all", "locked_counter"]) else {
        return;
    };
    let m = ElfModule::load_with(p, &no_roots()).unwrap();
    assert_eq!(m.names_from, NameSource::DynamicOnly);
    assert_eq!(m.cfi_function(f.addr + f.size / 2), Some((f.addr, f.size)));
}

#[test]
fn debian_libc_internal_functions_are_bounded_by_cfi_and_named_by_libc6_dbg() {
    let libc = Path::new("/lib/x86_64-linux-gnu/libc.so.6");
    if !libc.exists() {
        missing_tool("Debian's x86-64 libc.so.6", "a Debian x86-64 machine");
        return;
    }
    let id = build_id(libc);
    let debug =
        Path::new("/usr/lib/debug/.build-id").join(format!("{}/{}.debug", &id[..2], &id[2..]));
    let m = ElfModule::load_with(libc.to_str().unwrap(), &no_roots()).unwrap();
    assert!(m.cfi_functions.len() > 1000, "{}", m.cfi_functions.len());
    if !debug.exists() {
        missing_tool(
            "libc6-dbg (glibc's debug file)",
            "apt-get install libc6-dbg",
        );
        return;
    }
    let named = ElfModule::load(libc.to_str().unwrap()).unwrap();
    assert!(matches!(named.names_from, NameSource::DebugFile(_)));
    // __lll_lock_wait is internal: no dynamic symbol names it; its FDE bounds it.
    let wait = named
        .symbols
        .iter()
        .find(|s| s.name == "__lll_lock_wait")
        .expect("libc6-dbg names __lll_lock_wait");
    assert!(m.symbols.iter().all(|s| s.name != "__lll_lock_wait"));
    assert_eq!(
        m.cfi_function(wait.addr + 1).map(|(s, _)| s),
        Some(wait.addr)
    );
}

#[test]
fn a_stripped_programs_hot_code_is_grouped_by_cfi_function_and_disassembled() {
    let dir = tempfile::tempdir().unwrap();
    let Some(prog) = program_in(dir.path(), "locked_counter", Build::Distribution) else {
        return;
    };
    let p = prog.to_str().unwrap();
    let f = address_of(
        &ElfModule::load_with(p, &no_roots()).unwrap(),
        "contended_increment",
    );
    let Some(()) = binutils(dir.path(), &["strip", "--strip-all", "locked_counter"]) else {
        return;
    };
    let d = diagnose_json(&["--", p, "1"]);
    let name = format!("locked_counter@{f:#x}");
    let top = &d["functions"][0];
    assert_eq!(top["symbol"], name, "{:#}", d["functions"]);
    let site = &d["hot_sites"][0];
    assert_eq!(site["symbol"], name, "{site:#}");
    assert_eq!(site["kind"], "locked_rmw");
    assert!(site["instruction"].as_str().unwrap().starts_with("lock "));
    assert!(
        d["notes"]
            .as_array()
            .unwrap()
            .iter()
            .all(|n| !n.as_str().unwrap().contains("not disassembled")),
        "{:#}",
        d["notes"]
    );
}

#[test]
fn a_contended_glibc_mutex_is_grouped_by_libc_function() {
    let dir = tempfile::tempdir().unwrap();
    let Some(prog) = program_in(dir.path(), "adaptive_mutex", Build::Distribution) else {
        return;
    };
    let d = diagnose_json(&["--", prog.to_str().unwrap(), "1.5"]);
    let in_libc: Vec<&Value> = d["functions"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|f| f["module"].as_str().unwrap().ends_with("/libc.so.6"))
        .collect();
    assert!(!in_libc.is_empty(), "{:#}", d["functions"]);
    // Every libc group is a function: named (dynamic symbol, libc6-dbg) or `libc.so.6@0x`,
    // never one address per row (`libc.so.6+0x`).
    for f in &in_libc {
        let s = f["symbol"].as_str().unwrap();
        assert!(!s.starts_with("libc.so.6+"), "{s}");
    }
    let id = build_id(Path::new("/lib/x86_64-linux-gnu/libc.so.6"));
    let debug =
        Path::new("/usr/lib/debug/.build-id").join(format!("{}/{}.debug", &id[..2], &id[2..]));
    if debug.exists() {
        assert!(
            in_libc
                .iter()
                .all(|f| !f["symbol"].as_str().unwrap().starts_with("libc.so.6@")),
            "libc6-dbg names every libc function: {in_libc:#?}"
        );
    }
}
