#!/usr/bin/env bash
# Compares cpudoctor's sharing ratios with an independent C reference (bench/sharing_ref.c) on
# the same two CPUs in one run, alternating the two, and prints each pattern's ratio side by
# side (medians over the rounds):
#   plain   per-thread plain increments, 8 bytes apart / 128 bytes apart
#   atomic  per-thread lock xadd increments, 8 / 128 bytes apart
#   reader  loads of a field 8 / 128 bytes from one another core stores to (JDK-8180450)
#   writer  that core's stores, 8 / 128 bytes from the readers' field
#   true    one lock xadd counter written from both cores / per-thread ones
# Both take medians of short runs of 200k operations (cpudoctor: 9 samples of every pattern
# interleaved; C: 9 runs of each in turn). No pass/fail target: contended lines on a shared host
# are noisy, and the C reader's loads are summed (2 per cycle alone) where cpudoctor's are not
# (4 per cycle on Zen 5), so its padded side differs. The point is the same patterns showing,
# or not, on this CPU, at about the same ratio.
# Usage: bench/sharing.sh [CPU_A CPU_B [ROUNDS]]   (default 0 1 5)
set -euo pipefail
cd "$(dirname "$0")/.."
a="${1:-0}" b="${2:-1}" rounds="${3:-5}"
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT

cargo build --release --quiet
gcc -O2 -pthread -o "$work/sharing_ref" bench/sharing_ref.c

for i in $(seq "$rounds"); do
  ./target/release/cpudoctor probe sharing --quick --json --cpus "$a,$b" 2>/dev/null >"$work/ours.$i.json"
  "$work/sharing_ref" "$a" "$b" 1 >"$work/ref.$i.txt"
done

python3 - "$work" "$rounds" <<'PY'
import json, statistics, sys
work, rounds = sys.argv[1], int(sys.argv[2])
names = {
    "plain": "false_sharing_ratio",
    "atomic": "false_sharing_atomic_ratio",
    "reader": "false_sharing_reader_ratio",
    "writer": "false_sharing_writer_ratio",
    "true": "true_sharing_ratio",
}
ours = {k: [] for k in names}
wall_s = []
refused = 0
for i in range(1, rounds + 1):
    p = json.load(open(f"{work}/ours.{i}.json"))["probes"][0]
    wall_s.append(p["duration_s"])
    m = {x["name"]: x["value"] for x in p["metrics"]}
    if not p["effects"].get("separate_cores", True):
        refused += 1
        continue
    for k, n in names.items():
        ours[k].append(m[n])
ref = {k: [] for k in names}
for i in range(1, rounds + 1):
    r = {}
    for line in open(f"{work}/ref.{i}.txt"):
        f = line.split()
        key = (f[0], f[1])
        t0 = float(f[3])
        t1 = float(f[6]) if len(f) > 6 else None
        wall = float(f[9]) if len(f) > 9 else None
        r[key] = (t0, t1, wall)
    w = lambda off, mode: r[(f"off={off}", f"mode={mode}")]
    ref["plain"].append(w(8, 0)[2] / w(128, 0)[2])
    ref["atomic"].append(w(8, 1)[2] / w(128, 1)[2])
    ref["reader"].append(w(8, 2)[1] / w(128, 2)[1])
    ref["writer"].append(w(8, 2)[0] / w(128, 2)[0])
    ref["true"].append(w(0, 1)[2] / w(128, 1)[2])
fmt = lambda v: ", ".join(f"{x:.2f}" for x in v)
print(f"{rounds} alternating rounds; cpudoctor probe wall time "
      f"median {statistics.median(wall_s):.2f} s ({fmt(wall_s)})")
if refused:
    print(f"  cpudoctor refused {refused} of {rounds} rounds (threads not on separate cores)")
print(f"  {'pattern':8} {'cpudoctor':>10} {'C ref':>8} {'ratio':>6}   per round: cpudoctor | C")
for k in names:
    o = statistics.median(ours[k]) if ours[k] else float("nan")
    c = statistics.median(ref[k])
    print(f"  {k:8} {o:9.2f}x {c:7.2f}x {o / c:6.2f}   {fmt(ours[k])} | {fmt(ref[k])}")
PY
