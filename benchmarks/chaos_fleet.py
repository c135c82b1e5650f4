"""The chaos bench's fleet: `specbench worker` and `scheduler` processes, and the stand-in servers they start.

Servers are found through /proc: a live `synthetic.server` process whose stdout is a log file under the bench's work
folder is one of ours, and one whose parent is not a live worker of the fleet is an orphan.
"""

from __future__ import annotations

import contextlib
import os
import signal
import subprocess
import sys
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

from sqlalchemy import Engine, select

from bench.host.reaper import RECORDS_ENV
from db.models import Job, Worker

REPO = Path(__file__).resolve().parents[1]


@dataclass
class Fleet:
    url: str
    workdir: Path
    lease_s: float
    procs: dict[int, subprocess.Popen[bytes]] = field(default_factory=dict)
    logs: list[Path] = field(default_factory=list)
    scheduler: subprocess.Popen[bytes] | None = None

    def _env(self) -> dict[str, str]:
        env = dict(os.environ)
        env.pop("DATABASE_URL", None)
        env.update({"PYTHONUNBUFFERED": "1", RECORDS_ENV: str(self.workdir / "records")})
        return env

    def _spawn(self, args: list[str], name: str) -> subprocess.Popen[bytes]:
        log = self.workdir / f"{name}.log"
        self.logs.append(log)
        with open(log, "wb") as out:
            return subprocess.Popen(
                [sys.executable, "-m", "runners.cli", *args],
                cwd=REPO,
                env=self._env(),
                stdout=out,
                stderr=subprocess.STDOUT,
            )

    def add_worker(self) -> subprocess.Popen[bytes]:
        n = len(self.logs)
        p = self._spawn(
            ["worker", "--db", self.url, "--poll-interval", "0.2", "--lease-s", str(self.lease_s),
             "--retry-backoff-s", "0", "--requeue-backoff-s", "0", "--log-dir", str(self.workdir / "logs")],
            f"worker-{n}",
        )  # fmt: skip
        self.procs[p.pid] = p
        return p

    def start_scheduler(self) -> None:
        self.scheduler = self._spawn(["scheduler", "--db", self.url, "--interval-s", "0.5"], "scheduler")

    def alive(self) -> list[subprocess.Popen[bytes]]:
        out = [p for p in self.procs.values() if p.poll() is None]
        if self.scheduler is not None and self.scheduler.poll() is None:
            out.append(self.scheduler)
        return out

    def stop_all(self, timeout: float = 60) -> dict[int, int | None]:
        everyone = [*self.procs.values(), *([self.scheduler] if self.scheduler else [])]
        for p in everyone:
            if p.poll() is None:
                p.send_signal(signal.SIGTERM)
        codes: dict[int, int | None] = {}
        deadline = time.monotonic() + timeout
        for p in everyone:
            try:
                codes[p.pid] = p.wait(timeout=max(deadline - time.monotonic(), 0.1))
            except subprocess.TimeoutExpired:
                p.kill()
                codes[p.pid] = None
        return codes


def say(msg: str) -> None:
    print(f"[{time.strftime('%H:%M:%S')}] {msg}", flush=True)


def wait_for(check: Callable[[], bool], timeout: float) -> bool:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        with contextlib.suppress(Exception):
            if check():
                return True
        time.sleep(0.2)
    return False


def busy_workers(engine: Engine, fleet: Fleet) -> list[subprocess.Popen[bytes]]:
    """Live workers of ours that are running a job whose run has stored at least one server."""
    with engine.connect() as conn:
        rows = conn.execute(
            select(Worker.pid)
            .join(Job, Job.id == Worker.current_job_id)
            .where(Worker.status == "busy", Job.status == "running")
        ).all()
    pids = {int(pid) for (pid,) in rows}
    return [p for pid, p in fleet.procs.items() if pid in pids and p.poll() is None]


def our_servers(workdir: Path) -> list[int]:
    """Live stand-in servers launched by this bench: their stdout is a log file under `workdir`."""
    out = []
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            cmd = (entry / "cmdline").read_bytes().split(b"\0")
            stat = (entry / "stat").read_text()
            target = os.readlink(entry / "fd" / "1")
        except OSError:
            continue
        if b"synthetic.server" not in cmd or not target.startswith(str(workdir)):
            continue
        if stat[stat.rfind(")") + 2 :].split()[0] in ("Z", "X"):
            continue
        out.append(int(entry.name))
    return out


def busy_workers_safe(engine: Engine, fleet: Fleet) -> list[subprocess.Popen[bytes]]:
    try:
        return busy_workers(engine, fleet)
    except Exception:
        return []


def dead(fleet: Fleet) -> list[subprocess.Popen[bytes]]:
    """Processes that died by themselves (our kills are removed from the fleet)."""
    out = [p for p in fleet.procs.values() if p.poll() is not None]
    if fleet.scheduler is not None and fleet.scheduler.poll() is not None:
        out.append(fleet.scheduler)
    return out


def orphan_servers(fleet: Fleet) -> list[int]:
    """Our stand-in servers whose parent is not a live worker of the fleet."""
    live = {p.pid for p in fleet.procs.values() if p.poll() is None}
    out = []
    for pid in our_servers(fleet.workdir):
        try:
            stat = Path(f"/proc/{pid}/stat").read_text()
        except OSError:
            continue
        ppid = int(stat[stat.rfind(")") + 2 :].split()[1])
        if ppid not in live:
            out.append(pid)
    return out
