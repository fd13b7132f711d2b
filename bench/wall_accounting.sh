#!/usr/bin/env bash
# Accuracy of `cpudoctor diagnose`'s wall-clock view against the kernel's own accounting, read
# independently in the same run: tests/programs/mutex_wait.c (four threads on one mutex, each
# holding it ~2 ms) runs beside a CPU-bound neighbour pinned to one of its CPUs, so its threads
# spend time in all three states (running, waiting for a CPU, asleep on the lock). diagnose
# attaches by --pid for DURATION seconds; as it starts and as it stops, this script reads every
# thread's /proc/PID/task/TID/schedstat (time on CPU, time waiting on a run queue) and the
# clock, timed by diagnose's perf events appearing in and leaving its fd table (the two windows
# then differ by a few ms). Per thread it prints diagnose's running, runnable and blocked shares
# of its window (by default from the counts diagnose reads from the same schedstat every 100 ms,
# so this checks its windows and sums; with ARGS=--switches from context-switch records, runnable
# with schedstat's run-queue delay for the waits after wake-ups) beside schedstat's over the
# bracketing window, and their difference; and the sum of diagnose's three against its window.
# Goal: each thread's states add up to its wall time within 5%, and running and runnable agree
# with schedstat within 5% of the wall time.
# Usage: [ARGS=--switches] bench/wall_accounting.sh [DURATION] [ROUNDS]   (default 5 s, 3 rounds)
set -euo pipefail
cd "$(dirname "$0")/.."
duration="${1:-5}"
rounds="${2:-3}"
work=$(mktemp -d)
cleanup() { kill "${pids[@]}" 2>/dev/null || true; rm -rf "$work"; }
pids=()
trap cleanup EXIT

cargo build --release --quiet
cc -O2 -g -pthread -o "$work/mutex_wait" tests/programs/mutex_wait.c
cc -O2 -o "$work/cpu_bound" tests/programs/cpu_bound.c
cpu=$(python3 -c 'import os; print(sorted(os.sched_getaffinity(0))[-1])')
echo "machine: $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2 | xargs), $(nproc) CPUs; load $(cut -d' ' -f1-3 /proc/loadavg)"

for round in $(seq "$rounds"); do
  "$work/mutex_wait" $((duration * 3)) 4 >/dev/null &
  target=$!
  taskset -c "$cpu" "$work/cpu_bound" 400000000000 >/dev/null &
  neighbour=$!
  pids=("$target" "$neighbour")
  sleep 0.5
  # The reference snapshots are taken when diagnose's perf events appear in its fd table and
  # when they go, so that the two windows differ by milliseconds, not by diagnose's start-up
  # and analysis.
  python3 - "$target" "$duration" "$work" "${ARGS:-}" <<'EOF'
import json, os, subprocess, sys, time
pid, duration, work, args = sys.argv[1], sys.argv[2], sys.argv[3], sys.argv[4].split()
def snapshot():
    t = {}
    for tid in os.listdir(f"/proc/{pid}/task"):
        run, wait, _ = open(f"/proc/{pid}/task/{tid}/schedstat").read().split()
        t[tid] = [int(run), int(wait)]
    return {"clock": time.clock_gettime_ns(time.CLOCK_MONOTONIC), "threads": t}
def perf_fds(p):
    try:
        return any("perf_event" in os.readlink(f"/proc/{p}/fd/{fd}")
                   for fd in os.listdir(f"/proc/{p}/fd"))
    except OSError:
        return False
out = open(f"{work}/d.json", "w")
d = subprocess.Popen(["./target/release/cpudoctor", "diagnose", "--pid", pid, "--duration",
                      duration, "--json", *args], stdout=out, stderr=subprocess.DEVNULL)
while not perf_fds(d.pid):
    time.sleep(0.002)
before = snapshot()
while perf_fds(d.pid):
    time.sleep(0.002)
after = snapshot()
d.wait()
json.dump(before, open(f"{work}/before.json", "w"))
json.dump(after, open(f"{work}/after.json", "w"))
EOF
  kill "$target" "$neighbour" 2>/dev/null || true
  wait "$target" "$neighbour" 2>/dev/null || true
  echo "== round $round (neighbour pinned to CPU $cpu)"
  python3 - "$work/before.json" "$work/after.json" "$work/d.json" <<'EOF'
import json, sys
b, a, d = (json.load(open(p)) for p in sys.argv[1:4])
window = (a["clock"] - b["clock"]) / 1e9
wall = d["wall"]
source = wall["method"].get("source", "switch_records")
print(f"bracketing window {window:.3f} s, diagnose's {wall['method']['window_s']:.3f} s, "
      f"{wall['method']['looks']} looks; states from {source}")
print(f"{'tid':>8} {'state':>9} {'diagnose':>9} {'schedstat':>9} {'diff':>7}")
if source == "switch_records":
    moved = sum(t.get("runnable_after_wake_up_s", 0) for t in wall["threads"])
    runnable = sum(t["runnable_s"] for t in wall["threads"])
    print(f"(running: switch records alone; runnable: {runnable - moved:.3f} s from switch "
          f"records (preemptions), {moved:.3f} s after wake-ups from schedstat's run-queue delay)")
worst = 0.0
worst_sum = 0.0
for t in wall["threads"]:
    tid = str(t["tid"])
    if tid not in b["threads"] or tid not in a["threads"]:
        continue
    run = (a["threads"][tid][0] - b["threads"][tid][0]) / 1e9 / window
    delay = (a["threads"][tid][1] - b["threads"][tid][1]) / 1e9 / window
    ref = {"running": run, "runnable": delay, "blocked": max(0.0, 1 - run - delay)}
    ours = {k: t[f"{k}_s"] / t["wall_s"] for k in ref}
    total = sum(t[f"{k}_s"] for k in ref) / t["wall_s"]
    worst_sum = max(worst_sum, abs(total - 1))
    for k in ref:
        diff = ours[k] - ref[k]
        worst = max(worst, abs(diff))
        print(f"{tid:>8} {k:>9} {ours[k]:9.1%} {ref[k]:9.1%} {diff:+7.1%}")
print(f"largest difference in a state's share: {worst:.1%} of the wall time; "
      f"largest |sum of states - wall|: {worst_sum:.2%} (goal: under 5% each)")
EOF
done
