//! `cpudoctor diagnose` on Debian's Redis under `redis-benchmark`: a server that spends most
//! of its CPU time in the kernel's network stack (issue 30: "87% of its CPU time is in the
//! kernel; only user space is sampled"). Kernel code is sampled where permitted (root here)
//! and named from /proc/kallsyms; with `--user-only` the screen says how much of the threads'
//! CPU time the samples do not cover. Debian's `redis-server` is a symlink to
//! `redis-check-rdb`: the process is named as the user ran it, its executable beside.
//!
//! A missing package fails the test (or, with CPUDOCTOR_ALLOW_SKIP=1, skips it, saying so);
//! `.ci/run` installs redis-server and redis-tools. Assertions are on shares with wide margins,
//! never on times.

use serde_json::Value;
use std::net::{TcpListener, TcpStream};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

mod common;

fn on_path(cmd: &str) -> bool {
    std::env::var_os("PATH")
        .is_some_and(|p| std::env::split_paths(&p).any(|d| d.join(cmd).is_file()))
}

/// Processes this test started; dropping it kills and reaps them (even when the test fails).
struct Started(Vec<Child>);

impl Drop for Started {
    fn drop(&mut self) {
        for c in &mut self.0 {
            let _ = c.kill();
            let _ = c.wait();
        }
    }
}

/// A free TCP port on the loopback interface.
fn free_port() -> u16 {
    TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port()
}

/// True when /proc/kallsyms shows this user the kernel's addresses.
fn kallsyms_visible() -> bool {
    std::fs::read_to_string("/proc/kallsyms").is_ok_and(|t| {
        t.lines().take(100).any(|l| {
            l.split_whitespace()
                .next()
                .is_some_and(|a| !a.trim_matches('0').is_empty())
        })
    })
}

/// Redis on a free loopback port without persistence, and `redis-benchmark` driving it; the
/// server's PID.
fn redis_under_benchmark(dir: &std::path::Path, started: &mut Started) -> u32 {
    let port = free_port().to_string();
    let server = Command::new("redis-server")
        .args([
            "--port",
            &port,
            "--bind",
            "127.0.0.1",
            "--save",
            "",
            "--appendonly",
            "no",
        ])
        .args(["--daemonize", "no", "--dir"])
        .arg(dir)
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .expect("redis-server starts");
    let pid = server.id();
    started.0.push(server);
    let until = Instant::now() + Duration::from_secs(10);
    while TcpStream::connect(("127.0.0.1", port.parse::<u16>().unwrap())).is_err() {
        assert!(
            Instant::now() < until,
            "redis-server did not listen in 10 s"
        );
        std::thread::sleep(Duration::from_millis(50));
    }
    let bench = Command::new("redis-benchmark")
        .args([
            "-p",
            &port,
            "-c",
            "50",
            "-n",
            "100000000",
            "-t",
            "set,get",
            "-q",
        ])
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .expect("redis-benchmark starts");
    started.0.push(bench);
    // Its clients connected and the server busy.
    std::thread::sleep(Duration::from_millis(500));
    pid
}

fn diagnose(pid: u32, extra: &[&str]) -> std::process::Output {
    common::cpudoctor()
        .args([
            "diagnose",
            "--pid",
            &pid.to_string(),
            "--duration",
            "4",
            "--no-wall",
        ])
        .args(extra)
        .env("COLUMNS", "80")
        .assert()
        .success()
        .get_output()
        .clone()
}

/// The Redis case: its kernel share shown and named, the process named `redis-server`, and
/// with `--user-only` the CPU time the samples do not cover stated with its figures.
#[test]
fn redis_under_benchmark_shows_its_kernel_share_and_is_named_as_run() {
    if !on_path("redis-server") || !on_path("redis-benchmark") {
        common::missing_tool(
            "redis-server and redis-benchmark",
            "apt-get install redis-server redis-tools",
        );
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let mut started = Started(Vec::new());
    let pid = redis_under_benchmark(dir.path(), &mut started);

    let d: Value = serde_json::from_slice(&diagnose(pid, &["--json"]).stdout).unwrap();
    let k = &d["kernel"];
    let name = &d["target"]["name"];
    assert_eq!(name["name"], "redis-server", "{name}");
    let exe = std::fs::read_link(format!("/proc/{pid}/exe")).unwrap();
    if exe.file_name().unwrap() != "redis-server" {
        assert_eq!(name["executable"], exe.to_str().unwrap(), "{name}");
    }
    let cpu = &k["cpu"];
    let system_share = cpu["system_s"].as_f64().unwrap() / cpu["cpu_s"].as_f64().unwrap();
    // The kernel's own accounting says Redis lives in system calls.
    assert!(system_share > 0.3, "{cpu}");
    if common::kernel_sampling_permitted() {
        assert_eq!(k["sampling"]["state"], "sampled", "{k}");
        let redis = common::entry(&k["processes"], "pid", pid);
        let share = redis["kernel_share"].as_f64().unwrap();
        assert!(share > 0.2, "kernel share {share}: {k}");
        // The samples and the kernel's accounting agree within a wide margin.
        assert!(
            (share - system_share).abs() < 0.35,
            "samples {share} against /proc {system_share}"
        );
        let functions = k["functions"].as_array().unwrap();
        if kallsyms_visible() {
            assert!(k["unnamed_because"].is_null(), "{k}");
            assert!(
                functions
                    .iter()
                    .any(|f| f["function"].as_str().unwrap().contains("tcp")),
                "no TCP function among the kernel's: {k}"
            );
        } else {
            assert!(k["unnamed_because"].is_string(), "{k}");
        }
        // Kernel frames are in the stacks, under the server's own code, and never
        // disassembled as hot sites.
        let kernel_leaf_with_user_callers = d["stacks"].as_array().unwrap().iter().any(|s| {
            let frames = s["frames"].as_array().unwrap();
            frames[0]["module"] == "[kernel.kallsyms]"
                && frames
                    .iter()
                    .any(|f| f["module"].as_str().unwrap().starts_with('/'))
        });
        assert!(
            kernel_leaf_with_user_callers,
            "no kernel stack reaches user code"
        );
        assert!(
            d["hot_sites"]
                .as_array()
                .unwrap()
                .iter()
                .all(|s| s["module"] != "[kernel.kallsyms]")
        );
    } else {
        assert_eq!(k["sampling"]["state"], "refused", "{k}");
    }

    // User space only: what the samples do not cover, with its figures.
    let screen = String::from_utf8(diagnose(pid, &["--user-only"]).stdout).unwrap();
    assert!(screen.contains("redis-server"), "{screen}");
    let kernel: String = screen
        .lines()
        .skip_while(|l| !l.starts_with("Kernel "))
        .take_while(|l| l.starts_with("Kernel ") || l.starts_with("   "))
        .flat_map(str::split_whitespace)
        .collect::<Vec<_>>()
        .join(" ");
    assert!(
        kernel.contains("user space only: samples cover "),
        "{screen}"
    );
    assert!(
        kernel.contains(" in the kernel (") && kernel.contains("was not sampled (--user-only)"),
        "{screen}"
    );
    assert!(screen.lines().all(|l| l.chars().count() <= 80), "{screen}");
}
