"""The shipped verdict run on the 40-layer shard (examples/h100-v3shard-40l-verdict/evidence.db, issue 34) says
what the README, the example's README and the results page quote (docs/results/2026-12-07-h100-v3shard-40l-verdict.md):
every v2/v1 and v1/baseline ratio with its interval, the parts and the drift check that kept part 1 apart, and
the batch-8 profile pair."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest

from tests.fixtures.cli import run_cli
from tests.paths import REPO_ROOT

VERDICT_DB = REPO_ROOT / "examples" / "h100-v3shard-40l-verdict" / "evidence.db"
QUOTED_IN = [
    REPO_ROOT / "README.md",
    REPO_ROOT / "examples" / "h100-v3shard-40l-verdict" / "README.md",
    REPO_ROOT / "docs" / "results" / "2026-12-07-h100-v3shard-40l-verdict.md",
]


@pytest.fixture(scope="module")
def verdict_db(tmp_path_factory: pytest.TempPathFactory) -> Path:
    db = tmp_path_factory.mktemp("verdict") / "evidence.db"
    shutil.copy(VERDICT_DB, db)
    return db


def _export(db: Path, view: str) -> dict:
    done = run_cli("export", "--db", f"sqlite:///{db}", "--run", "1", "--view", view, "--format", "json")
    assert done.returncode == 0, done.stdout + done.stderr
    return json.loads(done.stdout)


def _quoted(row: dict) -> str:
    """A ratio and its interval as the pages write them (and the Markdown export prints them)."""
    return f"{row['ratio']:.3f} [{row['ci_low']:.3f}, {row['ci_high']:.3f}]"


def test_the_run_has_three_parts_and_part_1_did_not_combine(verdict_db: Path) -> None:
    parts = _export(verdict_db, "v2-vs-v1")["parts"]
    assert [p["part"] for p in parts] == [1, 2, 3]
    assert {p["gpu_name"] for p in parts} == {"NVIDIA H100 80GB HBM3"}
    check = parts[1]["check"]
    assert check["against_part"] == 1 and check["agrees"] is False and round(check["change"], 3) == -0.035
    assert parts[1]["host"] == parts[2]["host"]  # parts 2 and 3: the same GPU


@pytest.mark.parametrize(("view", "mode"), [("v2-vs-v1", None), ("spec-vs-baseline", "v1")])
def test_every_quoted_ratio_is_the_exports(verdict_db: Path, view: str, mode: str | None) -> None:
    rows = [r for r in _export(verdict_db, view)["rows"] if mode is None or r["spec_mode"] == mode]
    assert sorted(r["batch_size"] for r in rows) == [1, 8, 32, 64]
    assert all(r["steps"] == 3 and r["method"] == "paired" for r in rows)
    pages = {f: " ".join(f.read_text(encoding="utf-8").replace("**", "").split()) for f in QUOTED_IN}
    readme = pages[REPO_ROOT / "README.md"]
    for r in rows:
        assert _quoted(r) in readme, (view, r["batch_size"], _quoted(r))
        cells = f"{r['ratio']:.3f} | [{r['ci_low']:.3f}, {r['ci_high']:.3f}]"
        for f in QUOTED_IN[1:]:  # the example's README and the page hold tables: ratio | [lo, hi]
            assert cells in pages[f], (f.name, cells)
    if view == "v2-vs-v1":  # no v2/v1 interval excludes 1, as every page says
        assert all(r["ci_low"] < 1 < r["ci_high"] and r["verdict"] == "no clear difference" for r in rows)


def test_the_batch_8_profile_pair_is_the_quoted_one(verdict_db: Path) -> None:
    rows = {r["batch_size"]: r for r in _export(verdict_db, "v2-vs-v1")["rows"]}
    b8 = rows[8]
    quoted = (b8["v1_cycle_ms"], b8["v2_cycle_ms"], b8["v1_gpu_idle_ms"], b8["v2_gpu_idle_ms"])
    assert [f"{x:.2f}" for x in quoted] == ["31.26", "31.75", "8.45", "8.84"]
    assert b8["profile_verdict"].startswith("v2 hides no CPU work")
    assert rows[64]["v2_cycle_ms"] is None  # the v2 profile at batch 64 is still missing
