#!/bin/sh
# pg_server.sh — a throwaway PostgreSQL server for the database tests.
#
#   pg_server.sh start STATE_DIR [--fast]   initdb + pg_ctl start on a free
#                                           loopback port; writes STATE_DIR/url
#   pg_server.sh stop STATE_DIR             pg_ctl stop, data folder removed
#   pg_server.sh halt STATE_DIR             pg_ctl stop, data folder kept
#   pg_server.sh resume STATE_DIR           pg_ctl start again (same port)
#
# PostgreSQL refuses to run as root: as root, the server runs as the
# `postgres` user the Debian package creates (runuser), with its data folder
# owned by that user. When the server binaries are absent, `start` writes
# STATE_DIR/skip with the reason and exits 0; the tests that need the server
# then report themselves skipped (exit 77) quoting it.
#
# The login is password-checked (scram-sha-256) over TCP, so a wrong
# password is refused as on a real server. --fast turns fsync off (the
# suite's server: nothing here survives a power loss anyway).
set -eu

cmd=${1:?usage: pg_server.sh start|stop|halt|resume STATE_DIR}
state=${2:?usage: pg_server.sh start|stop|halt|resume STATE_DIR}
fast=${3:-}
PASSWORD=tessera-test

bindir=""
if [ -n "${PG_BINDIR:-}" ]; then
  bindir=$PG_BINDIR
else
  for d in $(ls -d /usr/lib/postgresql/*/bin 2>/dev/null | sort -V -r); do
    if [ -x "$d/initdb" ] && [ -x "$d/pg_ctl" ]; then bindir=$d; break; fi
  done
  if [ -z "$bindir" ] && command -v initdb >/dev/null 2>&1; then
    bindir=$(dirname "$(command -v initdb)")
  fi
fi

# as_server CMD...: runs CMD as the server's user
as_server() {
  if [ "$(id -u)" -eq 0 ]; then
    runuser -u postgres -- "$@"
  else
    "$@"
  fi
}

ctl_start() {
  data=$(cat "$state/data")
  as_server "$bindir/pg_ctl" -D "$data" -l "$data/server.log" -w -t 60 start >/dev/null
}

case "$cmd" in
start)
  mkdir -p "$state"
  rm -f "$state/skip" "$state/url"
  if [ -z "$bindir" ] || [ ! -x "$bindir/initdb" ]; then
    echo "no PostgreSQL server binaries (initdb, pg_ctl) found; install the postgresql package (scripts/install-deps.sh)" >"$state/skip"
    echo "pg_server: skipped: $(cat "$state/skip")"
    exit 0
  fi
  if [ "$(id -u)" -eq 0 ] && ! id postgres >/dev/null 2>&1; then
    echo "pg_server: running as root, but there is no 'postgres' user to run the server as" >&2
    exit 1
  fi
  data=$(mktemp -d "${TMPDIR:-/tmp}/tessera-pg-XXXXXX")
  echo "$data" >"$state/data"
  printf '%s\n' "$PASSWORD" >"$data.pw"
  if [ "$(id -u)" -eq 0 ]; then
    chown postgres "$data" "$data.pw"
    chmod 700 "$data"
  fi
  as_server "$bindir/initdb" -D "$data" -U postgres --pwfile="$data.pw" \
    --auth-host=scram-sha-256 --auth-local=trust --locale=C -E UTF8 \
    >"$state/initdb.log" 2>&1 || {
    cat "$state/initdb.log" >&2
    exit 1
  }
  rm -f "$data.pw"
  # a free loopback port: try random ones until the server binds one
  tries=0
  while :; do
    port=$((20000 + $(od -An -N2 -tu2 /dev/urandom | tr -d ' ') % 40000))
    {
      echo "listen_addresses = '127.0.0.1'"
      echo "port = $port"
      echo "unix_socket_directories = '$data'"
      echo "max_connections = 60"
      if [ "$fast" = "--fast" ]; then
        echo "fsync = off"
        echo "full_page_writes = off"
      fi
    } | as_server sh -c "cat >> '$data/postgresql.conf.tessera' && cp '$data/postgresql.conf.tessera' '$data/postgresql.auto.conf' && rm '$data/postgresql.conf.tessera'"
    if ctl_start 2>/dev/null; then break; fi
    tries=$((tries + 1))
    if [ $tries -ge 8 ]; then
      echo "pg_server: the server did not start; its log:" >&2
      cat "$data/server.log" >&2 || true
      exit 1
    fi
  done
  echo "$port" >"$state/port"
  echo "postgresql://postgres:$PASSWORD@127.0.0.1:$port/postgres" >"$state/url"
  echo "pg_server: PostgreSQL $("$bindir/pg_ctl" --version | awk '{print $3}') on 127.0.0.1:$port, data in $data"
  ;;
halt)
  data=$(cat "$state/data")
  as_server "$bindir/pg_ctl" -D "$data" -m fast -w stop >/dev/null
  ;;
resume)
  ctl_start
  ;;
stop)
  [ -f "$state/data" ] || exit 0
  data=$(cat "$state/data")
  as_server "$bindir/pg_ctl" -D "$data" -m immediate -w stop >/dev/null 2>&1 || true
  rm -rf "$data" "$state/data" "$state/url" "$state/port"
  ;;
*)
  echo "usage: pg_server.sh start|stop|halt|resume STATE_DIR" >&2
  exit 2
  ;;
esac
