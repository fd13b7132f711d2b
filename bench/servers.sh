# Sourced by the bench scripts that load a server: one start function per server, each run in
# a directory of its own under $work (which the caller made and removes). A start function
# sets `parent` (the pid diagnose attaches to: the server's parent process), defines
# `load_SERVER SECONDS` (runs the load for that long and prints its throughput, one number,
# higher is better) and adds its stop command to `stoppers` (the caller's EXIT trap runs
# `stop_servers`). Ports come from the environment so that several runs can share a machine.
#   MARIADB_SOCKET (default $work/mariadb/sock, no TCP), NGINX_PORT (8392), REDIS_PORT (6392),
#   PG_PORT (25499); CLIENTS (32): the load's concurrency.
# Needs root (servers start as their users): mariadb-server + sysbench, nginx + ab (apache2-utils),
# redis-server + redis-tools, postgresql + pgbench.

stoppers=()
stop_servers() {
  local s
  for s in "${stoppers[@]}"; do eval "$s" >/dev/null 2>&1 || true; done
}
clients="${CLIENTS:-32}"

# start_mariadb: mariadbd with a 256 MiB buffer pool, sysbench's oltp_point_select (or
# $SYSBENCH_TEST) on one table of 10,000 rows, $clients threads; throughput in TPS.
start_mariadb() {
  local dir="$work/mariadb"
  local sock="${MARIADB_SOCKET:-$dir/sock}"
  mkdir -p "$dir/db" "$(dirname "$sock")" && chown mysql "$dir" "$dir/db" "$(dirname "$sock")"
  mariadb-install-db --user=mysql --datadir="$dir/db" --auth-root-authentication-method=normal \
    >/dev/null 2>&1
  mariadbd --user=mysql --datadir="$dir/db" --socket="$sock" --skip-networking \
    --innodb-buffer-pool-size=256M --pid-file="$dir/pid" >"$dir/log" 2>&1 &
  stoppers+=("kill \$(cat '$dir/pid')")
  for _ in $(seq 150); do [ -S "$sock" ] && [ -s "$dir/pid" ] && break; sleep 0.2; done
  [ -S "$sock" ] || { echo "mariadbd did not start:" >&2; tail -5 "$dir/log" >&2; return 1; }
  mariadb --socket="$sock" -uroot -e "CREATE DATABASE IF NOT EXISTS sbtest"
  MARIADB_SOCK="$sock"
  sb() { sysbench "${SYSBENCH_TEST:-oltp_point_select}" --mysql-socket="$MARIADB_SOCK" \
    --mysql-user=root --tables=1 --table-size=10000 "$@"; }
  sb prepare >/dev/null 2>&1
  parent=$(cat "$dir/pid")
  load_mariadb() {
    sb --threads="$clients" --time="$1" run 2>/dev/null |
      awk '/transactions:/ {gsub(/\(/,"",$3); print $3}'
  }
}

# start_nginx: nginx (one worker per CPU) serving a 612-byte static page on NGINX_PORT; `ab -k
# -c $clients` for the time given; throughput in requests/s.
start_nginx() {
  local dir="$work/nginx" port="${NGINX_PORT:-8392}"
  mkdir -p "$dir/html" "$dir/tmp"
  head -c 612 /dev/zero | tr '\0' x >"$dir/html/index.html"
  cat >"$dir/nginx.conf" <<EOF
worker_processes auto;
pid $dir/pid;
error_log $dir/error.log;
events { worker_connections 1024; }
http {
  access_log off;
  client_body_temp_path $dir/tmp; proxy_temp_path $dir/tmp; fastcgi_temp_path $dir/tmp;
  uwsgi_temp_path $dir/tmp; scgi_temp_path $dir/tmp;
  server { listen 127.0.0.1:$port; root $dir/html; }
}
EOF
  chmod -R a+rX "$dir"
  nginx -c "$dir/nginx.conf" -p "$dir"
  stoppers+=("kill \$(cat '$dir/pid')")
  for _ in $(seq 50); do [ -s "$dir/pid" ] && break; sleep 0.1; done
  parent=$(cat "$dir/pid")
  NGINX_URL="http://127.0.0.1:$port/"
  load_nginx() {
    ab -q -k -c "$clients" -t "$1" -n 100000000 "$NGINX_URL" 2>/dev/null |
      awk '/^Requests per second/ {print $4}'
  }
}

# start_redis: redis-server without persistence on REDIS_PORT; `redis-benchmark -q -t get,set
# -c $clients` run for the time given (in rounds of 100,000 requests); throughput in requests/s
# (GET and SET together).
start_redis() {
  local dir="$work/redis" port="${REDIS_PORT:-6392}"
  mkdir -p "$dir"
  redis-server --port "$port" --bind 127.0.0.1 --save '' --appendonly no --dir "$dir" \
    --daemonize no >"$dir/log" 2>&1 &
  local pid=$!
  stoppers+=("kill $pid")
  for _ in $(seq 50); do redis-cli -p "$port" ping >/dev/null 2>&1 && break; sleep 0.1; done
  parent=$pid
  REDIS_PORT_USED=$port
  load_redis() {
    python3 - "$1" "$REDIS_PORT_USED" "$clients" <<'PY'
import re, subprocess, sys, time
secs, port, clients = float(sys.argv[1]), sys.argv[2], sys.argv[3]
start, done = time.monotonic(), 0
while time.monotonic() - start < secs:
    out = subprocess.run(["redis-benchmark", "-p", port, "-q", "-t", "get,set", "-c", clients,
                          "-n", "100000"], capture_output=True, text=True).stdout
    done += 200000
print(round(done / (time.monotonic() - start)))
PY
  }
}

# start_postgres_server: PostgreSQL (bench/postgres.sh) with pgbench's tables at scale 10 on
# PG_PORT; `pgbench -S` (select-only) with $clients clients; throughput in TPS.
start_postgres_server() {
  local port="${PG_PORT:-25499}"
  . "$(dirname "${BASH_SOURCE[0]}")/postgres.sh"
  mkdir -p "$work/pg"
  local outer="$work"
  work="$work/pg"
  start_postgres "$port" 10 -c max_connections=100
  work="$outer"
  stoppers+=("runuser -u postgres -- '$bin/pg_ctl' -D '$work/pg/data' -m immediate stop")
  PG_DIR="$work/pg" PG_PORT_USED=$port
  load_postgres() {
    runuser -u postgres -- pgbench -h "$PG_DIR" -p "$PG_PORT_USED" -n -S -c "$clients" -j 2 \
      -T "$1" postgres 2>/dev/null | awk '/^tps/ {print $3}'
  }
}

# switch_rate FILE0 FILE1: switches a second of the threads in both readings of
# tree_switches, over the time between them.
switch_rate() {
  python3 - "$@" <<'PY'
import sys
read = lambda f: dict(l.split() for l in open(f) if l.strip())
a, b = read(sys.argv[1]), read(sys.argv[2])
seconds = float(b.pop("at")) - float(a.pop("at"))
print(round(sum(int(b[t]) - int(a[t]) for t in a.keys() & b.keys()) / seconds))
PY
}

# tree_switches PID: context switches so far of PID, its threads and its descendants' threads
# (from /proc/PID/task/*/status), one `TID COUNT` line per thread (a rate is taken over the
# threads alive at both readings: PostgreSQL's backends come and go), and `at SECONDS`, the
# CLOCK_MONOTONIC time of the reading: Python's start and the /proc walk take up to a second
# on a loaded 2-vCPU guest, so a time taken outside would misplace the window.
tree_switches() {
  python3 - "$1" <<'PY'
import os, sys, time
root = int(sys.argv[1])
at = time.monotonic()
kids = {}
for p in os.listdir("/proc"):
    if p.isdigit():
        try:
            ppid = int(open(f"/proc/{p}/stat").read().rsplit(")", 1)[1].split()[1])
            kids.setdefault(ppid, []).append(int(p))
        except OSError:
            pass
counts, todo = {}, [root]
while todo:
    pid = todo.pop()
    todo += kids.get(pid, [])
    try:
        tasks = os.listdir(f"/proc/{pid}/task")
    except OSError:
        continue
    for t in tasks:
        try:
            for line in open(f"/proc/{pid}/task/{t}/status"):
                if line.startswith(("voluntary_ctxt", "nonvoluntary_ctxt")):
                    counts[t] = counts.get(t, 0) + int(line.split()[1])
        except OSError:
            pass
for t, n in counts.items():
    print(t, n)
print("at", (at + time.monotonic()) / 2)
PY
}
