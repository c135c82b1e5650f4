"""Every workload file, model config and sweep file is checked before the first server starts (issue 35): a
`jsonl` workload that is /proc/self/environ, /dev/zero, a FIFO, a directory, 100,000 nested arrays,
`input_ids: [1e30]` or `output_len: 10**12` was refused only when the pair runner read it, after the servers
started (five minutes on a GPU host), and then as a traceback; on PostgreSQL `output_len: 10**12` reset the
stand-in's connection and ended in a traceback carrying the failed insert. Now: one line, exit 2, no server
started, no run stored. On SQLite and PostgreSQL, with the real CLI."""

from __future__ import annotations

import os
from collections.abc import Callable
from pathlib import Path

import pytest
from sqlalchemy import func, select

from db.migrate import open_database
from db.models import Run
from tests.fixtures.cli import run_cli


def sweep(workload_path: str, model: str = "sim-tiny") -> str:
    return (
        f"name: hostile\nmodel: '{model}'\nserver: {{backend: sim, sim: {{instant: true, startup_s: 0}}}}\n"
        "grid: {batch_sizes: [1], spec_modes: [v1, v2], steps: [1], baseline: true}\n"
        f"workload: {{dataset: jsonl, path: '{workload_path}', output_len: 4, num_prompts: 2}}\nrepeats: 2\n"
    )


def _fifo(tmp: Path) -> str:
    path = tmp / "fifo.jsonl"
    os.mkfifo(path)
    return str(path)


def _written(text: str) -> Callable[[Path], str]:
    def make(tmp: Path) -> str:
        path = tmp / "prompts.jsonl"
        path.write_text(text)
        return str(path)

    return make


CASES: dict[str, tuple[Callable[[Path], str], str]] = {
    # case: (the workload path, what the one line says)
    "/proc/self/environ": (lambda tmp: "/proc/self/environ", "not a regular file"),
    "/etc/shadow": (
        lambda tmp: "/etc/shadow",
        "not valid JSON" if os.access("/etc/shadow", os.R_OK) else "cannot read",
    ),
    "/dev/zero": (lambda tmp: "/dev/zero", "not a regular file"),
    "a FIFO": (_fifo, "not a regular file"),
    "a directory": (lambda tmp: str(tmp), "not a regular file"),
    "100,000 nested arrays": (_written("[" * 100_000 + "]" * 100_000 + "\n"), "not valid JSON"),
    "input_ids 1e30": (_written('{"input_ids": [1e30]}\n'), "not an integer id"),
    "output_len 10**12": (_written('{"input_ids": [5, 6], "output_len": 1000000000000}\n'), '"output_len"'),
}


def _refused_up_front(db_url: str, tmp_path: Path, text: str, needle: str) -> None:
    path = tmp_path / "hostile.yaml"
    path.write_text(text)
    logs = tmp_path / "logs"
    done = run_cli("run", str(path), "--db", db_url, "--log-dir", str(logs), "--no-progress")
    out = done.stdout + done.stderr
    assert done.returncode == 2, out
    assert "Traceback" not in out and needle in out, out
    error = [line for line in done.stderr.splitlines() if line.strip()]
    assert len(error) == 1 and "nothing was run" in error[0], out  # one line
    assert not list(logs.rglob("server-*.log")), "a server started"
    engine = open_database(db_url)
    with engine.connect() as conn:
        assert conn.execute(select(func.count()).select_from(Run)).scalar_one() == 0
    engine.dispose()


@pytest.mark.timeout(120)
@pytest.mark.parametrize("case", list(CASES))
def test_a_hostile_workload_is_refused_before_any_server_starts(
    db_url: str, tmp_path: Path, case: str
) -> None:
    make, needle = CASES[case]
    if case.startswith("/") and not Path(case).exists():
        pytest.skip(f"{case} is not on this host")
    data = tmp_path / "data"
    data.mkdir()
    _refused_up_front(db_url, tmp_path, sweep(make(data)), needle)


@pytest.mark.timeout(120)
@pytest.mark.parametrize("name", ["config.json", "model.safetensors.index.json"])
def test_a_model_file_that_is_a_fifo_is_refused_before_any_server_starts(
    db_url: str, tmp_path: Path, name: str
) -> None:
    """A FIFO config.json, or weight index (read for the run's provenance: it hung the run), is refused."""
    model = tmp_path / "model"
    model.mkdir()
    (model / "config.json").write_text('{"architectures": ["LlamaForCausalLM"]}')
    (model / name).unlink(missing_ok=True)
    os.mkfifo(model / name)
    prompts = tmp_path / "prompts.jsonl"
    prompts.write_text('{"input_ids": [5, 6]}\n')
    _refused_up_front(db_url, tmp_path, sweep(str(prompts), model=str(model)), f"{name}: not a regular file")


@pytest.mark.parametrize("verb", ["run", "submit"])
@pytest.mark.parametrize("path", ["/proc/self/environ", "/dev/zero", "a FIFO", "a directory"])
def test_a_sweep_file_that_is_no_file_is_refused_saying_so(tmp_path: Path, path: str, verb: str) -> None:
    path = _fifo(tmp_path) if path == "a FIFO" else str(tmp_path) if path == "a directory" else path
    done = run_cli(
        verb, path, *(["--dry-run"] if verb == "run" else []), "--db", f"sqlite:///{tmp_path}/s.db"
    )
    assert done.returncode == 2 and "Traceback" not in done.stderr, done.stdout + done.stderr
    assert f"{path}: not a regular file" in done.stderr, done.stderr  # not "file not found": it is there
