"""The Profiles page on a database filled by a real stand-in sweep with `profile:`: AppTest and Chromium."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path

import pyarrow as pa
import pytest
from streamlit.testing.v1 import AppTest

from bench.profile.overlap import verdict
from bench.sweep import parse_sweep
from db import profile_queries as pq
from db.migrate import open_database
from runners.sweep_runner import execute_sweep
from tests.fixtures.dashboard import (
    APP,
    CHART,
    CHROMIUM,
    CHROMIUM_ARGS,
    PAGE_TIMEOUT,
    md_tables,
    require_browser,
    served_dashboard,
    show,
)
from tests.paths import REPO_ROOT

SWEEP = """
name: prof-page
model: sim-tiny
server:
  backend: sim
  attention_backend: flashmla
  sim: {time_scale: 1.0, seed: 2}
grid: {batch_sizes: [8], spec_modes: [v1, v2], steps: [3], topk: [1], baseline: false}
workload: {input_len: 32, output_len: 512, num_prompts: 8}
repeats: 1
profile: {steps: 12, activities: [CPU, GPU], settle_s: 0.25, timeout_s: 30}
"""


@pytest.fixture(scope="module")
def profiled_url(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    d = tmp_path_factory.mktemp("profiles")
    url = f"sqlite:///{d / 'p.db'}"  # artifacts land in d/artifacts, next to the database
    eng = open_database(url)
    out = execute_sweep(parse_sweep(SWEEP), SWEEP, eng, log_dir=d / "logs", show_progress=False)
    assert out.status == "done"
    eng.dispose()
    yield url


def _open(url: str, monkeypatch: pytest.MonkeyPatch) -> AppTest:
    monkeypatch.setenv("DATABASE_URL", url)
    at = AppTest.from_file(APP, default_timeout=PAGE_TIMEOUT)
    at.run()
    at.switch_page("pages/profiles.py").run()
    assert not at.exception, [e.value for e in at.exception]
    return at


def test_side_by_side_view(profiled_url: str, monkeypatch: pytest.MonkeyPatch) -> None:
    eng = open_database(profiled_url)
    rows = pq.run_profiles(eng, pq.runs_with_profiles(eng)[0]["id"])
    eng.dispose()
    (pair,) = pq.profile_pairs(rows)
    assert all(Path(pair[m]["path"]).parent.parent.parent.name == "artifacts" for m in ("v1", "v2"))
    at = _open(profiled_url, monkeypatch)
    assert at.title[0].value == "Profiles"
    line = at.success[0].value
    assert line == verdict(pair["v1"]["summary"], pair["v2"]["summary"])
    assert line.startswith("v2 hides ") and "GPU idle per cycle" in line
    charts = at.get("vega_lite_chart")
    assert len(charts) == 2
    for c in charts:
        assert json.loads(c.proto.spec)["mark"]["type"] == "bar"
        (ds,) = c.proto.datasets  # Streamlit ships the chart's rows as Arrow next to the spec
        values = pa.ipc.open_stream(ds.data.data).read_pandas()
        assert set(values["row"]) == {"CPU steps", "GPU steps", "GPU kernels"}
        assert {"target_verify", "draft_extend", "draft"} <= set(values["phase"])
        assert values["start_ms"].min() == 0.0
    assert not at.dataframe  # the figures are Markdown tables; the list of all profiles waits in its expander
    figures = [t for t in md_tables(at) if "figure" in t.columns]
    assert len(figures) == 2
    for t in figures:
        assert "distortion" in set(t["figure"]) and "GPU idle per cycle" in set(t["figure"])
    assert len(at.get("download_button")) == 2
    (listing,) = (t.value for t in show(at, "pr_all_open").dataframe)  # every profile of the run, on demand
    assert len(listing) == len(rows)


def test_empty_state_without_profiles(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    from datetime import UTC, datetime

    from synthetic.history import SMALL_SHAPE
    from synthetic.history.seed import seed_history

    url = f"sqlite:///{tmp_path / 'e.db'}"
    eng = open_database(url)
    seed_history(eng, 20, shape=SMALL_SHAPE, end=datetime.now(UTC), seed=1)
    eng.dispose()
    at = _open(url, monkeypatch)
    assert "No profiles yet" in at.info[0].value


@pytest.mark.browser
@pytest.mark.timeout(300)
def test_profiles_page_in_chromium(profiled_url: str, tmp_path: Path) -> None:
    from playwright.sync_api import expect, sync_playwright

    require_browser()
    with served_dashboard(profiled_url) as base, sync_playwright() as p:
        browser = p.chromium.launch(executable_path=CHROMIUM, args=CHROMIUM_ARGS)
        try:
            page = browser.new_page(viewport={"width": 1500, "height": 1400}, accept_downloads=True)
            page.set_default_timeout(30_000)
            page.goto(f"{base}/profiles")
            page.wait_for_selector(CHART)
            expect(page.get_by_text("v2 hides")).to_be_visible()
            expect(page.locator("[data-testid='stVegaLiteChart']")).to_have_count(2)
            with page.expect_download() as info:
                page.get_by_role("button", name="Download v1 (non-overlap) trace (open in Perfetto)").click()
            saved = tmp_path / "v1.trace.json.gz"
            info.value.save_as(saved)
            assert saved.read_bytes()[:2] == b"\x1f\x8b"
            page.screenshot(path=str(tmp_path / "profiles.png"), full_page=True)
        finally:
            browser.close()
    assert (tmp_path / "profiles.png").stat().st_size > 10_000


def test_overlap_columns_for_the_v2_v1_export(profiled_url: str) -> None:
    import pandas as pd

    from analysis.profiles import join_overlap, overlap_cells, overlap_table

    eng = open_database(profiled_url)
    run_id = pq.runs_with_profiles(eng)[0]["id"]
    table = overlap_table(eng, [run_id])
    eng.dispose()
    assert len(table) == 1
    row = table.iloc[0]
    assert (row["batch_size"], row["steps"], row["profile_activities"]) == (8, 3, "CPU+GPU")
    # Stand-in cost model at bs 8 with CPU profiling (synthetic/server/profiler.py): v1 idles for the CPU work,
    # 0.72 ms x 1.5; v2 only for the 0.1 ms sync.
    assert row["v1_gpu_idle_ms"] == pytest.approx(0.72 * 1.5)
    assert row["v2_gpu_idle_ms"] == pytest.approx(0.1)
    assert row["cpu_hidden_ms"] == pytest.approx(0.72 * 1.5 - 0.1)
    v2v1 = pd.DataFrame({"batch_size": [8, 16], "steps": [3, 3], "speedup": [1.2, 1.1]})
    joined = join_overlap(v2v1, table)
    assert joined.loc[0, "cpu_hidden_ms"] == pytest.approx(0.98)
    assert pd.isna(joined.loc[1, "cpu_hidden_ms"])
    cells = overlap_cells(joined.iloc[0])
    assert cells["GPU idle/cycle v1→v2"].startswith("1.08 → 0.10 ms")
    assert cells["overlap hidden"] == f"{0.98 / 1.08:.0%} of 100%"  # of v1's idle time, what v2 removes
    assert overlap_cells(joined.iloc[1]) == {
        "cycle v1→v2": "–",
        "GPU idle/cycle v1→v2": "–",
        "CPU hidden/cycle": "–",
        "overlap hidden": "–",
    }
    assert row["profile_verdict"].startswith("v2 hides 0.98 ms of CPU per cycle")
    with pytest.raises(ValueError, match="batch_size and steps"):
        join_overlap(pd.DataFrame({"batch_size": [8]}), table)


def test_shipped_h200_traces_render_from_a_fresh_clone(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The H200 pair's rows name the VM's paths (/root/ev/artifacts/...); the traces ship in examples/. The page
    finds them there by sha256 and draws the timeline by default, on a run that has a pair (not the newer
    profile-only run), with the stand-in run's profiles marked as simulated."""
    from typer.testing import CliRunner

    from runners.cli import app

    url = f"sqlite:///{tmp_path / 'demo.db'}"
    res = CliRunner().invoke(
        app, ["import", str(REPO_ROOT / "examples" / "h200-v3slice-paired.db"), "--db", url]
    )
    assert res.exit_code == 0, res.output
    eng = open_database(url)
    runs = pq.runs_with_profiles(eng)
    paired = next(r["id"] for r in runs if r["sweep_name"] == "h200-v3slice-paired")
    assert runs[0]["sweep_name"] == "h200-v3slice-profile-cpu"  # newest, and it has no pair
    (first, *_) = pq.profile_pairs(pq.run_profiles(eng, paired))
    eng.dispose()
    assert not Path(first["v1"]["path"]).exists()  # the capturing VM's path
    at = _open(url, monkeypatch)
    assert at.selectbox(key="pr_run").value == paired
    charts = at.get("vega_lite_chart")
    assert len(charts) == 2  # v1 and v2 timelines
    shipped = [
        c.value for c in at.caption if "shipped with specbench: examples/h200-v3slice-profiles/" in c.value
    ]
    assert len(shipped) == 2 and all("sha256 checked" in c for c in shipped)
    assert not any("not on this host" in c.value for c in at.caption)
    figures = [t for t in md_tables(at) if "figure" in t.columns]
    assert len(figures) == 2
    assert all(t["figure"].iloc[-1] == "distortion" for t in figures)


def test_stand_in_profiles_are_marked_simulated(profiled_url: str, monkeypatch: pytest.MonkeyPatch) -> None:
    from analysis.labels import STAND_IN_TAG

    at = _open(profiled_url, monkeypatch)
    assert any(STAND_IN_TAG in i.value and "No GPU ran them" in i.value for i in at.info)
    assert STAND_IN_TAG in at.selectbox(key="pr_run").format_func(at.selectbox(key="pr_run").value)
