"""The Sweep page of a stand-in run whose v2 server died of a known SGLang bug (sglang 0.5.12 + FlashMLA, as
measured on an H100): the red correctness block names the bug for the v2 configuration, which has no speed."""

from __future__ import annotations

from pathlib import Path

import pytest
from streamlit.testing.v1 import AppTest
from typer.testing import CliRunner

from runners.cli import app
from runners.exit_codes import ExitCode
from tests.paths import REPO_ROOT

APP = str(REPO_ROOT / "dashboard" / "app.py")
SWEEP = """name: known-bug-page
model: sim-tiny
server: {backend: sim, attention_backend: flashmla, sim: {version: "0.5.12", instant: true}}
grid: {batch_sizes: [1], spec_modes: [v1, v2], algorithm: NEXTN, steps: [3], topk: [1], baseline: true}
workload: {input_len: 16, output_len: 16}
measure: {correctness: {prompts: 4, output_len: 16}}
repeats: 2
"""


def sweep_page_errors(sweep_text: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> str:
    """Run the sweep on the stand-in (the gate finds something: exit 1), then open its Sweep page and return
    the text of the page's red blocks."""
    sweep = tmp_path / "sweep.yaml"
    sweep.write_text(sweep_text)
    url = f"sqlite:///{tmp_path / 'runs.db'}"
    res = CliRunner().invoke(
        app, ["run", str(sweep), "--db", url, "--no-progress", "--log-dir", str(tmp_path / "logs")]
    )
    assert res.exit_code == ExitCode.FINDING, res.output
    monkeypatch.setenv("DATABASE_URL", url)
    at = AppTest.from_file(APP, default_timeout=60)
    at.query_params["run"] = "1"
    at.run()
    at.switch_page("pages/sweep.py").run()
    assert not at.exception, [e.value for e in at.exception]
    return " ".join(e.value for e in at.error)


def test_sweep_page_names_the_known_bug(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    errors = sweep_page_errors(SWEEP, tmp_path, monkeypatch)
    assert "died of a known SGLang bug" in errors
    assert "known SGLang bug flashmla-draft-extend-v2, fixed in 0.5.13 by PR #24640" in errors
    assert "v2" in errors and "v1:" not in errors  # only the v2 configuration is wrong


ISSUE_SWEEP = SWEEP.replace("name: known-bug-page", "name: known-issue-page").replace(
    'sim: {version: "0.5.12", instant: true}',
    'sim: {version: "0.5.13.post1", instant: true, fault: flashmla_draft_decode_context}',
)


def test_sweep_page_names_the_open_flashmla_draft_issue(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """FlashMLA's draft-decode issue emulated (acceptance falls on v1 and v2, tokens right): the red block lists
    both configurations with the gate's line, which names the issue and its control."""
    assert ISSUE_SWEEP != SWEEP
    errors = sweep_page_errors(ISSUE_SWEEP, tmp_path, monkeypatch)
    assert errors.count("matches known SGLang issue flashmla-draft-decode-context") == 2, errors
    assert "sweeps/correctness-triton-control.yaml" in errors
