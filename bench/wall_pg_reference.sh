#!/usr/bin/env bash
# Accuracy of `cpudoctor diagnose`'s lock waits on a real server, against the kernel's own view
# in the same run. PostgreSQL under `pgbench -c 32` with every client updating one row (the hot
# row): the backends sleep in ProcSleep (a heavyweight lock, `Lock:tuple` /
# `Lock:transactionid`). While the load runs, diagnose attaches to the postmaster (--pid,
# following every backend) and `perf record -a -e sched:sched_switch -g` records every context
# switch with its stack, for the same seconds; pg_stat_activity is sampled meanwhile.
# The reference: each backend's time off the CPU from a switch-out whose stack holds ProcSleep
# to its next switch-in (the sleep and the wait for a CPU after the wake-up, which the switch
# records cannot tell apart), as backends asleep on the lock on average. diagnose's figure: its
# blocked time in stacks holding ProcSleep (the sleep alone), and the backends' waits for a CPU
# after wake-ups (schedstat), so that diagnose's sleep <= the reference <= its sleep plus those
# waits (with the default counts, which do not tell those waits apart, diagnose's sleep <= the
# reference only; ARGS=--switches for the switch records). Prints the three figures and the
# ratio diagnose / reference.
# Needs root, perf, tracefs, Debian's postgresql + pgbench, python3.
# Usage: [ARGS=--switches] bench/wall_pg_reference.sh [SECONDS] [ROUNDS]   (default 8 s, 3 rounds)
set -euo pipefail
cd "$(dirname "$0")/.."
secs="${1:-8}"
rounds="${2:-3}"
work=$(mktemp -d)
stop_server() { :; }
trap 'stop_server; rm -rf "$work"' EXIT
cargo build --release --quiet
diag="$PWD/target/release/cpudoctor"
[ -d /sys/kernel/tracing/events ] || mount -t tracefs nodev /sys/kernel/tracing 2>/dev/null || true
command -v perf >/dev/null || { echo "needs perf (apt-get install linux-perf)" >&2; exit 1; }
. bench/postgres.sh
start_postgres 25498 1 -c synchronous_commit=off
echo "UPDATE pgbench_branches SET bbalance = bbalance + 1 WHERE bid = 1;" >"$work/hot.sql"
echo "machine: $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2 | xargs), $(nproc) CPUs; load $(cut -d' ' -f1-3 /proc/loadavg)"

for round in $(seq "$rounds"); do
  runuser -u postgres -- pgbench -h "$work" -p 25498 -n -c 32 -j 2 -T $((secs + 4)) \
    -f "$work/hot.sql" postgres >"$work/bench.txt" 2>&1 &
  bench=$!
  sleep 1.5 # the clients connected, their backends forked
  # shellcheck disable=SC2086
  "$diag" diagnose --pid "$parent" --duration "$secs" --save "$work/d.json" ${ARGS:-} >/dev/null 2>&1 &
  d=$!
  perf record -q -a -e sched:sched_switch -g -o "$work/sw.data" -- sleep "$secs" >/dev/null 2>&1 &
  p=$!
  : >"$work/psa.txt"
  while kill -0 "$p" 2>/dev/null; do
    runuser -u postgres -- psql -h "$work" -p 25498 -At -d postgres -c \
      "SELECT count(*) FILTER (WHERE wait_event_type = 'Lock') FROM pg_stat_activity
       WHERE backend_type = 'client backend'" >>"$work/psa.txt" 2>/dev/null || true
    sleep 0.2
  done
  wait "$d" "$p" || true
  wait "$bench" || true
  perf script -i "$work/sw.data" -F tid,time,trace,ip,sym 2>/dev/null >"$work/sw.txt"
  echo "== round $round: $(grep -m1 '^tps' "$work/bench.txt" | cut -d' ' -f1-3)"
  python3 - "$work/sw.txt" "$work/d.json" "$work/psa.txt" <<'PY'
import json, re, sys
sw, dj, psa = sys.argv[1:4]
# The reference: off-CPU intervals of client backends (PostgresMain in the stack), by whether
# the stack they left the CPU in holds ProcSleep.
head = re.compile(r"\s(\d+\.\d+):\s+prev_comm=(.*?) prev_pid=(\d+) prev_prio=\d+ "
                  r"prev_state=(\S+) ==> next_comm=.*? next_pid=(\d+)")
recs, cur = [], None
for line in open(sw):
    if line.startswith("\t"):
        if cur is not None:
            cur[4].append(line.split()[-1])
        continue
    m = head.search(line)
    cur = None
    if m:
        cur = [float(m.group(1)), m.group(2), int(m.group(3)), m.group(4), [], int(m.group(5))]
        recs.append(cur)
if not recs:
    sys.exit("perf recorded no sched_switch (tracefs, permissions?)")
window = recs[-1][0] - recs[0][0]
out, lock_s = {}, 0.0
for t, comm, prev, state, stack, nxt in recs:
    if nxt in out:
        ts, in_lock = out.pop(nxt)
        lock_s += (t - ts) if in_lock else 0.0
    if comm == "postgres" and state[0] in "SD" and "PostgresMain" in stack:
        out[prev] = (t, "ProcSleep" in stack)
ref = lock_s / window
d = json.load(open(dj))
w = d["wall"]
ours_s = sum(s["ns"] for s in w["stacks"] if s.get("state") == "blocked"
             and any(f.get("function") == "ProcSleep" for f in s["frames"])) / 1e9
backends = [t for t in w["threads"] if t["command"] == "postgres"]
wake_s = sum(t.get("runnable_after_wake_up_s", 0.0) for t in backends)
ours = ours_s / w["method"]["window_s"]
wake = wake_s / w["method"]["window_s"]
snaps = [int(x) for x in open(psa).read().split()]
pg = sum(snaps) / len(snaps) if snaps else float("nan")
print(f"backends asleep on the row lock, on average over the window:")
print(f"  perf sched_switch stacks (sleep + wait for a CPU after it): {ref:6.2f}  ({window:.1f} s)")
print(f"  diagnose, asleep in ProcSleep:                              {ours:6.2f}  ({w['method']['window_s']:.1f} s)")
counted = w["method"].get("source") == "schedstat"
if counted:
    # Counts do not tell a wait after a wake-up from a preemption (--switches does): only the
    # lower bound holds.
    print(f"  diagnose, waits for a CPU after wake-ups:                   not told apart (counts)")
    wake = float("inf")
else:
    print(f"  diagnose, all backends' waits for a CPU after wake-ups:     {wake:6.2f}")
print(f"  pg_stat_activity Lock:* ({len(snaps)} snapshots):                  {pg:6.2f}")
print(f"  ratio diagnose / perf: {ours / ref if ref else float('nan'):.2f}; "
      f"diagnose <= perf <= diagnose + wake-up waits: {ours <= ref * 1.05 and ref <= (ours + wake) * 1.05}")
PY
done
