#!/usr/bin/env bash
# The real case of `diff`'s "why is it slower" (issue 31): MariaDB under sysbench with
# InnoDB's spin knob changed, `innodb_spin_wait_delay` OLD (default 4) against NEW (0), on one
# machine. For each setting: ROUNDS unprofiled sysbench runs give the throughput (`--rate`,
# one per run, so the diff has an interval), then one run with `diagnose --pid` attached saves
# the profile. The settings alternate each round so that a drift of the machine favours
# neither. Then `cpudoctor diff` of the two saved diagnoses, on the screen and as JSON.
#   SYSBENCH_TEST (oltp_update_index), TABLE_SIZE (10), CLIENTS (32): the contention the
#   servers issue used (32 threads on 10 rows: InnoDB's lock-wait spin is most of the CPU).
# Usage: bench/why_mariadb.sh [OLD_DELAY] [NEW_DELAY] [ROUNDS] [SECONDS] [OUT_DIR]
set -euo pipefail
cd "$(dirname "$0")/.."
old="${1:-4}"
new="${2:-0}"
rounds="${3:-3}"
secs="${4:-10}"
out="${5:-$(mktemp -d)}"
mkdir -p "$out"
export SYSBENCH_TEST="${SYSBENCH_TEST:-oltp_update_index}"
work=$(mktemp -d)
chmod 755 "$work"
. bench/servers.sh
trap 'stop_servers; rm -rf "$work"' EXIT
[ -n "${NO_BUILD:-}" ] || cargo build --release --quiet
diag="$PWD/target/release/cpudoctor"
# The table size is the contention: sysbench's prepare in start_mariadb makes 10,000 rows;
# remake the table at TABLE_SIZE.
start_mariadb
sb() { sysbench "$SYSBENCH_TEST" --mysql-socket="$MARIADB_SOCK" --mysql-user=root \
  --tables=1 --table-size="${TABLE_SIZE:-10}" "$@"; }
sb cleanup >/dev/null 2>&1 || true
sb prepare >/dev/null 2>&1
tps() { sb --threads="$clients" --time="$1" run 2>/dev/null |
  awk '/transactions:/ {gsub(/\(/,"",$3); print $3}'; }
set_delay() { mariadb --socket="$MARIADB_SOCK" -uroot -e "SET GLOBAL innodb_spin_wait_delay=$1"; }

declare -A rates
for r in $(seq "$rounds"); do
  order="$old $new"; ((r % 2 == 0)) && order="$new $old"
  for d in $order; do
    set_delay "$d"
    t=$(tps "$secs")
    rates[$d]="${rates[$d]:-} --rate ${t}tps"
    echo "round $r innodb_spin_wait_delay=$d: $t TPS" >&2
  done
done
for d in "$old" "$new"; do
  set_delay "$d"
  tps $((secs + 2)) >/dev/null &
  load=$!
  sleep 1
  # shellcheck disable=SC2086
  "$diag" diagnose --pid "$parent" --duration "$secs" --figures all ${rates[$d]} \
    --save "$out/mariadb-delay$d.json" >"$out/mariadb-delay$d.txt" 2>"$out/mariadb-delay$d.err"
  wait "$load"
done
COLUMNS=80 "$diag" diff "$out/mariadb-delay$old.json" "$out/mariadb-delay$new.json" \
  | tee "$out/diff.txt"
"$diag" diff --json "$out/mariadb-delay$old.json" "$out/mariadb-delay$new.json" >"$out/diff.json"
echo "saved in $out" >&2
