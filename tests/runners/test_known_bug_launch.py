"""A launch that dies of a known SGLang bug is a finding, on the stand-in: `sweeps/correctness-sim.yaml` emulating
sglang 0.5.12 (FlashMLA + NEXTN, v2 dies at its warm-up as measured on an H100) names the bug, fails v2 in the
correctness gate while v1 and the baseline are measured and pass, and exits 1; at 0.5.13.post1 everything passes
(exit 0); a launch failure no known bug explains stays a failed launch (no answer, not a finding)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from sqlalchemy import select
from typer.testing import CliRunner

from analysis.export import read_csv_rows
from db.engine import session_scope
from db.migrate import open_database
from db.models import Point, ServerInstance
from runners.cli import app
from runners.exit_codes import ExitCode
from tests.paths import REPO_ROOT

pytestmark = pytest.mark.slow  # tests/conftest.py starts the slow files first

SHIPPED = REPO_ROOT / "sweeps" / "correctness-sim.yaml"
LINE = (
    "server crashed in spec v2's draft extend: known SGLang bug flashmla-draft-extend-v2, fixed in 0.5.13 by "
    "PR #24640: AttributeError: 'PrefillMetadata' object has no attribute 'block_kv_indices'"
)


def shipped(tmp: Path, version: str) -> Path:
    """The shipped sweep at `version`, with no modelled time (the stand-in's speed is not the point here)."""
    text = SHIPPED.read_text()
    emulated = 'sim: {version: "0.5.12", acceptance_rate: 0.7, time_scale: 0.25}'
    assert emulated in text
    path = tmp / f"correctness-sim-{version}.yaml"
    path.write_text(
        text.replace(emulated, f'sim: {{version: "{version}", acceptance_rate: 0.7, instant: true}}')
    )
    return path


def run(url: str, sweep: Path, tmp: Path) -> Any:
    args = ["run", str(sweep), "--db", url, "--no-progress", "--log-dir", str(tmp / "logs")]
    return CliRunner().invoke(app, args)


def export(url: str, run_id: int) -> list[dict[str, str]]:
    res = CliRunner().invoke(
        app, ["export", "--db", url, "--run", str(run_id), "--format", "csv", "--all-status"]
    )
    assert res.exit_code == 0, res.output
    return read_csv_rows(res.stdout)


def flat(text: str) -> str:
    return " ".join(text.split())  # the console wraps long lines


def test_0_5_12_names_the_bug_fails_v2_measures_v1_and_exits_1(db_url: str, tmp_path: Path) -> None:
    res = run(db_url, shipped(tmp_path, "0.5.12"), tmp_path)
    assert res.exit_code == ExitCode.FINDING, res.output
    out = flat(res.output)
    assert f"server failed to start: {LINE}" in out  # the failed points, in one line each
    assert f"FAIL NEXTN steps=3 topk=1 draft=4 v2: {LINE}" in out
    assert "cannot run on this release: the server died of a known SGLang bug" in out
    rows = export(db_url, 1)
    v2 = [r for r in rows if r["spec_mode"] == "v2"]
    others = [r for r in rows if r["spec_mode"] != "v2"]
    assert len(v2) == 2 and all(r["status"] == "failed" and r["correctness"] == "fail" for r in v2)
    assert all(r["correctness_reason"].startswith(LINE) for r in v2)
    # The run went on past the crash: v1 and the baseline were measured and pass.
    assert len(others) == 4 and all(r["status"] in ("ok", "unstable") for r in others)
    assert {r["correctness"] for r in others} == {"pass"}
    engine = open_database(db_url)
    with session_scope(engine) as s:
        failed = s.scalars(select(ServerInstance).where(ServerInstance.status == "failed")).all()
        assert [(r.spec_mode_requested, r.known_bug, r.exit_code) for r in failed] == [
            ("v2", "flashmla-draft-extend-v2", -9)
        ]
        assert (failed[0].error or "").splitlines()[0] == LINE
        assert "SIGQUIT received" in (failed[0].log_tail or "")
        # One launch per config: the crash is not retried (alone it would crash the same way).
        assert s.query(ServerInstance).count() == 3
    engine.dispose()
    again = CliRunner().invoke(app, ["gate", "1", "--db", db_url])  # judged again from what is stored
    assert again.exit_code == ExitCode.FINDING and LINE in flat(again.output)


def test_0_5_13_post1_passes_and_ci_fails_the_0_5_12_candidate(tmp_path: Path) -> None:
    url = f"sqlite:///{tmp_path / 'gate.db'}"
    fixed = run(url, shipped(tmp_path, "0.5.13.post1"), tmp_path)
    assert fixed.exit_code == ExitCode.OK, fixed.output
    assert "correctness: 3 pass, 0 fail, 0 not checked" in fixed.output
    rows = export(url, 1)
    assert len(rows) == 6 and {r["correctness"] for r in rows} == {"pass"}
    assert {r["status"] for r in rows} <= {"ok", "unstable"}
    buggy = run(url, shipped(tmp_path, "0.5.12"), tmp_path)
    assert buggy.exit_code == ExitCode.FINDING, buggy.output
    comment = tmp_path / "comment.md"
    args = ["ci", str(SHIPPED), "--db", url, "--base-run", "1", "--head-run", "2", "-o", str(comment)]
    res = CliRunner().invoke(app, args)
    assert res.exit_code == ExitCode.FINDING, res.output
    assert "failed the correctness gate" in flat(res.output)
    assert "flashmla-draft-extend-v2" in comment.read_text()


UNKNOWN = """name: unknown-failure
model: sim-tiny
server:
  backend: sim
  attention_backend: flashmla
  max_parallel_starts: 2
  args: {mem-fraction-static: 0.6}
  sim: {version: "0.5.13.post1", instant: true, shared_gpu: true}
grid: {batch_sizes: [1], spec_modes: [v1, v2], algorithm: NEXTN, steps: [3], topk: [1], baseline: true}
measure: {paired: false}
workload: {input_len: 16, output_len: 16}
repeats: 2
"""


def test_a_failure_no_known_bug_explains_stays_a_failed_launch(tmp_path: Path) -> None:
    """v1 and v2 start together on one emulated GPU at 0.6 of its memory each: the second cannot start (GPU
    memory, not a known bug). That launch is not named, its config is `not checked`, and the run exits as a
    partial run does: no answer, not a finding."""
    sweep = tmp_path / "unknown.yaml"
    sweep.write_text(UNKNOWN)
    url = f"sqlite:///{tmp_path / 'unknown.db'}"
    res = run(url, sweep, tmp_path)
    assert res.exit_code == ExitCode.ERROR, res.output
    assert "known SGLang bug" not in res.output
    engine = open_database(url)
    with session_scope(engine) as s:
        failed = s.scalars(select(ServerInstance).where(ServerInstance.status == "failed")).all()
        assert len(failed) == 1 and failed[0].known_bug is None
        verdicts = {p.spec_mode: p.correctness for p in s.scalars(select(Point))}
    engine.dispose()
    mode = failed[0].spec_mode_requested
    assert verdicts.pop(mode) == "not checked"
    assert set(verdicts.values()) == {"pass"}
