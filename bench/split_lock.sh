#!/usr/bin/env bash
# Compares cpudoctor's per-op split-lock figures with an independent C loop
# (bench/split_lock_ref.c: `lock add` on a u32 at line offset 62, each op timed with rdtsc) on
# the same CPU in one run, alternating the two, and prints the ratios.
#   p50     cpudoctor split_lock_op_percentiles_ns.p50 vs the C loop's per-op median: the
#           cost of one split lock as the hardware gives it; target within 10% (none where
#           cpudoctor names a trap: the per-op times are bimodal there).
#   mean    cpudoctor split_lock_op_mean_ns (each timed block's wall time per op) vs the C
#           loop of split locks timed as a whole: what a program pays, traps included wherever
#           their cost lands (on the Emerald Rapids guest whose host traps them, mostly outside
#           the clock reads around each op: the C per-op mean read 45-52 us where the loop took
#           130-180 us an op); target within 15%. cpudoctor leaves out the ops its preemptions
#           explain, the C loop does not, so on a busy machine the C loop runs higher. The C
#           per-op mean is printed beside it.
# Also prints the mechanism cpudoctor names and the C loop's percentiles, so a trapping host
# (bimodal: bus locks and 100 us+ traps) shows in both.
# Usage: bench/split_lock.sh [CPU] [ROUNDS]   (default CPU 0, 5 rounds; the probe pairs CPU
# with the next allowed CPU)
set -euo pipefail
cd "$(dirname "$0")/.."
cpu="${1:-0}"
rounds="${2:-5}"
other=$(python3 -c "import os; c=sorted(os.sched_getaffinity(0)); print(next(x for x in c if x != $cpu))")
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT

cargo build --release --quiet
gcc -O2 -o "$work/split_lock_ref" bench/split_lock_ref.c

for i in $(seq "$rounds"); do
  taskset -c "$cpu" "$work/split_lock_ref" 3000 1 >>"$work/ref.txt"
  ./target/release/cpudoctor probe split-lock --quick --cpus "$cpu,$other" --json 2>/dev/null \
    >"$work/ours$i.json"
done

python3 - "$cpu" "$work" "$rounds" "$other" <<'PY'
import json, re, statistics, sys
cpu, work, rounds = sys.argv[1], sys.argv[2], int(sys.argv[3])
ref = []
for line in open(f"{work}/ref.txt"):
    mean = float(re.search(r"mean ([\d.]+) us", line).group(1)) * 1e3
    loop = float(re.search(r"split ([\d.]+) ns", line).group(1))
    pct = {k: float(v) * 1e3 for k, v in re.findall(r"(p\d+) ([\d.]+)", line)}
    ref.append((mean, pct, loop))
ours, mechs = [], []
for i in range(1, rounds + 1):
    p = json.load(open(f"{work}/ours{i}.json"))["probes"][0]
    m = {x["name"]: x["value"] for x in p["metrics"]}
    pct = p["effects"]["split_lock_op_percentiles_ns"]
    ours.append((m["split_lock_op_mean_ns"], pct))
    mechs.append(p["effects"].get("split_lock_mechanism", "?"))
med = statistics.median
fmt = lambda v: ", ".join(f"{x:.0f}" for x in v)
o50, r50 = [o[1]["p50"] for o in ours], [r[1]["p50"] for r in ref]
om, rm, rl = [o[0] for o in ours], [r[0] for r in ref], [r[2] for r in ref]
ratio = med(o50) / med(r50)
print(f"CPU {cpu} (pair {cpu}-{sys.argv[4]}), {rounds} alternating rounds; cpudoctor names: {', '.join(sorted(set(mechs)))}")
print(f"  p50  cpudoctor {med(o50):9.0f} ns  ({fmt(o50)})")
print(f"       C loop    {med(r50):9.0f} ns  ({fmt(r50)})")
print(f"  mean cpudoctor {med(om):9.0f} ns  ({fmt(om)})")
print(f"       C loop    {med(rl):9.0f} ns  ({fmt(rl)})  (timed as a whole)")
print(f"       C per op  {med(rm):9.0f} ns  ({fmt(rm)})  (the ops' own times)")
for name in ["p0", "p10", "p90", "p99", "p100"]:
    print(f"  {name:<4} cpudoctor {med([o[1][name] for o in ours]):9.0f} ns   C loop {med([r[1][name] for r in ref]):9.0f} ns")
# Where split locks are trapped the per-op times are bimodal and the p50 falls between the two
# modes, wherever the share of trapped ops puts it (2.5-57 us from round to round on the
# Emerald Rapids guest whose host traps them): printed, held to no target.
trapped = any(m.startswith("trapped") for m in mechs)
ok = trapped or 0.90 <= ratio <= 1.10
print(f"p50 ratio cpudoctor / C loop: {ratio:.3f} ({'no target: trapped ops' if trapped else 'within' if ok else 'OUTSIDE'}{'' if trapped else ' 0.90-1.10'})")
# Paired: each round's C loop ran just before its probe, and the trap's cost moves with the
# host from round to round (the C loop 125-181 us an op within a minute).
mean_ratio = med([o / r for o, r in zip(om, rl)])
mean_ok = 0.85 <= mean_ratio <= 1.15
print(f"mean ratio cpudoctor / C loop timed as a whole (median of the rounds' ratios): {mean_ratio:.3f} ({'within' if mean_ok else 'OUTSIDE'} 0.85-1.15)")
sys.exit(0 if ok and mean_ok else 1)
PY
