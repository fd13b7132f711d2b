#!/usr/bin/env bash
# Compares cpudoctor's pause_ns with an independent C PAUSE loop (gcc, clock_gettime) on the
# same CPU in one run, alternating the two, and prints the ratio. Target: within 5%.
# Usage: bench/pause.sh [CPU]   (default CPU 0)
set -euo pipefail
cd "$(dirname "$0")/.."
cpu="${1:-0}"
rounds=5
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT

cargo build --release --quiet
gcc -O2 -o "$work/pause_ref" bench/pause_ref.c

ours=() ref=()
for i in $(seq "$rounds"); do
  ref+=("$(taskset -c "$cpu" "$work/pause_ref" 1000000 21)")
  ours+=("$(./target/release/cpudoctor probe pause --cpus "$cpu" --repetitions 61 --json 2>/dev/null |
    python3 -c 'import json,sys; d=json.load(sys.stdin); print(next(m["value"] for m in d["probes"][0]["metrics"] if m["name"]=="pause_ns"))')")
done

python3 - "$cpu" "${ours[*]}" "${ref[*]}" <<'PY'
import statistics, sys
cpu, ours, ref = sys.argv[1], [float(x) for x in sys.argv[2].split()], [float(x) for x in sys.argv[3].split()]
o, r = statistics.median(ours), statistics.median(ref)
ratio = o / r
print(f"CPU {cpu}, {len(ours)} alternating rounds")
print(f"  cpudoctor pause_ns       {o:8.3f} ns   (rounds: {', '.join(f'{x:.2f}' for x in ours)})")
print(f"  C reference (gcc, mono)  {r:8.3f} ns   (rounds: {', '.join(f'{x:.2f}' for x in ref)})")
print(f"  ratio cpudoctor/reference {ratio:.3f}  target 0.95..1.05: {'PASS' if 0.95 <= ratio <= 1.05 else 'FAIL'}")
sys.exit(0 if 0.95 <= ratio <= 1.05 else 1)
PY
