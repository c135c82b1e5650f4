#!/usr/bin/env bash
# Start (or reuse) a throwaway PostgreSQL for the test suite, from Debian's packages.
# Prints the URL to use as SPECBENCH_TEST_PG_URL. `stop` stops it.
set -euo pipefail
PORT=${SPECBENCH_PG_PORT:-54329}
DATA=${SPECBENCH_PG_DATA:-/tmp/specbench-pg}
BIN=$(ls -d /usr/lib/postgresql/*/bin 2>/dev/null | sort -V | tail -1)
if [ -z "$BIN" ]; then
  echo "PostgreSQL server binaries not found; install Debian's postgresql package" >&2
  exit 1
fi
# PostgreSQL refuses to run as root, so the cluster belongs to the postgres user when we are root.
if [ "$(id -u)" = 0 ]; then AS=(runuser -u postgres --); OWNER=postgres; else AS=(); OWNER=$(id -un); fi
if [ "${1:-start}" = stop ]; then
  "${AS[@]}" "$BIN/pg_ctl" -D "$DATA" -m fast stop >/dev/null 2>&1 || true
  exit 0
fi
if [ ! -f "$DATA/PG_VERSION" ]; then
  mkdir -p "$DATA"; chown "$OWNER" "$DATA"
  "${AS[@]}" "$BIN/initdb" -D "$DATA" -U specbench --auth=trust >/dev/null
fi
if ! "${AS[@]}" "$BIN/pg_ctl" -D "$DATA" status >/dev/null 2>&1; then
  "${AS[@]}" "$BIN/pg_ctl" -D "$DATA" -l "$DATA/server.log" -w \
    -o "-p $PORT -k /tmp -c listen_addresses=127.0.0.1 -c fsync=off -c max_connections=200" start >/dev/null
fi
"${AS[@]}" "$BIN/psql" -h 127.0.0.1 -p "$PORT" -U specbench -d postgres -tAc \
  "SELECT 1 FROM pg_database WHERE datname='specbench_test'" | grep -q 1 \
  || "${AS[@]}" "$BIN/createdb" -h 127.0.0.1 -p "$PORT" -U specbench specbench_test
echo "postgresql://specbench@127.0.0.1:$PORT/specbench_test"
