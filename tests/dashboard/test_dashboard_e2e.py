"""The real app in a real browser: `specbench dashboard` on a seeded database, driven by headless Chromium.

Debian's `chromium` through Playwright (`executable_path`), so no browser download is needed; `.ci/run`
installs the package. Skips when /usr/bin/chromium is missing, unless SPECBENCH_REQUIRE_BROWSER=1.
"""

from __future__ import annotations

import csv
import io
import re
from collections.abc import Iterator
from datetime import UTC, datetime
from pathlib import Path

import pytest

from db import queries as q
from db.migrate import open_database
from synthetic.history import SMALL_SHAPE
from synthetic.history.seed import seed_history
from tests.fixtures.dashboard import CHART, CHROMIUM, CHROMIUM_ARGS, require_browser, served_dashboard
from tests.paths import REPO_ROOT

pytestmark = [pytest.mark.browser, pytest.mark.timeout(300)]

ROOT = REPO_ROOT


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[str, str]]:
    require_browser()
    url = f"sqlite:///{tmp_path_factory.mktemp('e2e') / 'demo.db'}"
    eng = open_database(url)
    seed_history(eng, 40 * 20, shape=SMALL_SHAPE, end=datetime.now(UTC), seed=4)
    eng.dispose()
    with served_dashboard(url) as base:
        yield base, url


def test_dashboard_in_a_browser(server: tuple[str, str], tmp_path: Path) -> None:
    from playwright.sync_api import expect, sync_playwright

    base, db_url = server
    shots = tmp_path / "screenshots"
    shots.mkdir()
    with sync_playwright() as p:
        browser = p.chromium.launch(executable_path=CHROMIUM, args=CHROMIUM_ARGS)
        try:
            page = browser.new_page(viewport={"width": 1500, "height": 1300}, accept_downloads=True)
            page.set_default_timeout(30_000)

            # Trends: the chart renders, a filter change re-renders it and lands in the URL.
            page.goto(f"{base}/trends")
            page.wait_for_selector(CHART)
            expect(page.get_by_role("heading", name="Change points")).to_be_visible()
            page.get_by_test_id("stSelectbox").filter(has_text="Spec mode").click()
            page.get_by_role("option", name="v1", exact=True).click()
            page.wait_for_url("**mode=v1**")
            page.wait_for_selector(CHART)
            expect(page.get_by_role("heading", name=re.compile(r" s\d+ v1 · bs"))).to_be_visible()
            page.screenshot(path=str(shots / "trends.png"))

            # Compare: download the CSV and check its header.
            eng = open_database(db_url)
            runs = q.run_choices(eng).sort_values("started_at")
            eng.dispose()
            h200 = runs[runs["gpu_name"] == "NVIDIA H200"]
            page.goto(f"{base}/compare?a={h200['id'].iloc[0]}&b={h200['id'].iloc[-1]}")
            page.get_by_test_id("stExpander").filter(has_text="by configuration and batch size").click()
            page.wait_for_selector(CHART)  # the Δ grid, drawn once opened
            with page.expect_download() as info:
                page.get_by_role("button", name="Download CSV").click()
            csv_path = tmp_path / "compare.csv"
            info.value.save_as(csv_path)
            header, *rows = csv.reader(io.StringIO(csv_path.read_text()))
            assert header[:4] == ["kind", "config", "model", "workload"] and "verdict" in header
            assert rows and {r[0] for r in rows} == {"synthetic"}, rows[:3]  # two seeded H200 runs: made up
            page.screenshot(path=str(shots / "compare.png"))

            # Overview and Sweep render too.
            page.goto(base)
            expect(page.get_by_role("heading", name="Latest runs")).to_be_visible()
            page.goto(f"{base}/sweep")
            page.wait_for_selector(CHART)
            page.screenshot(path=str(shots / "sweep.png"))
        finally:
            browser.close()
    for name in ("trends", "compare", "sweep"):
        assert (shots / f"{name}.png").stat().st_size > 10_000


@pytest.fixture(scope="module")
def demo_server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[str, str]]:
    """The shape `make demo` builds: the bundled H200 runs (toy and V3 slice) and two stand-in runs of one grid."""
    require_browser()
    from typer.testing import CliRunner

    from runners.cli import app

    tmp = tmp_path_factory.mktemp("demo")
    url = f"sqlite:///{tmp / 'demo.db'}"
    runner = CliRunner()
    for example in ("h200-sglang-0.5.13.post1.db", "h200-v3slice-paired.db"):
        res = runner.invoke(app, ["import", str(ROOT / "examples" / example), "--db", url])
        assert res.exit_code == 0, res.output
    for name, rate in (("demo-sim", 0.7), ("demo-sim-candidate", 0.4)):
        sweep = tmp / f"{name}.yaml"
        sweep.write_text(
            f"name: {name}\nmodel: sim-tiny\nserver:\n  backend: sim\n  attention_backend: flashmla\n"
            f"  sim: {{acceptance_rate: {rate}, seed: 1, instant: true}}\n"
            "grid: {batch_sizes: [1, 8], spec_modes: [v1, v2], steps: [3], topk: [1], baseline: true}\n"
            "workload: {input_len: 32, output_len: 32}\nrepeats: 3\n"
        )
        res = runner.invoke(
            app, ["run", str(sweep), "--db", url, "--no-progress", "--log-dir", str(tmp / "logs")]
        )
        assert res.exit_code == 0, res.output
    with served_dashboard(url) as base:
        yield base, url


def test_demo_compare_and_simulated_tag_in_a_browser(demo_server: tuple[str, str], tmp_path: Path) -> None:
    from playwright.sync_api import expect, sync_playwright

    from analysis.labels import STAND_IN_TAG

    base, db_url = demo_server
    eng = open_database(db_url)
    runs = q.run_choices(eng)
    eng.dispose()
    stand_in = runs[runs["simulated"].astype(bool)]["id"].tolist()  # newest first
    with sync_playwright() as p:
        browser = p.chromium.launch(executable_path=CHROMIUM, args=CHROMIUM_ARGS)
        try:
            page = browser.new_page(viewport={"width": 1500, "height": 1300})
            page.set_default_timeout(30_000)
            # Compare opens on the two comparable runs (the stand-in pair, not stand-in vs H200), with verdicts.
            page.goto(f"{base}/compare")
            page.wait_for_selector("[data-testid='stMarkdownContainer'] table")

            def picked(name: str) -> str:
                box = page.get_by_role("combobox", name=name)
                return str(
                    box.evaluate("e => (e.value !== undefined && e.value !== '') ? e.value : e.textContent")
                )

            expect(page.get_by_role("combobox", name="Candidate (B)")).to_be_visible()
            cand, base_run = picked("Candidate (B)"), picked("Baseline (A)")
            assert cand.startswith(f"#{stand_in[0]} ") and STAND_IN_TAG in cand, cand
            assert base_run.startswith(f"#{stand_in[1]} ") and STAND_IN_TAG in base_run, base_run
            metrics = {
                page.get_by_test_id("stMetricLabel").nth(i).inner_text(): page.get_by_test_id("stMetricValue")
                .nth(i)
                .inner_text()
                for i in range(4)
            }
            assert metrics["Insufficient data"] == "0", metrics
            # Every point of the grid (baseline, v1 and v2 at two batch sizes) has a verdict.
            assert sum(int(v) for v in metrics.values()) == 6, metrics
            assert page.get_by_text("share no configuration").count() == 0
            page.screenshot(path=str(tmp_path / "compare.png"))
            # The simulated tag on every page.
            for path in ("", "trends", "sweep", "profiles", "compare", "jobs"):
                page.goto(f"{base}/{path}")
                page.wait_for_selector("h1")
                expect(page.get_by_text(STAND_IN_TAG).first).to_be_visible()
        finally:
            browser.close()
