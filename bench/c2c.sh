#!/usr/bin/env bash
# Compares cpudoctor's c2c_latency_ns with an independent plain C CAS ping-pong (gcc, pthreads,
# clock_gettime) on the same CPU pair in one run, alternating the two, and prints the ratio.
# Target: within 10%. Usage: bench/c2c.sh [CPU_A CPU_B]   (default 0 1)
# On a VM the hypervisor may move vCPUs between physical cores during the run (on the Zen 4
# guest the same pair reads ~26 ns or ~105 ns depending on placement); the per-round ratios
# show whether that happened.
set -euo pipefail
cd "$(dirname "$0")/.."
a="${1:-0}" b="${2:-1}"
rounds=7
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT

cargo build --release --quiet
gcc -O2 -pthread -o "$work/c2c_ref" bench/c2c_ref.c

ours=() ref=()
for i in $(seq "$rounds"); do
  ref+=("$("$work/c2c_ref" "$a" "$b" 4000 31)")
  ours+=("$(./target/release/cpudoctor probe c2c --cpus "$a,$b" --repetitions 31 --json 2>/dev/null |
    python3 -c 'import json,sys; d=json.load(sys.stdin); print(next(m["value"] for m in d["probes"][0]["metrics"] if m["name"]=="c2c_latency_ns"))')")
done

python3 - "$a" "$b" "${ours[*]}" "${ref[*]}" <<'PY'
import statistics, sys
a, b = sys.argv[1], sys.argv[2]
ours = [float(x) for x in sys.argv[3].split()]
ref = [float(x) for x in sys.argv[4].split()]
o, r = statistics.median(ours), statistics.median(ref)
ratio = o / r
print(f"CPU pair {a}-{b}, {len(ours)} alternating rounds")
print(f"  cpudoctor c2c_latency_ns   {o:8.2f} ns   (rounds: {', '.join(f'{x:.1f}' for x in ours)})")
print(f"  C reference (gcc, CAS)     {r:8.2f} ns   (rounds: {', '.join(f'{x:.1f}' for x in ref)})")
print(f"  per-round ratios           {', '.join(f'{x / y:.3f}' for x, y in zip(ours, ref))}")
ok = 0.9 <= ratio <= 1.1
print(f"  ratio cpudoctor/reference  {ratio:.3f}  target 0.90..1.10: {'PASS' if ok else 'FAIL'}")
sys.exit(0 if ok else 1)
PY
