#!/usr/bin/env bash
# Compares the memory probes with independent references in one run, alternating the two:
#   read_bw_1t_gbs (probe bandwidth, 4 KiB pages, one thread) against likwid-bench -t load_avx512
#   on one thread over the same 512 MB (target: ratio >= 0.95);
#   the 1 GiB pointer-chase latency (probe mem-latency, THP and 4 KiB pages) against a plain C
#   chase built here with gcc (bench/chase_ref.c) (target: ratio within 0.95..1.05).
# Installs likwid with apt-get when likwid-bench is missing. Prints both ratios.
# Usage: bench/mem.sh [CPU] [ROUNDS]   (default CPU 0, 3 rounds)
set -euo pipefail
cd "$(dirname "$0")/.."
cpu="${1:-0}"
rounds="${2:-3}"
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

bw_ours=() bw_likwid=() lat_thp=() lat_4k=() ref_thp=() ref_4k=()
for i in $(seq "$rounds"); do
  echo "round $i/$rounds" >&2
  # likwid-bench pins its thread to the first CPU of the workgroup's domain; N:... is the node
  # domain, and -C is not used by likwid-bench, so run it under taskset on CPU $cpu.
  mbs=$(taskset -c "$cpu" likwid-bench -t load_avx512 -w N:512MB:1 2>/dev/null | awk '/^MByte\/s:/ {print $2}')
  bw_likwid+=("$(python3 -c "print($mbs / 1000)")")
  bw_ours+=("$($bin probe bandwidth --cpus "$cpu" --pages 4k --max-size 512M --json 2>/dev/null | metric read_bw_1t_gbs)")
  fp=$($bin probe mem-latency --cpus "$cpu" --sizes 1G --pages 4k,thp --json 2>/dev/null)
  lat_thp+=("$(metric dram_latency_ns <<<"$fp")")
  lat_4k+=("$(metric dram_latency_4k_ns <<<"$fp")")
  read -r ns huge_kb < <(taskset -c "$cpu" "$work/chase_ref" 1073741824 thp)
  [ "$huge_kb" -ge 943718 ] || echo "warning: C reference got only $huge_kb kB of THP" >&2
  ref_thp+=("$ns")
  read -r ns _ < <(taskset -c "$cpu" "$work/chase_ref" 1073741824 4k)
  ref_4k+=("$ns")
done

python3 - "$cpu" "${bw_ours[*]}" "${bw_likwid[*]}" "${lat_thp[*]}" "${ref_thp[*]}" "${lat_4k[*]}" "${ref_4k[*]}" <<'PY'
import statistics, sys
cpu = sys.argv[1]
bw_o, bw_l, l_t, r_t, l_4, r_4 = ([float(x) for x in a.split()] for a in sys.argv[2:8])
med = statistics.median
fmt = lambda xs: ", ".join(f"{x:.2f}" for x in xs)
ok = True
print(f"CPU {cpu}, {len(bw_o)} alternating rounds (medians)")
bw = med(bw_o) / med(bw_l)
print(f"  read_bw_1t_gbs (4 KiB pages)  {med(bw_o):8.2f} GB/s   (rounds: {fmt(bw_o)})")
print(f"  likwid-bench load_avx512      {med(bw_l):8.2f} GB/s   (rounds: {fmt(bw_l)})")
print(f"  bandwidth ratio cpudoctor/likwid {bw:.3f}  target >= 0.95: {'PASS' if bw >= 0.95 else 'FAIL'}")
ok &= bw >= 0.95
for name, o, r in (("THP", l_t, r_t), ("4 KiB", l_4, r_4)):
    ratio = med(o) / med(r)
    good = 0.95 <= ratio <= 1.05
    ok &= good
    print(f"  1 GiB chase, {name:5s} cpudoctor {med(o):8.1f} ns   (rounds: {fmt(o)})")
    print(f"  1 GiB chase, {name:5s} C ref     {med(r):8.1f} ns   (rounds: {fmt(r)})")
    print(f"  latency ratio cpudoctor/C ({name}) {ratio:.3f}  target 0.95..1.05: {'PASS' if good else 'FAIL'}")
print(f"  huge pages vs 4 KiB (cpudoctor): 1 GiB chase {med(l_4)/med(l_t):.2f}x faster on THP")
sys.exit(0 if ok else 1)
PY
