"""Bulk triage: one verdict for every change one cause made, from the CLI and from the Overview page."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest
from streamlit.testing.v1 import AppTest
from typer.testing import CliRunner

from analysis.changes import changes_of_run, main_cause
from analysis.regressions import flagged, recent_changes
from analysis.stats.changepoint import ChangePointParams
from db import triage as stored_triage
from db.migrate import open_database
from runners.cli import app
from synthetic.history import SMALL_SHAPE
from synthetic.history.seed import seed_history
from tests.paths import REPO_ROOT

APP = str(REPO_ROOT / "dashboard" / "app.py")


@pytest.fixture
def history(tmp_path: Path) -> Iterator[str]:
    url = f"sqlite:///{tmp_path / 'h.db'}"
    eng = open_database(url)
    seed_history(eng, 40 * 20, shape=SMALL_SHAPE, seed=11)  # 40 rounds ending now: recent changes exist
    eng.dispose()
    yield url


def _busiest_run(url: str) -> tuple[int, int]:
    eng = open_database(url)
    changes = recent_changes(eng, "output_throughput", ChangePointParams())
    eng.dispose()
    counts = changes.groupby("run_id").size().sort_values(ascending=False)
    assert len(counts) and counts.iloc[0] >= 2, "the seeded history should flag several series at one run"
    return int(counts.index[0]), int(counts.iloc[0])


def _states(url: str, run_id: int) -> list[str]:
    eng = open_database(url)
    t = stored_triage.triage_for(eng, metric="output_throughput")
    eng.dispose()
    return t[t["run_id"] == run_id]["state"].tolist()


def test_cli_triages_every_change_of_a_run(history: str) -> None:
    run_id, n = _busiest_run(history)
    runner = CliRunner()
    res = runner.invoke(app, ["triage", str(run_id), "--state", "dismissed", "--dry-run", "--db", history])
    assert res.exit_code == 0, res.output
    assert f"{n} change(s) of run {run_id}" in res.stdout and _states(history, run_id) == []
    res = runner.invoke(
        app, ["triage", str(run_id), "--state", "acknowledged", "--note", "new draft", "--db", history]
    )
    assert res.exit_code == 0, res.output
    assert _states(history, run_id) == ["acknowledged"] * n
    # The Overview pipeline sees them acknowledged, with the note.
    eng = open_database(history)
    after = changes_of_run(recent_changes(eng, "output_throughput", ChangePointParams()), run_id)
    eng.dispose()
    assert set(after["state"]) == {"acknowledged"} and set(after["note"]) == {"new draft"}


def test_cli_triage_by_cause_and_bad_input(history: str) -> None:
    run_id, _ = _busiest_run(history)
    eng = open_database(history)
    of_run = changes_of_run(recent_changes(eng, "output_throughput", ChangePointParams()), run_id)
    eng.dispose()
    cause = main_cause(of_run["why"]).value_counts().index[0]
    k = int((main_cause(of_run["why"]) == cause).sum())
    res = CliRunner().invoke(
        app, ["triage", str(run_id), "--state", "dismissed", "--cause", cause, "--db", history]
    )
    assert res.exit_code == 0, res.output
    assert _states(history, run_id) == ["dismissed"] * k
    res = CliRunner().invoke(
        app, ["triage", str(run_id), "--state", "dismissed", "--cause", "nope", "--db", history]
    )
    assert res.exit_code == 2 and "its causes" in res.output
    res = CliRunner().invoke(app, ["triage", "latest~x", "--state", "open", "--db", history])
    assert res.exit_code == 2
    res = CliRunner().invoke(app, ["triage", str(run_id), "--state", "maybe", "--db", history])
    assert res.exit_code == 2


def test_overview_bulk_triage(history: str, monkeypatch: pytest.MonkeyPatch) -> None:
    run_id, n = _busiest_run(history)
    monkeypatch.setenv("DATABASE_URL", history)
    at = AppTest.from_file(APP, default_timeout=90)
    at.run()
    assert not at.exception, [e.value for e in at.exception]
    assert not at.selectbox  # the form waits in its expander, drawn once opened
    at.session_state["ov_bulk_open"] = True
    at.run()
    at.selectbox(key="ov_bulk_run").set_value(run_id).run()
    # Form widgets: their values go in with the submit.
    at.radio(key=f"ov_bulk_state_{run_id}").set_value("dismissed")
    at.text_area(key=f"ov_bulk_note_{run_id}").input("one cause: the seeded acceptance shift")
    button = next(b for b in at.button if b.label.startswith("Apply to"))
    assert button.label == f"Apply to {n} change(s)"
    button.click().run()
    assert not at.exception, [e.value for e in at.exception]
    assert _states(history, run_id) == ["dismissed"] * n


def test_the_triage_picker_opens_on_a_run_the_list_shows(
    history: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The list above shows regressions not dismissed; the picker under it must not open on a run that list
    does not show. Dismissing every change of the busiest run hides it from the list (and it used to be the
    picker's first choice)."""
    busiest, _ = _busiest_run(history)
    res = CliRunner().invoke(app, ["triage", str(busiest), "--state", "dismissed", "--db", history])
    assert res.exit_code == 0, res.output
    eng = open_database(history)
    shown = flagged(recent_changes(eng, "output_throughput", ChangePointParams()))
    eng.dispose()
    assert not shown.empty and busiest not in set(shown["run_id"])
    newest = shown.sort_values(["started_at", "rel_change"], ascending=[False, True]).iloc[0]
    monkeypatch.setenv("DATABASE_URL", history)
    at = AppTest.from_file(APP, default_timeout=90)
    at.run()
    assert not at.exception, [e.value for e in at.exception]
    at.session_state["ov_bulk_open"] = True
    at.run()
    picker = at.selectbox(key="ov_bulk_run")
    assert picker.value == int(newest["run_id"])  # the run of the list's first row
    assert busiest in picker.options or f"#{busiest}" in " ".join(map(str, picker.options))  # still offered
