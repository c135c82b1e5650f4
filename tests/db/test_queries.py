"""Read queries and the synthetic-history generator, on SQLite and PostgreSQL alike (the `db_url` fixture)."""

from __future__ import annotations

import json
from datetime import UTC, datetime, timedelta
from typing import Any

import numpy as np
import pandas as pd
import pytest
from sqlalchemy import Engine, event, func, select
from typer.testing import CliRunner

from analysis.changes import change_points
from analysis.stats.changepoint import ChangePointParams
from db import queries as q
from db import triage
from db.engine import session_scope
from db.fingerprint import point_fingerprint
from db.migrate import open_database
from db.models import Point, Run, Sample, ServerInstance, Triage
from runners.cli import app
from synthetic.history import (
    INJECTED_STEPS,
    SMALL_SHAPE,
    SYNTHETIC_LABEL,
    SYNTHETIC_PREFIX,
    SYNTHETIC_TRIGGER,
)
from synthetic.history.seed import delete_synthetic, seed_history

pytestmark = pytest.mark.slow  # tests/conftest.py starts the slow files first

END = datetime(2026, 11, 30, 12, 0, tzinfo=UTC)
ROUNDS = 30


@pytest.fixture
def seeded(engine: Engine) -> Engine:
    seed_history(engine, ROUNDS * 20, shape=SMALL_SHAPE, end=END, seed=5)
    return engine


def test_synthetic_history_is_labelled_and_complete(seeded: Engine) -> None:
    with session_scope(seeded) as s:
        runs = s.scalars(select(Run)).all()
        assert len(runs) == ROUNDS * len(SMALL_SHAPE.lanes)
        for r in runs:
            assert r.trigger == SYNTHETIC_TRIGGER
            assert r.sweep_name.startswith(SYNTHETIC_PREFIX)
            assert r.label == SYNTHETIC_LABEL
            assert r.provenance["synthetic"] is True and r.simulated
            assert r.started_at.tzinfo is not None and r.started_at <= END
        n_points = s.scalar(select(func.count(Point.id)))
        ok = s.scalar(select(func.count(Point.id)).where(Point.status == "ok"))
        samples = s.scalar(select(func.count(Sample.id)))
        assert n_points is not None and ok is not None and n_points > 0
        assert samples == sum(p.repeats for p in s.scalars(select(Point)))
        # Every point's median is its repeats' median; its fingerprint is the shared function's.
        p = s.scalars(select(Point).where(Point.status == "ok").limit(1)).one()
        assert p.output_throughput == pytest.approx(
            float(np.median([x.output_throughput for x in p.samples]))
        )
        assert p.fingerprint == point_fingerprint(
            model=p.model,
            draft_model=p.draft_model,
            attention_backend=p.attention_backend,
            tp=p.tp,
            algorithm=p.algorithm,
            steps=p.steps,
            topk=p.topk,
            draft_tokens=p.draft_tokens,
            spec_mode=p.spec_mode,
            batch_size=p.batch_size,
            workload_key=p.workload_key,
            gpu_name=p.gpu_name,
            gpu_count=p.gpu_count,
        )
        assert s.get(ServerInstance, p.server_instance_id) is not None
    # Ids continue after seeding (PostgreSQL sequences were moved past the explicit ids).
    with session_scope(seeded) as s:
        extra = Run(sweep_name="real", sweep_yaml="", sweep_hash="x", backend="sim", model="m", provenance={})
        s.add(extra)
        s.flush()
        assert extra.id == ROUNDS * len(SMALL_SHAPE.lanes) + 1


def test_delete_synthetic_keeps_real_runs(seeded: Engine) -> None:
    with session_scope(seeded) as s:
        s.add(Run(sweep_name="real", sweep_yaml="", sweep_hash="x", backend="sim", model="m", provenance={}))
    assert delete_synthetic(seeded) == ROUNDS * len(SMALL_SHAPE.lanes)
    with session_scope(seeded) as s:
        assert [r.sweep_name for r in s.scalars(select(Run))] == ["real"]
        assert s.scalar(select(func.count(Point.id))) == 0


def test_catalog_and_series_values_with_run_axes(seeded: Engine) -> None:
    cat = q.series_catalog(seeded)
    per_run = SMALL_SHAPE.points_per_run
    assert len(cat) == per_run * len(SMALL_SHAPE.lanes)
    assert cat["fingerprint"].is_unique
    assert {"model", "gpu_name", "batch_size", "spec_mode", "n_points", "last_at"} <= set(cat.columns)
    spec = cat[cat["spec_mode"] == "v2"].sort_values(["n_points", "fingerprint"])
    fp = spec.iloc[-1]["fingerprint"]
    axes = q.run_axes(seeded)  # the Trends page's path: the series alone, then the (cached) run axes
    series = q.with_run_axes(
        q.series_values(seeded, fp, ["output_throughput", "accept_length", "tpot_p50_ms"]), axes
    )
    assert set(series["status"]) == {"ok"}
    assert series["started_at"].is_monotonic_increasing
    assert {"sglang_version", "sglang_commit", "output_throughput_ci_low", "tpot_p50_ms"} <= set(
        series.columns
    )
    assert (series["output_throughput_ci_low"] <= series["output_throughput"]).all()
    everything = q.series_values(
        seeded, fp, statuses=("ok", "failed", "invalid", "mode_mismatch", "unstable")
    )
    assert len(everything) >= len(series)
    band = q.sample_ranges(seeded, series["point_id"].tolist(), "accept_length")
    assert len(band) == len(series)
    assert (band["low"] <= band["high"]).all() and set(band["n"]) == {3}


def test_metric_names_are_validated_never_interpolated(seeded: Engine) -> None:
    with pytest.raises(q.QueryError, match="unknown metric"):
        q.series_values(seeded, "x", ["output_throughput FROM points; --"])
    with pytest.raises(q.QueryError):
        q.run_samples(seeded, 1, ["id"])
    # A hostile fingerprint is just a value that matches nothing.
    assert q.series_values(seeded, "' OR 1=1 --").empty


def test_runs_newest_first_with_counts_and_problems(seeded: Engine) -> None:
    runs = q.latest_runs(seeded, 10)
    assert len(runs) == 10
    assert runs["started_at"].is_monotonic_decreasing
    assert (runs["points_ok"] + runs["points_problem"] <= SMALL_SHAPE.points_per_run).all()
    assert q.latest_runs(seeded, 10, include_synthetic=False).empty
    problems = q.problem_points(seeded, q.latest_runs(seeded, 1000)["id"].tolist())
    assert set(problems["status"]) <= set(q.PROBLEM_STATUSES)
    assert problems["reason"].notna().all()
    choices = q.run_choices(seeded)
    assert choices["id"].iloc[0] == runs["id"].iloc[0]
    totals = q.totals(seeded)
    assert totals.runs == totals.synthetic_runs == ROUNDS * len(SMALL_SHAPE.lanes)
    assert totals.last_run_at is not None and totals.last_run_at.tzinfo is not None


def test_run_points_samples_and_info(seeded: Engine) -> None:
    rid = int(q.latest_runs(seeded, 1)["id"].iloc[0])
    points = q.run_points(seeded, rid)
    assert len(points) == SMALL_SHAPE.points_per_run
    samples = q.run_samples(seeded, rid, ["output_throughput"])
    ok = points[points["status"] != "failed"]
    merged = samples.groupby("point_id")["output_throughput"].median()
    assert np.allclose(merged.reindex(ok["point_id"]).to_numpy(), ok["output_throughput"].to_numpy())
    info = q.run_info(seeded, rid)
    assert info["id"] == rid and "sweep_yaml" in info
    with pytest.raises(q.QueryError):
        q.run_info(seeded, 10_000)


def test_run_reads_select_the_head_schema_without_inspecting_it(sqlite_url: str) -> None:
    """Every reader opens the database at head (tests/db/test_schema_path.py), so a read query asks nothing
    about which columns exist: it selects them."""
    engine = open_database(sqlite_url)
    seed_history(engine, 20, shape=SMALL_SHAPE, end=END, seed=5)
    rid = int(q.latest_runs(engine, 1)["id"].iloc[0])
    inspected: list[str] = []

    @event.listens_for(engine, "before_cursor_execute")
    def count(_conn: Any, _cursor: Any, statement: str, *_: Any) -> None:
        if statement.startswith("PRAGMA") and "table_" in statement:  # SQLite's column listing
            inspected.append(statement)

    assert "telemetry" in q.run_windows(engine, rid, ["output_throughput"]).columns
    assert "invocation" in q.run_samples(engine, rid, ["output_throughput"]).columns
    assert "correctness" in q.run_points(engine, rid).columns
    assert "accept_lengths" in q.caption_facts(engine, rid)
    assert inspected == []


def test_resolve_run(seeded: Engine) -> None:
    runs = q.run_choices(seeded)
    newest, second = int(runs["id"].iloc[0]), int(runs["id"].iloc[1])
    assert q.resolve_run(seeded, "latest") == newest
    assert q.resolve_run(seeded, "latest~1") == second
    assert q.resolve_run(seeded, str(second)) == second
    uid = str(runs["uid"].iloc[1])
    assert q.resolve_run(seeded, uid) == second
    for bad in ("99999", "latest~9999", "zzzzzzzz", "abc"):
        with pytest.raises(q.QueryError):
            q.resolve_run(seeded, bad)


def test_triage_upsert(seeded: Engine) -> None:
    fp = str(q.series_catalog(seeded)["fingerprint"].iloc[0])
    first = triage.set_triage(
        seeded, fingerprint=fp, metric="output_throughput", run_id=3, state="acknowledged", note=" a "
    )
    again = triage.set_triage(
        seeded, fingerprint=fp, metric="output_throughput", run_id=3, state="dismissed", note=""
    )
    assert first == again
    rows = triage.triage_for(seeded, [fp], "output_throughput")
    assert rows[["state", "note", "run_id"]].to_dict("records") == [
        {"state": "dismissed", "note": None, "run_id": 3}
    ]
    triage.set_triage(
        seeded, fingerprint=fp, metric="accept_length", run_id=None, state="open", magnitude=-0.08
    )
    assert len(triage.triage_for(seeded, [fp])) == 2
    assert triage.triage_for(seeded, []).empty
    with pytest.raises(q.QueryError):
        triage.set_triage(seeded, fingerprint=fp, metric="output_throughput", run_id=3, state="maybe")
    with session_scope(seeded) as s:
        assert s.scalar(select(func.count(Triage.id))) == 2


def test_injected_acceptance_drop_is_found_where_it_was_put(seeded: Engine) -> None:
    """End to end: synthetic history -> queries -> E-divisive -> attribution names acceptance."""
    step = INJECTED_STEPS[0]  # v2 acceptance -8% on DeepSeek-V3 / H200 from 35% of history
    cat = q.series_catalog(seeded)
    pick = cat[(cat["gpu_name"] == step.gpu) & (cat["spec_mode"] == "v2") & (cat["steps"] == 3)]
    fp = str(pick.sort_values("batch_size")["fingerprint"].iloc[-1])
    series = q.with_run_axes(q.series_values(seeded, fp), q.run_axes(seeded)).assign(fingerprint=fp)
    changes = change_points(series, "output_throughput", ChangePointParams(window=30))
    drops = changes[changes["direction"] == "regression"]
    assert len(drops) >= 1
    first = drops.iloc[0]
    runs = q.run_choices(seeded, limit=10_000).sort_values("started_at")
    lane_runs = runs[runs["gpu_name"] == step.gpu].reset_index(drop=True)
    expected = int(np.ceil(step.at * (ROUNDS - 1)))
    assert abs(int(lane_runs.index[lane_runs["id"] == first["run_id"]][0]) - expected) <= 1
    assert "acceptance dropped" in first["why"]


def test_series_history_reads_by_run_and_filters(seeded: Engine) -> None:
    since = END - timedelta(days=5)
    hist = q.series_history(seeded, since=since)
    assert not hist.empty
    assert (pd.to_datetime(hist["started_at"], utc=True) >= since).all()
    fps = sorted(hist["fingerprint"].unique())
    assert 0 < len(fps) <= len(SMALL_SHAPE.lanes) * SMALL_SHAPE.points_per_run
    some = q.series_history(seeded, since=since, fingerprints=fps[:3])
    assert set(some["fingerprint"]) <= set(fps[:3])
    assert q.series_history(seeded, since=since, fingerprints=[]).empty
    desc = q.series_describe(seeded, fps[:3])
    assert set(desc["fingerprint"]) == set(fps[:3])


def test_seed_and_regressions_cli(sqlite_url: str) -> None:
    runner = CliRunner()
    res = runner.invoke(app, ["seed", "--points", "400", "--db", sqlite_url, "--seed", "2"])
    assert res.exit_code == 0, res.output
    assert "SYNTHETIC" in res.output
    res = runner.invoke(app, ["regressions", "--db", sqlite_url, "--since", "400d", "--format", "json"])
    assert res.exit_code == 0, res.output
    rows = json.loads(res.stdout)
    assert isinstance(rows, list)
    assert all(r["direction"] == "regression" for r in rows)
    res = runner.invoke(app, ["regressions", "--db", sqlite_url, "--since", "soon"])
    assert res.exit_code == 2
    res = runner.invoke(app, ["seed", "--points", "100", "--db", sqlite_url, "--replace"])
    assert res.exit_code == 0, res.output
    eng = open_database(sqlite_url)
    with session_scope(eng) as s:
        assert s.scalar(select(func.count(Run.id))) == 4  # one round of the default shape's 4 lanes
    eng.dispose()


def test_the_demos_seeded_history_has_a_change_with_its_cause(db_url: str) -> None:
    """`make demo`'s seed: the small shape, written once; `regressions --since 365d` then lists a change with
    its attribution, on SQLite and PostgreSQL."""
    runner = CliRunner()
    args = ["seed", "--shape", "small", "--points", "600", "--once", "--db", db_url]
    res = runner.invoke(app, args)
    assert res.exit_code == 0, res.output
    eng = open_database(db_url)
    with session_scope(eng) as s:
        runs = s.scalar(select(func.count(Run.id)))
    assert runs == 60  # 30 nightly rounds of the small shape's 2 lanes
    again = runner.invoke(app, args)
    assert again.exit_code == 0 and "already present" in again.output
    with session_scope(eng) as s:
        assert s.scalar(select(func.count(Run.id))) == runs
    eng.dispose()
    res = runner.invoke(app, ["regressions", "--db", db_url, "--since", "365d", "--format", "json"])
    rows = json.loads(res.stdout)
    assert rows and all(r["why"] for r in rows), rows
    assert any("slower" in r["why"] or "acceptance" in r["why"] for r in rows)
