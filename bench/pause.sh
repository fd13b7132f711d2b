#!/usr/bin/env bash
# Compares cpudoctor's PAUSE figures with an independent C PAUSE loop (gcc, clock_gettime) on
# the same CPU in one run, alternating the two, and prints the ratios.
#   pause_ns           vs the C loop timing runs of 4096 PAUSEs (cpudoctor's sample size):
#                      target within 5%.
#   pause_sustained_ns vs the C loop timing runs of 1,000,000 PAUSEs: what a long spin pays,
#                      pause-loop exits of a hypervisor included (no target: both are noisy
#                      on a shared host; shown so the two figures are not confused).
# Usage: bench/pause.sh [CPU]   (default CPU 0)
set -euo pipefail
cd "$(dirname "$0")/.."
cpu="${1:-0}"
rounds=5
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT

cargo build --release --quiet
gcc -O2 -o "$work/pause_ref" bench/pause_ref.c

ours=() ours_long=() ref=() ref_long=()
for i in $(seq "$rounds"); do
  ref+=("$(taskset -c "$cpu" "$work/pause_ref" 4096 61)")
  ref_long+=("$(taskset -c "$cpu" "$work/pause_ref" 1000000 5)")
  read -r short long < <(./target/release/cpudoctor probe pause --quick --cpus "$cpu" --repetitions 61 --json 2>/dev/null |
    python3 -c 'import json,sys; m={x["name"]:x["value"] for x in json.load(sys.stdin)["probes"][0]["metrics"]}; print(m["pause_ns"], m["pause_sustained_ns"])')
  ours+=("$short"); ours_long+=("$long")
done

python3 - "$cpu" "${ours[*]}" "${ref[*]}" "${ours_long[*]}" "${ref_long[*]}" <<'PY'
import statistics, sys
cpu = sys.argv[1]
ours, ref, ours_l, ref_l = ([float(x) for x in a.split()] for a in sys.argv[2:6])
fmt = lambda v: ", ".join(f"{x:.2f}" for x in v)
o, r = statistics.median(ours), statistics.median(ref)
ol, rl = statistics.median(ours_l), statistics.median(ref_l)
ratio = o / r
ok = 0.95 <= ratio <= 1.05
print(f"CPU {cpu}, {len(ours)} alternating rounds")
print(f"  cpudoctor pause_ns             {o:8.3f} ns   ({fmt(ours)})")
print(f"  C loop, 4096 PAUSEs a run      {r:8.3f} ns   ({fmt(ref)})")
print(f"  ratio {ratio:.3f}  target 0.95..1.05: {'PASS' if ok else 'FAIL'}")
print(f"  cpudoctor pause_sustained_ns   {ol:8.3f} ns   ({fmt(ours_l)})")
print(f"  C loop, 1,000,000 PAUSEs a run {rl:8.3f} ns   ({fmt(ref_l)})")
print(f"  ratio {ol / rl:.3f}  (long spins; informational)")
sys.exit(0 if ok else 1)
PY
