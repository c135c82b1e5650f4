"""Pages under AppTest on a database of real stand-in runs: the simulated tag on every page, and links to
something the database lacks answered with a notice that names it."""

from __future__ import annotations

from collections.abc import Iterator

import pytest
from streamlit.testing.v1 import AppTest

from analysis.labels import SIMULATED, STAND_IN_TAG
from bench.sweep import parse_sweep
from db.migrate import open_database
from runners.sweep_runner import execute_sweep
from tests.fixtures.dashboard import md_tables, open_page, show

PAGES = ["pages/overview.py", "pages/trends.py", "pages/sweep.py", "pages/compare.py", "pages/jobs.py"]

SWEEP = """
name: links
model: sim-tiny
server:
  backend: sim
  attention_backend: flashmla
  sim: {seed: 3, instant: true}
grid: {batch_sizes: [1, 2], spec_modes: [v2], steps: [2], topk: [1], baseline: true}
workload: {input_len: 16, output_len: 8}
repeats: 2
"""


@pytest.fixture(scope="module")
def stand_in_url(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    tmp = tmp_path_factory.mktemp("links")
    url = f"sqlite:///{tmp / 'standin.db'}"
    eng = open_database(url)
    for _ in range(2):
        out = execute_sweep(parse_sweep(SWEEP), SWEEP, eng, log_dir=tmp / "logs", show_progress=False)
        assert out.status in ("done", "unstable")  # unstable: a TTFT outlier on a busy machine
    eng.dispose()
    yield url


def _texts(at: AppTest) -> str:
    parts = [e.value for kind in ("info", "warning", "markdown", "caption") for e in at.get(kind)]
    parts += [str(s.options) for s in at.selectbox]
    parts += [d.value.to_csv() for d in at.dataframe] + [t.to_csv() for t in md_tables(at)]
    return "\n".join(str(p) for p in parts)


@pytest.mark.parametrize("page", PAGES)
def test_simulated_tag_on_every_page(stand_in_url: str, page: str, monkeypatch: pytest.MonkeyPatch) -> None:
    at = open_page(stand_in_url, page, monkeypatch)
    assert STAND_IN_TAG in _texts(at)


def test_run_pickers_and_tables_tag_stand_in_runs(stand_in_url: str, monkeypatch: pytest.MonkeyPatch) -> None:
    at = open_page(stand_in_url, "pages/compare.py", monkeypatch)
    assert all(STAND_IN_TAG in label for label in at.selectbox(key="cmp_a").options)
    assert all("no GPU" in label for label in at.selectbox(key="cmp_b").options)
    # Above the verdicts, in the PR comment's words: both compared runs are the stand-in's.
    assert [w.value for w in at.warning if "Both runs are" in w.value] == [
        f"Both runs are **{STAND_IN_TAG}**: measured on the stand-in server, numbers from its performance "
        "model, not a GPU."
    ]
    at = open_page(stand_in_url, "pages/overview.py", monkeypatch)
    runs = next(t for t in md_tables(at) if "Kind" in t.columns)
    assert set(runs["Kind"]) == {SIMULATED}
    at = open_page(stand_in_url, "pages/sweep.py", monkeypatch)
    assert any(STAND_IN_TAG in i.value and "performance model" in i.value for i in at.info)
    # The run's points, as their CSV download holds them, each with its kind (drawn once their expander opens).
    points = next(d.value for d in show(at, "sw_points_open").dataframe if "kind" in d.value.columns)
    assert len(points) and set(points["kind"]) == {SIMULATED}


def test_link_to_a_missing_run_says_so(stand_in_url: str, monkeypatch: pytest.MonkeyPatch) -> None:
    at = open_page(stand_in_url, "pages/sweep.py", monkeypatch, run="9999")
    notes = [w.value for w in at.warning]
    assert any("run **#9999**" in n and "does not hold" in n for n in notes), notes
    # The page says what it shows instead, and the picker holds that run.
    shown = at.selectbox(key="sw_run").value
    assert any(f"Showing #{shown} instead" in n for n in notes)
    at = open_page(stand_in_url, "pages/compare.py", monkeypatch, a="9998", b="9999")
    notes = [w.value for w in at.warning]
    assert any("#9998" in n for n in notes) and any("#9999" in n for n in notes)
    # A link to an existing run shows no notice.
    at = open_page(stand_in_url, "pages/sweep.py", monkeypatch, run=str(shown))
    assert not any("does not hold" in w.value for w in at.warning)


def test_link_to_a_missing_series_says_so(stand_in_url: str, monkeypatch: pytest.MonkeyPatch) -> None:
    at = open_page(stand_in_url, "pages/trends.py", monkeypatch, fp="deadbeefdeadbeef")
    notes = [w.value for w in at.warning]
    assert any("series **`deadbeefdeadbeef`**" in n for n in notes), notes
