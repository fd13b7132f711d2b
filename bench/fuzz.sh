#!/usr/bin/env bash
# The property tests of every parser of outside input (tests/fuzz_parsers.rs), run long:
# saved fingerprints and diagnoses (arbitrary bytes, real files with bytes or values changed),
# perf maps, /proc files, size, number and CPU-list arguments. `cargo test` runs 64 inputs per
# property; this runs CASES (default 20000) per property, optimised but with overflow checks
# and debug assertions on, so an overflow is a crash here as in a debug build. Prints the
# inputs tried and whether anything crashed; a failure prints the smallest input that fails.
#
# Usage: bench/fuzz.sh [CASES]
set -uo pipefail
cd "$(dirname "$0")/.."
cases="${1:-20000}"
log="${TMPDIR:-/tmp}/cpudoctor-fuzz.log"
export CARGO_PROFILE_RELEASE_OVERFLOW_CHECKS=true
export CARGO_PROFILE_RELEASE_DEBUG_ASSERTIONS=true
start=$(date +%s)
PROPTEST_CASES="$cases" cargo test --release --test fuzz_parsers -- --test-threads=1 \
    --nocapture >"$log" 2>&1
status=$?
grep -E "inputs tried|test result|minimal failing" "$log"
crashes=$(grep -c "minimal failing input" "$log")
echo "fuzz: $cases cases per property, $(($(date +%s) - start)) s, crashes: $crashes, exit $status (log: $log)"
exit "$status"
