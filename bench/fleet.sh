#!/usr/bin/env bash
# `cpudoctor fleet` on N saved fingerprints (default 10,000; target: under 5 s on a 2-vCPU
# machine). The fleet is made from a real `check --runs 3` of the Zen 3 guest (a real file's
# size, ~110 KB, samples included): every host a copy with each figure jittered by 2%, and 12%
# of hosts in a fast band of false sharing, as in the Netflix JVM case. As the independent
# reference, Python's json module parses the same files (no analysis), on one core.
# Usage: bench/fleet.sh [N]
set -euo pipefail
cd "$(dirname "$0")/.."
n="${1:-10000}"
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
cargo build --release --quiet
python3 - "$work" "$n" <<'PY'
import json, random, sys
work, n = sys.argv[1], int(sys.argv[2])
base = json.load(open("tests/fixtures/fingerprints/zen3-kvm-runs3-a.json"))
rng = random.Random(1)
for i in range(n):
    fast = rng.random() < 0.12
    for p in base["probes"]:
        for m in p["metrics"]:
            m.setdefault("_orig", m["value"])
            v = m["_orig"] * (1 + 0.02 * rng.gauss(0, 1))
            if fast and m["name"] == "false_sharing_ratio":
                v /= 5
            m["value"] = v
    text = json.dumps(base, indent=1).replace('"_orig"', '"orig_value"')
    open(f"{work}/host{i:05d}.json", "w").write(text)
PY
du -sh "$work" | awk -v n="$n" '{print n " fingerprints, " $1 " on disk"}'
# Warm the page cache for both, so both read from memory.
cat "$work"/*.json >/dev/null
start=$(date +%s.%N)
./target/release/cpudoctor fleet "$work" >"$work.out"
ours=$(echo "$(date +%s.%N) - $start" | bc)
start=$(date +%s.%N)
python3 -c '
import json, os, sys
d = sys.argv[1]
for f in os.listdir(d):
    json.load(open(os.path.join(d, f)))' "$work"
ref=$(echo "$(date +%s.%N) - $start" | bc)
head -8 "$work.out"
rm -f "$work.out"
printf 'cpudoctor fleet: %.2f s; Python json.load of the same files (reference, no analysis): %.2f s; ratio %.2f\n' \
  "$ours" "$ref" "$(echo "$ours / $ref" | bc -l)"
awk -v t="$ours" 'BEGIN { ok = t < 5.0; print "target under 5 s: " (ok ? "PASS" : "FAIL"); exit !ok }'
