#!/usr/bin/env bash
# What `cpudoctor diagnose --pid` costs a server, in the server's own figure: its throughput
# under a standard load, alone and with diagnose attached to the server's parent process
# (which follows its threads and workers), interleaved and paired: each round runs the load
# alone and once per side (below), the order turned round every other round so that a drift
# of the machine does not favour one side. Servers (bench/servers.sh):
#   mariadb   mariadbd + sysbench oltp_point_select (SYSBENCH_TEST to change), 32 threads
#   nginx     nginx, a worker per CPU, static page + ab -k -c 32
#   redis     redis-server + redis-benchmark -q -t get,set -c 32
#   postgres  PostgreSQL 15 + pgbench -S, 32 clients
# For each server it prints the throughput alone and per side (medians, ranges), the median of
# the paired ratios (side / alone of the same round) with their range, the target's context
# switches per second alone (its threads and descendants, /proc/PID/task/*/status), and
# diagnose's own CPU time (user + system) per second of the load's window (/proc/PID/stat)
# and over its whole run, the analysis after the window included (/usr/bin/time).
# Sides: SIDES="label=ARGS;label=ARGS", ARGS added to `diagnose --pid P --duration D`;
# an ARGS starting with @PATH runs the cpudoctor binary at PATH instead of this checkout's.
# Default: one side, diagnose with its defaults. Example, where the cost comes from:
#   SIDES='default=;no-wall=--no-wall;99Hz=--frequency 99;per-task=--per-task' \
#     bench/server_overhead.sh mariadb 3 8
# Goal (issue 30): under 3% of the server's throughput. The machine's other load shows in the
# ranges: run it on a quiet machine for a verdict.
# Usage: bench/server_overhead.sh [SERVERS] [ROUNDS] [SECONDS]
#   SERVERS: comma-separated (default mariadb,nginx,redis), ROUNDS 5, SECONDS 8 (at least 4).
set -euo pipefail
cd "$(dirname "$0")/.."
servers="${1:-mariadb,nginx,redis}"
rounds="${2:-5}"
secs="${3:-8}"
sides="${SIDES:-diagnose=}"
work=$(mktemp -d)
chmod 755 "$work"
. bench/servers.sh
trap 'stop_servers; rm -rf "$work"' EXIT
[ -n "${NO_BUILD:-}" ] || cargo build --release --quiet
diag="$PWD/target/release/cpudoctor"

# attached LABEL-ARGS SERVER: the load's throughput with diagnose attached; diagnose's CPU
# seconds go to $work/cpu.
attached() {
  local args="$1" server=$2 bin=$diag
  if [[ $args == @* ]]; then
    bin=${args%% *}; bin=${bin#@}
    [[ $args == *" "* ]] && args=${args#* } || args=""
  fi
  # shellcheck disable=SC2086
  /usr/bin/time -f "%U %S" -o "$work/time" "$bin" diagnose --pid "$parent" \
    --duration $((secs + 2)) --save "$work/d.json" $args >/dev/null 2>"$work/diag.err" &
  local pid=$!
  sleep 1
  # diagnose's own CPU over the load's window (its user + system ticks in /proc/PID/stat),
  # apart from the analysis after it; /usr/bin/time's figure below includes the analysis.
  local dpid c0 c1 w0 w1 tps
  dpid=$(pgrep -P "$pid" | head -1)
  c0=$(awk '{print $14 + $15}' "/proc/$dpid/stat" 2>/dev/null || echo 0); w0=$(date +%s.%N)
  tps=$("load_$server" "$secs")
  c1=$(awk '{print $14 + $15}' "/proc/$dpid/stat" 2>/dev/null || echo 0); w1=$(date +%s.%N)
  wait "$pid" || { echo "diagnose failed:" >&2; tail -3 "$work/diag.err" >&2; }
  awk -v s="$secs" -v c0="$c0" -v c1="$c1" -v w0="$w0" -v w1="$w1" -v hz="$(getconf CLK_TCK)" \
    '{print (c1 - c0) / hz / (w1 - w0) "," ($1 + $2) / (s + 2)}' "$work/time" >"$work/cpu"
  echo "$tps"
}

alone() { # the load's throughput alone; the target's switches/s to $work/cs
  local server=$1
  "load_$server" "$secs" >"$work/tps" &
  local pid=$!
  local start=$SECONDS
  sleep 2 # the load's connections are made (32 backends of PostgreSQL)
  tree_switches "$parent" >"$work/c0"
  # The second reading 2 s before the load's end, counted from its start (the first reading
  # can take a second): PostgreSQL's backends leave with the load, and a reading after that
  # counted only the postmaster's own processes (8-13 switches/s).
  sleep $((secs - 2 - (SECONDS - start) > 0 ? secs - 2 - (SECONDS - start) : 0))
  tree_switches "$parent" >"$work/c1"
  wait "$pid"
  switch_rate "$work/c0" "$work/c1" >"$work/cs"
  cat "$work/tps"
}

echo "machine: $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2 | xargs), $(nproc) CPUs;" \
  "$rounds rounds of $secs s; load average $(cut -d' ' -f1-3 /proc/loadavg)"
IFS=';' read -ra side_list <<<"$sides"
results="$work/results"
: >"$results"
for server in ${servers//,/ }; do
  case $server in
  mariadb) start_mariadb ;;
  nginx) start_nginx ;;
  redis) start_redis ;;
  postgres) start_postgres_server ;;
  *) echo "unknown server $server" >&2; exit 2 ;;
  esac
  "load_$server" 3 >/dev/null # warm-up
  for r in $(seq "$rounds"); do
    line="$server round $r:"
    run_alone() { a=$(alone "$server"); echo "$server alone $r $a $(cat "$work/cs")" >>"$results"; line+=" alone $a ($(cat "$work/cs") switches/s)"; }
    [ $((r % 2)) = 1 ] && run_alone
    for side in "${side_list[@]}"; do
      label=${side%%=*}
      t=$(attached "${side#*=}" "$server")
      echo "$server $label $r $t $(cat "$work/cpu")" >>"$results"
      line+=", $label $t"
    done
    [ $((r % 2)) = 0 ] && run_alone
    echo "$line"
  done
  stop_servers
  stoppers=()
done
echo "load average after: $(cut -d' ' -f1-3 /proc/loadavg)"
python3 - "$results" <<'PY'
import statistics as st, sys
from collections import defaultdict
rows = [l.split() for l in open(sys.argv[1]) if l.strip()]
by = defaultdict(dict)
for server, side, rnd, tps, extra in rows:
    # alone: the switch rate; a side: diagnose's CPU in the window and over its whole run.
    by[(server, side)][int(rnd)] = (float(tps or 0), *map(float, extra.split(",")))
servers = list(dict.fromkeys(r[0] for r in rows))
sides = [s for s in dict.fromkeys(r[1] for r in rows) if s != "alone"]
print(f"{'server':<9}{'switches/s':>11}{'alone':>10}  {'side':<12}{'with':>10}"
      f"{'lost (median, range)':>24}{'diag CPU':>9}{'+analysis':>10}")
for server in servers:
    alone = by[(server, "alone")]
    cs = st.median(v[1] for v in alone.values())
    a = st.median(v[0] for v in alone.values())
    for i, side in enumerate(sides):
        w = by[(server, side)]
        ratios = sorted(w[r][0] / alone[r][0] for r in w if r in alone and alone[r][0])
        lost = [100 * (1 - x) for x in ratios]
        cpu = st.median(v[1] for v in w.values())
        whole = st.median(v[2] for v in w.values())
        head = f"{server:<9}{cs:>11,.0f}{a:>10,.0f}" if i == 0 else " " * 30
        print(f"{head}  {side:<12}{st.median(v[0] for v in w.values()):>10,.0f}"
              f"{st.median(lost):>+9.1f}% ({min(lost):+.1f}..{max(lost):+.1f}){cpu:>8.1%}"
              f"{whole:>10.1%}")
print("lost: throughput lost with diagnose attached, median of the paired rounds (range);"
      " diag CPU: diagnose's own CPU time (user + system) per second of the load's window;"
      " +analysis: the same over its whole run, the analysis after the window included")
PY
