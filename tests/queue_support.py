"""Helpers for the queue, worker and scheduler tests: tiny sweeps and the real `specbench` CLI as processes."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
import urllib.request
from collections.abc import Iterator
from contextlib import contextmanager, suppress
from pathlib import Path
from typing import Any

from bench.host.processes import free_port, proc_stats

REPO = Path(__file__).resolve().parents[1]
# The correctness check each launched server gets, cut from 16 prompts of 64 tokens (asked twice of a baseline)
# to 2 of 4: these tests exercise the queue, workers and signals, and the check still runs and is stored, but
# the default one took most of a tiny job's time (tests/runners/test_correctness_gate.py tests the check).
SMALL_CHECK = "{prompts: 2, input_len: 8, output_len: 4}"


def sim_sweep(
    name: str = "tiny",
    *,
    batch_sizes: tuple[int, ...] = (1,),
    repeats: int = 1,
    num_prompts: int = 2,
    output_len: int = 4,
    time_scale: float | None = None,
) -> str:
    """A sweep of a few hundred milliseconds on the stand-in: baseline only, small prompts."""
    sim = (
        "{instant: true, startup_s: 0}"
        if time_scale is None
        else f"{{time_scale: {time_scale}, startup_s: 0}}"
    )
    return (
        f"name: {name}\n"
        "model: sim-tiny\n"
        f"server: {{backend: sim, sim: {sim}}}\n"
        f"grid: {{batch_sizes: {list(batch_sizes)}, spec_modes: [], baseline: true}}\n"
        f"workload: {{dataset: random, input_len: 8, output_len: {output_len}, num_prompts: {num_prompts}}}\n"
        f"repeats: {repeats}\n"
        "warmup: {waves: 1}\n"
        f"measure: {{correctness: {SMALL_CHECK}}}\n"
    )


def cli_argv(*args: str) -> list[str]:
    """`specbench ARGS` as the installed entry point runs it, without needing the venv's script."""
    return [sys.executable, "-m", "runners.cli", *args]


def cli_env(**extra: str) -> dict[str, str]:
    env = dict(os.environ)
    env.pop("DATABASE_URL", None)
    env["PYTHONUNBUFFERED"] = "1"
    env["COLUMNS"] = "200"  # rich wraps at 80 otherwise, and log lines are parsed
    env.update(extra)
    return env


def run_cli(
    *args: str, timeout: float = 120, cwd: Path | None = None, **kw: Any
) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        cli_argv(*args),
        cwd=cwd or REPO,
        env=cli_env(),
        capture_output=True,
        text=True,
        timeout=timeout,
        check=False,
        **kw,
    )


def spawn_cli(*args: str, log: Path, cwd: Path | None = None) -> subprocess.Popen[bytes]:
    with open(log, "wb") as out:
        return subprocess.Popen(
            cli_argv(*args), cwd=cwd or REPO, env=cli_env(), stdout=out, stderr=subprocess.STDOUT
        )


def children_of(pid: int) -> list[int]:
    """Every live descendant of `pid` (from /proc), so a test can clean up what a killed worker left."""
    parents = {child: int(fields[1]) for child, fields in proc_stats()}
    out: list[int] = []
    frontier = [pid]
    while frontier:
        p = frontier.pop()
        kids = [c for c, pp in parents.items() if pp == p]
        out.extend(kids)
        frontier.extend(kids)
    return out


def kill_pids(pids: list[int]) -> None:
    """SIGKILL each of `pids` that is still there."""
    for pid in pids:
        with suppress(ProcessLookupError):
            os.kill(pid, signal.SIGKILL)


def external_sweep(name: str, base_url: str) -> str:
    """A sweep against an already running stand-in: no launch, so a job costs tens of milliseconds."""
    return (
        f"name: {name}\n"
        "model: sim-tiny\n"
        f'server: {{backend: external, base_url: "{base_url}"}}\n'
        "grid: {batch_sizes: [1], spec_modes: [], baseline: true}\n"
        "workload: {dataset: random, input_len: 8, output_len: 4, num_prompts: 2}\n"
        "repeats: 1\n"
        "warmup: {waves: 1}\n"
        # The server behind the URL is a stand-in: GPU-sized windows (10 s for external) and a drift
        # re-measurement would only slow every job down.
        f"measure: {{min_window_s: 0, drift_check: false, correctness: {SMALL_CHECK}}}\n"
    )


@contextmanager
def standin_server(log: Path) -> Iterator[str]:
    """`python -m synthetic.server` on a free port, instant mode; yields its base URL."""
    port = free_port()
    env = cli_env(SPECBENCH_SIM_INSTANT="1", SPECBENCH_SIM_STARTUP_S="0")
    # The backend the sweeps ask for (the default, flashmla): anything else is a mode mismatch, and a run
    # whose points all mismatch is `failed`.
    argv = [sys.executable, "-m", "synthetic.server", "--model-path", "sim-tiny", "--host", "127.0.0.1",
            "--attention-backend", "flashmla"]  # fmt: skip
    with open(log, "wb") as out:
        proc = subprocess.Popen(
            [*argv, "--port", str(port)], cwd=REPO, env=env, stdout=out, stderr=subprocess.STDOUT
        )
    base = f"http://127.0.0.1:{port}"
    try:
        deadline = time.monotonic() + 60
        while True:
            try:
                with urllib.request.urlopen(f"{base}/health", timeout=2) as r:
                    if r.status == 200:
                        break
            except OSError:
                pass
            if proc.poll() is not None or time.monotonic() > deadline:
                raise RuntimeError(f"stand-in server did not come up:\n{log.read_text()}")
            time.sleep(0.05)
        yield base
    finally:
        proc.terminate()
        try:
            proc.wait(timeout=10)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()
