"""Server processes on this host: free ports, process-group teardown, and what /proc says about a process. No
SGLang knowledge. The host-speed probe's child (bench/host/cpu_probe.py) uses it under `python -I`, where
psutil may be missing: so psutil is imported where used."""

from __future__ import annotations

import contextlib
import os
import random
import signal
import socket
import subprocess
import time
from collections.abc import Iterator
from pathlib import Path
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    import psutil


class PortError(RuntimeError):
    """No port can be given to a server on this host."""


# SGLang derives ports from --port (gRPC at port+10000, which 0.5.13 requires <= 65535). The port must lie
# below the kernel's ephemeral range: a health probe whose source port equals the destination connects to
# itself and blocks the server's bind (CI saw `BadStatusLine: GET /health HTTP/1.1`).
PORT_FLOOR = 20000
_EPHEMERAL_FILE = Path("/proc/sys/net/ipv4/ip_local_port_range")


def ephemeral_port_range(path: Path = _EPHEMERAL_FILE) -> tuple[int, int]:
    """The kernel's range for outgoing source ports (Linux's default where it cannot be read)."""
    try:
        low, high = (int(v) for v in path.read_text().split())
    except (OSError, ValueError):
        return 32768, 60999
    return low, high


def server_port_range(ephemeral: tuple[int, int] | None = None) -> tuple[int, int]:
    """[low, high) for server ports: above the registered crowd, below the ephemeral range."""
    low, high = ephemeral or ephemeral_port_range()
    if low - PORT_FLOOR >= 1000:  # the usual case: 20000-32767
        return PORT_FLOOR, low
    # A kernel whose ephemeral range starts low: take what lies above it, keeping port+10000 valid.
    top = 65535 - 10000
    if top - (high + 1) >= 1000:
        return high + 1, top + 1
    raise PortError(
        f"no room for server ports outside the ephemeral range {low}-{high} "
        "(/proc/sys/net/ipv4/ip_local_port_range); pass an explicit port"
    )


def free_port(host: str = "127.0.0.1", port_range: tuple[int, int] | None = None, attempts: int = 200) -> int:
    """A port free now, out of outgoing connections' reach, whose SGLang-derived ports stay valid."""
    lo, hi = port_range or server_port_range()
    rng = random.Random()
    for _ in range(attempts):
        port = rng.randrange(lo, hi)
        if port_is_free(port, host):
            return port
    raise PortError(f"no free port in {lo}-{hi - 1} on {host} after {attempts} tries")


def port_is_free(port: int, host: str = "127.0.0.1") -> bool:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        try:
            s.bind((host, port))
        except OSError:
            return False
        return True


def group_alive(pgid: int) -> bool:
    """Whether a non-zombie process is left in the group (kill(0) also succeeds for unreaped zombies)."""
    proc_dir = Path("/proc")
    if not proc_dir.is_dir():
        try:
            with contextlib.suppress(PermissionError):  # alive, but not ours to signal
                os.killpg(pgid, 0)
        except ProcessLookupError:
            return False
        return True
    return any(len(f) >= 3 and int(f[2]) == pgid and f[0] not in ("Z", "X") for _, f in proc_stats(proc_dir))


def stat_fields(stat: str) -> list[str]:
    """A /proc stat line's fields after the name (field N at index N - 3), split at the last ')'."""
    return stat[stat.rfind(")") + 2 :].split()


STAT_PROCESSOR = 39 - 3  # proc(5) field 39, "processor": the CPU the task last ran on, in stat_fields()


def proc_stats(proc_dir: Path = Path("/proc")) -> Iterator[tuple[int, list[str]]]:
    """(pid, stat_fields()) of every process /proc lets us read."""
    for entry in proc_dir.iterdir():
        if not entry.name.isdigit():
            continue
        try:
            stat = (entry / "stat").read_text()
        except OSError:
            continue
        yield int(entry.name), stat_fields(stat)


def current_cpu(stat_path: str = "/proc/thread-self/stat") -> int | None:
    """The CPU the calling thread (or a stat file's task) last ran on, or None; standard library only."""
    try:
        with open(stat_path, encoding="ascii") as f:
            return int(stat_fields(f.read())[STAT_PROCESSOR])
    except (OSError, ValueError, IndexError):
        return None


def process_tree(pid: int) -> list[psutil.Process]:
    """`pid` and its descendants (SGLang's scheduler and workers); psutil.Error when `pid` is gone."""
    import psutil  # not at the top: see the module's docstring

    root = psutil.Process(pid)
    return [root, *root.children(recursive=True)]


def signal_group(pgid: int, sig: signal.Signals) -> None:
    with contextlib.suppress(ProcessLookupError, PermissionError):
        os.killpg(pgid, sig)


def terminate_group(proc: subprocess.Popen[bytes], grace_s: float) -> None:
    """SIGTERM the process group led by `proc`, SIGKILL whatever is left after `grace_s`."""
    pgid = proc.pid  # start_new_session made the server a group leader, so its pid is the group id
    if proc.poll() is not None and not group_alive(pgid):
        return
    try:
        signal_group(pgid, signal.SIGTERM)
        deadline = time.monotonic() + grace_s
        with contextlib.suppress(subprocess.TimeoutExpired):
            proc.wait(timeout=max(0.0, deadline - time.monotonic()))
        while group_alive(pgid) and time.monotonic() < deadline:
            time.sleep(0.05)
    finally:
        # Also reached on KeyboardInterrupt mid-wait: nothing of the group may outlive the launcher.
        if proc.poll() is None or group_alive(pgid):
            signal_group(pgid, signal.SIGKILL)
            with contextlib.suppress(subprocess.TimeoutExpired):
                proc.wait(timeout=5.0)
            end = time.monotonic() + 5.0
            while group_alive(pgid) and time.monotonic() < end:
                time.sleep(0.05)


LOG_TAIL_LINES = 40


def read_log(path: Path | None) -> str:
    try:
        return path.read_bytes().decode("utf-8", errors="replace") if path is not None else ""
    except OSError:
        return ""


def log_tail_of(path: Path | None, lines: int = LOG_TAIL_LINES) -> str:
    text = read_log(path)
    return "\n".join(text.splitlines()[-lines:]) if text else "(empty log)"


def describe_exit(rc: int) -> str:
    if rc < 0:
        try:
            return f"killed by {signal.Signals(-rc).name}"
        except ValueError:
            return f"killed by signal {-rc}"
    return "see the log tail"
