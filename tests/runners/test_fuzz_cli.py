"""The CLI fuzz corpus (tests/fuzz_cli.py) on SQLite and on PostgreSQL: no traceback, no hang, no raw control
character in anything printed (issue 30 §7, §9).

The test runs every third case of the corpus (about 390 per backend, every family), in this process; the
whole corpus (about 1,150 per backend) is `python -m benchmarks.fuzz_cli`, whose figures are in
docs/reference/reliability.md.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from benchmarks.chaos_audit import fresh_schema
from tests.fixtures.db import PG_URL
from tests.fuzz_cli import Targets, build_corpus, run_corpus
from tests.hostile import hostile_database

pytestmark = [pytest.mark.slow, pytest.mark.timeout(1200)]
STRIDE = 3
# Per case: far beyond what any case needs on a loaded box (the slowest takes a few seconds).
CASE_TIMEOUT_S = 60.0


@pytest.fixture
def empty_url(db_url: str, tmp_path: Path) -> Iterator[str]:
    """An empty database next to the hostile one: workers, the scheduler and seed start work on what they find."""
    if db_url.startswith("sqlite"):
        yield f"sqlite:///{tmp_path / 'empty.db'}"
        return
    assert PG_URL
    url, drop = fresh_schema(PG_URL)
    yield url
    drop()


def test_the_corpus_gives_no_traceback_no_hang_no_raw_control(
    db_url: str, empty_url: str, tmp_path: Path, measured_runs: Path
) -> None:
    hostile_database(measured_runs, tmp_path / "runs", db_url)
    corpus = build_corpus(Targets(db=db_url, empty=empty_url, work=tmp_path / "corpus"))
    assert len(corpus) > 1000
    sample = corpus[::STRIDE]
    assert {c.family for c in sample} == {c.family for c in corpus}  # every family is in the sample
    report = run_corpus(sample, tmp_path / "corpus", timeout_s=CASE_TIMEOUT_S)
    assert len(report.outcomes) >= 300
    assert report.failures() == [], report.summary()
    # Most of it is refused, as it should be; some is fine as given and runs (reads, a label of markup).
    codes = report.exit_codes()
    assert codes[2] > len(report.outcomes) // 2 and codes[0] > 0, report.summary()
