#!/usr/bin/env bash
# Independent references for the machine corpus (tests/fixtures/machines/): plain C programs,
# no code shared with cpudoctor, for each behaviour a verdict judges:
#   PAUSE          bench/pause_ref.c       median ns per PAUSE, pinned to each CPU
#   split locks    bench/split_lock_ref.c  aligned and split `lock add`, mean and per-op
#                                          percentiles (bus locks vs traps)
#   false sharing  bench/sharing_ref.c     plain, atomic and writer/reader, fields 8 vs 128
#                                          bytes apart, two threads on two CPUs
#   pointer chase  bench/chase_ref.c       a random single cycle, THP vs 4 KiB pages, from
#                                          inside the caches to 2 GiB (and at least 4x the LLC)
# Prints the refs.txt of a corpus entry on stdout; its parser is in tests/corpus.rs. Take it
# between two `cpudoctor check --runs 3 --save` runs, so both describe the same minutes.
# Bus locking: the split-lock section runs ~0.01 s of split locks where they are bus locks
# and ~1 s where the host traps them. Needs gcc, taskset, python3; about 2-3 minutes.
# Usage: bench/reference.sh [CPU_A CPU_B] > refs.txt     (default CPUs 0 and 1)
set -euo pipefail
cd "$(dirname "$0")/.."
a="${1:-0}"
b="${2:-1}"
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
for p in pause_ref split_lock_ref sharing_ref chase_ref; do
  gcc -O2 -pthread -o "$work/$p" "bench/$p.c"
done

model=$(awk -F': ' '/^model name/ {print $2; exit}' /proc/cpuinfo)
ids=$(awk -F': ' '/^vendor_id/ {v=$2} /^cpu family/ {f=$2} /^model\t/ {m=$2} /^stepping/ {s=$2; exit} END {print v" family "f" model "m" stepping "s}' /proc/cpuinfo)
echo "# Independent C references, $model ($ids), $(date -u +%Y-%m-%dT%H:%M:%SZ), load $(cut -d' ' -f1-3 /proc/loadavg)"

echo "## PAUSE: median ns per PAUSE, 7 runs of 10M, pinned (a C loop)"
for cpu in "$a" "$b"; do
  echo "cpu$cpu $(taskset -c "$cpu" "$work/pause_ref" 10000000 7) ns"
done

echo "## split lock: lock add on a u32 at line offset 62, aligned and split, mean and per-op percentiles, 3000 ops, 3 rounds (a C loop)"
taskset -c "$a" "$work/split_lock_ref" 3000 3

echo "## false sharing, two threads on CPUs $a and $b, fields OFF bytes apart (a C program): mode 0 plain increments, 1 lock xadd, 2 thread 0 stores / thread 1 loads"
"$work/sharing_ref" "$a" "$b" 3

# From inside the L2 to past 4x the LLC and 2 GiB: DRAM is found from the curve, and the
# 4 KiB penalty grows with the footprint (page walks).
llc=$(python3 - <<'PY'
import glob
best = 0
for d in glob.glob("/sys/devices/system/cpu/cpu0/cache/index*"):
    try:
        size = open(d + "/size").read().strip()
    except OSError:
        continue
    n = int(size.rstrip("KMG"))
    n *= {"K": 1 << 10, "M": 1 << 20, "G": 1 << 30}.get(size[-1], 1)
    best = max(best, n)
print(best)
PY
)
sizes_mib="4 16 32 64 128 256 512 1024 2048"
top=$(( (4 * llc) >> 20 ))
if [ "$top" -gt 2048 ]; then sizes_mib="$sizes_mib $top"; fi
echo "## pointer chase, random single cycle over 64-byte lines, median of 7 (a C Sattolo chase, THP via madvise or 4 KiB pages): ns per load; LLC $(( llc >> 20 )) MiB"
for mib in $sizes_mib; do
  thp=$(taskset -c "$a" "$work/chase_ref" $(( mib << 20 )) thp 1000000 7 | cut -d' ' -f1)
  small=$(taskset -c "$a" "$work/chase_ref" $(( mib << 20 )) 4k 1000000 7 | cut -d' ' -f1)
  echo "$mib MiB THP: $thp   4K: $small"
done
