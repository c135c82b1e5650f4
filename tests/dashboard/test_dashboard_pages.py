"""Every dashboard page under `streamlit.testing.v1.AppTest`, against a small seeded database and an empty one."""

from __future__ import annotations

import json
from collections.abc import Iterator
from datetime import UTC, datetime
from pathlib import Path

import pytest
from sqlalchemy import Engine

from analysis.regressions import flagged, recent_changes
from analysis.stats.changepoint import ChangePointParams
from db import queries as q
from db import triage
from db.migrate import open_database
from runners.commands.dashboard import streamlit_argv, streamlit_env
from synthetic.history import SMALL_SHAPE
from synthetic.history.seed import seed_history
from tests.fixtures.dashboard import APP, chart_rows, charts, grid_copy, md_tables, open_page, show
from tests.paths import REPO_ROOT

pytestmark = pytest.mark.slow  # tests/conftest.py starts the slow files first

PAGES = [
    "pages/overview.py",
    "pages/trends.py",
    "pages/sweep.py",
    "pages/profiles.py",
    "pages/compare.py",
    "pages/jobs.py",
]


@pytest.fixture(scope="module")
def seeded_url(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    url = f"sqlite:///{tmp_path_factory.mktemp('dash') / 'dash.db'}"
    eng = open_database(url)
    seed_history(eng, 40 * 20, shape=SMALL_SHAPE, seed=11)  # 40 rounds ending now: recent changes exist
    eng.dispose()
    yield url


@pytest.fixture
def engine_of(seeded_url: str) -> Iterator[Engine]:
    eng = open_database(seeded_url)
    yield eng
    eng.dispose()


def test_overview(seeded_url: str, monkeypatch: pytest.MonkeyPatch) -> None:
    at = open_page(seeded_url, "pages/overview.py", monkeypatch)
    assert at.title[0].value == "specbench"
    labels = {m.label: m.value for m in at.metric}
    assert labels["Runs"] == "80" and labels["Series"] == str(SMALL_SHAPE.points_per_run * 2)
    assert any("Synthetic history" in w.value for w in at.warning)
    assert [s.value for s in at.subheader] == [
        "Newest flagged changes",
        "Latest runs",
        "Failed, invalid and mode-mismatch points",
    ]
    assert len(md_tables(at)) >= 1
    assert not at.dataframe  # small tables are Markdown: no data grid on the first view
    # The recent changes of this history are improvements; the toggle shows them.
    at.toggle(key="ov_all").set_value(True).run()
    assert not at.exception
    frames = md_tables(at)
    flagged = next(f for f in frames if "Change" in f.columns)
    assert set(flagged["Change"]) <= {"▼ regression", "▲ improvement"} and len(flagged) > 0
    assert flagged["Open"].str.startswith("trends?fp=").all()
    # Every change and every run of this seeded history says it is made up, in its own column.
    assert set(flagged["Kind"]) == {"synthetic"}
    runs = next(f for f in frames if "Sweep" in f.columns)
    assert set(runs["Kind"]) == {"synthetic"}
    summaries = [m.value for m in at.markdown if m.value.startswith("**Run #")]  # the per-run summary lines
    assert summaries and all("(synthetic numbers, " in line for line in summaries)


def test_trends_restores_the_view_from_the_url(
    seeded_url: str, engine_of: Engine, monkeypatch: pytest.MonkeyPatch
) -> None:
    cat = q.series_catalog(engine_of)
    row = cat[(cat["gpu_name"] == "NVIDIA H200") & (cat["spec_mode"] == "v2") & (cat["steps"] == 3)]
    fp = str(row.sort_values("batch_size")["fingerprint"].iloc[-1])
    at = open_page(seeded_url, "pages/trends.py", monkeypatch, fp=fp, metric="output_throughput", x="commit")
    assert at.query_params["fp"] == fp and at.query_params["x"] == "commit"
    assert at.selectbox(key="f_mode_s").value == "v2"
    assert at.selectbox(key="f_gpu_s").value == "H200×8"
    (spec,) = charts(at)
    marks = [
        layer["mark"]["type"] if isinstance(layer["mark"], dict) else layer["mark"] for layer in spec["layer"]
    ]
    assert marks[:3] == ["area", "line", "circle"]
    assert "rule" in marks  # change points drawn as rules
    assert at.subheader[-1].value == "Change points"


def test_trends_opens_on_the_newest_regression(
    seeded_url: str, engine_of: Engine, monkeypatch: pytest.MonkeyPatch
) -> None:
    """No link: the series of the newest flagged regression (the Overview's first), with its change drawn."""
    at = open_page(seeded_url, "pages/trends.py", monkeypatch)
    changes = flagged(recent_changes(engine_of, "output_throughput", ChangePointParams()))
    assert not changes.empty  # the seeded history has regressions in its last 30 days
    newest = changes.sort_values("started_at", ascending=False).iloc[0]
    assert at.query_params["fp"] == newest["fingerprint"]
    (spec,) = charts(at)
    assert "rule" in [
        layer["mark"]["type"] if isinstance(layer["mark"], dict) else layer["mark"] for layer in spec["layer"]
    ]
    assert len(chart_rows(at, 0)) >= 10
    assert any("synthetic" in c.value for c in at.caption)  # what the numbers are, next to the chart
    listed = next(t for t in md_tables(at) if "change" in t.columns)  # the change points
    assert len(listed) and set(listed["kind"]) == {"synthetic"}
    # The series' points, as their CSV download holds them, each with its kind: drawn once asked for.
    assert not at.dataframe and not at.get("download_button")
    at.session_state["tr_points_open"] = True
    at.run()
    (series,) = (d.value for d in at.dataframe)
    assert len(series) and set(series["kind"]) == {"synthetic"}


def test_trends_filter_change_updates_chart_and_url(seeded_url: str, monkeypatch: pytest.MonkeyPatch) -> None:
    at = open_page(seeded_url, "pages/trends.py", monkeypatch)
    other = "v1" if at.query_params["mode"] == "v2" else "v2"
    at.selectbox(key="f_mode_s").set_value(other).run()
    assert not at.exception
    assert at.query_params["mode"] == other
    at.selectbox(key="tr_metric").set_value("accept_length").run()
    assert not at.exception and at.query_params["metric"] == "accept_length"
    at.radio(key="tr_x").set_value("version").run()
    assert not at.exception
    (spec,) = charts(at)
    assert spec["layer"][0]["encoding"]["x"]["type"] == "ordinal"


def test_trends_detection_settings_outlive_their_expander(
    seeded_url: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The change-point settings are drawn only while their expander is open; a link's values and the ones
    set there stay in force (and in the URL) while it is closed."""
    at = open_page(seeded_url, "pages/trends.py", monkeypatch, window="20")
    assert not at.number_input and at.query_params["window"] == "20"
    at.session_state["tr_detection_open"] = True
    at.run()
    assert at.number_input(key="tr_window").value == 20
    at.number_input(key="tr_window").set_value(30).run()
    at.session_state["tr_detection_open"] = False
    at.run()
    at.run()
    assert not at.exception and not at.number_input
    assert at.query_params["window"] == "30" and at.session_state["tr_window"] == 30


def test_trends_triage_is_stored_and_shown(
    seeded_url: str, engine_of: Engine, monkeypatch: pytest.MonkeyPatch
) -> None:
    cat = q.series_catalog(engine_of)
    row = cat[(cat["gpu_name"] == "NVIDIA H200") & (cat["spec_mode"] == "v2") & (cat["steps"] == 3)]
    fp = str(row.sort_values("batch_size")["fingerprint"].iloc[-1])
    at = open_page(seeded_url, "pages/trends.py", monkeypatch, fp=fp)
    at.session_state["tr_triage_open"] = True  # the form waits in its expander
    at.run()
    base = f"tr_triage_{fp}_output_throughput"
    which = at.selectbox(key=f"{base}_which").value
    at.radio(key=f"{base}_{which}_state").set_value("acknowledged")
    at.text_area(key=f"{base}_{which}_note").input("expected: stale KV fix")
    at.button[0].click().run()
    assert not at.exception
    stored = triage.triage_for(engine_of, [fp], "output_throughput")
    assert stored[["state", "note"]].to_dict("records") == [
        {"state": "acknowledged", "note": "expected: stale KV fix"}
    ]
    table = next(t for t in md_tables(at) if "triage" in t.columns)
    assert "acknowledged" in set(table["triage"])


def test_sweep(seeded_url: str, engine_of: Engine, monkeypatch: pytest.MonkeyPatch) -> None:
    run = int(q.run_choices(engine_of)["id"].iloc[3])
    at = open_page(seeded_url, "pages/sweep.py", monkeypatch, run=str(run))
    assert at.selectbox(key="sw_run").value == run
    # One tab at a time: throughput, acceptance and spec/baseline heatmaps, each faceted by spec mode
    specs = charts(at)
    assert len(specs) == 3 and all("facet" in s for s in specs)
    assert [t.label for t in at.tabs] == ["Heatmaps", "Against batch size", "v2 over v1", "Physical floor"]
    (ratio,) = charts(show(at, "sw_tab", "v2 over v1"))
    assert "facet" in ratio  # v2/v1 has one panel
    assert len(charts(show(at, "sw_tab", "Against batch size"))) == 2  # spec/baseline and throughput lines
    assert at.query_params["run"] == str(run)


def test_compare(seeded_url: str, engine_of: Engine, monkeypatch: pytest.MonkeyPatch) -> None:
    runs = q.run_choices(engine_of).sort_values("started_at")
    h200 = runs[runs["gpu_name"] == "NVIDIA H200"]
    a, b = str(h200["id"].iloc[0]), str(h200["id"].iloc[-1])
    at = open_page(seeded_url, "pages/compare.py", monkeypatch, a=a, b=b, threshold="3")
    assert (at.selectbox(key="cmp_a").value, at.selectbox(key="cmp_b").value) == (int(a), int(b))
    counts = {m.label: int(m.value) for m in at.metric}
    assert sum(counts.values()) == SMALL_SHAPE.points_per_run
    (table,) = md_tables(at)
    assert len(table) == SMALL_SHAPE.points_per_run and table["verdict"].str.len().all()
    downloads = at.get("download_button")
    assert len(downloads) == 2
    assert not charts(at)  # the Δ grid and the forest of intervals are drawn once their expanders open
    assert len(charts(show(at, "cmp_grid_open"))) == 1 and len(charts(show(at, "cmp_forest_open"))) == 2
    # The PR comment preview is drawn when asked for: its code blocks, like st.code, load a syntax highlighter
    # that costs a browser ~0.9 s of CPU on every visit.
    assert not any("Baseline | Candidate" in m.value for m in at.markdown) and len(at.code) == 0
    at.toggle(key="cmp_preview").set_value(True).run()
    assert any("Baseline | Candidate" in m.value for m in at.markdown)
    assert "Baseline | Candidate" in at.text_area(key="cmp_md_source").value  # its source, to copy


def test_compare_with_bad_url_values_falls_back(seeded_url: str, monkeypatch: pytest.MonkeyPatch) -> None:
    at = open_page(
        seeded_url, "pages/compare.py", monkeypatch, a="nope", b="999999", metric="drop table", confidence="x"
    )
    assert at.selectbox(key="cmp_metric").value == "output_throughput"
    assert at.selectbox(key="cmp_confidence").value == 0.95


def test_jobs_page_renders(seeded_url: str, monkeypatch: pytest.MonkeyPatch) -> None:
    at = open_page(seeded_url, "pages/jobs.py", monkeypatch)
    assert at.title[0].value.startswith("Jobs")


@pytest.mark.parametrize("page", PAGES[:4])
def test_empty_database_shows_the_empty_state(
    page: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    url = f"sqlite:///{tmp_path / 'empty.db'}"
    open_database(url).dispose()
    at = open_page(url, page, monkeypatch)
    assert any("No runs in" in i.value for i in at.info)
    assert not charts(at)


def test_dashboard_command_line() -> None:
    argv = streamlit_argv(8600, "127.0.0.1", headless=True)
    assert argv[1:5] == ["-m", "dashboard.serve", "run", APP]
    assert argv[argv.index("--server.port") + 1] == "8600"
    assert argv[argv.index("--server.headless") + 1] == "true"
    env = streamlit_env("sqlite:////tmp/x.db")
    assert env["DATABASE_URL"] == "sqlite:////tmp/x.db"
    assert env["PYTHONPATH"].split(":")[0] == str(Path(APP).parents[1])


def test_seed_end_is_now_by_default(engine_of: Engine) -> None:
    last = q.totals(engine_of).last_run_at
    assert last is not None and (datetime.now(UTC) - last).total_seconds() < 24 * 3600


def test_sweep_warns_when_servers_shared_the_gpu(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """The real H200 sweep started six servers together: its page must say that the idle neighbours can bias
    comparisons, and the solo control run must not."""
    import shutil

    db_file = tmp_path / "h200.db"
    shutil.copy(REPO_ROOT / "examples" / "h200-sglang-0.5.13.post1.db", db_file)
    url = f"sqlite:///{db_file}"
    eng = open_database(url)
    runs = q.run_choices(eng)
    smoke = int(runs.loc[runs["sweep_name"] == "h200-smoke", "id"].iloc[0])
    solo = int(runs.loc[runs["sweep_name"] == "h200-solo", "id"].iloc[0])
    assert q.run_servers(eng, smoke)["idle_neighbours"].tolist() == [0, 5, 4, 3, 2, 1, 0]
    eng.dispose()
    at = open_page(url, "pages/sweep.py", monkeypatch, run=str(smoke))
    co_start = [w.value for w in at.warning if "Co-started servers" in w.value]
    assert (
        co_start
        and "max_parallel_starts" in co_start[0]
        and "idle SGLang scheduler still spins" in co_start[0]
    )
    # Its baseline at bs 4 was unstable: the page says why that cell is missing from the charts.
    assert any("Left out: 1 unstable" in c.value for c in at.caption)
    at = open_page(url, "pages/sweep.py", monkeypatch, run=str(solo))
    assert not any("Co-started servers" in w.value for w in at.warning)
    assert not any("Left out" in c.value for c in at.caption)


def test_overview_lists_what_the_regressions_command_prints(
    seeded_url: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """One pipeline (`analysis.regressions`): the Overview table and `specbench regressions` agree."""
    from typer.testing import CliRunner

    from runners.cli import app

    at = open_page(seeded_url, "pages/overview.py", monkeypatch)
    at.toggle(key="ov_all").set_value(True).run()
    table = next(t for t in md_tables(at) if "Change" in t.columns)
    if any(
        e.label.endswith(" flagged changes") for e in at.expander
    ):  # a long list: its first rows, all on demand
        at.session_state["ov_changes_all"] = True
        at.run()
        table = next(d.value for d in at.dataframe if "Change" in d.value.columns)
        table["Δ"] = [f"{d:+.1f}%" for d in table["Δ"]]
    res = CliRunner().invoke(
        app,
        [
            "regressions",
            "--db",
            seeded_url,
            "--format",
            "json",
            "--include-improvements",
            "--include-dismissed",
        ],
    )
    rows = json.loads(res.stdout)
    assert len(rows) > 0
    found = any(r["direction"] == "regression" and r["state"] != "dismissed" for r in rows)
    assert res.exit_code == (1 if found else 0), res.output  # a regression is a finding (exit 1)
    shown = sorted(zip(table["Series"], table["Kind"], table["Δ"], strict=True))
    printed = sorted((r["series"], r["kind"], f"{r['rel_change'] * 100:+.1f}%") for r in rows)
    assert shown == printed


def test_sweep_of_a_grid_with_two_acceptances_shows_one_at_a_time(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """grid.accept_lengths puts two points of each mode at every (batch, steps) cell. The page picks one
    acceptance (from the URL too), so each heatmap cell is one point and v2/v1 compares like with like; it
    used to draw both acceptances into one cell and divide by a Series."""
    url = grid_copy(tmp_path, "grid.db")
    eng = open_database(url)
    points = q.run_points(eng, 1)
    eng.dispose()
    for accept in (1.8, 2.5):
        at = open_page(url, "pages/sweep.py", monkeypatch, run="1", accept=str(accept))
        box = next(s for s in at.selectbox if s.label == "Acceptance (pinned)")
        assert box.options == ["1.8", "2.5"] and box.value == accept
        heat = chart_rows(at, 0)  # output throughput, one panel per spec mode
        rows = heat.to_dict("records")
        cells = [(r["spec_mode"], r["batch_size"], r["steps_label"]) for r in rows]
        assert len(cells) == len(set(cells)) > 0
        ok = points[(points["status"] == "ok") & (points["accept_length_pinned"] == accept)]
        expected = {
            (m, int(b), str(int(s))): v
            for m, b, s, v in zip(
                ok["spec_mode"], ok["batch_size"], ok["steps"], ok["output_throughput"], strict=True
            )
        }
        assert {c: r["output_throughput"] for c, r in zip(cells, rows, strict=True)} == pytest.approx(
            expected
        )
        show(at, "sw_tab", "v2 over v1")
        index = next(i for i, c in enumerate(charts(at)) if "v2/v1" in json.dumps(c))
        assert set(chart_rows(at, index)["accept"]) == {f"accept {accept:g}"}
        # v2 over v1 at the same cell and acceptance, not over a Series of both acceptances
        v2 = heat[heat["spec_mode"] == "v2"]
        assert v2["speedup_v2_over_v1"].notna().all() and len(v2) > 0
        for r in v2.to_dict("records"):
            v1 = expected[("v1", r["batch_size"], r["steps_label"])]
            assert r["speedup_v2_over_v1"] == pytest.approx(r["output_throughput"] / v1)


def test_sweep_says_when_a_resume_edited_the_stopping_rule(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The H200 grid resumed with `measure.ratio_target_min_batch` added (as its part 4 is): the Sweep page
    says the stopping rule changed and when. The unedited grid says nothing of the kind."""
    from bench.sweep import load_sweep
    from db.engine import session_scope
    from db.models import Run
    from runners import store
    from runners.resume_guard import check_resume

    plain = open_page(grid_copy(tmp_path, "plain.db"), "pages/sweep.py", monkeypatch, run="1")
    assert not any("stopping rule" in c.value for c in plain.caption)
    url = grid_copy(tmp_path, "edited.db")
    eng = open_database(url)
    sweep_file = REPO_ROOT / "sweeps" / "h200-v3slice-grid.yaml"
    with session_scope(eng) as s:
        run = s.get(Run, 1)
        assert run is not None
        old = run.sweep_yaml.replace(", ratio_target_min_batch: 8}", "}")  # as parts 1-3 stored it
        run.sweep_yaml = old
        check = check_resume(1, run.sweep_name, old, load_sweep(sweep_file))
        assert [c.path for c in check.edits] == ["measure.ratio_target_min_batch"]
        store.adopt_sweep(run, sweep_file.read_text(), check.edits)
    assert q.run_info(eng, 1)["sweep_edits"][0]["changes"] == [
        {"field": "measure.ratio_target_min_batch", "old": 1, "new": 8}
    ]
    eng.dispose()
    at = open_page(url, "pages/sweep.py", monkeypatch, run="1")
    edited = [c.value for c in at.caption if "stopping rule" in c.value]
    assert len(edited) == 1 and "ratio\\_target\\_min\\_batch 1 → 8" in edited[0], edited
    assert "specbench runs --yaml 1" in edited[0]


def test_point_counts_agree_between_cli_and_dashboard(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """One definition (analysis.run_counts): a run cut short reads as cut everywhere, ok out of planned."""
    from typer.testing import CliRunner

    from runners.cli import app
    from tests.fixtures.db import grid_part1

    url = f"sqlite:///{grid_part1(tmp_path / 'grid.db')}"  # 10 ok points of the 52 its sweep planned
    res = CliRunner().invoke(app, ["runs", "--db", url])
    header, row = res.stdout.splitlines()[:2]
    assert row[header.index("points") :].split()[0] == "10/52"
    at = open_page(url, "pages/overview.py", monkeypatch)
    runs_table = next(t for t in md_tables(at) if "Points ok" in t.columns)
    assert runs_table["Points ok"].tolist() == ["10/52"]
    at = open_page(url, "pages/sweep.py", monkeypatch)
    assert {m.label: m.value for m in at.metric}["Points ok"] == "10 / 52"
