#!/usr/bin/env bash
# The regression corpus of the machine in hand (issue 31: "why is it slower here?"): a saved
# `check` and saved diagnoses of fixed-work programs (tests/programs/regression/), for
# `cpudoctor diff OLD NEW` to explain across every pair of machines (tests/regression_corpus.rs).
#   pause_rounds      a fixed count of PAUSEs per round (a spin tuned on one CPU)  -> pause_spin
#   contended_atomic  two threads `lock xadd` one line                             -> locked_rmw
#   split_lock        a locked add across two cache lines (~0.2 s of bus locks)    -> split_lock
#   chase-huge        a 1 GiB malloc'd random chase, CHASE_MADVISE=1 (madvise MADV_HUGEPAGE)
#                     (THP under `madvise`)                                        -> dram_loads
#   chase-4k          the same chase without advice: 4 KiB pages; with chase-huge the
#                     same-machine changed-setting pair                            -> page_walks_4k
#   compute           plain integer computation, the control                       -> computation
# Writes tests/fixtures/machines/MACHINE/regression/: check.json (`check --runs 3 --save`, +
# .txt, its screen), NAME.json (`diagnose --check check.json --runs 5 --save`, stored without
# indentation, + NAME.txt, its screen with the program's output) and README.md, one line per
# file: the command, the date, the machine and the load.
# MACHINE defaults to the check's microarchitecture and hypervisor (`zen4-kvm`). Keep the
# machine quiet (no build running): the work measures are times. The chase pair needs THP
# `madvise` (under `always` the 4 KiB run would get huge pages too, under `never` the huge run
# would not): otherwise only the run that means what its name says is saved, and the script
# says why. Programs are built with the tests' flags (tests/cli_diagnose.rs: frame pointers in
# every function). Needs gcc, python3 and `cargo build --release`; about 3-5 minutes.
# Usage: bench/regression_corpus.sh [MACHINE]
set -euo pipefail
cd "$(dirname "$0")/.."
bin=target/release/cpudoctor
[ -x "$bin" ] || { echo "build first: cargo build --release" >&2; exit 1; }
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
flags=(-O2 -g -pthread -fno-omit-frame-pointer -mno-omit-leaf-frame-pointer)
for p in pause_rounds contended_atomic split_lock chase compute; do
  gcc "${flags[@]}" -o "$work/$p" "tests/programs/regression/$p.c"
done

stamp() { echo "$(date -u +%Y-%m-%dT%H:%M:%SZ), load $(cut -d' ' -f1-3 /proc/loadavg)"; }
check_when=$(stamp)
"$bin" check --runs 3 --save "$work/check.json" > "$work/check.txt"
machine="${1:-$(python3 - "$work/check.json" <<'PY'
import json, sys
m = json.load(open(sys.argv[1]))["machine"]
arch = m["cpu"]["microarchitecture"].lower().replace(" ", "")
hyp = (m.get("hypervisor") or {}).get("vendor") or "metal"
print(f"{arch}-{hyp.lower().split()[0]}")
PY
)}"
dir="tests/fixtures/machines/$machine/regression"
mkdir -p "$dir"
if grep -q "^Measured while disturbed" "$work/check.txt"; then
  echo "warning: the check was disturbed (other work on the CPUs): its figures may read off," \
    "and so may what they predict; record the corpus on a quiet machine" >&2
  disturbed=" The check says it was disturbed (other work on the CPUs): its figures may read off."
else
  disturbed=""
fi
mv "$work/check.json" "$dir/"
sed "s|^Saved to .*|Saved to $dir/check.json.|" "$work/check.txt" > "$dir/check.txt"

model=$(awk -F': ' '/^model name/ {print $2; exit}' /proc/cpuinfo)
ids=$(awk -F': ' '/^vendor_id/ {v=$2} /^cpu family/ {f=$2} /^model\t/ {m=$2} /^stepping/ {s=$2; exit} END {print v" family "f" model "m" stepping "s}' /proc/cpuinfo)
thp=$(sed -n 's/.*\[\(.*\)\].*/\1/p' /sys/kernel/mm/transparent_hugepage/enabled 2>/dev/null || echo unknown)
readme="$dir/README.md"
{
  echo "# Regression corpus: $machine"
  echo
  echo "$model ($ids), $(nproc) CPUs, THP \`$thp\`, kernel $(uname -r). Written by"
  echo "\`bench/regression_corpus.sh\` (programs in tests/programs/regression/, built with"
  echo "\`gcc ${flags[*]}\`); \`cpudoctor\` is \`target/release/cpudoctor\` at"
  echo "$(git rev-parse --short HEAD).$disturbed"
  echo
  echo "- \`check.json\` (+ \`check.txt\`): \`cpudoctor check --runs 3 --save check.json\`, $check_when"
} > "$readme"

# diagnose NAME MEASURE_ARGS... -- ENV... PROGRAM ARGS...: saves NAME.json and NAME.txt and
# adds its README line.
diagnose() {
  local name=$1; shift
  local opts=()
  while [ "$1" != "--" ]; do opts+=("$1"); shift; done
  shift
  local envs=()
  while [[ "$1" == *=* ]]; do envs+=("$1"); shift; done
  local prog=$1; shift
  local when
  when=$(stamp)
  env "${envs[@]}" "$bin" diagnose --check "$dir/check.json" --runs 5 "${opts[@]}" \
    --save "$dir/$name.json" -- "$work/$prog" "$@" > "$dir/$name.txt" 2>&1
  # Stored compact: the 4 KiB chase's page-fault stacks make ~500 KiB of indented JSON, ~300
  # KiB without the indentation (cpudoctor reads either; key order and numbers are kept).
  python3 - "$dir/$name.json" <<'PY'
import json, sys
path = sys.argv[1]
with open(path) as f:
    d = json.load(f)
with open(path, "w") as f:
    json.dump(d, f, separators=(",", ":"))
    f.write("\n")
PY
  local shown="${envs[*]:+${envs[*]} }cpudoctor diagnose --check check.json --runs 5"
  local a
  for a in "${opts[@]}"; do
    if [[ "$a" =~ ^[A-Za-z0-9_./=:-]+$ ]]; then shown="$shown $a"; else shown="$shown '$a'"; fi
  done
  shown="$shown --save $name.json -- $prog${*:+ $*}"
  echo "- \`$name.json\` (+ \`$name.txt\`): \`$shown\`, $when, $(du -k "$dir/$name.json" | cut -f1) KiB" >> "$readme"
  echo "$name: $(du -k "$dir/$name.json" | cut -f1) KiB" >&2
}

diagnose pause_rounds --measure cpu -- pause_rounds
diagnose contended_atomic --measure cpu -- contended_atomic
diagnose split_lock --measure cpu -- split_lock
# The chase's own time per load, of its thread's CPU time: the building of the cycle (~1 s,
# also page-size sensitive) is left out, and so is time spent waiting for a CPU. A time, lower
# is better: the work of a run stays one run (a rate would be taken as rate x recorded seconds
# of work, and the recorded seconds include the building).
chase_metric=(--metric 'cpu_ns/load: ([0-9.]+)')
# The chase advises its own buffer (CHASE_MADVISE=1): glibc 2.35-2.36's
# GLIBC_TUNABLES=glibc.malloc.hugetlb=1 takes in some runs only (see tests/programs/regression/chase.c),
# and diagnose --runs 5 would mix runs on huge and 4 KiB pages.
huge_env=CHASE_MADVISE=1
case "$thp" in
  madvise)
    diagnose chase-huge "${chase_metric[@]}" -- "$huge_env" chase
    diagnose chase-4k "${chase_metric[@]}" -- chase
    ;;
  always)
    echo "THP is \`always\`: every malloc'd buffer may get huge pages, so there is no" \
      "4 KiB chase here (no chase-4k)" | tee -a "$readme" >&2
    diagnose chase-huge "${chase_metric[@]}" -- "$huge_env" chase
    ;;
  *)
    echo "THP is \`$thp\`: the tunable cannot give huge pages, so there is no huge-page" \
      "chase here (no chase-huge)" | tee -a "$readme" >&2
    diagnose chase-4k "${chase_metric[@]}" -- chase
    ;;
esac
diagnose compute --measure cpu -- compute

# The pages each chase got, as it printed them (smaps_rollup AnonHugePages while its buffer
# was live): a pair whose huge run got no huge pages (or 4 KiB run got some) says nothing.
for name in chase-huge chase-4k; do
  [ -f "$dir/$name.txt" ] || continue
  kib=$(grep -o 'anon_huge_kib: [0-9-]*' "$dir/$name.txt" | tail -1 | cut -d' ' -f2)
  echo "  - $name: AnonHugePages ${kib:-?} KiB of its 1 GiB buffer (the diagnosed run)" >> "$readme"
done
echo "Saved to $dir" >&2
