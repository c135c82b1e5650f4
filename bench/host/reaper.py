"""Launched servers die with the process that launched them, even on SIGKILL; no `preexec_fn` (unsafe with
threads). A watchdog per server reads a pipe whose only write end the launcher holds: EOF (the launcher gone)
takes the server's group down; a clean stop writes "released" first. Records (one JSON file per live server)
let `reap_orphans()`, run when any command starts, kill servers whose launcher and watchdog are gone; start
times (/proc) guard against recycled pids. `owner()`/`owner_gone()` name processes for database rows the same
way (runners/host_recovery.py)."""

import contextlib
import json
import os
import signal
import socket
import subprocess
import sys
import tempfile
import time
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from bench.host.processes import group_alive, stat_fields

RECORDS_ENV = "SPECBENCH_SERVER_RECORDS"
WATCHDOG_MARK = "specbench-server-watchdog"
_RELEASED = b"released"


def records_dir() -> Path:
    raw = os.environ.get(RECORDS_ENV)
    return Path(raw) if raw else Path(tempfile.gettempdir()) / f"specbench-{os.getuid()}" / "servers"


def start_time(pid: int) -> int | None:
    """The process's start time in clock ticks since boot (/proc), None if it is gone or unknown."""
    try:
        return int(stat_fields(Path(f"/proc/{pid}/stat").read_text())[22 - 3])  # proc(5) field 22, starttime
    except (OSError, IndexError, ValueError):
        return None


def _is(pid: int, started: int | None) -> bool:
    """Whether `pid` is still the process that started at `started` (not a recycled pid)."""
    return started is not None and start_time(pid) == started


def _pid_namespace() -> int | None:
    # Containers on one host may share a host name; a pid means something only inside its pid namespace.
    try:
        return os.stat("/proc/self/ns/pid").st_ino
    except OSError:
        return None


def _boot_id() -> str | None:
    try:
        return Path("/proc/sys/kernel/random/boot_id").read_text().strip() or None
    except OSError:
        return None


def owner() -> dict[str, Any]:
    """This process as the owner of a record: host, boot, pid namespace, pid and start time."""
    pid = os.getpid()
    return {
        "host": socket.gethostname(),
        "boot": _boot_id(),
        "pidns": _pid_namespace(),
        "pid": pid,
        "start": start_time(pid),
    }


def owner_gone(record: Mapping[str, Any] | None) -> bool:
    """Whether `record`'s process (`owner()`) ran here (host, pid namespace) and is gone; False if unsure."""
    if not isinstance(record, Mapping) or record.get("host") != socket.gethostname():
        return False
    pid = record.get("pid")
    if not isinstance(pid, int) or isinstance(pid, bool) or pid <= 0:
        return False
    if record.get("pidns") != _pid_namespace():
        return False
    boot = record.get("boot")
    if boot is not None and boot != _boot_id():
        return True  # rebooted since: every process of that boot is gone
    started = record.get("start")
    if started is None:
        return False  # no start time to tell a recycled pid from the owner: do not guess
    return not _is(pid, started)


@dataclass
class Guard:
    """Keeps one server's watchdog armed; `release()` after a clean stop disarms it."""

    pgid: int
    _fd: int | None
    _watchdog: subprocess.Popen[bytes] | None
    record: Path | None

    def release(self) -> None:
        if self._fd is not None:
            with contextlib.suppress(OSError):
                os.write(self._fd, _RELEASED)
            with contextlib.suppress(OSError):
                os.close(self._fd)
            self._fd = None
        if self._watchdog is not None:
            with contextlib.suppress(subprocess.TimeoutExpired):
                self._watchdog.wait(timeout=5)
            self._watchdog = None
        if self.record is not None:
            with contextlib.suppress(OSError):
                self.record.unlink()
            self.record = None


def guard(pgid: int, *, grace_s: float = 15.0, label: str = "") -> Guard:
    """Arm a watchdog for the process group `pgid` and record it; never raises (stop and records remain)."""
    fd: int | None = None
    watchdog: subprocess.Popen[bytes] | None = None
    try:
        read_end, fd = os.pipe()  # both ends non-inheritable: no later child holds the write end open
        try:
            watchdog = subprocess.Popen(
                [sys.executable, "-m", "bench.host.reaper", str(pgid), str(grace_s), WATCHDOG_MARK],
                stdin=read_end,
                stdout=subprocess.DEVNULL,
                stderr=subprocess.DEVNULL,
                close_fds=True,
            )
        finally:
            os.close(read_end)
    except OSError:
        if fd is not None:
            os.close(fd)
        fd = None
    return Guard(pgid, fd, watchdog, _write_record(pgid, watchdog, label))


def _write_record(pgid: int, watchdog: subprocess.Popen[bytes] | None, label: str) -> Path | None:
    me = os.getpid()
    record = {
        "host": socket.gethostname(),
        "server_pgid": pgid,
        "server_start": start_time(pgid),
        "owner_pid": me,
        "owner_start": start_time(me),
        "watchdog_pid": watchdog.pid if watchdog else None,
        "label": label,
    }
    try:
        folder = records_dir()
        folder.mkdir(parents=True, exist_ok=True)
        path = folder / f"{record['host']}-{me}-{pgid}.json"
        path.write_text(json.dumps(record))
        return path
    except OSError:
        return None


def _kill_group(pgid: int, grace_s: float) -> None:
    """SIGTERM the group, SIGKILL what is left after `grace_s`."""
    for sig, wait_s in ((signal.SIGTERM, grace_s), (signal.SIGKILL, 5.0)):
        if not group_alive(pgid):
            return
        try:
            os.killpg(pgid, sig)
        except (ProcessLookupError, PermissionError):
            return
        end = time.monotonic() + wait_s
        while group_alive(pgid) and time.monotonic() < end:
            time.sleep(0.05)


def _watch(pgid: int, grace_s: float) -> None:
    """The watchdog's body: block on the pipe; EOF without "released" means the launcher is gone."""
    # Signals a terminal or a supervisor sends to the launcher's group are not ours: only the pipe decides.
    for sig in (signal.SIGINT, signal.SIGTERM, signal.SIGHUP):
        signal.signal(sig, signal.SIG_IGN)
    data = b""
    while chunk := os.read(0, 64):
        data += chunk
    if not data.endswith(_RELEASED):
        _kill_group(pgid, grace_s)


def reap_orphans(folder: Path | None = None) -> list[int]:
    """Kill servers here whose launcher is gone; returns their group ids. Safe from many processes at once."""
    folder = folder or records_dir()
    host = socket.gethostname()
    reaped: list[int] = []
    try:
        entries = sorted(folder.glob("*.json"))
    except OSError:
        return reaped
    for path in entries:
        try:
            rec = json.loads(path.read_text())
        except (OSError, ValueError):
            continue
        if rec.get("host") != host:
            continue
        owner, pgid = int(rec["owner_pid"]), int(rec["server_pgid"])
        if _is(owner, rec.get("owner_start")):
            continue  # its launcher still runs and stops it itself
        # A group id stays reserved while a member lives; a live leader's start time proves the same server.
        leader_same = _is(pgid, rec.get("server_start"))
        if group_alive(pgid) and (leader_same or start_time(pgid) is None):
            _kill_group(pgid, 0.0)
            reaped.append(pgid)
        with contextlib.suppress(OSError):
            path.unlink()
    return reaped


if __name__ == "__main__":  # the watchdog: python -m bench.host.reaper PGID GRACE_S MARK
    _watch(int(sys.argv[1]), float(sys.argv[2]))
