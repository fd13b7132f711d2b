#!/usr/bin/env bash
# Compares the memory probes with independent references in one run, alternating the two:
#   read_bw_1t_gbs (probe bandwidth, 4 KiB pages, one thread) against likwid-bench's load kernel
#   of the same width (load_avx512 where the CPU has AVX-512, else load_avx) on one thread over
#   the same 512 MB (target: ratio >= 0.95);
#   the 1 GiB pointer-chase latency (probe mem-latency, THP and 4 KiB pages) against a plain C
#   chase built here with gcc (bench/chase_ref.c) (target: ratio within 0.95..1.05), both as
#   the full profile's 1 GiB point alone and as the quick curve's last point (1 GiB or 4x the LLC; every size and
#   the TLB sweep, what `check` and `diagnose` measure: its chase starts after the other page
#   kind's block evicted its page tables).
# Installs likwid with apt-get when likwid-bench is missing. Each round runs the two sides
# back to back, in ABBA order across rounds; the ratio printed is the median of the per-round
# ratios, so a neighbour's load on a shared machine (which can move DRAM latency by 2x within
# a minute) hits both sides of a pair alike as far as possible.
# Usage: bench/mem.sh [CPU] [ROUNDS]   (default CPU 0, 5 rounds)
set -euo pipefail
cd "$(dirname "$0")/.."
cpu="${1:-0}"
rounds="${2:-5}"
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT

if ! command -v likwid-bench >/dev/null; then
  echo "installing likwid (apt-get) ..." >&2
  apt-get update -qq >&2
  DEBIAN_FRONTEND=noninteractive apt-get install -y -qq likwid >&2
fi
cargo build --release --quiet
gcc -O2 -o "$work/chase_ref" bench/chase_ref.c
bin=./target/release/cpudoctor

metric() { # metric NAME < fingerprint json
  python3 -c 'import json,sys; d=json.load(sys.stdin); print(next(m["value"] for p in d["probes"] for m in p["metrics"] if m["name"]==sys.argv[1]))' "$1"
}

# The widest loads the CPU has, as the probe uses (Zen 3 has no AVX-512: load_avx512 prints
# nothing there).
if grep -qw avx512f /proc/cpuinfo; then kernel=load_avx512; else kernel=load_avx; fi
likwid_gbs() {
  # likwid-bench pins its thread to the first CPU of the workgroup's domain (N: the node);
  # taskset keeps it on CPU $cpu as well.
  local mbs
  mbs=$(taskset -c "$cpu" likwid-bench -t "$kernel" -i 20 -w N:512MB:1 2>/dev/null | awk '/^MByte\/s:/ {print $2}')
  python3 -c "print($mbs / 1000)"
}
ours_gbs() {
  $bin probe bandwidth --cpus "$cpu" --pages 4k --max-size 512M --repetitions 7 --json 2>/dev/null |
    metric read_bw_1t_gbs
}
sample_median() { # sample_median NAME < fingerprint json
  python3 -c 'import json,sys,statistics; d=json.load(sys.stdin); print(statistics.median(next(p["samples"][sys.argv[1]] for p in d["probes"] if sys.argv[1] in p["samples"])))' "$1"
}
ours_chase() { # prints "thp_ns 4k_ns"
  # The 1 GiB point's own samples: one size alone is DRAM only by its size (4x the LLC), which
  # a guest reporting its host's L3 (260 MiB on the Emerald Rapids guest) does not reach.
  local fp
  fp=$($bin probe mem-latency --cpus "$cpu" --sizes 1G --pages 4k,thp --json 2>/dev/null)
  echo "$(sample_median latency_ns.thp.1073741824 <<<"$fp") $(sample_median latency_ns.4k.1073741824 <<<"$fp")"
}
largest_median() { # largest_median KIND < fingerprint json: the median at the curve's last size
  python3 -c 'import json,sys,statistics; d=json.load(sys.stdin); pre="latency_ns."+sys.argv[1]+"."; s=next(p["samples"] for p in d["probes"] if any(k.startswith(pre) for k in p["samples"])); print(statistics.median(s[max((k for k in s if k.startswith(pre)), key=lambda k: int(k[len(pre):]))]))' "$1"
}
ours_quick() { # prints "thp_ns 4k_ns": the last point of the quick curve check measures (1 GiB,
  # or 4x the last-level cache where that is larger: 1040 MiB on the Emerald Rapids guest)
  local fp
  fp=$($bin probe mem-latency --quick --cpus "$cpu" --pages 4k,thp --json 2>/dev/null)
  echo "$(largest_median thp <<<"$fp") $(largest_median 4k <<<"$fp")"
}
ref_chase() { # prints "thp_ns 4k_ns"
  local thp huge_kb k4
  read -r thp huge_kb < <(taskset -c "$cpu" "$work/chase_ref" 1073741824 thp)
  [ "$huge_kb" -ge 943718 ] || echo "warning: C reference got only $huge_kb kB of THP" >&2
  read -r k4 _ < <(taskset -c "$cpu" "$work/chase_ref" 1073741824 4k)
  echo "$thp $k4"
}

bw_ours=() bw_likwid=() lat_thp=() lat_4k=() ref_thp=() ref_4k=() q_thp=() q_4k=()
# ABBA order: odd rounds run cpudoctor first, even rounds the reference first, so a drift in
# the neighbours' load does not favour one side. Bandwidth pairs are short (seconds), so they
# get twice the rounds.
for i in $(seq $((2 * rounds))); do
  echo "bandwidth round $i/$((2 * rounds))" >&2
  if (( i % 2 )); then o=$(ours_gbs); l=$(likwid_gbs); else l=$(likwid_gbs); o=$(ours_gbs); fi
  bw_ours+=("$o"); bw_likwid+=("$l")
done
for i in $(seq "$rounds"); do
  echo "chase round $i/$rounds" >&2
  if (( i % 2 )); then
    read -r ot o4 < <(ours_chase); read -r qt q4 < <(ours_quick); read -r rt r4 < <(ref_chase)
  else
    read -r rt r4 < <(ref_chase); read -r qt q4 < <(ours_quick); read -r ot o4 < <(ours_chase)
  fi
  lat_thp+=("$ot"); lat_4k+=("$o4"); ref_thp+=("$rt"); ref_4k+=("$r4"); q_thp+=("$qt"); q_4k+=("$q4")
done

python3 - "$cpu" "${bw_ours[*]}" "${bw_likwid[*]}" "${lat_thp[*]}" "${ref_thp[*]}" "${lat_4k[*]}" "${ref_4k[*]}" "${q_thp[*]}" "${q_4k[*]}" "$kernel" <<'PY'
import statistics, sys
cpu, kernel = sys.argv[1], sys.argv[10]
bw_o, bw_l, l_t, r_t, l_4, r_4, q_t, q_4 = ([float(x) for x in a.split()] for a in sys.argv[2:10])
med = statistics.median
fmt = lambda xs: ", ".join(f"{x:.2f}" for x in xs)
paired = lambda o, r: med([a / b for a, b in zip(o, r)])
ok = True
print(f"CPU {cpu}, {len(bw_o)} bandwidth and {len(l_t)} chase rounds; ratio = median of per-round ratios")
bw = paired(bw_o, bw_l)
print(f"  read_bw_1t_gbs (4 KiB pages)  median {med(bw_o):8.2f} GB/s   (rounds: {fmt(bw_o)})")
print(f"  likwid-bench {kernel:16s} median {med(bw_l):8.2f} GB/s   (rounds: {fmt(bw_l)})")
print(f"  per-round ratios: {fmt([a / b for a, b in zip(bw_o, bw_l)])}")
print(f"  bandwidth ratio cpudoctor/likwid {bw:.3f}  target >= 0.95: {'PASS' if bw >= 0.95 else 'FAIL'}")
ok &= bw >= 0.95
for name, o, r in (
    ("THP", l_t, r_t),
    ("4 KiB", l_4, r_4),
    ("THP, quick curve", q_t, r_t),
    ("4 KiB, quick curve", q_4, r_4),
):
    ratio = paired(o, r)
    good = 0.95 <= ratio <= 1.05
    ok &= good
    print(f"  1 GiB chase, {name}: cpudoctor median {med(o):8.1f} ns   (rounds: {fmt(o)})")
    print(f"  1 GiB chase, {name}: C ref     median {med(r):8.1f} ns   (rounds: {fmt(r)})")
    print(f"  per-round ratios: {fmt([a / b for a, b in zip(o, r)])}")
    print(f"  latency ratio cpudoctor/C ({name}) {ratio:.3f}  target 0.95..1.05: {'PASS' if good else 'FAIL'}")
print(f"  1 GiB chase on 4 KiB over THP: cpudoctor {paired(l_4, l_t):.2f}x, C reference {paired(r_4, r_t):.2f}x")
sys.exit(0 if ok else 1)
PY
