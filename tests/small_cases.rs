//! Issue 29's smaller defects, each a test named for its case, found by trying cpudoctor as a
//! new user would under limits (one CPU, a closed stdout, a strict umask, odd terminals).

use std::os::unix::process::CommandExt;
use std::path::Path;
use std::process::{Command, Stdio};

mod common;
use common::{bin, fixture, stderr_of, stdout_of};

/// `taskset -c 0 cpudoctor probe c2c sharing` measured nothing and exited 0. It still says
/// why each was skipped, and exits 1 as `check` does (README: "1 ... measuring nothing").
#[test]
fn case_probe_c2c_sharing_on_one_cpu_says_skipped_and_exits_1() {
    let mut cmd = Command::new(bin());
    common::on_one_cpu(cmd.args(["probe", "c2c", "sharing"]));
    let o = cmd.stdin(Stdio::null()).output().unwrap();
    assert_eq!(o.status.code(), Some(1), "{}", stderr_of(&o));
    assert!(
        stderr_of(&o).contains("nothing was measured"),
        "{}",
        stderr_of(&o)
    );
    let text = stdout_of(&o);
    assert!(text.contains("c2c (skipped"), "{text}");
    assert!(text.contains("needs two CPUs"), "{text}");
}

/// `probe mem-latency --sizes 1` skipped with "no buffer size at or below the maximum" and
/// exited 0; a size below two cache lines is now refused before anything runs.
#[test]
fn case_mem_latency_sizes_1_is_refused_with_the_real_reason() {
    let o = Command::new(bin())
        .args(["probe", "mem-latency", "--sizes", "16K,1"])
        .stdin(Stdio::null())
        .output()
        .unwrap();
    assert_eq!(o.status.code(), Some(2), "{}", stderr_of(&o));
    let err = stderr_of(&o);
    assert_eq!(err.trim_end().lines().count(), 1, "{err}");
    assert!(
        err.contains("--sizes 1 is below the smallest buffer"),
        "{err}"
    );
    assert!(stdout_of(&o).is_empty(), "measured before refusing");
}

/// `check --save -` with stdout closed (`>&-`) said "Saved to stdout." and the data was lost
/// (Rust's runtime opens /dev/null on a closed stdout). Refused before measuring, exit 2.
#[test]
fn case_save_to_closed_stdout_fails_instead_of_saying_saved() {
    let mut cmd = Command::new(bin());
    cmd.args(["probe", "pause", "--quick", "--save", "-"])
        .stdin(Stdio::null())
        .stderr(Stdio::piped());
    // SAFETY: close is async-signal-safe; nothing else runs between fork and exec.
    unsafe {
        cmd.pre_exec(|| {
            libc::close(1);
            Ok(())
        });
    }
    let o = cmd.output().unwrap();
    let err = stderr_of(&o);
    assert_eq!(o.status.code(), Some(2), "{err}");
    assert!(err.contains("stdout was closed"), "{err}");
    assert!(!err.contains("Saved to stdout"), "{err}");
}

/// `--metric` read only the first 16 MiB of the output, silently: a figure printed after
/// that was "not found" with no word of the cap. The failure now says so.
#[test]
fn case_metric_past_16_mib_of_output_says_so() {
    let o = Command::new(bin())
        .args(["experiment", "--pages", "--runs", "1", "--warmup", "0"])
        .args(["--metric", "ops: ([0-9]+)", "--", "sh", "-c"])
        .arg("head -c 17000000 /dev/zero | tr '\\0' x; echo; echo ops: 5")
        .stdin(Stdio::null())
        .output()
        .unwrap();
    let text = stdout_of(&o) + &stderr_of(&o);
    assert_eq!(o.status.code(), Some(1), "{text}");
    assert!(text.contains("in the first 16 MiB of its output"), "{text}");
    assert!(text.contains("it wrote 16.21 MiB"), "{text}");
}

/// A saved `pause_ns` of -24 or 0 was printed as measured ("-24.0 ns = 78 cycles").
#[test]
fn case_saved_pause_ns_below_zero_is_refused_by_diff_explain_and_report() {
    let dir = tempfile::tempdir().unwrap();
    let good = fixture("fingerprints/zen2-kvm-check.json");
    for bad in [-24.0, 0.0] {
        let mut v: serde_json::Value =
            serde_json::from_slice(&std::fs::read(&good).unwrap()).unwrap();
        for p in v["probes"].as_array_mut().unwrap() {
            for m in p["metrics"].as_array_mut().into_iter().flatten() {
                if m["name"] == "pause_ns" {
                    m["value"] = bad.into();
                }
            }
        }
        let path = dir.path().join("bad.json");
        std::fs::write(&path, v.to_string()).unwrap();
        let html = dir.path().join("r.html");
        for args in [
            vec!["diff".into(), good.clone(), path.clone()],
            vec!["explain".into(), "slow_pause".into(), path.clone()],
            vec!["report".into(), path.clone(), "-o".into(), html.clone()],
        ] {
            let o = Command::new(bin()).args(&args).output().unwrap();
            let err = stderr_of(&o);
            assert_eq!(o.status.code(), Some(2), "{args:?}: {err}");
            assert!(err.contains("pause_ns is"), "{err}");
            assert!(err.contains("which no measurement gives"), "{err}");
            assert!(!stdout_of(&o).contains("cycles"), "{}", stdout_of(&o));
        }
    }
}

/// An experiment file given to `diagnose --from` (or to `diff`) was called "a saved
/// fingerprint".
#[test]
fn case_experiment_file_given_to_diagnose_from_is_named_an_experiment() {
    let exp = fixture("experiment/pages_neighbour.json");
    for args in [
        vec!["diagnose".into(), "--from".into(), exp.clone()],
        vec!["diff".into(), exp.clone(), exp.clone()],
    ] {
        let o = Command::new(bin()).args(&args).output().unwrap();
        let err = stderr_of(&o);
        assert_eq!(o.status.code(), Some(2), "{args:?}: {err}");
        assert!(err.contains("it is a saved experiment"), "{err}");
        assert!(!err.contains("fingerprint (`cpudoctor check"), "{err}");
    }
}

/// `diagnose --pid 999999` printed the 3-line sampling banner before its one-line error.
#[test]
fn case_diagnose_missing_pid_is_one_line_without_the_banner() {
    let o = Command::new(bin())
        .args(["diagnose", "--pid", "999999999"])
        .stdin(Stdio::null())
        .output()
        .unwrap();
    let err = stderr_of(&o);
    assert_eq!(o.status.code(), Some(2), "{err}");
    assert_eq!(err.trim_end().lines().count(), 1, "{err}");
    assert!(err.contains("no process with PID 999999999"), "{err}");
}

/// `--prom` under `umask 077` wrote a 0600 file that node_exporter's textfile collector (its
/// own user) cannot read; a new file is 0644, an existing one keeps its mode.
#[test]
fn case_prom_under_umask_077_is_readable_by_node_exporter() {
    use std::os::unix::fs::PermissionsExt;
    let dir = tempfile::tempdir().unwrap();
    let prom = dir.path().join("cpudoctor.prom");
    let save = dir.path().join("fp.json");
    let mut cmd = Command::new(bin());
    cmd.args(["probe", "pause", "--quick", "--prom"])
        .arg(&prom)
        .arg("--save")
        .arg(&save)
        .stdin(Stdio::null());
    // SAFETY: umask is async-signal-safe; nothing else runs between fork and exec.
    unsafe {
        cmd.pre_exec(|| {
            libc::umask(0o077);
            Ok(())
        });
    }
    let o = cmd.output().unwrap();
    assert!(o.status.success(), "{}", stderr_of(&o));
    let mode = |p: &Path| std::fs::metadata(p).unwrap().permissions().mode() & 0o777;
    assert_eq!(mode(&prom), 0o644);
    // The fingerprint is the user's own: the umask holds there.
    assert_eq!(mode(&save), 0o600);
}

/// Screens were never narrower than 60 columns, so a 40-column terminal broke every long
/// line in mid-word. At `COLUMNS=40` the text is fitted to 40 columns at word boundaries:
/// `diff`'s machine facts, `explain`'s paragraphs.
#[test]
fn case_columns_40_wraps_at_word_boundaries() {
    let old = fixture("fingerprints/zen2-kvm-check.json");
    let new = fixture("fingerprints/zen4-kvm-probe-all.json");
    let o = Command::new(bin())
        .args(["diff".as_ref(), old.as_os_str(), new.as_os_str()])
        .env("COLUMNS", "40")
        .output()
        .unwrap();
    let text = stdout_of(&o);
    let facts: Vec<&str> = text
        .lines()
        .skip_while(|l| !l.starts_with("Machine facts"))
        .take_while(|l| !l.is_empty())
        .collect();
    assert!(facts.len() > 3, "{text}");
    for l in &facts {
        assert!(
            l.chars().count() <= 40,
            "{} columns: {l:?}",
            l.chars().count()
        );
    }
    // Words stay whole: the model line is split between words, not inside them.
    assert!(
        facts.iter().any(|l| l.contains("AuthenticAMD family 23")),
        "{facts:#?}"
    );
    let o = Command::new(bin())
        .args(["explain".as_ref(), "slow_pause".as_ref(), old.as_os_str()])
        .env("COLUMNS", "40")
        .output()
        .unwrap();
    let text = stdout_of(&o);
    let long: Vec<&str> = text
        .lines()
        .filter(|l| l.chars().count() > 40 && l.contains(' '))
        .collect();
    assert!(long.is_empty(), "wider than 40: {long:#?}");
    // A diagnosis and the diff of two.
    let (a, b) = (
        fixture("diagnose/mutex-wait-2-zen4-kvm.json"),
        fixture("diagnose/mutex-wait-4-zen4-kvm.json"),
    );
    for args in [
        vec!["diagnose".as_ref(), "--from".as_ref(), b.as_os_str()],
        vec!["diff".as_ref(), a.as_os_str(), b.as_os_str()],
    ] {
        let o = Command::new(bin())
            .args(&args)
            .env("COLUMNS", "40")
            .output()
            .unwrap();
        let text = stdout_of(&o);
        assert!(!text.is_empty(), "{args:?}: {}", stderr_of(&o));
        let long: Vec<&str> = text
            .lines()
            .filter(|l| l.chars().count() > 40 && l.trim().contains(' '))
            .collect();
        assert!(long.is_empty(), "{args:?} wider than 40: {long:#?}");
    }
}

/// `--cpus 99` exited 1 where the README says 2 (a number outside its range): `experiment
/// --cpus 99` on a smaller machine can run nothing asked, a request that cannot be acted on.
#[test]
fn case_cpus_99_exits_2() {
    for args in [
        vec!["experiment", "--cpus", "99999", "--", "true"],
        vec!["probe", "pause", "--cpus", "99999"],
    ] {
        let o = Command::new(bin()).args(&args).output().unwrap();
        let err = stderr_of(&o);
        assert_eq!(o.status.code(), Some(2), "{args:?}: {err}");
        assert!(err.contains("99999"), "{err}");
    }
}

/// `--skip pause,c2c` was refused ("unknown probe 'pause,c2c'"): a comma list is the
/// convention, and is taken as the names it lists.
#[test]
fn case_skip_takes_a_comma_list() {
    let list = Command::new(bin())
        .args(["probe", "--list"])
        .output()
        .unwrap();
    let names: Vec<String> = stdout_of(&list)
        .lines()
        .map(|l| l.split_whitespace().next().unwrap().to_string())
        .collect();
    assert!(names.len() > 2, "{names:?}");
    // Every probe in one comma list, the last one again in a flag of its own.
    let o = Command::new(bin())
        .args(["check", "--skip", &names.join(","), "--skip", &names[0]])
        .output()
        .unwrap();
    let err = stderr_of(&o);
    assert_eq!(o.status.code(), Some(2), "{err}");
    assert!(err.contains("--skip leaves no probe to run"), "{err}");
    assert!(!err.contains("unknown probe"), "{err}");
}

/// Two INTs 50 ms apart to `diagnose` saved nothing, silently: the second ended it at once.
/// A second signal that soon is the same request; what was recorded is saved.
#[test]
fn case_two_ints_50_ms_apart_to_diagnose_still_save() {
    let dir = tempfile::tempdir().unwrap();
    let save = dir.path().join("d.json");
    let mut child = Command::new(bin())
        .args(["diagnose", "--no-wall", "--save"])
        .arg(&save)
        .args(["--", "sleep", "30"])
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    // Recording: the sleep has started under it.
    let until = std::time::Instant::now() + std::time::Duration::from_secs(20);
    while !std::fs::read_to_string(format!("/proc/{}/task/{}/children", child.id(), child.id()))
        .is_ok_and(|c| !c.trim().is_empty())
    {
        assert!(
            std::time::Instant::now() < until,
            "the command never started"
        );
        std::thread::sleep(std::time::Duration::from_millis(20));
    }
    std::thread::sleep(std::time::Duration::from_millis(500));
    for _ in 0..2 {
        // SAFETY: a signal to our own child.
        unsafe { libc::kill(child.id() as i32, libc::SIGINT) };
        std::thread::sleep(std::time::Duration::from_millis(50));
    }
    let status = child.wait().unwrap();
    let mut err = String::new();
    std::io::Read::read_to_string(&mut child.stderr.take().unwrap(), &mut err).unwrap();
    assert_eq!(
        std::os::unix::process::ExitStatusExt::signal(&status),
        Some(libc::SIGINT),
        "{status:?}: {err}"
    );
    let saved: serde_json::Value = serde_json::from_slice(
        &std::fs::read(&save).unwrap_or_else(|e| panic!("nothing saved ({e}): {err}")),
    )
    .unwrap();
    assert!(saved["diagnosis_version"].as_u64().is_some(), "{saved}");
}
