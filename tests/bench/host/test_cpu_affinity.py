"""CPU pinning against real processes: `server.cpu_affinity` on a launched stand-in's whole process tree,
`--client-cpus` on the runner itself (run and worker), and the CPU lists both are written in."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import psutil
import pytest
from sqlalchemy import select
from typer.testing import CliRunner

from bench.host.cpu_affinity import (
    AffinityError,
    format_cpu_list,
    parse_cpu_list,
    pin_tree,
    pinned_runner,
    runner_pin,
)
from bench.server.launcher import LaunchError, launch
from bench.sweep import ServerConfig, ServerSpec, SimSettings, SweepError, parse_sweep
from db import queries as q
from db.engine import make_engine, session_scope
from db.migrate import open_database
from db.models import Run, ServerInstance
from runners import queue
from runners.cli import app
from runners.sweep_runner import execute_sweep

if not hasattr(os, "sched_setaffinity"):
    pytest.skip("CPU affinity is Linux only", allow_module_level=True)

ALLOWED = sorted(os.sched_getaffinity(0))
CPU = ALLOWED[0]  # the one CPU every pin here narrows to
# With one CPU, pinning to it changes nothing, so nothing could be seen to change.
needs_two = pytest.mark.skipif(len(ALLOWED) < 2, reason="needs at least two CPUs to narrow the affinity")

CONFIG = ServerConfig(
    model="sim-tiny",
    draft_model=None,
    attention_backend="flashmla",
    tp=1,
    algorithm="EAGLE",
    steps=3,
    topk=1,
    draft_tokens=4,
    spec_mode="v1",
)

SWEEP = """
name: pinned
model: sim-tiny
server:
  backend: sim
  sim: {{time_scale: 0.05, seed: 3}}
  {affinity}
grid: {{batch_sizes: [1], spec_modes: [], baseline: true}}
workload: {{input_len: 16, output_len: 8}}
repeats: 1
"""


def sweep_text(affinity: str = "") -> str:
    return SWEEP.format(affinity=affinity)


def sim_spec(**kw: Any) -> ServerSpec:
    sim = SimSettings(startup_s=0.02, instant=True)
    return ServerSpec(backend="sim", sim=sim, startup_timeout_s=20, **kw)


def tree_cpus(pid: int) -> dict[tuple[int, int], set[int]]:
    """(pid, tid) -> CPUs of every thread of `pid` and its descendants, read straight from psutil and the
    kernel (not through the module under test)."""
    root = psutil.Process(pid)
    return {
        (p.pid, t.id): set(os.sched_getaffinity(t.id))
        for p in [root, *root.children(recursive=True)]
        for t in p.threads()
    }


def all_threads_cpus() -> set[frozenset[int]]:
    return {frozenset(os.sched_getaffinity(t.id)) for t in psutil.Process().threads()}


@pytest.fixture
def restore_signals() -> Iterator[None]:
    """`specbench run` and `worker` install SIGTERM/SIGINT handlers; give pytest its own back."""
    saved = {s: signal.getsignal(s) for s in (signal.SIGTERM, signal.SIGINT)}
    yield
    for s, handler in saved.items():
        signal.signal(s, handler)


# ---- the CPU list syntax


@pytest.mark.parametrize(
    ("value", "cpus"),
    [
        ("2-7,10", (2, 3, 4, 5, 6, 7, 10)),
        ("0", (0,)),
        (" 3 , 1-2 ", (1, 2, 3)),
        ("4-4", (4,)),
        ("1,0-2", (0, 1, 2)),  # overlaps are merged, as the kernel does
        ([3, 1, 1], (1, 3)),
        (5, (5,)),  # YAML reads `cpu_affinity: 5` as a number
    ],
)
def test_good_cpu_lists(value: object, cpus: tuple[int, ...]) -> None:
    assert parse_cpu_list(value) == cpus


@pytest.mark.parametrize(
    ("value", "needle"),
    [
        ("", "must not be empty"),
        ("  ", "must not be empty"),
        ([], "must not be empty"),
        ("7-2", "'7-2': a range runs from the lower CPU to the higher (2-7)"),
        ("-1", "'-1' is not a CPU number or range (CPU numbers start at 0)"),
        ([-1], "CPU -1 is out of range"),
        ("1,,2", "an empty item (a comma too many)"),
        ("1,", "an empty item"),
        ("a-b", "'a-b' is not a CPU number or range"),
        ("²", "is not a CPU number or range"),  # a digit to str.isdigit, not to the kernel
        ("0-99999", "CPU numbers go up to 8191"),
        ([True], "True is not a CPU number"),
        (["1"], "'1' is not a CPU number"),
        (1.5, "not float"),
    ],
)
def test_bad_cpu_lists_say_what_is_wrong(value: object, needle: str) -> None:
    with pytest.raises(ValueError) as e:
        parse_cpu_list(value)
    assert needle in str(e.value)


def test_format_is_the_kernels_compact_form() -> None:
    assert format_cpu_list([10, 2, 3, 4, 5]) == "2-5,10"
    assert format_cpu_list([0]) == "0"
    assert format_cpu_list([1, 3, 4]) == "1,3-4"
    assert parse_cpu_list(format_cpu_list([0, 1, 2, 7, 9, 10])) == (0, 1, 2, 7, 9, 10)


def test_the_sweep_field_takes_both_forms_and_names_itself_in_errors() -> None:
    assert parse_sweep(sweep_text('cpu_affinity: "2-3,6"')).server.cpu_affinity == (2, 3, 6)
    assert parse_sweep(sweep_text("cpu_affinity: [6, 2]")).server.cpu_affinity == (2, 6)
    assert parse_sweep(sweep_text("cpu_affinity: 3")).server.cpu_affinity == (3,)
    assert parse_sweep(sweep_text()).server.cpu_affinity is None
    for bad, needle in [
        ('"3-1"', "server.cpu_affinity: '3-1': a range runs from the lower CPU to the higher"),
        ("[]", "server.cpu_affinity: must not be empty"),
        ("[-2]", "server.cpu_affinity: CPU -2 is out of range"),
        ('"x"', "server.cpu_affinity: 'x' is not a CPU number or range"),
    ]:
        with pytest.raises(SweepError) as e:
            parse_sweep(sweep_text(f"cpu_affinity: {bad}"))
        assert any(p.startswith(needle) for p in e.value.problems), e.value.problems


def test_an_external_server_cannot_be_pinned() -> None:
    text = (
        sweep_text("cpu_affinity: 0")
        .replace("backend: sim", "backend: external\n  base_url: http://127.0.0.1:30000")
        .replace("sim: {time_scale: 0.05, seed: 3}", "")
    )
    with pytest.raises(SweepError) as e:
        parse_sweep(text)
    assert e.value.problems == [
        "backend external: server.cpu_affinity cannot apply to a server specbench does not launch "
        "(pin it where it is started, e.g. with taskset)"
    ]


# ---- server.cpu_affinity


@needs_two
def test_pin_tree_reaches_threads_and_children_that_started_before_it(tmp_path: Path) -> None:
    # A process with an extra thread and a child with one of its own, all started unpinned.
    child = (
        "import threading, time; threading.Thread(target=time.sleep, args=(60,), daemon=True).start(); "
        "print('child', flush=True); time.sleep(60)"
    )
    parent = (
        "import subprocess, sys, threading, time\n"
        "threading.Thread(target=time.sleep, args=(60,), daemon=True).start()\n"
        f"c = subprocess.Popen([sys.executable, '-c', {child!r}])\n"
        "print('parent', flush=True)\n"
        "time.sleep(60)\n"
    )
    proc = subprocess.Popen([sys.executable, "-c", parent], stdout=subprocess.PIPE, text=True)
    try:
        assert proc.stdout is not None
        assert {proc.stdout.readline().strip(), proc.stdout.readline().strip()} == {"parent", "child"}
        before = tree_cpus(proc.pid)
        assert len({pid for pid, _ in before}) == 2 and len(before) >= 4
        assert all(cpus == set(ALLOWED) for cpus in before.values())
        done = pin_tree(proc.pid, [CPU])
        assert (done.processes, done.threads, done.stray) == (2, len(before), [])
        assert all(cpus == {CPU} for cpus in tree_cpus(proc.pid).values())
    finally:
        for p in psutil.Process(proc.pid).children(recursive=True):
            p.kill()
        proc.kill()
        proc.wait()


@needs_two
def test_a_launched_server_runs_every_thread_on_its_cpus(tmp_path: Path) -> None:
    with launch(sim_spec(cpu_affinity=(CPU,)), CONFIG, log_dir=tmp_path) as server:
        assert server.ok, server.mismatches
        assert server.pid is not None
        threads = tree_cpus(server.pid)
        assert threads and all(cpus == {CPU} for cpus in threads.values()), threads
        # It stays there while it serves (threads started for requests inherit the pin).
        time.sleep(0.2)
        assert all(cpus == {CPU} for cpus in tree_cpus(server.pid).values())
        record = server.to_record()
        assert record["cpu_affinity"] == [CPU]
        assert any(n.startswith("pinned 1 process(es)") for n in record["notes"]), record["notes"]


def test_a_server_without_cpu_affinity_is_left_alone(tmp_path: Path) -> None:
    with launch(sim_spec(), CONFIG, log_dir=tmp_path) as server:
        assert server.to_record()["cpu_affinity"] is None
        assert server.pid is not None
        assert all(cpus == set(ALLOWED) for cpus in tree_cpus(server.pid).values())


def test_a_cpu_this_host_lacks_fails_before_anything_starts(tmp_path: Path) -> None:
    missing = max(ALLOWED) + 1
    logs = tmp_path / "logs"
    with pytest.raises(LaunchError) as e:
        launch(sim_spec(cpu_affinity=(CPU, missing)), CONFIG, log_dir=logs)
    assert str(e.value) == (
        f"cannot launch server: server.cpu_affinity: CPU {missing} is not available on this host "
        f"(specbench may use CPUs {format_cpu_list(ALLOWED)}, its os.sched_getaffinity)"
    )
    assert e.value.pid is None  # nothing was started: no process, no server log
    assert not logs.exists() or not any(logs.iterdir())


@needs_two
def test_the_run_stores_the_servers_cpus(tmp_path: Path) -> None:
    url = f"sqlite:///{tmp_path / 'pin.db'}"
    text = sweep_text(f'cpu_affinity: "{CPU}"')
    engine = open_database(url)
    out = execute_sweep(parse_sweep(text), text, engine, log_dir=tmp_path / "logs", show_progress=False)
    assert out.status in ("done", "unstable"), out.error
    with session_scope(engine) as s:
        (si,) = s.scalars(select(ServerInstance))
        assert si.env["specbench.cpu_affinity"] == [CPU]
        run = s.scalars(select(Run)).one()
        assert "client_cpus" not in run.provenance
    assert q.run_servers(engine, out.run_id)["cpu_affinity"].tolist() == [[CPU]]


def test_a_run_whose_cpus_the_host_lacks_records_the_launch_failure(tmp_path: Path) -> None:
    url = f"sqlite:///{tmp_path / 'pin.db'}"
    text = sweep_text(f"cpu_affinity: [{max(ALLOWED) + 1}]")
    engine = open_database(url)
    out = execute_sweep(parse_sweep(text), text, engine, log_dir=tmp_path / "logs", show_progress=False)
    assert out.status == "failed"
    with session_scope(engine) as s:
        (si,) = s.scalars(select(ServerInstance))
        assert si.status == "failed" and "server.cpu_affinity" in (si.error or "")
        assert si.log_path is None  # refused before a log (or a process) existed


# ---- --client-cpus


@needs_two
def test_pinned_runner_pins_every_thread_and_gives_each_its_cpus_back() -> None:
    other = ALLOWED[1]
    started = threading.Event()
    release = threading.Event()
    # A thread with CPUs of its own: it gets those back, not the main thread's.
    own: dict[str, Any] = {}

    def worker() -> None:
        os.sched_setaffinity(0, {other})
        own["tid"] = threading.get_native_id()
        started.set()
        release.wait(10)

    t = threading.Thread(target=worker)
    t.start()
    started.wait(5)
    before = set(os.sched_getaffinity(0))
    try:
        with pinned_runner([CPU]) as pin:
            assert pin.cpus == (CPU,) and pin.before == frozenset(before) and runner_pin() is pin
            assert all_threads_cpus() == {frozenset({CPU})}
            # A thread started inside inherits the pin.
            seen: list[set[int]] = []
            inner = threading.Thread(target=lambda: seen.append(set(os.sched_getaffinity(0))))
            inner.start()
            inner.join()
            assert seen == [{CPU}]
        assert runner_pin() is None
        assert set(os.sched_getaffinity(0)) == before
        assert set(os.sched_getaffinity(own["tid"])) == {other}
    finally:
        release.set()
        t.join()


def test_pinned_runner_restores_on_error_and_refuses_missing_cpus() -> None:
    before = set(os.sched_getaffinity(0))
    with pytest.raises(RuntimeError, match="boom"), pinned_runner([CPU]):
        raise RuntimeError("boom")
    assert set(os.sched_getaffinity(0)) == before and runner_pin() is None
    with pytest.raises(AffinityError, match=r"--client-cpus: CPU \d+ is not available on this host"):
        pinned_runner([max(ALLOWED) + 1]).__enter__()
    assert set(os.sched_getaffinity(0)) == before


class AffinityWatcher:
    """A thread that records the main thread's CPUs and its own while a command runs in this process."""

    def __init__(self) -> None:
        self.main_tid = threading.main_thread().native_id
        self.seen: list[tuple[frozenset[int], frozenset[int]]] = []  # (main thread's, its own), in order
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._watch, daemon=True)

    def _watch(self) -> None:
        while not self._stop.is_set():
            assert self.main_tid is not None
            self.seen.append(
                (frozenset(os.sched_getaffinity(self.main_tid)), frozenset(os.sched_getaffinity(0)))
            )
            time.sleep(0.005)

    def __enter__(self) -> AffinityWatcher:
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        self._thread.join()


@needs_two
def test_run_client_cpus_pins_the_runner_for_the_run_only(tmp_path: Path, restore_signals: None) -> None:
    sweep = tmp_path / "pinned.yaml"
    sweep.write_text(sweep_text())
    url = f"sqlite:///{tmp_path / 'run.db'}"
    before = frozenset(os.sched_getaffinity(0))
    args = ["run", str(sweep), "--db", url, "--no-progress", "--log-dir", str(tmp_path / "logs")]
    with AffinityWatcher() as watch:
        res = CliRunner().invoke(app, [*args, "--client-cpus", str(CPU)])
        time.sleep(0.05)  # a look after the run, too
    assert res.exit_code == 0, res.output
    pinned = frozenset({CPU})
    assert (pinned, pinned) in watch.seen  # both threads ran on the client's CPU during the run
    assert watch.seen[-1] == (before, before)  # and got their CPUs back after it
    engine = make_engine(url)
    with session_scope(engine) as s:
        run = s.scalars(select(Run)).one()
        assert run.provenance["client_cpus"] == str(CPU)
        (si,) = s.scalars(select(ServerInstance))
        # Not squeezed onto the client's CPU: the server gets what the runner had before it pinned itself.
        assert si.env["specbench.cpu_affinity"] == sorted(before)
    engine.dispose()


def test_run_client_cpus_bad_lists_exit_2(tmp_path: Path) -> None:
    sweep = tmp_path / "pinned.yaml"
    sweep.write_text(sweep_text())
    for bad, needle in [
        ("3-1", "--client-cpus '3-1': '3-1': a range runs from the lower CPU to the higher"),
        (str(max(ALLOWED) + 1), f"--client-cpus: CPU {max(ALLOWED) + 1} is not available on this host"),
    ]:
        res = CliRunner().invoke(app, ["run", str(sweep), "--dry-run", "--client-cpus", bad])
        assert res.exit_code == 2, res.output
        assert needle in " ".join(res.stderr.split()), res.stderr
        assert "Traceback" not in res.output


def test_dry_run_shows_the_servers_cpus(tmp_path: Path) -> None:
    sweep = tmp_path / "pinned.yaml"
    sweep.write_text(sweep_text(f'cpu_affinity: "{CPU}"'))
    res = CliRunner().invoke(app, ["run", str(sweep), "--dry-run", "--db", f"sqlite:///{tmp_path / 'x.db'}"])
    assert res.exit_code == 0, res.output
    assert f"  cpus: {CPU}" in res.stdout


@needs_two
def test_worker_client_cpus_pins_the_worker_while_it_runs_a_job(
    sqlite_url: str, tmp_path: Path, restore_signals: None
) -> None:
    engine = open_database(sqlite_url)
    queue.submit(engine, sweep_text())
    before = frozenset(os.sched_getaffinity(0))
    args = ["worker", "--db", sqlite_url, "--once", "--poll-interval", "0.05", "--log-dir", str(tmp_path)]
    with AffinityWatcher() as watch:
        res = CliRunner().invoke(app, [*args, "--client-cpus", str(CPU)])
        time.sleep(0.05)  # a look after the run, too
    assert res.exit_code == 0, res.output
    assert (frozenset({CPU}), frozenset({CPU})) in watch.seen
    assert watch.seen[-1] == (before, before)
    with session_scope(engine) as s:
        run = s.scalars(select(Run)).one()
        assert run.status in ("done", "unstable") and run.provenance["client_cpus"] == str(CPU)
    engine.dispose()
    res = CliRunner().invoke(app, ["worker", "--db", sqlite_url, "--once", "--client-cpus", "x"])
    assert res.exit_code == 2 and "--client-cpus 'x'" in res.stderr
