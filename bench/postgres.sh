# Sourced by the bench scripts that load a PostgreSQL server: starts Debian's newest PostgreSQL
# as the postgres user in $work (a directory the caller made and removes), with fsync off and the
# -c settings given, on PORT; sets `bin` (its bin folder) and `parent` (the postmaster's pid);
# defines stop_server (the caller's EXIT trap calls it); fills pgbench's tables at SCALE.
# Usage: start_postgres PORT SCALE [-c NAME=VALUE ...]
start_postgres() {
  local port=$1 scale=$2
  shift 2
  bin=$(ls -d /usr/lib/postgresql/*/bin 2>/dev/null | sort -V | tail -1)
  [ -n "$bin" ] || { echo "needs PostgreSQL (apt-get install postgresql)" >&2; exit 1; }
  chmod 755 "$work"
  chown postgres "$work"
  runuser -u postgres -- "$bin/initdb" -A trust -U postgres -D "$work/data" >/dev/null
  runuser -u postgres -- "$bin/pg_ctl" -D "$work/data" -l "$work/log" -w -o \
    "-k $work -p $port -c listen_addresses= -c fsync=off $*" start >/dev/null
  stop_server() { runuser -u postgres -- "$bin/pg_ctl" -D "$work/data" -m immediate stop >/dev/null 2>&1 || true; }
  runuser -u postgres -- pgbench -h "$work" -p "$port" -i -s "$scale" -q postgres >/dev/null 2>&1
  parent=$(head -1 "$work/data/postmaster.pid")
}
