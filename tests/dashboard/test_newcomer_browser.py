"""A newcomer's first look, in headless Chromium on a database shaped like `make demo`'s: every page draws
without fetching anything from the internet, its tables fit the page, Trends opens on a history with a change
point, Profiles on a readable v1/v2 pair; `--open-browser` leaves no defunct process behind."""

from __future__ import annotations

import re
import stat
import subprocess
from collections.abc import Iterator
from datetime import UTC, datetime
from pathlib import Path

import psutil
import pytest

from analysis.labels import STAND_IN_TAG
from bench.host.processes import free_port
from db.migrate import open_database
from synthetic.history import SMALL_SHAPE
from synthetic.history.seed import seed_history
from tests.fixtures.cli import run_cli
from tests.fixtures.dashboard import (
    CHART,
    CHROMIUM,
    CHROMIUM_ARGS,
    require_browser,
    served_dashboard,
    stop_server,
    track_changes,
    wait_drawn,
    wait_healthy,
)
from tests.fixtures.waiting import wait_until
from tests.paths import REPO_ROOT
from tests.queue_support import cli_argv, cli_env

pytestmark = [pytest.mark.browser, pytest.mark.timeout(300)]

STAND_IN = """
name: demo-sim
model: sim-tiny
server: {backend: sim, attention_backend: flashmla, sim: {acceptance_rate: 0.7, seed: 1, instant: true}}
grid: {batch_sizes: [1, 8], spec_modes: [v1, v2], steps: [3], topk: [1], baseline: true}
workload: {input_len: 32, output_len: 32}
repeats: 3
"""
# Every table's content against its frame at this width (the sidebar open): nothing may stick out sideways.
# The tables a page opens with are Markdown (dashboard.components.tables), a grid only in an expander.
FITS = """() => [
  ...[...document.querySelectorAll("[data-testid='stDataFrame']")]
    .filter(d => !d.closest("[data-testid='stExpander']"))
    .map(d => { const s = d.querySelector('.dvn-scroller'); return s ? [s.scrollWidth, s.clientWidth] : null; }),
  ...[...document.querySelectorAll("[data-testid='stMarkdownContainer'] table")]
    .map(t => [t.scrollWidth, t.closest("[data-testid='stMarkdownContainer']").clientWidth]),
]"""


@pytest.fixture(scope="module")
def demo(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[str, str]]:
    require_browser()
    tmp = tmp_path_factory.mktemp("newcomer")
    url = f"sqlite:///{tmp / 'demo.db'}"
    eng = open_database(url)
    seed_history(eng, 600, shape=SMALL_SHAPE, end=datetime.now(UTC), seed=0)  # as `make demo` seeds
    eng.dispose()
    assert (
        run_cli("import", str(REPO_ROOT / "examples" / "h200-v3slice-paired.db"), "--db", url).returncode == 0
    )
    for name, rate in (("demo-sim", 0.7), ("demo-sim-candidate", 0.4)):
        sweep = tmp / f"{name}.yaml"
        sweep.write_text(STAND_IN.replace("demo-sim", name).replace("0.7", str(rate)))
        out = run_cli("run", str(sweep), "--db", url, "--no-progress", "--log-dir", str(tmp / "logs"))
        assert out.returncode == 0, out.stdout + out.stderr
    with served_dashboard(url, timeout=90) as base:
        yield base, url


def test_a_newcomers_first_look(demo: tuple[str, str], tmp_path: Path) -> None:
    from playwright.sync_api import expect, sync_playwright

    base, _ = demo
    outside: list[str] = []
    with sync_playwright() as p:
        browser = p.chromium.launch(executable_path=CHROMIUM, args=CHROMIUM_ARGS)
        try:
            page = browser.new_page(viewport={"width": 1280, "height": 1000})
            page.set_default_timeout(60_000)
            page.on(
                "request",
                lambda r: (
                    outside.append(r.url)
                    if not r.url.startswith(("http://127.0.0.1", "data:", "blob:"))
                    else None
                ),
            )
            # The pages name the server's base (dashboard.serve.BASE_HINT): no guess at /trends/_stcore/health
            missing: list[str] = []
            page.on("response", lambda r: missing.append(r.url) if r.status == 404 else None)
            # Overview and Compare: their tables fit the page (no sideways scroll inside a table).
            for path in ("", "compare"):
                page.goto(f"{base}/{path}")
                page.wait_for_selector("[data-testid='stMarkdownContainer'] table")
                page.wait_for_timeout(500)
                sizes = page.evaluate(FITS)
                assert sizes and all(s is not None and s[0] <= s[1] + 1 for s in sizes), (path, sizes)
            # Trends: the newest regression of the seeded history, at least 10 points, its change drawn.
            page.goto(f"{base}/trends")
            page.wait_for_selector(CHART)
            caption = page.get_by_text(re.compile(r"\d+ points · series")).first.inner_text()
            assert int(re.search(r"(\d+) points", caption).group(1)) >= 10, caption  # type: ignore[union-attr]
            assert "synthetic" in caption
            # Its change point, ready to triage: "-5.7% at run #40 (0.5.14@9e01143, ...)", once the form opens.
            page.get_by_test_id("stExpander").filter(has_text="Triage a change point").click()
            expect(page.get_by_role("combobox", name="Change")).to_have_value(
                re.compile(r"-\d+\.\d% at run #")
            )
            # Profiles: the H200 pair whose traces ship in examples/ draws its two timelines by default.
            page.goto(f"{base}/profiles")
            page.wait_for_selector(CHART)
            expect(page.locator("[data-testid='stVegaLiteChart']")).to_have_count(2)
            expect(
                page.get_by_text("shipped with specbench: examples/h200-v3slice-profiles/").first
            ).to_be_visible()
            expect(page.get_by_text(STAND_IN_TAG).first).to_be_visible()  # the banner: stand-in runs here
            page.screenshot(path=str(tmp_path / "profiles.png"), full_page=True)
            for path in ("sweep", "jobs"):
                page.goto(f"{base}/{path}")
                page.wait_for_selector("h1")
                expect(page.get_by_text(STAND_IN_TAG).first).to_be_visible()
        finally:
            browser.close()
    assert outside == [], outside  # the page icon and every font come from the package
    assert missing == [], missing


def test_a_page_is_open_when_its_charts_and_tables_are_drawn(demo: tuple[str, str]) -> None:
    """What the page timings count as open (benchmarks/page_render.py): not when the script finishes, since
    Streamlit then still shows skeletons while a chart's or a table's code loads, but once every chart and
    table is drawn and nothing changes."""
    from playwright.sync_api import sync_playwright

    base, _ = demo
    with sync_playwright() as p:
        browser = p.chromium.launch(executable_path=CHROMIUM, args=CHROMIUM_ARGS)
        try:
            for path, drawn in (("trends", 1), ("sweep", 1), ("compare", 0), ("", 0), ("jobs", 0)):
                page = browser.new_page(viewport={"width": 1280, "height": 1000})  # a new context: cold
                track_changes(page)
                page.goto(f"{base}/{path}", wait_until="commit")
                seconds = wait_drawn(page)
                state = page.evaluate(
                    """() => ({
                      skeletons: document.querySelectorAll("[data-testid='stSkeleton']").length,
                      charts: document.querySelectorAll("[data-testid='stVegaLiteChart']").length,
                      drawn: document.querySelectorAll(
                        "[data-testid='stVegaLiteChart'] svg, [data-testid='stVegaLiteChart'] canvas").length,
                      now: performance.now() / 1000,
                    })"""
                )
                assert state["skeletons"] == 0, (path, state)
                assert state["charts"] >= drawn and state["drawn"] >= state["charts"], (path, state)
                # The time is that of the page's last change, before the quiet wait that confirmed it.
                assert 0 < seconds <= state["now"] - 0.9, (path, seconds, state)
                page.close()
        finally:
            browser.close()


def test_open_browser_leaves_no_defunct_child(tmp_path: Path) -> None:
    """The opener (a fake browser that says its pid) exits, and the dashboard reaps it: the test waits for
    the exit it needs to see, then for the reaping, and fails if the opener stays a zombie."""
    url = f"sqlite:///{tmp_path / 'x.db'}"
    opened, pid_file = tmp_path / "opened.txt", tmp_path / "opener.pid"
    browser = tmp_path / "fake-browser"
    browser.write_text(f'#!/bin/sh\necho $$ > {pid_file}\necho "$1" > {opened}\n')
    browser.chmod(browser.stat().st_mode | stat.S_IXUSR)
    port = free_port()
    proc = subprocess.Popen(
        cli_argv("dashboard", "--db", url, "--port", str(port), "--open-browser"),
        cwd=REPO_ROOT,
        env=cli_env(BROWSER=str(browser)),
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    try:
        wait_healthy(port, proc, timeout=90)
        wait_until(lambda: opened.exists() and opened.read_text().strip(), "the browser opened")
        assert opened.read_text().strip() == f"http://127.0.0.1:{port}"
        opener = int(pid_file.read_text())
        wait_until(lambda: _status(opener) != "running", "the opener's exit")
        wait_until(lambda: _status(opener) == "gone", "the opener reaped (it stayed a zombie)", timeout_s=30)
    finally:
        stop_server(proc)


def _status(pid: int) -> str:
    """`gone` (exited and reaped), `zombie` (exited, not reaped) or `running`."""
    try:
        return "zombie" if psutil.Process(pid).status() == psutil.STATUS_ZOMBIE else "running"
    except psutil.NoSuchProcess:
        return "gone"
