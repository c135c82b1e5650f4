#!/usr/bin/env bash
# The test suite, as `make test` and CI run it. Starts a throwaway PostgreSQL when the server binaries exist
# (Debian's postgresql package), so the SQLite/PostgreSQL parity tests run instead of skipping.
set -euo pipefail
cd "$(dirname "$0")/.."
if [ -z "${SPECBENCH_TEST_PG_URL:-}" ] && ls /usr/lib/postgresql/*/bin/initdb >/dev/null 2>&1; then
  SPECBENCH_TEST_PG_URL=$(bash scripts/pg_test_server.sh)
  export SPECBENCH_TEST_PG_URL
  echo "PostgreSQL for tests: $SPECBENCH_TEST_PG_URL"
fi
exec .venv/bin/pytest "$@"
