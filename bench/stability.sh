#!/usr/bin/env bash
# Same machine, same answer? Runs `cpudoctor check --runs K` RUNS times on this unchanged
# machine and prints: each hazard's level per run and the verdict flips; what `diff` reports
# between the first run and each other one (figures worse/better, verdicts changed); each
# headline figure's run-to-run coefficient of variation beside the width of the interval the
# runs reported. Then a positive control: the same check while a memory-hogging neighbour
# (stress-ng --vm, else a Python loop over 1 GiB) runs on another CPU, which `diff` must report
# as worse, and (as root) transparent huge pages switched to `never`. The independent
# reference for "unchanged" is the run-to-run spread itself.
# Usage: bench/stability.sh [RUNS] [K]   (defaults: 5 checks of --runs 3)
set -euo pipefail
cd "$(dirname "$0")/.."
runs="${1:-5}"
k="${2:-3}"
work="${STABILITY_DIR:-$(mktemp -d)}"
mkdir -p "$work"
hog_pid=""
trap '[ -n "$hog_pid" ] && kill "$hog_pid" 2>/dev/null; [ -n "${STABILITY_DIR:-}" ] || rm -rf "$work"' EXIT

cargo build --release --quiet
bin=./target/release/cpudoctor
echo "machine: $(uptime | sed 's/.*load/load/'); $runs checks of --runs $k"
for i in $(seq "$runs"); do
  "$bin" check --runs "$k" --save "$work/run$i.json" >/dev/null 2>&1
done
for i in $(seq 2 "$runs"); do
  "$bin" diff --json "$work/run1.json" "$work/run$i.json" >"$work/diff$i.json"
done

# Positive controls, real changes `diff` must report: transparent huge pages switched from
# their current mode to `never` (root only; restored after), and a neighbour that loads memory
# on the last allowed CPU.
thp=/sys/kernel/mm/transparent_hugepage/enabled
if [ -w "$thp" ]; then
  thp_was=$(sed 's/.*\[\(.*\)\].*/\1/' "$thp")
  trap '[ -n "$hog_pid" ] && kill "$hog_pid" 2>/dev/null; echo "$thp_was" >'"$thp"'; [ -n "${STABILITY_DIR:-}" ] || rm -rf "$work"' EXIT
  echo never >"$thp"
  "$bin" check --runs "$k" --save "$work/thp.json" >/dev/null 2>&1 || true
  echo "$thp_was" >"$thp"
  "$bin" diff --json "$work/run1.json" "$work/thp.json" >"$work/diff_thp.json"
fi
cpus=$(python3 -c 'import os; print(sorted(os.sched_getaffinity(0))[-1])')
if command -v stress-ng >/dev/null; then
  taskset -c "$cpus" stress-ng --vm 1 --vm-bytes 1G --vm-keep --quiet --timeout 600s &
else
  taskset -c "$cpus" python3 -c 'b=bytearray(1<<30)
while True:
    for i in range(0, len(b), 4096): b[i]=(b[i]+1)&255' &
fi
hog_pid=$!
sleep 2
"$bin" check --runs "$k" --save "$work/hog.json" >/dev/null 2>&1
kill "$hog_pid"; wait "$hog_pid" 2>/dev/null || true; hog_pid=""
"$bin" diff --json "$work/run1.json" "$work/hog.json" >"$work/diff_hog.json"

python3 - "$work" "$runs" <<'PY'
import json, statistics, sys
work, runs = sys.argv[1], int(sys.argv[2])
fps = [json.load(open(f"{work}/run{i}.json")) for i in range(1, runs + 1)]

def cell(v):
    return v["level"] + ("/" + v["borderline"] if v.get("borderline") else "")

def levels(v):
    # A borderline verdict claims every level from its level to its borderline one.
    order = ["ok", "notice", "hazard"]
    a, b = order.index(v["level"]), order.index(v.get("borderline") or v["level"])
    return set(order[min(a, b):max(a, b) + 1])

print("\nVerdicts per run (level/borderline):")
flips = contradictions = 0
for h in [v["hazard"] for v in fps[0]["verdicts"]]:
    vs = [next((v for v in fp["verdicts"] if v["hazard"] == h), None) for fp in fps]
    cells = [cell(v) if v else "-" for v in vs]
    changed = len(set(cells)) > 1
    # Two runs contradict each other when the levels they claim have none in common.
    common = set.intersection(*[levels(v) for v in vs if v]) if all(vs) else set()
    clash = not common
    flips += changed
    contradictions += clash
    mark = "  CONTRADICTS" if clash else ("  differs" if changed else "")
    print(f"  {h:20s} {' '.join(f'{c:14s}' for c in cells)}{mark}")
print(f"verdicts that read differently: {flips}; that contradict each other: {contradictions} "
      f"(of {len(fps[0]['verdicts'])} hazards)")

print("\ndiff of run 1 against each other run:")
total = 0
for i in range(2, runs + 1):
    d = json.load(open(f"{work}/diff{i}.json"))
    moved = [m["metric"] for m in d["metrics"] if m["change"] in ("worse", "better", "changed")]
    verdicts = [h["hazard"] for h in d["hazards"] if h["direction"] in ("worse", "better")]
    drift = d["counts"].get("host_drift", 0)
    total += len(moved) + len(verdicts)
    print(f"  run {i}: {d['counts']['worse']} worse, {d['counts']['better']} better, "
          f"{d['counts']['changed']} changed, {len(verdicts)} verdicts changed, "
          f"{drift} within the host's drift"
          + (f"  ({', '.join(moved[:6])}{'...' if len(moved) > 6 else ''})" if moved else ""))
print(f"changes reported on an unchanged machine: {total}")

print("\nHeadline figures: run-to-run CV against the interval each run reported (median width):")
heads = [("pause", "pause_cycles"), ("c2c", "c2c_latency_ns"), ("split-lock", "split_lock_ratio"),
         ("sharing", "false_sharing_ratio"), ("mem-latency", "dram_latency_ns"),
         ("mem-latency", "tlb_penalty_ratio"), ("bandwidth", "read_bw_1t_gbs"),
         ("bandwidth", "prefetch_read_gain_ratio")]
for probe, name in heads:
    vals, widths = [], []
    for fp in fps:
        p = next((p for p in fp["probes"] if p["name"] == probe and p["status"] == "ok"), None)
        m = next((m for m in p["metrics"] if m["name"] == name), None) if p else None
        if m:
            vals.append(m["value"])
            if m.get("interval"):
                widths.append((m["interval"]["high"] - m["interval"]["low"]) / abs(m["value"]))
    if len(vals) > 1:
        cv = statistics.pstdev(vals) / abs(statistics.mean(vals))
        w = f"{statistics.median(widths):.2f}" if widths else "none"
        print(f"  {name:28s} CV {cv:.3f}   interval width / value {w}")

import os
for name, what in [("thp", "transparent huge pages switched to never"),
                   ("hog", "a memory-hogging neighbour on another CPU")]:
    path = f"{work}/diff_{name}.json"
    if not os.path.exists(path):
        print(f"\npositive control ({what}): not run (needs root)")
        continue
    d = json.load(open(path))
    moved = [m["metric"] for m in d["metrics"] if m["change"] in ("worse", "better", "changed")]
    drift = [m["metric"] for m in d["metrics"] if m["change"] == "host_drift"]
    verdicts = [f'{h["hazard"]} ({h["direction"]})' for h in d["hazards"]
                if h["direction"] in ("worse", "better")]
    print(f"\npositive control ({what}): {len(moved)} figures moved: {', '.join(moved[:8])}; "
          f"verdicts changed: {', '.join(verdicts) or 'none'}; "
          f"within the host's drift: {len(drift)}")
    print("control " + ("CAUGHT" if moved or verdicts else "MISSED"))
PY
