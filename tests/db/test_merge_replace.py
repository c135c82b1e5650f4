"""A repeat imported while `failed`, then re-measured in place by the resumed run on the GPU host (same point,
same repeat index): the next import replaces it with the measurement, its requests and telemetry, and the point
takes the source's aggregates; a measured repeat is never replaced, and importing again changes nothing."""

from __future__ import annotations

import dataclasses
import shutil
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pytest
from sqlalchemy import Engine, inspect, select
from sqlalchemy.orm import Session
from typer.testing import CliRunner

from bench.measure import Window
from bench.results import STATUS_SEVERITY, PointStatus, RequestRecord, SampleMetrics, SampleResult
from bench.stats.summary import MEASURED_STATUSES
from db.engine import session_scope
from db.merge import SUPERSEDES_FAILED, Counts, merge_runs
from db.migrate import open_database
from db.models import METRIC_FIELDS, Point, RequestRow, Run, Sample, ServerInstance
from db.snapshot import snapshot
from runners.cli import app
from runners.store import store_sample
from tests.fixtures.run_parts import RESUMED, RESUMED_AT, UID, V3_EXAMPLE, example_in_parts, resumed_server

pytestmark = pytest.mark.slow  # tests/conftest.py starts the slow files first

KEY = RESUMED  # the point whose repeats 3 and 4 the resumed part measured
REPEAT = 2  # the repeat whose server died in part 1, measured again by the resumed run
DIED_AT = datetime(2026, 12, 3, 19, 0, tzinfo=UTC)
POINT_FIELDS = (*METRIC_FIELDS, "status", "reason", "repeats", "output_throughput_ci_low", "overhead_s")
REQUEST_FIELDS = tuple(c.key for c in inspect(RequestRow).column_attrs if c.key not in ("id", "sample_id"))


def _point(s: Session) -> Point:
    return s.scalars(select(Point).join(Run).where(Run.uid == UID, Point.point_key == KEY)).one()


def _run(s: Session) -> Run:
    return s.scalars(select(Run).where(Run.uid == UID)).one()


def _measurement(sample: Sample, status: PointStatus, scale: float) -> SampleResult:
    """What measuring the repeat again returns: the example's figures (throughputs scaled) and requests."""
    metrics = {f.name: getattr(sample, f.name) for f in dataclasses.fields(SampleMetrics)}
    metrics = {k: v for k, v in metrics.items() if v is not None}
    for name in ("output_throughput", "total_throughput", "request_throughput", "input_throughput"):
        metrics[name] *= scale
    records = [
        RequestRecord(
            index=r.idx,
            prompt_len=r.prompt_len,
            max_new_tokens=r.max_new_tokens,
            start=r.start_s,
            ttft=r.ttft_s,
            e2e=r.e2e_s,
            completion_tokens=r.completion_tokens,
            prompt_tokens=r.prompt_tokens,
            cached_tokens=r.cached_tokens,
            spec_verify_ct=r.spec_verify_ct,
            spec_accept_length=r.spec_accept_length,
            finish_reason=r.finish_reason,
            chunk_times=list(r.chunk_times),
            chunk_tokens=list(r.chunk_tokens),
        )
        for r in sample.requests
    ]
    reason = None if status == "ok" else f"{status} on purpose (re-measured x{scale})"
    return SampleResult(REPEAT, status, reason, SampleMetrics(**metrics), records, overhead_s=1.5)


def _host_part1(tmp_path: Path) -> tuple[Path, SampleResult]:
    """The GPU host's database when part 1 stopped: the server died in the middle of KEY's repeat 2, stored
    `failed` with its failed requests (the point refreshed by store_sample, as the runner does); and what
    the repeat measures when the run resumes."""
    host = tmp_path / "host.db"
    shutil.copy(V3_EXAMPLE, host)  # never write to the committed example
    eng = open_database(f"sqlite:///{host}")
    with session_scope(eng) as s:
        point = _point(s)
        sample = next(x for x in point.samples if x.repeat == REPEAT)
        remeasured = _measurement(sample, "ok", 1.0)
        point.samples.remove(sample)
        s.flush()
        n = len(remeasured.requests)
        died = SampleResult(
            REPEAT,
            "failed",
            "server died during the window (exit code -9)",
            SampleMetrics(
                duration_s=3.0,
                completed=0,
                failed=n,
                incomplete=0,
                total_input_tokens=0,
                total_output_tokens=0,
                request_throughput=0.0,
                input_throughput=0.0,
                output_throughput=0.0,
                total_throughput=0.0,
            ),
            [
                RequestRecord(index=i, prompt_len=256, max_new_tokens=256, error="ConnectionResetError")
                for i in range(n // 2)
            ],
        )
        window = Window(started_at=DIED_AT.timestamp(), telemetry={"sm_clock_mhz": 1980.0})
        assert store_sample(
            s, point, died, spec_mode_resolved=point.spec_mode_resolved, window=window, order_index=40
        )
        assert point.status == "failed" and point.repeats == 5
        run = _run(s)
        run.status, run.error, run.finished_at = "partial", "server died", DIED_AT
    eng.dispose()
    return host, remeasured


def _resume(host: Path, result: SampleResult, *, started_at: datetime = RESUMED_AT) -> None:
    """`--resume` on the GPU host: a new server measures the failed repeat again, in place."""
    eng = open_database(f"sqlite:///{host}")
    with session_scope(eng) as s:
        point = _point(s)
        server = resumed_server(s, point, started_at)
        window = Window(
            started_at=started_at.timestamp() + 60, telemetry={"sm_clock_mhz": 1755.0, "power_w": 640.0}
        )
        assert store_sample(  # replaces the failed repeat, refreshes the point
            s,
            point,
            result,
            spec_mode_resolved=point.spec_mode_resolved,
            window=window,
            order_index=41,
            invocation=41,
            server_instance_id=server.id,
        )
        run = _run(s)
        run.status, run.error, run.finished_at = "done", None, started_at.replace(hour=2)
    eng.dispose()


def _repeats(engine: Engine) -> dict[int, tuple[Any, ...]]:
    """KEY's repeats: status, reason, figures, window, telemetry, server, and every request's columns."""
    out: dict[int, tuple[Any, ...]] = {}
    with session_scope(engine) as s:
        for x in _point(s).samples:
            si = s.get(ServerInstance, x.server_instance_id) if x.server_instance_id else None
            server = None if si is None else (si.config_key, si.started_at)
            reqs = [tuple(getattr(r, f) for f in REQUEST_FIELDS) for r in x.requests]
            figures = tuple(getattr(x, f) for f in METRIC_FIELDS)
            out[x.repeat] = (x.status, x.reason, figures, x.window_started_at, x.telemetry, server, reqs)
    return out


def _aggregates(engine: Engine) -> dict[str, Any]:
    with session_scope(engine) as s:
        point = _point(s)
        si = s.get(ServerInstance, point.server_instance_id)
        assert si is not None and si.run_id == point.run_id
        return {**{f: getattr(point, f) for f in POINT_FIELDS}, "server": si.started_at}


def _run_state(engine: Engine) -> tuple[Any, ...]:
    with session_scope(engine) as s:
        run = _run(s)
        return run.status, run.error, run.finished_at


def _import(source: Engine, dest: Engine) -> Any:
    with session_scope(dest) as s:
        return merge_runs(source, s)


@pytest.mark.parametrize("status", ["ok", "invalid"])
def test_a_failed_repeat_measured_again_replaces_the_one_imported(
    tmp_path: Path, db_url: str, status: PointStatus
) -> None:
    host_file, remeasured = _host_part1(tmp_path)
    part1_file = tmp_path / "part1.db"
    snapshot(str(host_file), str(part1_file))  # the file imported while the repeat was failed
    dest = open_database(db_url)
    part1 = open_database(f"sqlite:///{part1_file}")
    first = _import(part1, dest)
    assert len(first.runs_added) == 2 and first.grown == Counts()
    assert _repeats(dest)[REPEAT][0] == "failed" and _aggregates(dest)["status"] == "failed"

    remeasured = dataclasses.replace(remeasured, status=status, reason=None if status == "ok" else "pinned")
    _resume(host_file, remeasured)
    host = open_database(f"sqlite:///{host_file}")
    want, want_point = _repeats(host), _aggregates(host)
    assert want[REPEAT][0] == status and want_point["status"] == status and want_point["repeats"] == 5
    n_requests = len(want[REPEAT][-1])
    assert n_requests == len(remeasured.requests) > len(_repeats(dest)[REPEAT][-1]) > 0

    second = _import(host, dest)
    assert not second.runs_added and len(second.runs_grown) == 1 and len(second.runs_skipped) == 1
    assert second.grown == Counts(requests=n_requests, servers=1, replaced=1)
    got = _repeats(dest)
    assert got[REPEAT] == want[REPEAT]  # measured, by the resumed server, with the source's requests
    assert got[REPEAT][-1] == [tuple(getattr(r, f) for f in REQUEST_FIELDS) for r in _rows(host)]
    assert got == want  # the other repeats, untouched, were the same already
    assert _aggregates(dest) == want_point  # the point counts the repeats it holds
    assert _run_state(dest) == _run_state(host)
    with session_scope(dest) as s:  # the failed repeat's requests went with it
        run_requests = s.scalars(
            select(RequestRow.id).join(Sample).join(Point).where(Point.run_id == _run(s).id)
        ).all()
    with session_scope(host) as s:
        assert len(run_requests) == len(
            s.scalars(select(RequestRow.id).join(Sample).join(Point).where(Point.run_id == _run(s).id)).all()
        )

    third = _import(host, dest)  # the same file again: nothing
    assert not third.runs_grown and len(third.runs_skipped) == 2 and third.grown == Counts()
    assert _repeats(dest) == want and _aggregates(dest) == want_point
    older = _import(part1, dest)  # the file of part 1 again: its failed repeat replaces nothing
    assert not older.runs_grown and older.grown == Counts()
    assert _repeats(dest) == want and _aggregates(dest) == want_point and _run_state(dest)[0] == "done"
    for eng in (part1, host, dest):
        eng.dispose()


def _rows(engine: Engine) -> list[RequestRow]:
    with session_scope(engine) as s:
        sample = next(x for x in _point(s).samples if x.repeat == REPEAT)
        rows = list(sample.requests)
        s.expunge_all()
        return rows


def test_a_measured_repeat_is_never_replaced(tmp_path: Path, db_url: str) -> None:
    """Two hosts resumed the same part 1 (a retried job elsewhere): the team database keeps the measurement
    it imported first, and a repeat still failed at the source replaces nothing."""
    host_file, remeasured = _host_part1(tmp_path)
    other_file = tmp_path / "other.db"
    snapshot(str(host_file), str(other_file))
    _resume(host_file, remeasured)
    _resume(
        other_file,
        dataclasses.replace(_scaled(remeasured, 0.5), status="unstable", reason="other host"),
        started_at=RESUMED_AT.replace(hour=3),
    )
    host, other = open_database(f"sqlite:///{host_file}"), open_database(f"sqlite:///{other_file}")
    dest = open_database(db_url)
    _import(host, dest)
    with session_scope(dest) as s:  # a marker an import must keep
        sample = next(x for x in _point(s).samples if x.repeat == REPEAT)
        sample.reason = "measured by the first host"
    kept, kept_point = _repeats(dest), _aggregates(dest)
    assert kept[REPEAT][0] == "ok" and kept[REPEAT][1] == "measured by the first host"

    report = _import(other, dest)
    assert report.grown.replaced == 0 and report.grown.samples == 0
    assert _repeats(dest)[REPEAT][:5] == kept[REPEAT][:5]  # not the other host's "unstable" repeat
    assert _repeats(dest)[REPEAT][-1] == kept[REPEAT][-1]
    assert _aggregates(dest) == kept_point
    for eng in (host, other, dest):
        eng.dispose()


def _scaled(result: SampleResult, scale: float) -> SampleResult:
    assert result.metrics is not None
    m = dataclasses.replace(result.metrics, output_throughput=result.metrics.output_throughput * scale)
    return dataclasses.replace(result, metrics=m)


def test_import_says_how_many_repeats_replaced_a_failed_one(tmp_path: Path) -> None:
    host_file, remeasured = _host_part1(tmp_path)
    part1_file = tmp_path / "part1.db"
    snapshot(str(host_file), str(part1_file))
    _resume(host_file, remeasured)
    dest = open_database(f"sqlite:///{tmp_path / 'team.db'}")
    lines = []
    for source in (part1_file, host_file):
        eng = open_database(f"sqlite:///{source}")
        lines.append(_import(eng, dest).summary())
        eng.dispose()
    dest.dispose()
    n = len(remeasured.requests)
    assert lines[1] == (
        "imported 0 run(s) (0 points, 0 repeats, 0 requests, 0 profiles), grew 1 run(s) "
        f"(+0 points, +0 repeats, +1 repeats replaced a failed one, +{n} requests, +0 profiles); "
        "1 already present"
    )


def test_the_summary_reads_as_the_import_command_prints_it(tmp_path: Path) -> None:
    """Without a replacement, MergeReport.summary() is the line `specbench import` prints."""
    part1, full = example_in_parts(tmp_path)
    cli_db = ["--db", f"sqlite:///{tmp_path / 'cli.db'}"]
    dest = open_database(f"sqlite:///{tmp_path / 'team.db'}")
    for source in (part1, full, full):
        res = CliRunner().invoke(app, ["import", str(source), *cli_db])
        assert res.exit_code == 0, res.output
        eng = open_database(f"sqlite:///{source}")
        assert _import(eng, dest).summary() == " ".join(res.output.split())
        eng.dispose()
    dest.dispose()


def test_the_statuses_that_supersede_a_failure_are_the_measured_ones() -> None:
    assert SUPERSEDES_FAILED == MEASURED_STATUSES == set(STATUS_SEVERITY) - {"failed"}
