//! The handoff programs of other runtimes (`runtimes/handoff/`: C, Go, Java): built at run
//! time with the local toolchain into a cache directory, run as child processes, and read
//! through [`super::format`].
//!
//! The sources are embedded in the binary, so an installed cpudoctor needs no checkout. A
//! build goes to a fresh directory and is renamed into place, keyed by a hash of the source
//! and the toolchain's version line: concurrent runs (tests run in parallel) never see a
//! half-built program, and a new compiler or source builds afresh.

use super::format::{self, ProgramOutput};
use crate::process;
use std::hash::{Hash, Hasher};
use std::io::Read;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, Instant};

/// The cap on a run's time limit: a year, far beyond any run the command line allows, and
/// far from where adding it to the clock could overflow.
const LONGEST_TIMEOUT: Duration = Duration::from_secs(365 * 86_400);

const C_SOURCE: &str = include_str!("../../../runtimes/handoff/handoff.c");
const GO_SOURCE: &str = include_str!("../../../runtimes/handoff/handoff.go");
const JAVA_SOURCE: &str = include_str!("../../../runtimes/handoff/Handoff.java");

/// A language toolchain that builds one of the programs.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Toolchain {
    /// `$CC` or `cc`, with `-O2 -pthread`.
    C,
    /// `go build` (with `GOTOOLCHAIN=local`: never downloads a toolchain).
    Go,
    /// `javac`, run with `java`.
    Java,
}

impl Toolchain {
    /// Short name used in cache directories and messages.
    pub fn name(self) -> &'static str {
        match self {
            Toolchain::C => "c",
            Toolchain::Go => "go",
            Toolchain::Java => "java",
        }
    }

    fn source(self) -> (&'static str, &'static str) {
        match self {
            Toolchain::C => ("handoff.c", C_SOURCE),
            Toolchain::Go => ("handoff.go", GO_SOURCE),
            Toolchain::Java => ("Handoff.java", JAVA_SOURCE),
        }
    }

    fn compiler(self) -> String {
        match self {
            Toolchain::C => std::env::var("CC")
                .ok()
                .filter(|s| !s.trim().is_empty())
                .unwrap_or_else(|| "cc".into()),
            Toolchain::Go => {
                // The official tarball installs here, and only login shells add it to PATH.
                let fallback = Path::new("/usr/local/go/bin/go");
                if !on_path("go") && fallback.is_file() {
                    fallback.display().to_string()
                } else {
                    "go".into()
                }
            }
            Toolchain::Java => "javac".into(),
        }
    }
}

/// True when an executable called `name` is in a directory of `$PATH`.
fn on_path(name: &str) -> bool {
    std::env::var_os("PATH")
        .is_some_and(|paths| std::env::split_paths(&paths).any(|d| d.join(name).is_file()))
}

/// Why a program could not be built.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum BuildError {
    /// The toolchain is not installed: the runtime is skipped.
    Missing(String),
    /// The toolchain is there and the build failed.
    Failed(String),
}

/// A built program, ready to run.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Built {
    /// Which toolchain built it.
    pub toolchain: Toolchain,
    /// The toolchain's version line (`cc (Debian 12.2.0-14) 12.2.0`, `go version go1.22 ...`).
    pub version: String,
    /// Directory holding the build.
    pub dir: PathBuf,
}

/// Where builds are cached: `$XDG_CACHE_HOME/cpudoctor/handoff`, `~/.cache/cpudoctor/handoff`,
/// or the temp directory when there is no home.
pub fn default_cache_dir() -> PathBuf {
    let base = std::env::var_os("XDG_CACHE_HOME")
        .filter(|v| !v.is_empty())
        .map(PathBuf::from)
        .or_else(|| {
            std::env::var_os("HOME")
                .filter(|v| !v.is_empty())
                .map(|h| PathBuf::from(h).join(".cache"))
        })
        .unwrap_or_else(std::env::temp_dir);
    base.join("cpudoctor").join("handoff")
}

/// First line of `program args` (stdout, else stderr); `Missing` when it cannot be started.
fn version_line(program: &str, args: &[&str]) -> Result<String, BuildError> {
    let out = Command::new(program)
        .args(args)
        .stdin(Stdio::null())
        .output()
        .map_err(|e| BuildError::Missing(format!("{program} not found ({e})")))?;
    let text = if out.stdout.is_empty() {
        out.stderr
    } else {
        out.stdout
    };
    let line = String::from_utf8_lossy(&text)
        .lines()
        .next()
        .unwrap_or("")
        .trim()
        .to_string();
    if !out.status.success() {
        return Err(BuildError::Missing(format!(
            "{program} {} failed: {line}",
            args.join(" ")
        )));
    }
    Ok(line)
}

fn toolchain_version(tc: Toolchain) -> Result<String, BuildError> {
    let compiler = tc.compiler();
    match tc {
        Toolchain::C => version_line(&compiler, &["--version"]),
        Toolchain::Go => version_line(&compiler, &["version"]),
        Toolchain::Java => {
            let javac = version_line(&compiler, &["-version"])?;
            // Running needs the launcher too (a JRE-less JDK is rare; a JDK-less JRE is not).
            let java = version_line("java", &["-version"])?;
            Ok(format!("{javac}; {java}"))
        }
    }
}

fn cache_key(tc: Toolchain, version: &str) -> String {
    let mut h = std::collections::hash_map::DefaultHasher::new();
    tc.source().1.hash(&mut h);
    version.hash(&mut h);
    format!("{}-{:016x}", tc.name(), h.finish())
}

/// Command that builds `src` into `out_dir`.
fn build_command(tc: Toolchain, compiler: &str, src: &Path, out_dir: &Path) -> Command {
    let mut cmd = match tc {
        Toolchain::C => {
            let mut c = Command::new(compiler);
            c.args(["-O2", "-pthread", "-o"])
                .arg(out_dir.join("handoff"))
                .arg(src);
            c
        }
        Toolchain::Go => {
            let mut c = Command::new(compiler);
            c.args(["build", "-o"])
                .arg(out_dir.join("handoff"))
                .arg(src);
            c.env("GOTOOLCHAIN", "local");
            c.current_dir(out_dir);
            let has_cache_home = ["GOCACHE", "XDG_CACHE_HOME", "HOME"]
                .iter()
                .any(|v| std::env::var_os(v).is_some_and(|s| !s.is_empty()));
            if !has_cache_home {
                c.env("GOCACHE", out_dir.join("gocache"));
            }
            c
        }
        Toolchain::Java => {
            let mut c = Command::new(compiler);
            c.arg("-d").arg(out_dir).arg(src);
            c
        }
    };
    cmd.stdin(Stdio::null());
    cmd
}

static TMP_SEQ: AtomicU64 = AtomicU64::new(0);

/// Builds the program of `tc` under `cache_dir`, or reuses an earlier build of the same
/// source with the same toolchain.
pub fn build(tc: Toolchain, cache_dir: &Path) -> Result<Built, BuildError> {
    let version = toolchain_version(tc)?;
    let dir = cache_dir.join(cache_key(tc, &version));
    let built = Built {
        toolchain: tc,
        version,
        dir: dir.clone(),
    };
    if dir.is_dir() {
        return Ok(built);
    }
    std::fs::create_dir_all(cache_dir)
        .map_err(|e| BuildError::Failed(format!("cannot create {}: {e}", cache_dir.display())))?;
    let tmp = cache_dir.join(format!(
        ".{}.tmp-{}-{}",
        tc.name(),
        std::process::id(),
        TMP_SEQ.fetch_add(1, Ordering::Relaxed)
    ));
    let result = (|| {
        std::fs::create_dir_all(&tmp)
            .map_err(|e| BuildError::Failed(format!("cannot create {}: {e}", tmp.display())))?;
        let (file, text) = tc.source();
        let src = tmp.join(file);
        std::fs::write(&src, text)
            .map_err(|e| BuildError::Failed(format!("cannot write {}: {e}", src.display())))?;
        let out = build_command(tc, &tc.compiler(), &src, &tmp)
            .output()
            .map_err(|e| BuildError::Failed(format!("{} did not start: {e}", tc.compiler())))?;
        if !out.status.success() {
            return Err(BuildError::Failed(format!(
                "{} build failed: {}",
                tc.name(),
                String::from_utf8_lossy(&out.stderr).trim()
            )));
        }
        let _ = std::fs::remove_dir_all(tmp.join("gocache"));
        match std::fs::rename(&tmp, &dir) {
            Ok(()) => Ok(()),
            // Another run finished the same build first: use theirs.
            Err(_) if dir.is_dir() => Ok(()),
            Err(e) => Err(BuildError::Failed(format!(
                "cannot move the build to {}: {e}",
                dir.display()
            ))),
        }
    })();
    let _ = std::fs::remove_dir_all(&tmp);
    result.map(|()| built)
}

/// What to run: the variant and the handoff's parameters.
#[derive(Debug, Clone, PartialEq)]
pub struct RunArgs<'a> {
    /// Program variant (`default`, `adaptive`, `sync`, `synchronized`, `reentrantlock`).
    pub variant: &'a str,
    /// Items per run.
    pub items: u64,
    /// Busy work per item, ms.
    pub work_ms: f64,
    /// Runs per delay.
    pub repetitions: u32,
    /// Sender delays, ms.
    pub delays_ms: &'a [f64],
}

impl RunArgs<'_> {
    /// The command-line arguments after the program, as `runtimes/handoff/README.md` says.
    pub fn argv(&self) -> Vec<String> {
        vec![
            self.variant.to_string(),
            self.items.to_string(),
            self.work_ms.to_string(),
            self.repetitions.to_string(),
            self.delays_ms
                .iter()
                .map(|d| d.to_string())
                .collect::<Vec<_>>()
                .join(","),
        ]
    }

    /// The longest a correct run can reasonably take: ten times the ideal, plus a minute for
    /// start-up (a JVM on a loaded machine) and scheduling noise.
    pub fn timeout(&self) -> Duration {
        let ideal_ms: f64 = self
            .delays_ms
            .iter()
            .map(|&d| super::ideal_ms(self.items, self.work_ms, d))
            .sum::<f64>()
            * self.repetitions as f64;
        // Saturating: absurd arguments (refused by the command line) never panic here.
        Duration::try_from_secs_f64(ideal_ms * 10.0 / 1e3 + 60.0).unwrap_or(LONGEST_TIMEOUT)
    }
}

/// The command that runs `built` with `args`.
pub fn command(built: &Built, args: &RunArgs) -> Command {
    let mut cmd = match built.toolchain {
        Toolchain::C | Toolchain::Go => Command::new(built.dir.join("handoff")),
        Toolchain::Java => {
            let mut c = Command::new("java");
            c.arg("-cp").arg(&built.dir).arg("Handoff");
            c
        }
    };
    cmd.args(args.argv());
    // A handoff run takes minutes: it must not go on spinning when cpudoctor is killed (a
    // group of its own, ended by `run` or by the watchdog, covers what the JVM starts).
    process::tie_to_parent(&mut cmd);
    process::own_group(&mut cmd);
    cmd
}

/// Runs `built` with `args` and parses its output; the error says what went wrong (exit
/// status with stderr, a timeout, or the format problem).
pub fn run(built: &Built, args: &RunArgs) -> Result<ProgramOutput, String> {
    let mut child = command(built, args)
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .map_err(|e| format!("cannot start the {} program: {e}", built.toolchain.name()))?;
    let _group = process::Group::of_leader(child.id());
    // Drain both pipes while waiting, so a chatty child never blocks on a full pipe.
    let mut stdout = child.stdout.take().expect("piped");
    let mut stderr = child.stderr.take().expect("piped");
    let out_reader = std::thread::spawn(move || {
        let mut s = String::new();
        let _ = stdout.read_to_string(&mut s);
        s
    });
    let err_reader = std::thread::spawn(move || {
        let mut s = String::new();
        let _ = stderr.read_to_string(&mut s);
        s
    });
    let deadline = Instant::now() + args.timeout();
    let status = match process::wait_child_until(&mut child, deadline, Duration::from_millis(20)) {
        Ok(Some(status)) => status,
        Ok(None) => {
            process::kill_child(&mut child);
            return Err(format!(
                "the {} program ran past its {:.0} s time limit and was stopped",
                built.toolchain.name(),
                args.timeout().as_secs_f64()
            ));
        }
        Err(e) => return Err(format!("waiting for the program failed: {e}")),
    };
    let out = out_reader.join().unwrap_or_default();
    let err = err_reader.join().unwrap_or_default();
    if !status.success() {
        return Err(format!(
            "the {} program failed ({status}): {}",
            built.toolchain.name(),
            err.trim()
        ));
    }
    format::parse(&out).map_err(|e| format!("the {} program's output: {e}", built.toolchain.name()))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn argv_follows_the_documented_command_line() {
        let a = RunArgs {
            variant: "adaptive",
            items: 100,
            work_ms: 10.0,
            repetitions: 1,
            delays_ms: &[1.0, 2.5],
        };
        assert_eq!(a.argv(), ["adaptive", "100", "10", "1", "1,2.5"]);
        // 100 x 10 ms + 100 x 10 ms = 2 s ideal: 20 s + 60 s.
        assert_eq!(a.timeout(), Duration::from_secs(80));
    }

    #[test]
    fn cache_key_changes_with_the_toolchain_version() {
        let a = cache_key(Toolchain::C, "cc 12");
        assert!(a.starts_with("c-"));
        assert_ne!(a, cache_key(Toolchain::C, "cc 13"));
        assert_eq!(a, cache_key(Toolchain::C, "cc 12"));
    }

    #[test]
    fn a_missing_compiler_is_reported_as_missing() {
        assert!(matches!(
            version_line("cpudoctor-no-such-compiler", &["--version"]),
            Err(BuildError::Missing(_))
        ));
    }
}
