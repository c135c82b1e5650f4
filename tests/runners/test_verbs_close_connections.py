"""A verb closes the database connections it opened before it ends: a PostgreSQL connection left to the garbage
collector outlives the verb (psycopg warns) and the server logs an unexpected EOF for each, per verb run."""

from __future__ import annotations

import os
import subprocess
import sys

import pytest

from db.migrate import open_database
from tests.paths import REPO_ROOT

pytestmark = pytest.mark.postgres


@pytest.mark.parametrize("verb", [["runs"], ["jobs"], ["regressions"]])  # read-only, migrating, analysis
def test_no_connection_is_left_to_the_garbage_collector(verb: list[str], pg_url: str) -> None:
    open_database(pg_url).dispose()  # the read-only verbs refuse a schema behind theirs
    done = subprocess.run(
        [sys.executable, "-X", "dev", "-W", "always::ResourceWarning", "-m", "runners.cli", *verb],
        cwd=REPO_ROOT,
        env={**os.environ, "DATABASE_URL": pg_url},
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert done.returncode in (0, 1), done.stderr
    assert "still open" not in done.stderr, done.stderr
