"""The correctness gate on the dashboard: a stand-in run whose v2 drafts are wrong (`server.sim.fault: v2_draft`)
shows its v2 points as wrong, speed struck through, on the Sweep page (headless Chromium) and on Compare."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest
from typer.testing import CliRunner

from runners.cli import app
from tests.fixtures.dashboard import (
    CHART,
    CHROMIUM,
    CHROMIUM_ARGS,
    require_browser,
    served_dashboard,
)

pytestmark = [pytest.mark.browser, pytest.mark.timeout(180)]

SWEEP = """name: {name}
model: sim-tiny
server:
  backend: sim
  attention_backend: flashmla
  sim: {{acceptance_rate: 0.7, seed: 1, instant: true{fault}}}
grid: {{batch_sizes: [1, 8], spec_modes: [v1, v2], steps: [3], topk: [1], baseline: true}}
workload: {{input_len: 32, output_len: 32}}
measure: {{correctness: {{prompts: 8, output_len: 32}}}}
repeats: 3
"""


@pytest.fixture(scope="module")
def gated(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[str, dict[str, int]]]:
    """A dashboard on a database with a clean stand-in run and one whose v2 drafts are wrong."""
    require_browser()
    tmp = tmp_path_factory.mktemp("gate")
    url = f"sqlite:///{tmp / 'gate.db'}"
    runner = CliRunner()
    runs: dict[str, int] = {}
    for n, (name, fault, code) in enumerate(
        (("clean", "", 0), ("wrong-drafts", ", fault: v2_draft", 1)), start=1
    ):
        sweep = tmp / f"{name}.yaml"
        sweep.write_text(SWEEP.format(name=name, fault=fault))
        res = runner.invoke(
            app, ["run", str(sweep), "--db", url, "--no-progress", "--log-dir", str(tmp / "logs")]
        )
        assert res.exit_code == code, res.output
        runs[name] = n
    with served_dashboard(url) as base:
        yield base, runs


def test_sweep_and_compare_show_wrong_points(gated: tuple[str, dict[str, int]], tmp_path: Path) -> None:
    from playwright.sync_api import expect, sync_playwright

    base, runs = gated
    with sync_playwright() as p:
        browser = p.chromium.launch(executable_path=CHROMIUM, args=CHROMIUM_ARGS)
        try:
            page = browser.new_page(viewport={"width": 1500, "height": 1300})
            page.set_default_timeout(30_000)

            page.goto(f"{base}/sweep?run={runs['wrong-drafts']}")
            page.wait_for_selector(CHART)
            alert = page.get_by_test_id("stAlertContentError")
            expect(alert).to_contain_text("Correctness gate")
            expect(alert).to_contain_text("EAGLE s3 v2")
            expect(alert).to_contain_text("acceptance v2/v1")
            # The speed of each wrong point is struck through (<del>) and labelled `wrong`; v1 is not listed.
            struck = alert.locator("del")
            expect(struck).to_have_count(2)  # the v2 points at batch 1 and 8
            assert all(t.replace(",", "").replace(".", "").isdigit() for t in struck.all_inner_texts())
            expect(alert.locator("strong", has_text="wrong").first).to_be_visible()
            assert "EAGLE s3 v1" not in alert.inner_text()
            page.screenshot(path=str(tmp_path / "sweep-wrong.png"))

            # The clean run has no alarm, and says what the gate found.
            page.goto(f"{base}/sweep?run={runs['clean']}")
            page.wait_for_selector(CHART)
            expect(page.get_by_text("Correctness gate: 6 point(s) pass")).to_be_visible()
            assert page.get_by_test_id("stAlertContentError").count() == 0

            # Compare: the candidate's wrong points are called out with their struck speed.
            page.goto(f"{base}/compare?a={runs['clean']}&b={runs['wrong-drafts']}")
            page.wait_for_selector("[data-testid='stMarkdownContainer'] table")
            alert = page.get_by_test_id("stAlertContentError")
            expect(alert).to_contain_text(f"the candidate run #{runs['wrong-drafts']}")
            expect(alert.locator("del")).to_have_count(2)
        finally:
            browser.close()
