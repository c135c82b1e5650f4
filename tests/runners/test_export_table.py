"""`specbench export` on an 80-column terminal: a table (its default there) that fits, for every view, with what
identifies a row and what it found kept; and `runs` at 80 columns tells the seeded histories' names apart."""

from __future__ import annotations

import re
from datetime import UTC, datetime
from pathlib import Path

import pytest
from rich.cells import cell_len

from db.migrate import open_database
from synthetic.history import SMALL_SHAPE
from synthetic.history.seed import seed_history
from tests.fixtures.cli import on_a_tty, run_cli

pytestmark = pytest.mark.slow  # a sweep on live stand-in servers

SWEEP = """
name: export-table-with-a-long-sweep-name
model: sim-tiny
server: {backend: sim, attention_backend: flashmla, sim: {acceptance_rate: 0.7, seed: 4, instant: true}}
grid: {batch_sizes: [1, 16], spec_modes: [v1, v2], steps: [1, 3], topk: [1], baseline: true}
workload: {input_len: 16, output_len: 32}
repeats: 3
"""


@pytest.fixture(scope="module")
def stand_in_run(tmp_path_factory: pytest.TempPathFactory) -> tuple[str, int]:
    tmp = tmp_path_factory.mktemp("export-table")
    url = f"sqlite:///{tmp / 'x.db'}"
    sweep = tmp / "s.yaml"
    sweep.write_text(SWEEP)
    done = run_cli("run", str(sweep), "--db", url, "--no-progress", "--log-dir", str(tmp / "logs"))
    assert done.returncode == 0, done.stdout + done.stderr
    return url, 1


def _fits(text: str, columns: int = 80) -> list[str]:
    lines = text.splitlines()
    assert lines and max(cell_len(line) for line in lines) <= columns, text
    return lines


def test_export_points_on_a_terminal_is_a_table_that_fits(stand_in_run: tuple[str, int]) -> None:
    url, run = stand_in_run
    lines = _fits(on_a_tty("export", "--db", url, "--run", str(run)))
    assert not any(line.startswith(("|", "config,", "#")) for line in lines)  # a table, not Markdown or CSV
    assert "simulated (stand-in)" in lines[0]  # what the numbers are, in the run's title
    rows = [line for line in lines if re.match(r"^\s*(baseline|EAGLE s\d v\d)\s+\d+\s", line)]
    assert len(rows) == 10  # 2 batch sizes x (baseline + 2 modes x 2 steps): none left out
    # Every row keeps its throughput in full (never cut), and the correctness check's verdict.
    assert all(re.search(r"\s\d{1,3}(,\d{3})*\s", r) and r.rstrip().endswith("pass") for r in rows), rows
    # Piped, it stays CSV.
    piped = run_cli("export", "--db", url, "--run", str(run))
    assert piped.stdout.startswith("#") and "batch_size" in piped.stdout


def test_every_view_fits_80_columns(stand_in_run: tuple[str, int]) -> None:
    url, run = stand_in_run
    v2v1 = _fits(on_a_tty("export", "--db", url, "--run", str(run), "--view", "v2-vs-v1"))
    cells = [line.split() for line in v2v1 if re.match(r"^\s*\d+\s+\d\s", line)]
    assert len(cells) == 4  # (1, 16) x (1, 3)
    # The ratio, its interval and the verdict are the finding: all there, whole.
    assert all(any(re.fullmatch(r"\d+\.\d{3}-\d+\.\d{3}", x) for x in c) for c in cells), (
        v2v1
    )  # wide under load
    assert all(any(v in " ".join(c) for v in ("faster", "slower", "no clear difference")) for c in cells)
    windows = _fits(on_a_tty("export", "--db", url, "--run", str(run), "--view", "windows"))
    assert "output_throughput" in " ".join(windows) and "left out to fit 80 columns" in " ".join(windows)
    assert run_cli("export", "--db", url, "--format", "table", "-o", "x.txt").returncode == 2


def test_runs_at_80_columns_tells_seeded_names_apart(tmp_path: Path) -> None:
    url = f"sqlite:///{tmp_path / 'seeded.db'}"
    eng = open_database(url)
    seed_history(eng, 40, shape=SMALL_SHAPE, end=datetime.now(UTC), seed=0)  # as `make demo` seeds
    eng.dispose()
    lines = _fits(on_a_tty("runs", "--db", url))
    names = {line.split()[3] for line in lines if re.match(r"^\s*\d+\s+\d{4}-", line)}
    assert len(names) == len(SMALL_SHAPE.lanes) >= 2, lines  # one per lane, not one shared prefix
    assert all("…" in n for n in names) and len({n[-4:] for n in names}) == len(names), names
