"""The dashboard's Jobs page under AppTest, on a database with a real mix of job and worker states."""

from __future__ import annotations

from datetime import timedelta
from pathlib import Path

import pytest
from sqlalchemy import Engine, update
from streamlit.testing.v1 import AppTest

from db import queue_queries as qq
from db.migrate import open_database
from db.models import Worker
from db.types import utcnow
from runners import queue, schedules
from tests.paths import REPO_ROOT
from tests.queue_support import sim_sweep

PAGE = str(REPO_ROOT / "dashboard" / "pages" / "jobs.py")


def populate(engine: Engine) -> dict[str, int]:
    ids = {
        name: queue.submit(engine, sim_sweep(name), label="nightly") for name in ("wait", "run", "bad", "ok")
    }
    queue.register_worker(engine, "gpu-a:1:x", pid=1, gpus=[], labels=[])
    queue.register_worker(engine, "gpu-b:2:y", pid=2, gpus=[], labels=[])
    # Claim order is oldest first: wait, run, bad, ok. Put "wait" back so it stays queued.
    got = queue.claim(engine, "gpu-a:1:x", [])
    assert got is not None and got.id == ids["wait"]
    assert queue.release(engine, ids["wait"], "gpu-a:1:x")
    for name in ("wait",):
        queue.transition(engine, ids[name], ["queued"], "canceled")
    for name in ("run", "bad", "ok"):
        got = queue.claim(engine, "gpu-a:1:x", [])
        assert got is not None and got.id == ids[name]
        assert queue.start(engine, got.id, "gpu-a:1:x", lease_s=60)
    assert (
        queue.fail_attempt(engine, ids["bad"], "gpu-a:1:x", "LaunchError: port 30000 in use", retry=False)
        == "failed"
    )
    assert queue.finish(engine, ids["ok"], "gpu-a:1:x")
    queue.worker_heartbeat(engine, "gpu-a:1:x", status="busy", job_id=ids["run"])
    with engine.begin() as conn:  # gpu-b was kill -9'd ten minutes ago
        conn.execute(
            update(Worker)
            .where(Worker.id == "gpu-b:2:y")
            .values(last_heartbeat=utcnow() - timedelta(minutes=10))
        )
    ids["queued"] = queue.submit(engine, sim_sweep("later"), priority=5)
    return ids


def open_page(url: str, monkeypatch: pytest.MonkeyPatch) -> AppTest:
    monkeypatch.setenv("DATABASE_URL", url)
    at = AppTest.from_file(PAGE, default_timeout=60)
    at.run()
    assert not at.exception, [e.value for e in at.exception]
    return at


def test_jobs_page(db_url: str, monkeypatch: pytest.MonkeyPatch) -> None:
    engine = open_database(db_url)
    ids = populate(engine)
    nightly = schedules.add_schedule(engine, "0 2 * * *", sim_sweep("nightly-sweep"), label="nightly")
    at = open_page(db_url, monkeypatch)
    assert at.title[0].value == "Jobs"
    metrics = {m.label: m.value for m in at.metric}
    assert metrics == {"Queued": "1", "Running": "1", "Done": "1", "Failed": "1", "Workers alive": "1"}

    assert len(at.dataframe) == 5
    queue_df, workers_df, failed_df, schedules_df, finished_df = (df.value for df in at.dataframe)
    # No table prints "None": an empty cell (a queued job's worker and run, a job not finished) is empty.
    for df in (queue_df, workers_df, failed_df, schedules_df, finished_df):
        assert not df.isna().any().any(), df
        assert not (df.astype(str) == "None").any().any(), df
    assert (queue_df["worker"] == "").sum() == 1 and (queue_df["run"] == "").all()
    # The schedules, as `specbench schedule list` shows them: it never fired, its next fire is due at 02:00.
    (row,) = schedules_df.to_dict("records")
    assert (row["schedule"], row["sweep"], row["label"], row["state"]) == (
        nightly,
        "nightly-sweep",
        "nightly",
        "enabled",
    )
    assert row["last fire"] == "never" and str(row["next fire"]).endswith("02:00:00")
    assert list(queue_df["job"]) == [ids["run"], ids["queued"]]  # running first, then waiting
    assert list(queue_df["status"]) == ["running", "queued"]
    states = dict(zip(workers_df["worker"], workers_df["state"], strict=True))
    assert states == {"gpu-a:1:x": "busy", "gpu-b:2:y": "lost"}
    ages = dict(zip(workers_df["worker"], workers_df["last heartbeat"], strict=True))
    assert ages["gpu-b:2:y"] == "10 min ago" and ages["gpu-a:1:x"].endswith("s ago")
    assert list(failed_df["job"]) == [ids["bad"]]
    assert failed_df["last error"][0] == "LaunchError: port 30000 in use"
    assert [e.label for e in at.expander] == [f"job {ids['bad']} · bad · failed after 1 attempt(s)"]
    assert at.text[0].value == "LaunchError: port 30000 in use"
    assert set(finished_df["status"]) == {"done", "canceled"}
    assert any("gpu-b:2:y" in w.value for w in at.warning)
    engine.dispose()


def test_empty_and_missing_schema(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    bare = f"sqlite:///{tmp_path / 'bare.db'}"
    at = open_page(bare, monkeypatch)
    assert "specbench db upgrade" in at.info[0].value
    empty = f"sqlite:///{tmp_path / 'empty.db'}"
    open_database(empty).dispose()
    at = open_page(empty, monkeypatch)
    assert {m.label: m.value for m in at.metric}["Queued"] == "0"
    assert any("Nothing queued" in i.value for i in at.info)
    assert any("No worker has registered" in i.value for i in at.info)
    assert at.success[0].value == "No failed jobs."
    assert any("No schedule" in i.value for i in at.info)


def test_queries_order_and_filter(sqlite_url: str) -> None:
    engine = open_database(sqlite_url)
    ids = populate(engine)
    assert [j["id"] for j in qq.queue_jobs(engine, statuses=["failed"])] == [ids["bad"]]
    assert [j["id"] for j in qq.queue_jobs(engine)][:2] == [ids["run"], ids["queued"]]
    queue.deregister_worker(engine, "gpu-a:1:x")
    assert {w["id"]: w["state"] for w in qq.workers(engine)}["gpu-a:1:x"] == "stopped"
    old = qq.workers(engine, now=utcnow() + timedelta(days=2))
    assert [w["id"] for w in old] == ["gpu-b:2:y"]  # stopped workers drop off after a day; lost ones stay
    engine.dispose()
