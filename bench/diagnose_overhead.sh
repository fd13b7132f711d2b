#!/usr/bin/env bash
# Overhead of `cpudoctor diagnose` at its default sampling frequency: a CPU-bound C program
# (tests/programs/cpu_bound.c, fixed work, times itself) runs alone and under diagnose,
# alternating, pinned to the same CPU, in one run. Prints the medians and the slowdown.
# Target: under 3%. Usage: bench/diagnose_overhead.sh [CPU] [ROUNDS]   (default CPU 1, 7 rounds)
set -euo pipefail
cd "$(dirname "$0")/.."
cpu="${1:-1}"
rounds="${2:-7}"
iterations=600000000
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT

cargo build --release --quiet
cc -O2 -o "$work/cpu_bound" tests/programs/cpu_bound.c

alone=() traced=()
taskset -c "$cpu" "$work/cpu_bound" "$iterations" >/dev/null # warm-up
for i in $(seq "$rounds"); do
  alone+=("$(taskset -c "$cpu" "$work/cpu_bound" "$iterations" | cut -d' ' -f1)")
  # With --json the program's own stdout goes to stderr; its first field is its time.
  traced+=("$(./target/release/cpudoctor diagnose --json -- taskset -c "$cpu" "$work/cpu_bound" "$iterations" \
    2>&1 >/dev/null | grep -E '^[0-9]+\.[0-9]+ ' | cut -d' ' -f1)")
done

python3 - "$cpu" "${alone[*]}" "${traced[*]}" <<'PY'
import statistics, sys
cpu, alone, traced = sys.argv[1], [float(x) for x in sys.argv[2].split()], [float(x) for x in sys.argv[3].split()]
a, t = statistics.median(alone), statistics.median(traced)
slowdown = (t / a - 1) * 100
print(f"CPU {cpu}, {len(alone)} alternating rounds, diagnose at its default frequency (999 Hz)")
print(f"  alone           {a:7.3f} s   (rounds: {', '.join(f'{x:.3f}' for x in alone)})")
print(f"  under diagnose  {t:7.3f} s   (rounds: {', '.join(f'{x:.3f}' for x in traced)})")
print(f"  slowdown {slowdown:+.2f}%  target < 3%: {'PASS' if slowdown < 3 else 'FAIL'}")
sys.exit(0 if slowdown < 3 else 1)
PY
