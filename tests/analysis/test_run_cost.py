"""The GPU time a run held (benchmarks.run_cost.held_seconds): a resumed run's wall time spans the hours between
its sessions; the held time counts only what its servers and windows covered."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest

from benchmarks.run_cost import held_seconds, run_cost
from benchmarks.run_cost import main as run_cost_main
from db.engine import make_engine, session_scope
from db.migrate import upgrade
from db.models import Run, ServerInstance

T0 = datetime(2026, 12, 4, 7, 37, tzinfo=UTC)


def _at(s: float) -> datetime:
    return T0 + timedelta(seconds=s)


def test_a_pair_alive_together_counts_once() -> None:
    # v1 launches at 0 and lives to 500, v2 launches at 60 and lives to 500: 500 s held, not 940.
    assert held_seconds([(_at(0), _at(500)), (_at(60), _at(500))]) == 500.0


def test_short_gaps_are_held_and_the_hours_between_sessions_are_not() -> None:
    session_a = [(_at(0), _at(70)), (_at(80), _at(90)), (_at(91), _at(101))]  # launch, then two windows
    session_b = [(_at(4 * 3600), _at(4 * 3600 + 300))]  # resumed on another host hours later
    # 10 s and 1 s gaps inside session A count (a lost host's flush and warmup); the 4 h gap does not.
    assert held_seconds(session_a + session_b) == 101.0 + 300.0
    assert held_seconds(session_a + session_b, gap_s=5.0) == 70.0 + 21.0 + 300.0


def test_order_of_the_record_does_not_matter() -> None:
    intervals = [(_at(200), _at(260)), (_at(0), _at(100)), (_at(50), _at(120))]
    assert held_seconds(intervals) == held_seconds(list(reversed(intervals))) == 120.0 + 60.0
    assert held_seconds([]) == 0.0


def test_a_missing_database_is_one_error_line(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    missing = tmp_path / "typo.db"
    assert run_cost_main(["--db", f"sqlite:///{missing}"]) == 2
    err = capsys.readouterr().err
    assert err.startswith("error:") and "typo.db" in err and "Traceback" not in err
    assert not missing.exists()  # a report never creates the file it was asked to read


def test_held_time_stays_within_the_runs_own_span(tmp_path: Path) -> None:
    # SQLite keeps created-at defaults in whole seconds: a server recorded at T0+1 s (really T0+1.9 s) after
    # a 1.5 s launch reads as launched at T0-0.5 s, before its run began at T0. The held time must not exceed
    # the run's wall time because of it.
    url = f"sqlite:///{tmp_path / 'cost.db'}"
    upgrade(url)
    engine = make_engine(url)
    try:
        with session_scope(engine) as s:
            run = Run(
                sweep_name="cost", sweep_yaml="name: cost", sweep_hash="0" * 64, backend="sim", model="m",
                started_at=_at(0), finished_at=_at(6), status="done",
            )  # fmt: skip
            s.add(run)
            s.flush()
            s.add(
                ServerInstance(
                    run_id=run.id, config_key="k", label="v1", requested={}, startup_s=1.5,
                    started_at=_at(1), stopped_at=_at(5.5), status="stopped",
                )
            )  # fmt: skip
        cost = run_cost(engine, None)
    finally:
        engine.dispose()
    assert cost["wall_s"] == 6.0
    assert cost["held_s"] == 5.5  # from the run's start (not T0-0.5 s) to the server's stop
