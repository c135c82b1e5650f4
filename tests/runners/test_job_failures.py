"""A failed job says why, in `specbench jobs` and on the Jobs page, with the words the Overview uses for its run's
points; a failure another attempt would repeat (a known SGLang bug, arguments SGLang refused, a missing model)
is not retried, while a crash still is (tests/runners/test_honest_exit.py)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from sqlalchemy import select
from streamlit.testing.v1 import AppTest

from analysis.jobs import cannot_succeed, failure_cause
from bench.server import refusal
from db.engine import session_scope
from db.migrate import open_database
from db.models import Job, Run
from runners import queue
from runners.worker import QueueWorker, WorkerOptions
from tests.fixtures.cli import run_cli
from tests.paths import REPO_ROOT

KNOWN_BUG = "known SGLang bug flashmla-draft-extend-v2"
# What the stand-in logs when SGLang would refuse a launch's arguments (synthetic/server/__main__.py), and what
# SGLang itself logs for one.
STAND_IN_REFUSAL = (
    "Traceback (most recent call last):\n"
    '  File "sglang/srt/server_args.py", in __post_init__\n'
    "ValueError: speculative_num_steps and speculative_eagle_topk must be >= 1\n"
)
SGLANG_REFUSAL = (
    "Traceback (most recent call last):\n"
    '  File "/opt/sgl/lib/python3.12/site-packages/sglang/srt/server_args.py", line 812, in __post_init__\n'
    "    self._handle_speculative_decoding()\n"
    "AssertionError: page_size must be 1 for topk > 1 on flashmla\n"
)
NO_MODEL = (
    "OSError: deepseek-ai/DeepSeek-V4 is not a local folder and is not a valid model identifier listed on "
    "'https://huggingface.co/models'\n"
)
CRASH = (
    "[2026-12-05 10:00:01] Scheduler hit an exception: RuntimeError: CUDA error: an illegal memory access\n"
)


def test_refusals_are_told_from_crashes() -> None:
    assert refusal.refused(1, STAND_IN_REFUSAL) == refusal.ARGUMENTS
    assert refusal.refused(1, SGLANG_REFUSAL) == refusal.ARGUMENTS
    assert refusal.refused(
        2, "usage: launch_server [-h] ...\nlaunch_server: error: unrecognized arguments: --x\n"
    )
    assert refusal.refused(1, NO_MODEL) == refusal.MODEL
    assert refusal.refused(1, CRASH) is None  # may go another way next time
    assert refusal.refused(-9, SGLANG_REFUSAL) is None  # killed: not its arguments
    assert refusal.refused(None, "") is None  # never became healthy in time: not told apart


def test_what_cannot_succeed_and_how_the_cause_reads() -> None:
    bug = {"status": "failed", "reason": f"server failed to start: {KNOWN_BUG}", "known_bug": "x"}
    refused = {
        "status": "failed",
        "reason": "server failed to start",
        "exit_code": 1,
        "log_tail": SGLANG_REFUSAL,
    }
    crashed = {"status": "failed", "reason": "server crashed", "exit_code": 1, "log_tail": CRASH}
    assert cannot_succeed([bug, bug, refused])
    assert not cannot_succeed([bug, crashed])  # the crash may not happen again: retry
    assert not cannot_succeed([])
    assert failure_cause([bug, crashed, bug]) == (
        f"2 failed: server failed to start: {KNOWN_BUG}; 1 failed: server crashed"
    )


def _known_bug_sweep(tmp: Path) -> str:
    """sweeps/correctness-sim.yaml as shipped (sglang 0.5.12 emulated: v2 dies of a known bug), instant."""
    text = (REPO_ROOT / "sweeps" / "correctness-sim.yaml").read_text()
    emulated = 'sim: {version: "0.5.12", acceptance_rate: 0.7, time_scale: 0.25}'
    assert emulated in text
    return text.replace(emulated, 'sim: {version: "0.5.12", acceptance_rate: 0.7, instant: true}').replace(
        "batch_sizes: [1, 8]", "batch_sizes: [1]"
    )


@pytest.fixture
def failed_job(db_url: str, tmp_path: Path) -> tuple[str, int]:
    engine = open_database(db_url)
    job_id = queue.submit(engine, _known_bug_sweep(tmp_path), label="nightly", max_attempts=3)
    options = WorkerOptions(
        lease_s=30, poll_s=0.02, once=True, backoff=queue.Backoff(base_s=0.0), log_dir=tmp_path
    )
    assert QueueWorker(engine, options).run() == 0
    with session_scope(engine) as s:
        job = s.get(Job, job_id)
        assert job is not None
        assert (job.status, job.attempts) == ("failed", 1), job.last_error  # not retried
        assert s.scalars(select(Run)).one().status == "partial"  # v1 and the baseline were measured
    engine.dispose()
    return db_url, job_id


def test_a_known_bug_fails_the_job_once_with_its_cause(failed_job: tuple[str, int]) -> None:
    url, job_id = failed_job
    listed = run_cli("jobs", "--db", url, "--status", "failed", "--format", "json")
    job = json.loads(listed.stdout)["jobs"][0]
    assert job["id"] == job_id
    error = job["last_error"]
    # The run's summary, why its points failed (as the Overview says it), and that it is not retried.
    assert error.startswith("2/3 points measured (1 failed): 1 failed: server failed to start: "), error
    assert KNOWN_BUG in error and error.endswith("(not retried: another attempt would fail the same way)")
    for columns in ("80", "200"):
        table = run_cli("jobs", "--db", url, "--status", "failed", env={"COLUMNS": columns})
        assert table.returncode == 0, table.stderr
        # At 80 columns the cause wraps, a long bug id mid-word where the worker's name (its pid) leaves the
        # column narrow: read it with the wrapping undone.
        flat = "".join(table.stdout.split())
        assert KNOWN_BUG.replace(" ", "") in flat and "why" in table.stdout, table.stdout
        assert max(len(line) for line in table.stdout.splitlines()) <= int(columns), table.stdout


def test_the_jobs_page_shows_the_cause(failed_job: tuple[str, int], monkeypatch: pytest.MonkeyPatch) -> None:
    url, job_id = failed_job
    monkeypatch.setenv("DATABASE_URL", url)
    at = AppTest.from_file(str(REPO_ROOT / "dashboard" / "pages" / "jobs.py"), default_timeout=60)
    at.run()
    assert not at.exception, [e.value for e in at.exception]
    failed = next(df.value for df in at.dataframe if "last error" in df.value.columns)
    assert list(failed["job"]) == [job_id] and KNOWN_BUG in failed["last error"][0]
    assert any(KNOWN_BUG in t.value for t in at.text)  # the whole error, in the job's expander
