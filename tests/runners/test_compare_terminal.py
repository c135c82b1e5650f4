"""`specbench compare` in a terminal: a table that fits 80 columns (the default on a TTY, Markdown with
--format md), and a plain refusal with the nearest meaningful comparison when two runs do not compare."""

from __future__ import annotations

import json
import re
import subprocess
from pathlib import Path

import pytest
from rich.cells import cell_len

from runners.exit_codes import ExitCode
from tests.fixtures.cli import on_a_tty, run_cli
from tests.paths import REPO_ROOT
from tests.queue_support import cli_argv, cli_env

pytestmark = pytest.mark.slow  # whole sweeps on live stand-in servers: scheduled first (tests/conftest.py)

SWEEP = """
name: {name}
model: sim-tiny
server: {{backend: sim, attention_backend: flashmla, sim: {{acceptance_rate: {rate}, seed: 3, time_scale: 0.05}}}}
grid: {{batch_sizes: [1, 4], spec_modes: [v1, v2], steps: [1, 3], topk: [1], baseline: true}}
workload: {{input_len: 16, output_len: 32}}
repeats: 3
"""


def _run(tmp_path: Path, url: str, name: str, rate: float) -> int:
    sweep = tmp_path / f"{name}.yaml"
    sweep.write_text(SWEEP.format(name=name, rate=rate))
    out = run_cli("run", str(sweep), "--db", url, "--no-progress", "--log-dir", str(tmp_path / "logs"))
    assert out.returncode == 0, out.stdout + out.stderr
    return _ids(url)[name]


def _ids(url: str) -> dict[str, int]:
    out = run_cli("runs", "--db", url, "--format", "json")
    return {str(r["name"]): int(r["id"]) for r in json.loads(out.stdout)}


@pytest.fixture(scope="module")
def two_stand_in_runs(tmp_path_factory: pytest.TempPathFactory) -> tuple[str, int, int]:
    tmp = tmp_path_factory.mktemp("cmp")
    url = f"sqlite:///{tmp / 'cmp.db'}"
    return url, _run(tmp, url, "base", 0.8), _run(tmp, url, "head", 0.4)


def test_compare_on_a_terminal_fits_80_columns(two_stand_in_runs: tuple[str, int, int]) -> None:
    url, a, b = two_stand_in_runs
    text = on_a_tty("compare", str(a), str(b), "--db", url, "--metric", "accept_length", code=1)  # regressed
    lines = text.splitlines()
    assert lines and max(cell_len(line) for line in lines) <= 80, text
    assert not any(line.startswith("|") for line in lines)  # a table, not Markdown
    body = [line for line in lines if re.match(r"^(regression|improvement|no change|too few data)\s", line)]
    # Every configuration has its row, its verdict and its full Δ (never cut or left out).
    assert len(body) == 10, text  # 2 batch sizes x (baseline + 2 modes x 2 steps)
    assert sum(line.startswith("regression") for line in body) == 8  # every spec point; the baseline holds
    assert all(re.search(r" -\d+\.\d% ", line) for line in body if line.startswith("regression")), text
    assert "left out to fit 80 columns" in text and "simulated (stand-in)" in text
    # Markdown stays a flag away, and a pipe keeps getting it by default.
    md = run_cli("compare", str(a), str(b), "--db", url, "--format", "md")
    assert md.returncode in (0, 1) and md.stdout.startswith("### specbench: run")
    piped = run_cli("compare", str(a), str(b), "--db", url)
    assert piped.stdout == md.stdout


def test_compare_table_piped_follows_columns(two_stand_in_runs: tuple[str, int, int]) -> None:
    url, a, b = two_stand_in_runs
    narrow = subprocess.run(
        cli_argv("compare", str(a), str(b), "--db", url, "--format", "table"),
        cwd=REPO_ROOT,
        env=cli_env(COLUMNS="80"),
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert narrow.returncode == (1 if " regression" in narrow.stderr else 0), narrow.stderr
    assert max(cell_len(line) for line in narrow.stdout.splitlines()) <= 80, narrow.stdout
    wide = run_cli("compare", str(a), str(b), "--db", url, "--format", "table")  # COLUMNS=200
    assert "candidate" in wide.stdout.splitlines()[3] and "left out" not in wide.stdout


def test_runs_and_regressions_fit_80_columns_on_a_terminal(two_stand_in_runs: tuple[str, int, int]) -> None:
    url, a, b = two_stand_in_runs
    text = on_a_tty("runs", "--db", url)
    lines = text.splitlines()
    assert max(cell_len(line) for line in lines) <= 80, text
    ids = [line.split()[0] for line in lines if re.match(r"^\s*\d+\s+\d{4}-", line)]  # rows, not a footnote
    assert sorted(ids) == sorted([str(a), str(b)])


def test_runs_that_do_not_compare_are_refused_with_the_nearest_comparison(
    two_stand_in_runs: tuple[str, int, int], db_url: str, tmp_path: Path
) -> None:
    # The module's stand-in runs (imported: a sweep of their own would measure the same kind of run again),
    # then two measured H200 runs.
    stand_in_db = two_stand_in_runs[0].removeprefix("sqlite:///")
    for db in (
        stand_in_db,
        REPO_ROOT / "examples/h200-v3slice-paired.db",
        REPO_ROOT / "examples/h200-v3slice-grid/grid.db",
    ):
        out = run_cli("import", str(db), "--db", db_url)
        assert out.returncode == 0, out.stderr
    ids = _ids(db_url)
    stand_in, paired, grid = ids["base"], ids["h200-v3slice-paired"], ids["h200-v3slice-grid"]

    kinds = run_cli("compare", str(stand_in), str(paired), "--db", db_url)
    said = " ".join(kinds.stderr.split())
    assert kinds.returncode == ExitCode.ERROR and kinds.stdout == "", kinds.stdout
    assert f"Run {stand_in} is simulated (stand-in)" in said and f"run {paired} is measured on H200" in said
    assert "insufficient data" not in said
    assert re.search(
        rf"Nearest meaningful comparison: specbench (compare \d+ {paired}|compare {paired} \d+|export --run {paired} --view v2-vs-v1)",
        said,
    ), said

    grids = run_cli("compare", str(paired), str(grid), "--db", db_url, "--format", "md")
    said = " ".join(grids.stderr.split())
    assert grids.returncode == ExitCode.ERROR, grids.stdout
    assert f"Runs {paired} and {grid} share no configuration" in said
    assert f"Nearest meaningful comparison: specbench export --run {grid} --view v2-vs-v1" in said
    # The same refusal stops a PR check: no comment from runs that do not compare.
    sweep = tmp_path / "s.yaml"
    sweep.write_text(SWEEP.format(name="base", rate=0.8))
    ci = run_cli(
        "ci",
        str(sweep),
        "--db",
        db_url,
        "--base-run",
        str(stand_in),
        "--head-run",
        str(paired),
        "-o",
        str(tmp_path / "c.md"),
    )
    assert ci.returncode == ExitCode.ERROR and "do not compare" in ci.stderr
    assert not (tmp_path / "c.md").exists()
