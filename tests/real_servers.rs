//! `cpudoctor diagnose` on real servers from Debian's packages, built by others (stripped,
//! without frame pointers): PostgreSQL under `pgbench` with a hot row, MariaDB under `sysbench`
//! with a hot row, and `stress-ng --lockbus`. A missing package fails the test (or, with CPUDOCTOR_ALLOW_SKIP=1, skips it,
//! saying so); `.ci/run` installs them. Assertions are on what diagnose names, never on times.

use serde_json::Value;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

mod common;

fn missing(what: &str) {
    common::missing_tool(what, "apt-get install postgresql stress-ng");
}

/// The newest PostgreSQL server's bin directory (`/usr/lib/postgresql/N/bin`).
fn postgresql_bin() -> Option<PathBuf> {
    let mut bins: Vec<(u32, PathBuf)> = std::fs::read_dir("/usr/lib/postgresql")
        .ok()?
        .filter_map(|e| {
            let e = e.ok()?;
            let v: u32 = e.file_name().to_str()?.parse().ok()?;
            let bin = e.path().join("bin");
            bin.join("postgres").is_file().then_some((v, bin))
        })
        .collect();
    bins.sort();
    bins.pop().map(|(_, b)| b)
}

fn on_path(cmd: &str) -> bool {
    std::env::var_os("PATH")
        .is_some_and(|p| std::env::split_paths(&p).any(|d| d.join(cmd).is_file()))
}

/// A command run as `user` (initdb and postgres refuse root), or as this user when it is not
/// root.
fn as_user(user: Option<&str>, program: &Path) -> Command {
    match user {
        Some(u) => {
            let mut c = Command::new("runuser");
            c.args(["-u", u, "--"]).arg(program);
            c
        }
        None => Command::new(program),
    }
}

/// A PostgreSQL cluster in a temporary directory: its data, its unix socket (no TCP), its
/// log. Dropping it stops any server left on it (even when the test fails) and removes it.
struct Cluster {
    dir: tempfile::TempDir,
    bin: PathBuf,
    user: Option<&'static str>,
    port: u16,
}

impl Cluster {
    fn init(bin: PathBuf) -> Cluster {
        let root = unsafe { libc::geteuid() } == 0;
        let user = root.then_some("postgres");
        let dir = common::server_dir(user);
        // The socket's name is .s.PGSQL.PORT in the cluster's own directory: any port does,
        // one per test process so that two runs never meet.
        let port = 20000 + (std::process::id() % 20000) as u16;
        let c = Cluster {
            dir,
            bin,
            user,
            port,
        };
        let ok = as_user(user, &c.bin.join("initdb"))
            .args(["-A", "trust", "-U", "postgres", "-D"])
            .arg(c.data())
            .stdout(Stdio::null())
            .status()
            .unwrap()
            .success();
        assert!(ok, "initdb failed");
        c
    }

    fn data(&self) -> PathBuf {
        self.dir.path().join("data")
    }

    /// `postgres` with its socket in the cluster's directory, no TCP, no fsync (the hot row
    /// is about CPU, not the disk).
    fn server_args(&self) -> Vec<String> {
        let mut a = Vec::new();
        if let Some(u) = self.user {
            a.extend(["runuser", "-u", u, "--"].map(String::from));
        }
        a.push(self.bin.join("postgres").display().to_string());
        a.extend(["-D".into(), self.data().display().to_string()]);
        a.extend(["-k".into(), self.dir.path().display().to_string()]);
        a.extend(["-p".into(), self.port.to_string()]);
        for setting in [
            "listen_addresses=",
            "fsync=off",
            "synchronous_commit=off",
            "max_connections=100",
        ] {
            a.extend(["-c".into(), setting.into()]);
        }
        a
    }

    fn client(&self, program: &str) -> Command {
        let mut c = as_user(self.user, Path::new(program));
        c.arg("-h")
            .arg(self.dir.path())
            .arg("-p")
            .arg(self.port.to_string());
        c
    }

    fn wait_ready(&self) {
        let deadline = Instant::now() + Duration::from_secs(30);
        while Instant::now() < deadline {
            let ok = self
                .client("pg_isready")
                .stdout(Stdio::null())
                .status()
                .is_ok_and(|s| s.success());
            if ok {
                return;
            }
            std::thread::sleep(Duration::from_millis(100));
        }
        panic!(
            "PostgreSQL did not start (log in {})",
            self.data().display()
        );
    }
}

impl Drop for Cluster {
    fn drop(&mut self) {
        if self.data().join("postmaster.pid").exists() {
            let _ = as_user(self.user, &self.bin.join("pg_ctl"))
                .args(["-m", "immediate", "-w", "stop", "-D"])
                .arg(self.data())
                .stdout(Stdio::null())
                .stderr(Stdio::null())
                .status();
        }
    }
}

/// diagnose running in the background; killed when dropped (a failed test).
struct Background(Option<Child>);

impl Background {
    /// Stops diagnose as Ctrl-C does (it stops the server) and reads its JSON.
    fn finish(mut self) -> Value {
        let child = self.0.take().unwrap();
        unsafe { libc::kill(child.id() as i32, libc::SIGINT) };
        let out = child.wait_with_output().unwrap();
        // It prints what it recorded, then ends by the signal as `perf record` does.
        use std::os::unix::process::ExitStatusExt;
        assert!(
            out.status.success() || out.status.signal() == Some(libc::SIGINT),
            "diagnose failed: {}",
            String::from_utf8_lossy(&out.stderr)
        );
        serde_json::from_slice(&out.stdout).expect("one JSON document")
    }
}

impl Drop for Background {
    fn drop(&mut self) {
        if let Some(c) = self.0.as_mut() {
            let _ = c.kill();
            let _ = c.wait();
        }
    }
}

/// Share of all samples taken in one of `names`.
fn leaf_share(d: &Value, names: &[&str]) -> f64 {
    let stacks = d["stacks"].as_array().unwrap();
    let total: u64 = stacks.iter().map(|s| s["samples"].as_u64().unwrap()).sum();
    let inside: u64 = stacks
        .iter()
        .filter(|s| {
            s["frames"][0]["function"]
                .as_str()
                .is_some_and(|f| names.contains(&f))
        })
        .map(|s| s["samples"].as_u64().unwrap())
        .sum();
    inside as f64 / total.max(1) as f64
}

/// Share of all samples whose sampled function lies in `module` (a path ending in it), and
/// of those the share that has a name.
fn module_shares(d: &Value, module: &str) -> (f64, f64) {
    let stacks = d["stacks"].as_array().unwrap();
    let total: u64 = stacks.iter().map(|s| s["samples"].as_u64().unwrap()).sum();
    let (mut inside, mut named) = (0, 0);
    for s in stacks {
        let leaf = &s["frames"][0];
        if leaf["module"].as_str().is_some_and(|m| m.ends_with(module)) {
            let n = s["samples"].as_u64().unwrap();
            inside += n;
            if leaf["function"].is_string() {
                named += n;
            }
        }
    }
    (
        inside as f64 / total.max(1) as f64,
        named as f64 / inside.max(1) as f64,
    )
}

/// Backends asleep in a heavyweight lock wait (PostgreSQL's `ProcSleep`) at any moment, on
/// average over a benchmark of `seconds`: their time asleep there over its length.
fn asleep_in_row_locks(d: &Value, seconds: f64) -> f64 {
    let asleep_ns: f64 = d["wall"]["stacks"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|s| s["state"] == "blocked" && s["wait"]["function"] == "ProcSleep")
        .map(|s| s["ns"].as_f64().unwrap())
        .sum();
    asleep_ns / (seconds * 1e9)
}

#[test]
fn postgresql_under_pgbench_with_a_hot_row_is_followed_into_its_backends_and_named() {
    let _serial = common::serial();
    let Some(bin) = postgresql_bin() else {
        missing("PostgreSQL's server (/usr/lib/postgresql/N/bin/postgres)");
        return;
    };
    if !on_path("pgbench") || !on_path("pg_isready") {
        missing("pgbench and pg_isready (postgresql-client)");
        return;
    }
    let cluster = Cluster::init(bin);
    let script = cluster.dir.path().join("hot_row.sql");
    // Every client updates the same row: the hot row.
    std::fs::write(
        &script,
        "UPDATE pgbench_branches SET bbalance = bbalance + 1 WHERE bid = 1;\n",
    )
    .unwrap();
    // The server runs under diagnose, which follows the backends it forks for each client.
    let diagnose = Background(Some(
        Command::new(env!("CARGO_BIN_EXE_cpudoctor"))
            .args(["diagnose", "--json", "--duration", "120", "--"])
            .args(cluster.server_args())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .unwrap(),
    ));
    cluster.wait_ready();
    let ok = cluster
        .client("pgbench")
        .args(["-i", "-s", "1", "-q", "postgres"])
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .status()
        .unwrap()
        .success();
    assert!(ok, "pgbench -i failed");
    // Many more clients than the machine's CPUs, all on the one row.
    let bench = cluster
        .client("pgbench")
        .args(["-n", "-c", "32", "-j", "2", "-T", "6", "-f"])
        .arg(&script)
        .arg("postgres")
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    // What the clients' backends wait for, as PostgreSQL itself says: the reference for the
    // wall-clock view's lock waits, sampled through the whole run (the hot row's waiters come
    // in convoys: one snapshot finds 30 of 32 in Lock:tuple, the next none).
    let mut bench = bench;
    let mut in_lock_waits = Vec::new();
    while bench.try_wait().unwrap().is_none() {
        std::thread::sleep(Duration::from_millis(150));
        let waits = cluster
            .client("psql")
            .args(["-At", "-F", " ", "-R", ", ", "-d", "postgres", "-c"])
            .arg(
                "SELECT coalesce(wait_event_type || ':' || wait_event, 'on CPU'), count(*) \
                 FROM pg_stat_activity WHERE query LIKE 'UPDATE%' GROUP BY 1 ORDER BY 2 DESC",
            )
            .output()
            .unwrap();
        let text = String::from_utf8_lossy(&waits.stdout).trim().to_string();
        if text.is_empty() {
            continue; // before the clients connected, or after they left
        }
        if in_lock_waits.len() % 8 == 0 {
            eprintln!("waits: {text}");
        }
        // `Lock:tuple 17, Lock:transactionid 5, Client:ClientRead 5`: heavyweight lock waits.
        let locks: u64 = text
            .split(", ")
            .filter(|w| w.starts_with("Lock:"))
            .filter_map(|w| w.rsplit(' ').next()?.parse::<u64>().ok())
            .sum();
        in_lock_waits.push(locks as f64);
    }
    let bench = bench.wait_with_output().unwrap();
    assert!(
        bench.status.success(),
        "pgbench failed: {}",
        String::from_utf8_lossy(&bench.stderr)
    );
    let d = diagnose.finish();
    eprintln!(
        "pgbench: {}",
        String::from_utf8_lossy(&bench.stdout)
            .lines()
            .filter(|l| l.starts_with("tps"))
            .collect::<String>()
    );
    // The 32 backends the clients got were followed.
    let backends = d["threads"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|t| t["samples"].as_u64().unwrap_or(0) > 0)
        .count();
    assert!(backends >= 16, "only {backends} processes sampled");
    // Debian's postgres is stripped but exports its functions (extensions link against
    // them): most of its samples are named.
    let (share, named) = module_shares(&d, "/postgres");
    eprintln!("{share:.3} of samples in postgres, {named:.3} of them named");
    assert!(share >= 0.3, "only {share:.3} of samples in postgres");
    assert!(named >= 0.6, "only {named:.3} of postgres's samples named");
    // The backends' row-lock waits, as the wall-clock view saw them: asleep in ProcSleep (a
    // heavyweight lock) on average as many as pg_stat_activity counted in Lock:* waits, within
    // a wide margin (PostgreSQL's wait event also covers the wait for a CPU after the wake-up,
    // which the view counts as runnable; the snapshots are a few dozen of a bursty series).
    let pg_in_locks = in_lock_waits.iter().sum::<f64>() / in_lock_waits.len() as f64;
    let ours = asleep_in_row_locks(&d, 6.0);
    eprintln!(
        "backends in heavyweight lock waits: pg_stat_activity {pg_in_locks:.1} on average of {} \
         snapshots, diagnose {ours:.1}",
        in_lock_waits.len()
    );
    if pg_in_locks >= 2.0 {
        let f = common::finding(&d, "lock_wait");
        assert!(
            f["title"].as_str().unwrap().contains("heavyweight lock"),
            "{f:#}"
        );
        assert!(
            ours >= pg_in_locks / 3.0 && ours <= pg_in_locks * 3.0,
            "diagnose {ours:.1} against pg_stat_activity {pg_in_locks:.1}"
        );
    }
    // PostgreSQL's spinlock is named with its callers and PostgreSQL's advice whenever it
    // takes a share a finding needs; on a machine with few CPUs the hot row's waiters sleep
    // on the row's heavyweight lock instead, and the spin may not show at all.
    let spin_share = leaf_share(&d, &["s_lock", "perform_spin_delay"]);
    let spin_finding = d["findings"].as_array().unwrap().iter().find(|f| {
        f["id"] == "runtime_lock_spin" && f["title"].as_str().unwrap().contains("PostgreSQL")
            || f["id"] == "pause_spin" && f["evidence"].to_string().contains("PostgreSQL")
    });
    eprintln!(
        "PostgreSQL spinlock: {spin_share:.4} of samples; finding: {}",
        spin_finding.is_some()
    );
    if spin_share >= 0.05 {
        let f = spin_finding.unwrap_or_else(|| panic!("no spinlock finding: {:#}", d["findings"]));
        assert!(f["advice"].as_str().unwrap().contains("PgBouncer"), "{f:#}");
        assert!(f["evidence"].to_string().contains("called from"), "{f:#}");
    } else {
        assert!(spin_finding.is_none(), "{:#}", d["findings"]);
    }
}

/// A process started by a test, killed when the test ends however it ends.
struct KillOnDrop(Child);

impl Drop for KillOnDrop {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

#[test]
fn postgresql_attached_by_the_postmasters_pid_is_followed_into_backends_that_ran_before() {
    // Issue 28: `diagnose --pid` of the postmaster while pgbench loaded it said "0 samples ...
    // No findings": the backends, forked for each client before diagnose attached, got no
    // events. The clients connect first; then diagnose attaches to the postmaster alone.
    let _serial = common::serial();
    let Some(bin) = postgresql_bin() else {
        missing("PostgreSQL's server (/usr/lib/postgresql/N/bin/postgres)");
        return;
    };
    if !on_path("pgbench") || !on_path("pg_isready") {
        missing("pgbench and pg_isready (postgresql-client)");
        return;
    }
    let cluster = Cluster::init(bin);
    let args = cluster.server_args();
    let _server = KillOnDrop(
        Command::new(&args[0])
            .args(&args[1..])
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .unwrap(),
    );
    cluster.wait_ready();
    // The postmaster's PID is the first line of postmaster.pid (runuser may stand between).
    let postmaster: u32 = std::fs::read_to_string(cluster.data().join("postmaster.pid"))
        .unwrap()
        .lines()
        .next()
        .unwrap()
        .parse()
        .unwrap();
    let ok = cluster
        .client("pgbench")
        .args(["-i", "-s", "1", "-q", "postgres"])
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .status()
        .unwrap()
        .success();
    assert!(ok, "pgbench -i failed");
    // Select-only clients: CPU in the backends. They connect at pgbench's start.
    let clients = 8;
    let bench = KillOnDrop(
        cluster
            .client("pgbench")
            .args(["-n", "-S", "-c", &clients.to_string(), "-j", "2", "-T", "8"])
            .arg("postgres")
            .stdout(Stdio::null())
            .spawn()
            .unwrap(),
    );
    let children = |pid: u32| -> Vec<u32> {
        std::fs::read_to_string(format!("/proc/{pid}/task/{pid}/children"))
            .unwrap_or_default()
            .split_whitespace()
            .filter_map(|p| p.parse().ok())
            .collect()
    };
    // A client's backend calls itself `postgres: USER DATABASE [local] ...`.
    let backends = || {
        children(postmaster)
            .into_iter()
            .filter(|c| {
                std::fs::read_to_string(format!("/proc/{c}/cmdline"))
                    .is_ok_and(|l| l.starts_with("postgres: postgres postgres [local]"))
            })
            .count()
    };
    let deadline = Instant::now() + Duration::from_secs(30);
    while backends() < clients && Instant::now() < deadline {
        std::thread::sleep(Duration::from_millis(50));
    }
    let at_attach = children(postmaster).len() + 1;
    assert!(backends() >= clients, "the clients' backends did not start");
    let out = Command::new(env!("CARGO_BIN_EXE_cpudoctor"))
        .args(["diagnose", "--json", "--duration", "2", "--pid"])
        .arg(postmaster.to_string())
        .output()
        .unwrap();
    drop(bench);
    assert!(
        out.status.success(),
        "diagnose failed: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    let d: Value = serde_json::from_slice(&out.stdout).expect("one JSON document");
    let postgres = common::entry(&d["target"]["followed"], "command", "postgres");
    eprintln!(
        "{} samples; followed: {}",
        d["sampling"]["samples"], d["target"]["followed"]
    );
    // Every process that ran at the attach, backends included, was followed.
    assert!(
        postgres["at_attach"].as_u64().unwrap() >= at_attach as u64,
        "{postgres:#}"
    );
    // The samples are the backends' (the postmaster itself only accepts connections).
    let sampled_backends = d["threads"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|t| t["pid"].as_u64() != Some(u64::from(postmaster)))
        .filter(|t| t["samples"].as_u64().unwrap_or(0) > 0)
        .count();
    assert!(
        sampled_backends >= clients / 2,
        "only {sampled_backends} backends sampled: {:#}",
        d["threads"]
    );
    let (share, _) = module_shares(&d, "/postgres");
    assert!(share >= 0.3, "only {share:.3} of samples in postgres");
}

#[test]
fn stress_ng_lockbus_is_a_locked_hotspot_found_at_its_lock_instruction() {
    let _serial = common::serial();
    if !on_path("stress-ng") {
        missing("stress-ng");
        return;
    }
    // Short: bus locks slow every core of the host.
    let out = Command::new(env!("CARGO_BIN_EXE_cpudoctor"))
        .args([
            "diagnose",
            "--json",
            "--",
            "stress-ng",
            "--lockbus",
            "1",
            "-t",
            "2",
        ])
        .stderr(Stdio::null())
        .output()
        .unwrap();
    assert!(out.status.success(), "diagnose failed");
    let d: Value = serde_json::from_slice(&out.stdout).expect("one JSON document");
    let f = d["findings"]
        .as_array()
        .unwrap()
        .iter()
        .find(|f| {
            (f["id"] == "split_lock" || f["id"] == "locked_rmw")
                && f["module"]
                    .as_str()
                    .is_some_and(|m| m.ends_with("stress-ng"))
        })
        .unwrap_or_else(|| {
            panic!(
                "no locked finding in stress-ng: {:#}\nnotes: {:#}",
                d["findings"], d["notes"]
            )
        });
    // Found at the instruction: the disassembly marks a lock-prefixed one in stress-ng's
    // function (named, or grouped by its bounds as stress-ng@0x...).
    let marked: Vec<&str> = f["disassembly"]
        .as_array()
        .unwrap()
        .iter()
        .filter_map(|l| l.as_str())
        .filter(|l| l.trim_start().starts_with("=>"))
        .collect();
    assert!(
        marked.iter().any(|l| l.contains("lock ")),
        "no lock instruction marked: {f:#}"
    );
    assert!(
        !f["symbol"].as_str().unwrap().contains("+0x"),
        "stress-ng's function not named nor grouped: {f:#}"
    );
}

// MariaDB: Debian's mariadbd under sysbench on a hot row, where InnoDB's lock waits spin on
// PAUSE in functions the stripped binary does not name.

/// Where `tool` is: on the PATH, else in /usr/sbin (mariadbd, off a user's PATH).
fn program(tool: &str) -> PathBuf {
    std::env::var_os("PATH")
        .and_then(|p| {
            std::env::split_paths(&p)
                .map(|d| d.join(tool))
                .find(|f| f.is_file())
        })
        .unwrap_or_else(|| Path::new("/usr/sbin").join(tool))
}

/// A private MariaDB server in a temporary directory: its data, its unix socket (no TCP), its
/// log. Dropping it stops the server (even when the test fails) and removes the directory.
struct Maria {
    dir: tempfile::TempDir,
    server: Option<Child>,
}

impl Maria {
    /// Installs a data directory and starts `mariadbd` on it, as user mysql when root (the
    /// server refuses to run as root).
    fn start() -> Maria {
        let root = unsafe { libc::geteuid() } == 0;
        let user = root.then_some("mysql");
        let dir = common::server_dir(user);
        let data = dir.path().join("data");
        let mut install = Command::new("mariadb-install-db");
        install
            .arg("--no-defaults")
            .arg(format!("--datadir={}", data.display()))
            .args(["--auth-root-authentication-method=normal", "--skip-test-db"]);
        if let Some(u) = user {
            install.arg(format!("--user={u}"));
        }
        let out = install.output().unwrap();
        assert!(
            out.status.success(),
            "mariadb-install-db failed: {}",
            String::from_utf8_lossy(&out.stderr)
        );
        let mut server = Command::new(program("mariadbd"));
        server
            .arg("--no-defaults")
            .arg(format!("--datadir={}", data.display()))
            .arg(format!("--socket={}", dir.path().join("sock").display()))
            .arg(format!(
                "--log-error={}",
                dir.path().join("err.log").display()
            ))
            .arg(format!("--pid-file={}", dir.path().join("pid").display()))
            .args([
                "--skip-networking",
                "--skip-log-bin",
                "--innodb-buffer-pool-size=64M",
                "--innodb-flush-log-at-trx-commit=0",
            ]);
        if let Some(u) = user {
            server.arg(format!("--user={u}"));
        }
        let m = Maria {
            server: Some(
                server
                    .stdout(Stdio::null())
                    .stderr(Stdio::null())
                    .spawn()
                    .unwrap(),
            ),
            dir,
        };
        let deadline = Instant::now() + Duration::from_secs(60);
        while m.try_sql("SELECT 1").is_none() {
            assert!(
                Instant::now() < deadline,
                "mariadbd did not start: {}",
                std::fs::read_to_string(m.dir.path().join("err.log")).unwrap_or_default()
            );
            std::thread::sleep(Duration::from_millis(200));
        }
        m
    }

    fn pid(&self) -> u32 {
        self.server.as_ref().unwrap().id()
    }

    fn socket(&self) -> String {
        self.dir.path().join("sock").display().to_string()
    }

    /// The result of `query`, tab-separated, without column names; `None` when it fails.
    fn try_sql(&self, query: &str) -> Option<String> {
        let out = Command::new("mariadb")
            .args(["--no-defaults", "-uroot", "-N", "-B", "-S"])
            .arg(self.socket())
            .args(["-e", query])
            .stderr(Stdio::null())
            .output()
            .ok()?;
        out.status
            .success()
            .then(|| String::from_utf8_lossy(&out.stdout).trim().to_string())
    }

    fn sql(&self, query: &str) -> String {
        self.try_sql(query)
            .unwrap_or_else(|| panic!("`{query}` failed"))
    }

    /// `sysbench oltp_update_index` on a 10-row table: every thread updates the same few rows.
    fn sysbench(&self, phase: &str, threads: u32, seconds: u32) -> Command {
        let mut c = Command::new("sysbench");
        c.args([
            "oltp_update_index",
            "--db-driver=mysql",
            "--mysql-user=root",
        ])
        .arg(format!("--mysql-socket={}", self.socket()))
        .args(["--tables=1", "--table-size=10"])
        .arg(format!("--threads={threads}"))
        .arg(format!("--time={seconds}"))
        .arg(phase);
        c
    }
}

impl Drop for Maria {
    fn drop(&mut self) {
        if let Some(mut c) = self.server.take() {
            unsafe { libc::kill(c.id() as i32, libc::SIGTERM) };
            let deadline = Instant::now() + Duration::from_secs(20);
            while c.try_wait().ok().flatten().is_none() && Instant::now() < deadline {
                std::thread::sleep(Duration::from_millis(100));
            }
            let _ = c.kill();
            let _ = c.wait();
        }
    }
}

/// sysbench's hot-row load for `seconds`, with `cpudoctor diagnose --pid` attached for the
/// middle of it, saving the diagnosis to `save`; returns the transactions per second.
fn diagnose_mariadb_under_load(m: &Maria, save: &Path, seconds: u32) -> f64 {
    let bench = KillOnDrop(
        m.sysbench("run", 32, seconds)
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .unwrap(),
    );
    std::thread::sleep(Duration::from_secs(2));
    common::output_ok(
        Command::new(env!("CARGO_BIN_EXE_cpudoctor"))
            .args(["diagnose", "--pid", &m.pid().to_string(), "--duration"])
            .arg((seconds - 4).to_string())
            .arg("--save")
            .arg(save)
            .stdout(Stdio::null()),
    );
    let mut bench = bench;
    let mut text = String::new();
    use std::io::Read;
    bench
        .0
        .stdout
        .take()
        .unwrap()
        .read_to_string(&mut text)
        .unwrap();
    assert!(bench.0.wait().unwrap().success(), "sysbench failed: {text}");
    // `transactions:  131435 (8210.11 per sec.)`
    text.lines()
        .find(|l| l.trim_start().starts_with("transactions:"))
        .and_then(|l| l.split('(').nth(1)?.split_whitespace().next()?.parse().ok())
        .unwrap_or(0.0)
}

/// InnoDB's spin finding of a diagnosis, when there is one.
fn innodb_finding(d: &Value) -> Option<&Value> {
    d["findings"]
        .as_array()
        .unwrap()
        .iter()
        .find(|f| f["id"] == "innodb_spin")
}

/// A knob's value as diagnose read it, from the InnoDB sites of a diagnosis.
fn knob_read(d: &Value, knob: &str) -> Option<(u64, String)> {
    d["hot_sites"].as_array()?.iter().find_map(|s| {
        s["innodb"]["knobs"].as_array()?.iter().find_map(|k| {
            (k["knob"] == knob).then(|| {
                (
                    k["value"].as_u64().unwrap(),
                    k["from"].as_str().unwrap().to_string(),
                )
            })
        })
    })
}

#[test]
fn the_mariadb_innodb_spin_case_is_named_with_its_knob_and_the_diff_shows_it_gone_at_zero() {
    // Issue 30: Debian's stripped mariadbd under sysbench on a hot row spends a third or more
    // of its samples in PAUSE loops of three unnamed functions: InnoDB's lock waits, sized by
    // innodb_spin_wait_delay. diagnose names them InnoDB's from their code, names the knob
    // with the value the server runs with, and with the knob at 0 the diff shows the spin gone.
    let _serial = common::serial();
    for tool in ["mariadbd", "mariadb-install-db", "mariadb", "sysbench"] {
        if !program(tool).is_file() {
            common::missing_tool(tool, "apt-get install mariadb-server sysbench");
            return;
        }
    }
    let m = Maria::start();
    m.sql("CREATE DATABASE sbtest");
    let ok = m
        .sysbench("prepare", 1, 1)
        .stdout(Stdio::null())
        .status()
        .unwrap()
        .success();
    assert!(ok, "sysbench prepare failed");
    // A round count set at run time, neither the default (30) nor on the command line: what
    // diagnose reads is the process's memory now.
    m.sql("SET GLOBAL innodb_sync_spin_loops = 20");
    let reported = m.sql("SELECT @@innodb_spin_wait_delay, @@innodb_sync_spin_loops");
    let (delay, loops) = reported.split_once('\t').unwrap();
    let (delay, loops): (u64, u64) = (delay.parse().unwrap(), loops.parse().unwrap());
    let dir = tempfile::tempdir().unwrap();
    let (old, new) = (dir.path().join("old.json"), dir.path().join("new.json"));
    let tps_old = diagnose_mariadb_under_load(&m, &old, 9);
    let d_old: Value = serde_json::from_slice(&std::fs::read(&old).unwrap()).unwrap();
    let f = innodb_finding(&d_old).unwrap_or_else(|| {
        common::finding(&d_old, "innodb_spin");
        unreachable!()
    });
    let old_share = f["sample_share"].as_f64().unwrap();
    eprintln!(
        "delay {delay}: {tps_old:.0} TPS, InnoDB spin {old_share:.3} of samples; {}",
        f["title"]
    );
    assert_eq!(f["runtime"], "innodb", "{f:#}");
    assert!(f["title"].as_str().unwrap().contains("InnoDB"), "{f:#}");
    let advice = f["advice"].as_str().unwrap();
    assert!(
        advice.contains(&format!("innodb_spin_wait_delay (now {delay})")),
        "the server reports {delay}: {advice}"
    );
    assert!(
        !f["explanation"].as_str().unwrap().contains(".NET"),
        "{f:#}"
    );
    // What diagnose read is what the server reports (read from its memory as root; without
    // ptrace permission, the defaults).
    if unsafe { libc::geteuid() } == 0 {
        assert_eq!(
            knob_read(&d_old, "innodb_spin_wait_delay"),
            Some((delay, "process_memory".to_string()))
        );
        assert_eq!(
            knob_read(&d_old, "innodb_sync_spin_loops"),
            Some((loops, "process_memory".to_string()))
        );
    }
    m.sql("SET GLOBAL innodb_spin_wait_delay = 0");
    let tps_new = diagnose_mariadb_under_load(&m, &new, 9);
    let d_new: Value = serde_json::from_slice(&std::fs::read(&new).unwrap()).unwrap();
    let diff = common::json_of(
        common::cpudoctor()
            .args(["diff", "--json"])
            .arg(&old)
            .arg(&new),
    );
    // The diff pairs InnoDB's finding by its runtime, or lists it in the old run only.
    let findings = &diff["findings"];
    let paired = findings["both"]
        .as_array()
        .unwrap()
        .iter()
        .find(|p| p["old"]["id"] == "innodb_spin");
    let in_old_only = findings["only_old"]
        .as_array()
        .unwrap()
        .iter()
        .any(|f| f["id"] == "innodb_spin");
    let new_share = paired.map_or(0.0, |p| p["new"]["sample_share"].as_f64().unwrap());
    eprintln!(
        "delay 0: {tps_new:.0} TPS, InnoDB spin {new_share:.3} of samples (finding in new: {})",
        innodb_finding(&d_new).is_some()
    );
    assert!(paired.is_some() || in_old_only, "{findings:#}");
    // Why it is faster (issue 42): the spin's change is the setting's, predicted on both sides
    // (the new side's lock spin is gone, its back-off still carries the server's delay: 0).
    let spins: Vec<&Value> = diff["why"]["functions"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|f| f["mechanism"] == "spin_setting")
        .collect();
    for f in &spins {
        eprintln!(
            "why: {} {} predicted {} observed {} ({})",
            f["name"], f["mechanism"], f["predicted_ratio"], f["observed_ratio"], f["reason"]
        );
    }
    assert!(
        !spins.is_empty() && spins.iter().all(|f| f["predicted_ratio"].is_number()),
        "the lock spins with delay {delay} -> 0 are not all predicted: {:#}",
        diff["why"]["functions"]
    );
    assert!(old_share >= 0.10, "InnoDB spin only {old_share:.3}");
    assert!(
        new_share * 3.0 < old_share,
        "InnoDB spin {old_share:.3} at delay {delay}, {new_share:.3} at 0"
    );
}

/// Issue 42: the lock spin's settings are read once per binary, from its code, so a process
/// whose lock spin is too cold to be sampled (delay 0: the spin gone, only the back-off hot)
/// still has them. Debian's mariadbd exports only the multiplier; its three srw_lock waits all
/// read one delay (`srv_spin_wait_delay`, a 4-byte uint) and one round count
/// (`srv_n_spin_wait_rounds`, an 8-byte ulong), zero-initialised globals the server sets at
/// start-up (10.11.19: 0x2170b78 and 0x2170b80, as the hot spin's own code reads them).
#[test]
fn the_mariadb_binary_shows_its_lock_spin_settings_without_a_hot_spin() {
    use cpudoctor::diagnose::analyse::innodb::{Globals, Knob};
    use object::{Object, ObjectSection, SectionKind};
    let bin = program("mariadbd");
    if !bin.is_file() {
        common::missing_tool("mariadbd", "apt-get install mariadb-server");
        return;
    }
    let image = std::fs::read(&bin).unwrap();
    let started = std::time::Instant::now();
    let g = Globals::from_elf(&image).expect("mariadbd holds InnoDB's globals");
    eprintln!(
        "mariadbd scanned in {:.2} s: {:?}",
        started.elapsed().as_secs_f64(),
        g.scanned
    );
    let (delay, rounds) = (
        g.scanned[&Knob::SpinWaitDelay],
        g.scanned[&Knob::SyncSpinLoops],
    );
    assert_ne!(delay.address, rounds.address);
    assert_eq!((delay.size, rounds.size), (4, 8));
    let file = object::File::parse(&*image).unwrap();
    for v in [delay, rounds] {
        let s = file
            .sections()
            .find(|s| (s.address()..s.address() + s.size()).contains(&v.address))
            .unwrap_or_else(|| panic!("{v:?} is in no section"));
        assert!(
            matches!(s.kind(), SectionKind::UninitializedData | SectionKind::Data),
            "{v:?} is in {:?} ({:?})",
            s.name(),
            s.kind()
        );
    }
}
