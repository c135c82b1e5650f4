"""Compare for PRs: the default pair, Δ on the values shown, the short PR comment, stand-in tags everywhere."""

from __future__ import annotations

import json
import re
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pandas as pd
import pytest
from typer.testing import CliRunner

from analysis import report
from analysis.compare import comparable_pair, compare_runs, one_sided
from analysis.labels import SIMULATED, STAND_IN_TAG
from runners.cli import app
from tests.fixtures.markdown import markdown_tables
from tests.fixtures.report_data import RUN_A, RUN_B, report_points, report_samples
from tests.paths import REPO_ROOT

ROOT = REPO_ROOT
DEMO_YAML = (ROOT / "sweeps" / "demo-sim.yaml").read_text()
GRID = [
    (m, s, bs)
    for m, s in [(None, None), *((m, s) for m in ("v1", "v2") for s in (1, 2, 3))]
    for bs in (1, 4, 16, 32)
]


def _runs(*rows: tuple[int, str, str, bool, str]) -> pd.DataFrame:
    t0 = datetime(2026, 12, 1, tzinfo=UTC)
    return pd.DataFrame(
        [
            {
                "id": rid,
                "model": model,
                "gpu_name": gpu,
                "gpu_count": 0 if gpu == "none" else 8,
                "simulated": sim,
                "trigger": "manual",
                "sweep_name": sweep,
                "started_at": t0 - timedelta(hours=i),
            }
            for i, (rid, model, gpu, sim, sweep) in enumerate(rows)
        ]
    )


def test_default_pair_is_the_two_latest_comparable_runs() -> None:
    runs = _runs(  # newest first, as the pickers list them
        (9, "sim-tiny", "none", True, "demo-sim"),
        (8, "dsv3", "NVIDIA H200", False, "smoke"),
        (7, "dsv3", "NVIDIA H100 80GB HBM3", False, "smoke"),
        (6, "dsv3", "NVIDIA H200", False, "solo"),
        (5, "dsv3", "NVIDIA H200", False, "smoke"),
    )
    # The stand-in run pairs with nothing; the H200 smoke run pairs with the earlier H200 smoke run.
    assert comparable_pair(runs) == (5, 8)
    # A pair must share a series when that is known: run 8 shares none with 5, only with 6.
    series = {9: {"s"}, 8: {"a", "b"}, 7: {"a"}, 6: {"b"}, 5: {"c"}}
    assert comparable_pair(runs, lambda r: series[r]) == (6, 8)
    assert comparable_pair(runs.iloc[:3]) is None  # sim, H200, H100: nothing pairs
    stand_ins = _runs(
        (3, "sim-tiny", "none", True, "demo-sim-candidate"), (2, "sim-tiny", "none", True, "demo-sim")
    )
    assert comparable_pair(pd.concat([stand_ins, runs.iloc[1:2]])) == (2, 3)


def _pair(changed: dict[tuple[str | None, int | None, int], float]) -> pd.DataFrame:
    base = {k: 1000.0 * (1 + (k[1] or 0) / 4) * (k[2] ** 0.5) for k in GRID}
    a = report_points(100, base)
    b = report_points(200, {k: v * changed.get(k, 1.0) for k, v in base.items()})
    return compare_runs(a, report_samples(a), b, report_samples(b))


def test_delta_agrees_with_the_columns_beside_it() -> None:
    table = _pair({("v2", 3, 16): 0.9, ("v1", 1, 4): 1.08})
    paired = table[~one_sided(table)]
    assert len(paired) == 28 and set(paired["center"]) == {"geometric mean"}
    ratio = paired["candidate"] / paired["baseline"] - 1
    assert (ratio - paired["delta"]).abs().max() < 1e-12


STAND_IN = {
    **RUN_A,
    "id": 1,
    "sweep_name": "demo-sim",
    "simulated": True,
    "backend": "sim",
    "model": "sim-tiny",
    "gpu_name": "none",
    "gpu_count": 0,
    "sglang_commit": None,
    "sgl_kernel_version": "none",
    "flashinfer_version": "none",
    "host": "ci",
    "sweep_yaml": DEMO_YAML,
}


def test_short_pr_comment_for_a_28_point_run() -> None:
    table = _pair({("v2", 3, 16): 0.88, ("v2", 3, 32): 0.9, ("v1", 2, 4): 1.09})
    cand = {**STAND_IN, "id": 2, "sweep_name": "demo-sim", "started_at": datetime(2026, 12, 1, tzinfo=UTC)}
    md = report.to_markdown(table, STAND_IN, cand, short=True)
    size = len(md.encode())
    assert size < 3 * 1024, size
    assert size < len(report.to_markdown(table, STAND_IN, cand).encode())
    head, rows = markdown_tables(md)[1]
    # Changed rows only, regressions first.
    assert [r[-2] for r in rows] == ["🔴 regression", "🔴 regression", "🟢 improvement"]
    assert "Not shown: 25 unchanged" in md
    # The sweep file is folded away, once (both runs ran the same file).
    assert md.count("```yaml") == 1
    yaml_at = md.index("```yaml")
    assert md.rfind("<details>", 0, yaml_at) > md.rfind("</details>", 0, yaml_at)
    # Stand-in runs: said at the top and in the provenance, nothing to pip install, no unknown pins.
    assert md.count(f"Both runs are **{STAND_IN_TAG}**") == 1
    assert "==none" not in md and "pip install" not in md
    assert head[1] == "Baseline (geometric mean)"  # one workload: no Workload column


def test_short_comment_stays_short_when_most_points_change() -> None:
    # A lower acceptance rate moves every speculative point (24 of 28), and the two sweep files differ.
    table = _pair({k: 0.8 - 0.01 * i for i, k in enumerate(GRID) if k[0] is not None})
    cand_yaml = DEMO_YAML.replace("acceptance_rate: 0.7", "acceptance_rate: 0.6").replace(
        "name: demo-sim", "name: demo-sim-candidate"
    )
    cand = {**STAND_IN, "id": 2, "sweep_name": "demo-sim-candidate", "sweep_yaml": cand_yaml}
    md = report.to_markdown(table, STAND_IN, cand, short=True)
    assert len(md.encode()) < 3.5 * 1024, len(md.encode())
    assert len(markdown_tables(md)[1][1]) == report.SHORT_ROWS
    assert f"Not shown: {24 - report.SHORT_ROWS} smaller regressions, 4 unchanged" in md
    # The candidate's sweep file as a diff against the baseline's.
    assert '-  sim: {version: "0.5.13.post1", acceptance_rate: 0.7' in md
    assert '+  sim: {version: "0.5.13.post1", acceptance_rate: 0.6' in md


def test_one_sided_rows_collapse_to_counts() -> None:
    a = report_points(1, {k: 1000.0 for k in GRID[:24]})
    b = report_points(100, {k: 1000.0 for k in GRID[20:]})
    table = compare_runs(a, report_samples(a), b, report_samples(b))
    md = report.to_markdown(table, RUN_A, RUN_B, short=True)
    assert "Not shown: 4 unchanged, 20 only in the baseline run, 4 only in the candidate run" in md
    assert "only in the baseline run |" not in md  # no table row per one-sided point
    nothing = compare_runs(a.iloc[:4], report_samples(a.iloc[:4]), b.iloc[-4:], report_samples(b.iloc[-4:]))
    assert "share no configuration" in report.to_markdown(nothing, RUN_A, RUN_B, short=True)


def test_reproduce_block_omits_unknown_versions() -> None:
    table = _pair({})
    real = {**RUN_A, "sgl_kernel_version": "none", "flashinfer_version": None, "sglang_commit": "unknown"}
    md = report.to_markdown(table, real, RUN_B)
    assert "==none" not in md and "@unknown" not in md
    assert "pip install sglang==0.5.13.post1" in md  # what is known stays
    assert "flashinfer-python==0.6.12" in md  # run B's known pin


def test_exports_and_json_carry_the_stand_in_tag(tmp_path: Path) -> None:
    table = _pair({})
    doc = json.loads(report.document(table, STAND_IN, RUN_B).text("json"))
    assert doc["baseline"]["kind"] == SIMULATED and doc["candidate"]["kind"] == "measured"


@pytest.fixture(scope="module")
def demo_db(tmp_path_factory: pytest.TempPathFactory) -> str:
    """The demo's shape: the bundled H200 runs and two stand-in runs (instant, so it takes seconds)."""
    tmp = tmp_path_factory.mktemp("demo")
    url = f"sqlite:///{tmp / 'demo.db'}"
    runner = CliRunner()
    res = runner.invoke(app, ["import", str(ROOT / "examples" / "h200-sglang-0.5.13.post1.db"), "--db", url])
    assert res.exit_code == 0, res.output
    for name, rate in (("demo-sim", 0.7), ("demo-sim-candidate", 0.5)):
        sweep = tmp / f"{name}.yaml"
        sweep.write_text(
            f"name: {name}\nmodel: sim-tiny\nserver:\n  backend: sim\n  attention_backend: flashmla\n"
            f"  sim: {{acceptance_rate: {rate}, seed: 1, instant: true}}\n"
            "grid: {batch_sizes: [1, 8], spec_modes: [v2], steps: [3], topk: [1], baseline: true}\n"
            "workload: {input_len: 32, output_len: 32}\nrepeats: 3\n"
        )
        res = runner.invoke(
            app, ["run", str(sweep), "--db", url, "--no-progress", "--log-dir", str(tmp / "logs")]
        )
        assert res.exit_code == 0, res.output
    return url


def test_cli_compare_defaults_to_the_comparable_pair(demo_db: str, tmp_path: Path) -> None:
    runs = json.loads(CliRunner().invoke(app, ["runs", "--db", demo_db, "--format", "json"]).stdout)
    stand_in = [r["id"] for r in runs if r["kind"] == SIMULATED]
    assert len(stand_in) == 2
    out = tmp_path / "comment.md"
    res = CliRunner().invoke(app, ["compare", "--db", demo_db, "--format", "comment", "-o", str(out)])
    # A regression is a finding (exit 1); whether the instant stand-in's noise shows one at this acceptance
    # varies with the host's load, so the exit code must follow what the verb counted.
    found = re.search(r"(\d+) regression", res.output)
    assert res.exit_code == (1 if found and int(found.group(1)) else 0), res.output
    assert f"baseline {stand_in[1]}, candidate {stand_in[0]}" in res.stderr
    md = out.read_text()
    assert STAND_IN_TAG in md and "==none" not in md
    # Both runs share every point: nothing is one-sided, every pair has 3 repeats, so all have verdicts.
    assert "only in the" not in md and "too few repeats" not in md and "0 insufficient data" in md
    res = CliRunner().invoke(app, ["compare", "latest", "--db", demo_db])
    assert res.exit_code == 2 and "both runs" in res.output
    # Exports say what the numbers are.
    res = CliRunner().invoke(app, ["export", "--db", demo_db, "--run", str(stand_in[0]), "--format", "csv"])
    assert f"#   kind: {SIMULATED}" in res.stdout
    res = CliRunner().invoke(app, ["export", "--db", demo_db, "--run", str(stand_in[0]), "--format", "md"])
    assert STAND_IN_TAG in res.stdout
