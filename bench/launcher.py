"""Launch, verify and tear down one server for one ServerConfig.

    with launch(spec.server, config, log_dir="logs/servers") as server:
        if server.mismatches: ...   # the server does not run what was asked: record, don't measure
        run_points(server.base_url)

The server runs in its own process group with its output in a per-server log file. Readiness is `/health`
returning 200 (polled only during startup: contract §6.9 says never during a run). Afterwards `/server_info`
says what the server actually runs, and the spec mode is resolved from it and the launch log (§1.5).
Teardown is SIGTERM to the whole group, then SIGKILL; it runs on every exit path, KeyboardInterrupt included.
"""

from __future__ import annotations

import atexit
import contextlib
import http.client
import json
import os
import random
import signal
import socket
import subprocess
import threading
import time
import urllib.error
import urllib.request
from collections.abc import Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from types import TracebackType
from typing import Any

from bench import reaper
from bench.server_argv import ArgvError, ServerArgv, build_argv, resolve_python, sim_env
from bench.server_env import ServerEnvError, build_server_env
from bench.spec_modes import ENV_SPEC_V2, ResolvedMode, VersionError, known_fallback, resolve_mode
from bench.sweep import SIMULATE_ACC_ENV, ServerConfig, ServerSpec

LOG_TAIL_LINES = 40
# The directory that holds the `bench` package: the sim's working directory, so `-m bench.sim` imports it
# whether or not specbench is installed.
_PROJECT_ROOT = Path(__file__).resolve().parents[1]
# Environment the sweep may not set: the spec mode and the sim settings own these.
_OWNED_ENV_PREFIXES = ("SPECBENCH_SIM_",)
_OWNED_ENV = frozenset({ENV_SPEC_V2})

_VERSION_PROBE = """\
import importlib.metadata as m
try:
    print(m.version("sglang"))
except m.PackageNotFoundError:
    # A site tree on PYTHONPATH may lack the dist-info; the package knows its own version.
    from sglang.version import __version__
    print(__version__)
"""


class LaunchError(RuntimeError):
    """The server could not be started or reached; the message carries the exit code and the log tail."""

    def __init__(
        self,
        message: str,
        *,
        exit_code: int | None = None,
        log_tail: str = "",
        pid: int | None = None,
        log_path: Path | None = None,
    ):
        self.exit_code = exit_code
        self.log_tail = log_tail
        self.pid = pid
        self.log_path = log_path
        full = message if not log_tail else f"{message}\n--- last lines of the server log ---\n{log_tail}"
        super().__init__(full)


@dataclass(eq=False)
class LaunchedServer:
    """One running (or attached) server and what it was verified to run."""

    base_url: str
    backend: str
    argv: list[str]
    # Only the variables specbench set on top of its own environment.
    env_delta: dict[str, str]
    log_path: Path | None
    pid: int | None
    version: str
    startup_s: float
    server_info: dict[str, Any]
    spec_mode_requested: str | None
    resolved: ResolvedMode
    # Empty when the server runs what was asked; otherwise one human line per difference.
    mismatches: list[str]
    # Adaptations to the version (renamed flags) and other facts worth keeping with the run.
    notes: list[str] = field(default_factory=list)
    _proc: subprocess.Popen[bytes] | None = field(default=None, repr=False)
    _stop_timeout_s: float = field(default=15.0, repr=False)
    _guard: reaper.Guard | None = field(default=None, repr=False)
    _lock: threading.Lock = field(default_factory=threading.Lock, repr=False)
    _stopped: bool = field(default=False, repr=False)

    @property
    def spec_mode_resolved(self) -> str | None:
        return self.resolved.mode

    @property
    def mode_detail(self) -> str:
        return self.resolved.detail

    @property
    def mode_evidence(self) -> dict[str, Any]:
        return self.resolved.evidence

    @property
    def ok(self) -> bool:
        return not self.mismatches

    @property
    def exit_code(self) -> int | None:
        return None if self._proc is None else self._proc.poll()

    def is_running(self) -> bool:
        return self._proc is not None and self._proc.poll() is None

    def log_tail(self, lines: int = LOG_TAIL_LINES) -> str:
        return _tail(self.log_path, lines)

    def to_record(self) -> dict[str, Any]:
        """JSON-able provenance of the launch, for the run's record."""
        return {
            "backend": self.backend,
            "base_url": self.base_url,
            "argv": list(self.argv),
            "env_delta": dict(self.env_delta),
            "log_path": str(self.log_path) if self.log_path else None,
            "version": self.version,
            "startup_s": self.startup_s,
            "spec_mode_requested": self.spec_mode_requested,
            "spec_mode_resolved": self.spec_mode_resolved,
            "spec_mode_detail": self.mode_detail,
            "spec_mode_evidence": self.mode_evidence,
            "mismatches": list(self.mismatches),
            "notes": list(self.notes),
            "server_info": self.server_info,
        }

    def stop(self, timeout_s: float | None = None) -> None:
        """SIGTERM the process group, SIGKILL what is left after `timeout_s`. Idempotent; attached: no-op."""
        proc = self._proc
        if proc is None:
            return
        with self._lock:
            # Once the group is gone its id may be reused by an unrelated process: never signal it again.
            if self._stopped:
                return
            _terminate_group(proc, self._stop_timeout_s if timeout_s is None else timeout_s)
            if self._guard is not None:
                self._guard.release()
            self._stopped = True
            _LIVE.pop(id(self), None)

    def __enter__(self) -> LaunchedServer:
        return self

    def __exit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        self.stop()


# Servers started and not yet stopped; the atexit hook stops them should a caller forget (or crash).
_LIVE: dict[int, LaunchedServer] = {}


@atexit.register
def _stop_all() -> None:
    for server in list(_LIVE.values()):
        with contextlib.suppress(Exception):
            server.stop()


def detect_sglang_version(python: str | None = None, timeout_s: float = 120.0) -> str:
    """The SGLang version installed for the interpreter that will run the server."""
    interpreter = resolve_python(python)
    try:
        out = subprocess.run(
            [interpreter, "-c", _VERSION_PROBE],
            capture_output=True,
            text=True,
            timeout=timeout_s,
            check=False,
        )
    except (OSError, subprocess.TimeoutExpired) as e:
        raise LaunchError(f"cannot ask {interpreter} for its SGLang version: {e}") from None
    version = out.stdout.strip().splitlines()[-1] if out.stdout.strip() else ""
    if out.returncode != 0 or not version:
        last = (out.stderr.strip().splitlines() or ["(no output)"])[-1]
        raise LaunchError(f"SGLang is not installed for {interpreter}: {last}")
    return version


# SGLang derives other ports from --port: gRPC at port+10000 (0.5.13 refuses to start if that exceeds 65535),
# ZMQ at port+233.. with DP attention. And the port must lie below the kernel's ephemeral range (often
# 32768-60999): a health probe sent before the server listens gets a source port from that range, and when
# it happens to equal the destination, TCP connects the probe to itself. The probe then reads its own
# "GET /health" back as the answer, and the server cannot bind its port while that socket lives. Two workers
# starting servers on one host hit this (CI saw `BadStatusLine: GET /health HTTP/1.1`).
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
    """[low, high) for server ports: above the well-known and registered crowd, below the ephemeral range,
    with room for SGLang's port+10000."""
    low, high = ephemeral or ephemeral_port_range()
    if low - PORT_FLOOR >= 1000:  # the usual case: 20000-32767
        return PORT_FLOOR, low
    # A kernel whose ephemeral range starts low: take what lies above it, keeping port+10000 valid.
    top = 65535 - 10000
    if top - (high + 1) >= 1000:
        return high + 1, top + 1
    raise LaunchError(
        f"no room for server ports outside the ephemeral range {low}-{high} "
        "(/proc/sys/net/ipv4/ip_local_port_range); pass an explicit port"
    )


def free_port(host: str = "127.0.0.1", port_range: tuple[int, int] | None = None, attempts: int = 200) -> int:
    """A port that is free now, cannot be taken by an outgoing connection, and whose SGLang-derived ports
    stay valid."""
    lo, hi = port_range or server_port_range()
    rng = random.Random()
    for _ in range(attempts):
        port = rng.randrange(lo, hi)
        if _port_is_free(port, host):
            return port
    raise LaunchError(f"no free port in {lo}-{hi - 1} on {host} after {attempts} tries")


def _port_is_free(port: int, host: str = "127.0.0.1") -> bool:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        try:
            s.bind((host, port))
        except OSError:
            return False
        return True


def launch(
    spec: ServerSpec,
    config: ServerConfig,
    *,
    log_dir: str | Path = "logs/servers",
    port: int | None = None,
    gpus: Sequence[int] | None = None,
    version: str | None = None,
    startup_timeout_s: float | None = None,
    stop_timeout_s: float = 15.0,
) -> LaunchedServer:
    """Start (or, for `external`, attach to) the server for `config` and verify what it runs.

    `version` skips detection (the runner may already know it). Raises LaunchError if the server cannot be
    started, dies, or is not healthy within `startup_timeout_s` (default: the spec's); a started process is
    always torn down before the error propagates. A server that runs something other than what was asked is
    returned with `mismatches` filled in, for the caller to record.
    """
    if spec.backend == "external":
        return attach_external(spec, config, version=version)
    # The config carries the args/env (they are part of its identity); `expand` copies them from the spec.
    # A spec whose own args/env the config lacks would have them silently dropped.
    # Lists in the spec are tuples in the (hashable) config.
    spec_args = {k: tuple(v) if isinstance(v, list) else v for k, v in spec.args.items()}
    # Fields the sweep turns into args/env of their own (server.load_format, grid.accept_lengths) are not
    # in the spec's args/env; leave them out of the comparison.
    cfg_args = {k: v for k, v in config.args if not (k == "load-format" and spec.load_format != "auto")}
    cfg_env = {
        k: v for k, v in config.env if not (k == SIMULATE_ACC_ENV and config.accept_length is not None)
    }
    if (spec.args and cfg_args != spec_args) or (spec.env and cfg_env != spec.env):
        raise LaunchError(
            "server.args/env differ from the config's args/env; build configs with bench.sweep.expand "
            f"(spec: {spec.args!r} {spec.env!r}; config: {dict(config.args)!r} {dict(config.env)!r})"
        )

    if spec.backend == "sim":
        version = spec.sim.version
    elif version is None:
        version = detect_sglang_version(spec.python)
    host = "127.0.0.1"
    if port is None:
        port = free_port(host)
    elif not _port_is_free(port, host):
        # Another server on that port would answer our health checks for a process that never binds.
        raise LaunchError(f"port {port} on {host} is already in use")

    plan = plan_launch(spec, config, version=version, port=port, gpus=gpus, log_dir=log_dir)
    built, env_delta, env = plan.argv, plan.env_delta, plan.env
    # Sim knobs come from the sweep alone: one exported by a developer would silently change the stand-in.
    dropped = sorted(k for k in os.environ if k.startswith(_OWNED_ENV_PREFIXES) and k not in env_delta)
    log_dir = Path(log_dir)
    log_dir.mkdir(parents=True, exist_ok=True)
    stamp = datetime.now(UTC).strftime("%Y%m%dT%H%M%S%fZ")
    log_path = log_dir / f"server-{config.key()}-{config.spec_mode or 'base'}-{port}-{stamp}.log"

    timeout = spec.startup_timeout_s if startup_timeout_s is None else startup_timeout_s
    t0 = time.monotonic()
    with open(log_path, "wb") as log:
        try:
            proc = subprocess.Popen(
                built.argv,
                stdin=subprocess.DEVNULL,
                stdout=log,
                stderr=subprocess.STDOUT,
                env=env,
                cwd=_PROJECT_ROOT if spec.backend == "sim" else None,
                start_new_session=True,  # own process group: teardown reaches the scheduler/detokenizer too
                close_fds=True,
            )
        except OSError as e:
            raise LaunchError(f"cannot start {built.argv[0]}: {e}") from None
    # The server dies with us, even on SIGKILL (bench/reaper.py).
    guard = reaper.guard(proc.pid, grace_s=stop_timeout_s, label=config.label())
    server: LaunchedServer | None = None
    try:
        base_url = f"http://{host}:{port}"
        server = LaunchedServer(
            base_url=base_url,
            backend=spec.backend,
            argv=built.argv,
            env_delta=env_delta,
            log_path=log_path,
            pid=proc.pid,
            version=version,
            startup_s=0.0,
            server_info={},
            spec_mode_requested=config.spec_mode,
            resolved=ResolvedMode(None, "not resolved yet", config.algorithm is not None, version),
            mismatches=[],
            notes=[*built.notes, *(f"inherited {k} not passed on (set by server.sim only)" for k in dropped)],
            _proc=proc,
            _stop_timeout_s=stop_timeout_s,
            _guard=guard,
        )
        _LIVE[id(server)] = server
        _wait_healthy(proc, base_url, log_path, timeout)
        server.startup_s = time.monotonic() - t0
        info = fetch_server_info(base_url)
        if proc.poll() is not None:
            raise LaunchError(
                f"server exited with code {proc.returncode} right after becoming healthy",
                exit_code=proc.returncode,
                log_tail=_tail(log_path),
            )
        server.server_info = info
        server.resolved = resolve_mode(version, info, _read_text(log_path))
        server.mismatches = compare_requested(config, info, server.resolved, version)
    except BaseException as e:
        # Every way out of a failed launch (KeyboardInterrupt included) takes the process group down first.
        if server is not None:
            server.stop()
        else:
            _terminate_group(proc, stop_timeout_s)
            guard.release()
        if isinstance(e, LaunchError):
            e.pid, e.log_path = proc.pid, log_path
        raise
    return server


@dataclass(frozen=True)
class LaunchPlan:
    argv: ServerArgv
    env_delta: dict[str, str]  # what specbench and the sweep set
    env: dict[str, str]  # the server's whole environment: env_delta over the host's small base


def plan_launch(
    spec: ServerSpec,
    config: ServerConfig,
    *,
    version: str,
    port: int,
    gpus: Sequence[int] | None = None,
    log_dir: str | Path = "logs/servers",
) -> LaunchPlan:
    """The argv and environment of one launch: what `launch` starts, and what `specbench run --dry-run`
    prints. Raises LaunchError listing every problem."""
    if spec.backend == "external":
        raise LaunchError("backend external launches nothing")
    try:
        built = build_argv(config, backend=spec.backend, version=version, port=port, python=spec.python)
    except (ArgvError, VersionError) as e:
        raise LaunchError(str(e)) from None
    env_delta = _env_delta(spec, config, built.mode_env, gpus)
    if spec.backend == "sim" and spec.sim.shared_gpu:
        # The run's stand-in servers share one emulated GPU (bench/sim/gpu_ledger.py), as on a real host.
        device = env_delta.get("CUDA_VISIBLE_DEVICES", "all").replace(",", "_")
        env_delta["SPECBENCH_SIM_GPU_LEDGER"] = str(Path(log_dir).resolve() / f"sim-gpu-{device}.json")
    # Built from nothing (bench.server_env): the worker's own environment holds the database URL.
    try:
        env = build_server_env(os.environ, dict(config.env), env_delta)
    except ServerEnvError as e:
        raise LaunchError(f"cannot launch server: {e}") from None
    return LaunchPlan(built, env_delta, env)


def attach_external(spec: ServerSpec, config: ServerConfig, *, version: str | None = None) -> LaunchedServer:
    """A server someone else runs: check it answers, read what it runs. Nothing is started or stopped."""
    if not spec.base_url:
        raise LaunchError("backend external needs server.base_url")
    base_url = spec.base_url.rstrip("/")
    info = fetch_server_info(base_url)
    detected = str(info.get("version") or version or "")
    if not detected:
        raise LaunchError(f"{base_url}/server_info reports no version and none was given")
    try:
        resolved = resolve_mode(detected, info, None)
    except VersionError as e:
        raise LaunchError(f"{base_url}: {e}") from None
    mismatches = compare_requested(config, info, resolved, version or detected)
    return LaunchedServer(
        base_url=base_url,
        backend="external",
        argv=[],
        env_delta={},
        log_path=None,
        pid=None,
        version=detected,
        startup_s=0.0,
        server_info=info,
        spec_mode_requested=config.spec_mode,
        resolved=resolved,
        mismatches=mismatches,
        notes=[
            "external server: no launch log, the spec mode rests on /server_info alone",
            *(["the external server is the specbench stand-in"] if "specbench_sim" in info else []),
        ],
    )


def _env_delta(
    spec: ServerSpec, config: ServerConfig, mode_env: dict[str, str], gpus: Sequence[int] | None
) -> dict[str, str]:
    sweep_env = dict(config.env)
    problems = [
        f"server.env.{name}: set by specbench itself (spec mode / sim settings), not by the sweep"
        for name in sweep_env
        if name in _OWNED_ENV or name.startswith(_OWNED_ENV_PREFIXES)
    ]
    delta = {**sweep_env, **mode_env}
    if spec.backend == "sim":
        delta.update(sim_env(spec.sim))
    if gpus is not None:
        if "CUDA_VISIBLE_DEVICES" in sweep_env:
            problems.append("server.env.CUDA_VISIBLE_DEVICES conflicts with the GPUs given to the launcher")
        if not gpus or any(isinstance(g, bool) or not isinstance(g, int) or g < 0 for g in gpus):
            problems.append(f"gpus {list(gpus)!r}: expected a non-empty list of GPU indices")
        elif len(gpus) < config.tp:
            problems.append(f"gpus {list(gpus)!r}: tp {config.tp} needs at least {config.tp} GPUs")
        else:
            delta["CUDA_VISIBLE_DEVICES"] = ",".join(str(g) for g in gpus)
    if problems:
        raise LaunchError("cannot launch server:\n" + "\n".join(f"  - {p}" for p in problems))
    # Python's stdout is block-buffered into a file; unbuffered output keeps the log tail current on a crash.
    delta["PYTHONUNBUFFERED"] = "1"
    return delta


def _http_get(url: str, timeout_s: float) -> tuple[int, bytes]:
    """GET without proxies (a loopback server must not go through http_proxy). HTTP errors are returned."""
    opener = urllib.request.build_opener(urllib.request.ProxyHandler({}))
    try:
        with opener.open(url, timeout=timeout_s) as r:
            return int(r.status), r.read()
    except urllib.error.HTTPError as e:
        body = e.read()
        e.close()
        return int(e.code), body


def _wait_healthy(proc: subprocess.Popen[bytes], base_url: str, log_path: Path, timeout_s: float) -> None:
    deadline = time.monotonic() + timeout_s
    delay = 0.05
    while True:
        rc = proc.poll()
        if rc is not None:
            raise LaunchError(
                f"server exited with code {rc} before it was ready ({_describe_exit(rc)})",
                exit_code=rc,
                log_tail=_tail(log_path),
            )
        remaining = deadline - time.monotonic()
        if remaining <= 0:
            # Kill first so the tail includes whatever the server printed while dying.
            _terminate_group(proc, 5.0)
            raise LaunchError(
                f"server not healthy within {timeout_s:g} s at {base_url}/health (killed)",
                log_tail=_tail(log_path),
            )
        try:
            status, _ = _http_get(f"{base_url}/health", timeout_s=max(0.5, min(remaining, 30.0)))
        except (OSError, http.client.HTTPException):  # not listening yet, or not speaking HTTP yet
            status = None
        if status == 200:
            return
        time.sleep(max(0.0, min(delay, deadline - time.monotonic())))
        delay = min(delay * 1.5, 1.0)


def fetch_server_info(base_url: str, timeout_s: float = 30.0) -> dict[str, Any]:
    """`/server_info`, or the deprecated `/get_server_info` where the first is missing."""
    last = ""
    for path in ("/server_info", "/get_server_info"):
        url = f"{base_url}{path}"
        try:
            status, body = _http_get(url, timeout_s)
        except OSError as e:
            raise LaunchError(f"cannot reach the server at {base_url}: {e}") from None
        if status == 404:
            last = f"{url}: 404"
            continue
        if status != 200:
            raise LaunchError(f"{url} answered HTTP {status}: {body[:200]!r}")
        try:
            info = json.loads(body)
        except ValueError:
            raise LaunchError(f"{url} did not return JSON: {body[:200]!r}") from None
        if not isinstance(info, dict):
            raise LaunchError(f"{url} returned {type(info).__name__}, expected an object")
        return info
    raise LaunchError(f"{base_url} has neither /server_info nor /get_server_info ({last})")


def _norm_algorithm(name: Any) -> str | None:
    if not name or str(name).upper() == "NONE":
        return None
    upper = str(name).upper()
    return "EAGLE" if upper == "NEXTN" else upper  # SGLang resolves the NEXTN alias to EAGLE


def compare_requested(
    config: ServerConfig, info: dict[str, Any], resolved: ResolvedMode, version: str
) -> list[str]:
    """What differs between the config asked for and what `/server_info` says runs; [] when nothing does.

    Not mismatches: NEXTN showing as EAGLE, and draft tokens = steps+1 with topk 1 (SGLang's overwrite).
    """
    out: list[str] = []
    reported = info.get("version")
    if reported and str(reported) != version:
        out.append(f"version: expected SGLang {version}, the server reports {reported}")
    if resolved.contradiction:
        out.append(f"spec mode evidence disagrees: {resolved.contradiction}")
    if config.spec_mode != resolved.mode:
        line = (
            f"spec mode: requested {config.spec_mode or 'none (baseline)'}, "
            f"server runs {resolved.mode or 'none'} ({resolved.detail})"
        )
        why = known_fallback(resolved.version, config.spec_mode, config.algorithm, config.topk)
        out.append(f"{line}; {why}" if why else line)

    def check(key: str, expected: Any, what: str) -> None:
        if key not in info:
            out.append(f"{what}: cannot verify, /server_info has no {key!r}")
        elif info[key] != expected:
            out.append(f"{what}: requested {expected!r}, server runs {info[key]!r}")

    expected_alg = _norm_algorithm(config.algorithm)
    actual_alg = _norm_algorithm(info.get("speculative_algorithm"))
    if "speculative_algorithm" not in info and expected_alg is not None:
        out.append("speculative algorithm: cannot verify, /server_info has no 'speculative_algorithm'")
    elif actual_alg != expected_alg:
        out.append(
            f"speculative algorithm: requested {expected_alg or 'none'}, server runs {actual_alg or 'none'}"
        )
    check("model_path", config.model, "model")
    check("attention_backend", config.attention_backend, "attention backend")
    check("tp_size", config.tp, "tp size")
    if expected_alg is None:
        return out
    check("speculative_num_steps", config.steps, "speculative steps")
    check("speculative_eagle_topk", config.topk, "eagle topk")
    # With topk 1 SGLang overwrites draft tokens with steps+1 (contract §1.2).
    drafts = config.steps + 1 if config.topk == 1 and config.steps is not None else config.draft_tokens
    check("speculative_num_draft_tokens", drafts, "draft tokens")
    if config.draft_model and info.get("speculative_draft_model_path") not in (None, config.draft_model):
        out.append(
            f"draft model: requested {config.draft_model!r}, "
            f"server runs {info['speculative_draft_model_path']!r}"
        )
    return out


# ---- process-group teardown -------------------------------------------------------------------------------


def _group_alive(pgid: int) -> bool:
    """Whether any non-zombie process is left in the group.

    kill(0) also succeeds for zombies, which linger in containers whose PID 1 does not reap; /proc tells.
    """
    proc_dir = Path("/proc")
    if not proc_dir.is_dir():
        try:
            os.killpg(pgid, 0)
        except ProcessLookupError:
            return False
        except PermissionError:
            return True
        return True
    for entry in proc_dir.iterdir():
        if not entry.name.isdigit():
            continue
        try:
            stat = (entry / "stat").read_text()
        except OSError:
            continue
        # Fields after the parenthesised command: state ppid pgrp ...
        fields = stat[stat.rfind(")") + 2 :].split()
        if len(fields) >= 3 and int(fields[2]) == pgid and fields[0] not in ("Z", "X"):
            return True
    return False


def _signal_group(pgid: int, sig: signal.Signals) -> None:
    with contextlib.suppress(ProcessLookupError, PermissionError):
        os.killpg(pgid, sig)


def _terminate_group(proc: subprocess.Popen[bytes], grace_s: float) -> None:
    # start_new_session made the server a group leader, so its pid is the group id.
    pgid = proc.pid
    if proc.poll() is not None and not _group_alive(pgid):
        return
    try:
        _signal_group(pgid, signal.SIGTERM)
        deadline = time.monotonic() + grace_s
        with contextlib.suppress(subprocess.TimeoutExpired):
            proc.wait(timeout=max(0.0, deadline - time.monotonic()))
        while _group_alive(pgid) and time.monotonic() < deadline:
            time.sleep(0.05)
    finally:
        # Also reached on KeyboardInterrupt mid-wait: nothing of the group may outlive the launcher.
        if proc.poll() is None or _group_alive(pgid):
            _signal_group(pgid, signal.SIGKILL)
            with contextlib.suppress(subprocess.TimeoutExpired):
                proc.wait(timeout=5.0)
            end = time.monotonic() + 5.0
            while _group_alive(pgid) and time.monotonic() < end:
                time.sleep(0.05)


# ---- logs -------------------------------------------------------------------------------------------------


def _read_text(path: Path | None) -> str:
    if path is None:
        return ""
    try:
        return path.read_bytes().decode("utf-8", errors="replace")
    except OSError:
        return ""


def _tail(path: Path | None, lines: int = LOG_TAIL_LINES) -> str:
    text = _read_text(path)
    return "\n".join(text.splitlines()[-lines:]) if text else "(empty log)"


def _describe_exit(rc: int) -> str:
    if rc < 0:
        try:
            return f"killed by {signal.Signals(-rc).name}"
        except ValueError:
            return f"killed by signal {-rc}"
    return "see the log tail"


__all__ = [
    "LaunchError",
    "LaunchedServer",
    "attach_external",
    "compare_requested",
    "detect_sglang_version",
    "fetch_server_info",
    "free_port",
    "launch",
]
