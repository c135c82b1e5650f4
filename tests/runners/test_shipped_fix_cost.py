"""The shipped cost runs of FlashMLA's draft-decode fix say what the report says
(docs/results/2026-12-06-flashmla-draft-decode-context.md, "What the fix costs"): the two runs differ in their
SGLang's patch and nothing else that a reader would compare, and no cell moves by 5% or more."""

from __future__ import annotations

import json
import math
import shutil
from pathlib import Path

import pytest

from bench.stats.tdist import t_quantile
from tests.fixtures.cli import run_cli
from tests.paths import REPO_ROOT

COST_DB = REPO_ROOT / "examples" / "h100-flashmla-draft-fix" / "cost.db"


def _cli(db: Path, *args: str) -> dict | list:
    done = run_cli(*args, "--db", f"sqlite:///{db}", "--format", "json")
    assert done.returncode == 0, done.stdout + done.stderr
    return json.loads(done.stdout)


@pytest.fixture(scope="module")
def cost_db(tmp_path_factory: pytest.TempPathFactory) -> Path:
    db = tmp_path_factory.mktemp("cost") / "cost.db"
    shutil.copy(COST_DB, db)
    return db


def test_the_two_cost_runs_differ_only_in_the_patch(cost_db: Path) -> None:
    runs = {run["label"]: run for run in _cli(cost_db, "runs")}
    unpatched, patched = runs["cost-unpatched"], runs["cost-patched"]
    assert unpatched["sglang_patch"] == "none"
    assert patched["sglang_patch"].startswith("flashmla-draft-decode-context (")
    same = ("name", "model", "gpu", "gpu_count", "sglang_version", "kind", "points_ok")
    assert {k: unpatched[k] for k in same} == {k: patched[k] for k in same}
    assert patched["kind"] == "measured" and patched["points_ok"] == 6


@pytest.mark.parametrize("metric", ["output_throughput", "itl_p50_ms"])
def test_no_cell_moves_by_five_percent_and_the_cells_average_to_nothing(cost_db: Path, metric: str) -> None:
    result = _cli(cost_db, "compare", "1", "2", "--metric", metric)
    assert isinstance(result, dict)
    cells = {(p["spec_mode"], p["batch_size"]): p["delta"] for p in result["points"]}
    assert set(cells) == {(mode, bs) for mode in ("v1", "v2") for bs in (1, 8, 64)}
    assert max(abs(d) for d in cells.values()) < 0.05, cells
    # The report's pooled figure: the six cells' mean change with a 95% t interval.
    deltas = list(cells.values())
    mean = sum(deltas) / len(deltas)
    sd = math.sqrt(sum((d - mean) ** 2 for d in deltas) / (len(deltas) - 1))
    half = t_quantile(0.95, len(deltas) - 1) * sd / math.sqrt(len(deltas))
    assert abs(mean) < 0.01 and half < 0.025 and mean - half < 0 < mean + half, (mean, half)
