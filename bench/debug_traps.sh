#!/usr/bin/env bash
# Spurious debug traps: how many watchpoint hits this host takes per program killed by SIGTRAP
# (the reason `diagnose --watch` is off by default; reference::SPURIOUS_DEBUG_TRAP_HITS_INTEL_KVM).
# bench/debug_trap_ref.c watches a child's writes RUNS times for SECONDS each; prints each run
# and the total hits per kill. A host with no kill in ~1M hits is, at the rule of three, below
# one kill per ~330,000 hits (a watch takes ~2,000).
# Usage: bench/debug_traps.sh [RUNS] [SECONDS]   (default 8 runs of 3 s)
set -euo pipefail
cd "$(dirname "$0")/.."
runs="${1:-8}"
secs="${2:-3}"
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
cc -O2 -o "$work/ref" bench/debug_trap_ref.c
echo "machine: $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2 | xargs), $(nproc) CPUs, kernel $(uname -r); load $(cut -d' ' -f1-3 /proc/loadavg)"
for i in $(seq "$runs"); do "$work/ref" "$secs"; done | tee "$work/out"
awk '{ for (i = 1; i <= NF; i++) if ($(i + 1) == "hits") hits += $i } /^died/ { kills++ }
  END { printf "%d hits, %d killed by SIGTRAP: %s\n", hits, kills,
        kills ? sprintf("one kill per %d hits", hits / kills) : sprintf("no kill (below one per %d hits, rule of three)", hits / 3) }' "$work/out"
