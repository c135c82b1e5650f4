#!/usr/bin/env bash
# The test suite, as `make test` and CI run it. Starts a throwaway PostgreSQL when the server binaries exist
# (Debian's postgresql package), so the SQLite/PostgreSQL parity tests run instead of skipping.
# With arguments it is plain pytest. Without, most of the suite waits (servers starting, windows running,
# workers polling), so it runs in parallel worker processes (pytest-xdist; TEST_WORKERS, default one per core),
# whole files to one worker so that a module's shared sweep runs once; then the tests that stop the shared
# PostgreSQL (marker `exclusive`) run alone.
set -euo pipefail
cd "$(dirname "$0")/.."
if [ -z "${SPECBENCH_TEST_PG_URL:-}" ] && ls /usr/lib/postgresql/*/bin/initdb >/dev/null 2>&1; then
  SPECBENCH_TEST_PG_URL=$(bash scripts/pg_test_server.sh)
  export SPECBENCH_TEST_PG_URL
  echo "PostgreSQL for tests: $SPECBENCH_TEST_PG_URL"
fi
if [ $# -gt 0 ] || ! .venv/bin/python -c "import xdist" 2>/dev/null; then
  exec .venv/bin/pytest "$@"
fi
status=0
.venv/bin/pytest -n "${TEST_WORKERS:-auto}" --dist loadfile -m "not exclusive" || status=$?
.venv/bin/pytest -m exclusive || { code=$?; [ "$code" -eq 5 ] || status=$code; }  # 5: none collected
exit "$status"
