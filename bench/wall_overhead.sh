#!/usr/bin/env bash
# What `cpudoctor diagnose` costs a database server that switches tens of thousands of times a
# second, in the server's own figure: its throughput. PostgreSQL under `pgbench -S` (select-only,
# 32 clients) or MariaDB under `sysbench oltp_point_select` (32 threads), each round running the
# same load four ways, interleaved: alone; with diagnose attached to the server's parent (--pid,
# which follows every backend or thread) with the wall-clock view (the default); with
# --no-wall (on-CPU sampling only); and with the independent reference, `perf record -e
# sched:sched_switch -g` on the same process (needs tracefs: this script mounts it when it can).
# The machine's context-switch rate (/proc/stat ctxt) is measured during the runs alone.
# Prints each side's median throughput with its range, and the median of the paired ratios
# (each attached run against the alone run of its round) with their range. Goal: under 3% with
# the wall-clock view at 50k switches a second or more.
# Needs root (it starts the servers as their users), and Debian's postgresql + pgbench, or
# mariadb-server + sysbench.
# Usage: bench/wall_overhead.sh postgres|mariadb [ROUNDS] [SECONDS]   (default 5 rounds of 5 s)
set -euo pipefail
cd "$(dirname "$0")/.."
server="${1:-postgres}"
rounds="${2:-5}"
secs="${3:-5}"
clients="${CLIENTS:-32}"
work=$(mktemp -d)
chmod 755 "$work"
stop_server() { :; }
trap 'stop_server; rm -rf "$work"' EXIT
cargo build --release --quiet
diag="$PWD/target/release/cpudoctor"
[ -d /sys/kernel/tracing/events ] || mount -t tracefs nodev /sys/kernel/tracing 2>/dev/null || true

case "$server" in
postgres)
  . bench/postgres.sh
  start_postgres 25499 10 -c max_connections=100
  load() {
    runuser -u postgres -- pgbench -h "$work" -p 25499 -n -S -c $clients -j 2 -T "$secs" postgres 2>/dev/null |
      awk '/^tps/ {print $3}'
  }
  ;;
mariadb)
  # The server runs as mysql: its socket and PID file go in a directory of its own.
  mkdir -p "$work/db" "$work/run" && chown mysql "$work/db" "$work/run"
  mariadb-install-db --user=mysql --datadir="$work/db" --auth-root-authentication-method=normal >/dev/null 2>&1
  mariadbd --user=mysql --datadir="$work/db" --socket="$work/run/sock" --skip-networking \
    --innodb-buffer-pool-size=256M --pid-file="$work/run/pid" >"$work/log" 2>&1 &
  stop_server() { kill "$(cat "$work/run/pid" 2>/dev/null)" 2>/dev/null || true; }
  for _ in $(seq 100); do [ -S "$work/run/sock" ] && break; sleep 0.2; done
  [ -S "$work/run/sock" ] || { echo "mariadbd did not start:" >&2; tail -5 "$work/log" >&2; exit 1; }
  mariadb --socket="$work/run/sock" -uroot -e "CREATE DATABASE sbtest" 2>/dev/null || true
  sb() { sysbench oltp_point_select --mysql-socket="$work/run/sock" --mysql-user=root \
    --tables=1 --table-size=10000 "$@"; }
  sb prepare >/dev/null 2>&1
  parent=$(cat "$work/run/pid")
  load() { sb --threads=$clients --time="$secs" run 2>/dev/null | awk '/transactions:/ {gsub(/\(/,"",$3); print $3}'; }
  ;;
*) echo "usage: $0 postgres|mariadb [ROUNDS] [SECONDS]" >&2; exit 2 ;;
esac

attached() { # diagnose or perf attached to the server's parent for the length of one load
  "$@" >/dev/null 2>&1 &
  local pid=$!
  sleep 1
  local tps
  tps=$(load)
  wait "$pid" 2>/dev/null || true
  echo "$tps"
}
wall() { attached "$diag" diagnose --pid "$parent" --duration $((secs + 2)) --save "$work/d.json"; }
nowall() { attached "$diag" diagnose --no-wall --pid "$parent" --duration $((secs + 2)); }
perf_sched() {
  if command -v perf >/dev/null && [ -d /sys/kernel/tracing/events/sched/sched_switch ]; then
    attached perf record -q -e sched:sched_switch -g -p "$parent" -o "$work/perf.data" -- sleep $((secs + 2))
  else
    echo ""
  fi
}
echo "server: $server, $clients clients, $rounds rounds of $secs s; machine: $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2 | xargs), $(nproc) CPUs; load $(cut -d' ' -f1-3 /proc/loadavg)"
load >/dev/null # warm-up
a=() w=() n=() p=() cs=()
for r in $(seq "$rounds"); do
  c0=$(awk '/^ctxt/ {print $2}' /proc/stat); t0=$(date +%s.%N)
  a+=("$(load)")
  c1=$(awk '/^ctxt/ {print $2}' /proc/stat); t1=$(date +%s.%N)
  cs+=("$(python3 -c "print(round(($c1 - $c0) / ($t1 - $t0)))")")
  w+=("$(wall)")
  n+=("$(nowall)")
  p+=("$(perf_sched)")
  echo "round $r: alone ${a[-1]}, diagnose ${w[-1]}, diagnose --no-wall ${n[-1]}, perf sched_switch -g ${p[-1]:-n/a} ($(printf '%s' "${cs[-1]}") switches/s alone)"
done
python3 - "${a[*]}" "${w[*]}" "${n[*]}" "${p[*]}" "${cs[*]}" <<'EOF'
import statistics as st, sys
a, w, n, p, cs = ([float(x) for x in s.split()] for s in sys.argv[1:6])
print(f"context switches per second, alone: median {st.median(cs):,.0f} (range {min(cs):,.0f}-{max(cs):,.0f})")
print(f"throughput alone: median {st.median(a):,.0f} (range {min(a):,.0f}-{max(a):,.0f})")
for name, side in (("diagnose (wall-clock view)", w), ("diagnose --no-wall", n), ("perf record -e sched:sched_switch -g", p)):
    if not side:
        print(f"{name}: not run"); continue
    ratios = sorted(x / y for x, y in zip(side, a))
    print(f"{name}: median {st.median(side):,.0f}; paired ratio to alone median {st.median(ratios):.3f} "
          f"(range {ratios[0]:.3f}-{ratios[-1]:.3f}): {100 * (1 - st.median(ratios)):+.1f}% throughput lost")
EOF
