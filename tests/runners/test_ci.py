"""`specbench ci`: runs or reuses both sides of a PR check on the stand-in, writes the comment, exits 1 on a
regression."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from typer.testing import CliRunner

from analysis.labels import STAND_IN_TAG
from runners.cli import app

SWEEP = """
name: ci-check
model: sim-tiny
server:
  backend: sim
  attention_backend: flashmla
  sim: {{acceptance_rate: {rate}, seed: 2, time_scale: 0.1}}
grid: {{batch_sizes: [1, 4], spec_modes: [v2], steps: [3], topk: [1], baseline: false}}
workload: {{input_len: 16, output_len: 48}}
repeats: 3
"""


def _runs(url: str) -> list[dict[str, object]]:
    res = CliRunner().invoke(app, ["runs", "--db", url, "--format", "json"])
    out: list[dict[str, object]] = json.loads(res.stdout)
    return out


def test_ci_runs_or_reuses_both_sides_and_fails_on_a_regression(sqlite_url: str, tmp_path: Path) -> None:
    runner = CliRunner()
    good, bad = tmp_path / "good.yaml", tmp_path / "bad.yaml"
    good.write_text(SWEEP.format(rate=0.9))
    bad.write_text(SWEEP.format(rate=0.2))  # the "PR": drafts rarely accepted, spec decoding much slower
    logs = ["--log-dir", str(tmp_path / "logs")]
    # The base side is measured while the base SGLang is installed; ci later reuses it and runs the head.
    base = ["ci", str(good), "--db", sqlite_url, "--base", "base-abc", "--base-only", *logs]
    res = runner.invoke(app, base)
    assert res.exit_code == 0 and "running it now" in res.stderr, res.output
    res = runner.invoke(app, base)
    assert res.exit_code == 0 and "reusing run" in res.stderr and len(_runs(sqlite_url)) == 1
    comment = tmp_path / "out" / "comment.md"
    args = [
        "ci",
        str(bad),
        "--db",
        sqlite_url,
        "--base",
        "base-abc",
        "--head",
        "head-def",
        "-o",
        str(comment),
        # Acceptance length: a fixed property of the stand-in's acceptance rate, immune to this host's load
        # (its throughput is not: a loaded CPU slows the stand-in).
        "--metric",
        "accept_length",
    ]
    res = runner.invoke(app, [*args, *logs])
    assert res.exit_code == 1, res.output  # a regression
    runs = _runs(sqlite_url)
    assert [(r["label"], r["trigger"]) for r in runs] == [("head-def", "pr"), ("base-abc", "pr")]
    assert "reusing run" in res.stderr and "running it now" in res.stderr
    md = comment.read_text()
    assert "🔴 regression" in md and f"Both runs are **{STAND_IN_TAG}**" in md
    assert len(md.encode()) < 3 * 1024
    # Again: both sides are reused, nothing new is measured, same verdict.
    res = runner.invoke(app, [*args, *logs])
    assert res.exit_code == 1 and len(_runs(sqlite_url)) == 2
    assert res.stderr.count("reusing run") == 2
    # Explicit runs; the reverse direction is an improvement, so the check passes.
    ids = [str(r["id"]) for r in runs]
    res = runner.invoke(
        app,
        [
            "ci",
            str(bad),
            "--db",
            sqlite_url,
            "--base-run",
            ids[0],
            "--head-run",
            "latest~1",
            "-o",
            str(comment),
            "--metric",
            "accept_length",
        ],
    )
    assert res.exit_code == 0, res.output
    assert "🟢 improvement" in comment.read_text()


@pytest.mark.parametrize(
    "extra",
    [
        [],  # neither side named
        ["--base", "x", "--base-run", "1", "--head", "y"],  # both forms for one side
        ["--base-run", "latest~x", "--head", "y"],  # a bad run reference
    ],
)
def test_ci_bad_input_exits_2(sqlite_url: str, tmp_path: Path, extra: list[str]) -> None:
    sweep = tmp_path / "s.yaml"
    sweep.write_text(SWEEP.format(rate=0.7))
    res = CliRunner().invoke(app, ["ci", str(sweep), "--db", sqlite_url, *extra])
    assert res.exit_code == 2, res.output
    assert "Traceback" not in res.output
