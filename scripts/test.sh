#!/usr/bin/env bash
# The test suite, as `make test` and CI run it. Starts a throwaway PostgreSQL when the server binaries exist
# (Debian's postgresql package), so the SQLite/PostgreSQL parity tests run instead of skipping.
# With arguments it is plain pytest. Without, most of the suite waits (servers starting, windows running,
# workers polling), so it runs in parallel worker processes (pytest-xdist), whole files to one worker so that a
# module's shared sweep runs once. TEST_WORKERS, default two per core: a 2-core box keeps about 1.2 cores busy
# with one worker per core, 1.7 with two. The tests that stop PostgreSQL start a cluster of their own.
set -euo pipefail
cd "$(dirname "$0")/.."
# The suite starts hundreds of Python processes (`specbench` verbs, stand-in servers, the dashboard) and each
# xdist worker imports every test module. Without bytecode caches each of them compiles specbench's modules
# again (~0.3 s of CPU a process, ~6 s a worker for the tests): a shell that sets PYTHONDONTWRITEBYTECODE made
# the whole suite pay that. __pycache__ is ignored by git.
unset PYTHONDONTWRITEBYTECODE
if [ -z "${SPECBENCH_TEST_PG_URL:-}" ] && ls /usr/lib/postgresql/*/bin/initdb >/dev/null 2>&1; then
  SPECBENCH_TEST_PG_URL=$(bash scripts/pg_test_server.sh)
  export SPECBENCH_TEST_PG_URL
  echo "PostgreSQL for tests: $SPECBENCH_TEST_PG_URL"
fi
if [ $# -gt 0 ] || ! .venv/bin/python -c "import xdist" 2>/dev/null; then
  exec .venv/bin/pytest "$@"
fi
# --no-loadscope-reorder: xdist (3.x) otherwise hands out the files with the most tests first, which undoes
# tests/conftest.py's order (slow and browser files first): a one-test browser file of 2.5 minutes started last
# and ran alone at the end while the other workers idled.
# --durations: the slowest tests, named in every CI log, so that a slower suite shows where it slowed.
exec .venv/bin/pytest -n "${TEST_WORKERS:-$(( 2 * $(nproc) ))}" --dist loadfile --no-loadscope-reorder --durations=25
