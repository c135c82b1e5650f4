"""Launch, verify and tear down one server: `with launch(spec.server, config) as server:`; non-empty
`server.mismatches` means it runs something other than what was asked (record it, don't measure).

The server runs in its own process group, logging to its own file. Ready is `/health` 200 (polled only at
startup, contract §6.9); then `/server_info` and the launch log say what it runs (§1.5). Teardown (SIGTERM
to the group, then SIGKILL) runs on every exit path. `server.cpu_affinity` pins it at start and every thread
once ready. Ports and teardown: bench/host/processes.py; probes: bench/server/http.py; requested vs resolved:
bench/server/requested.py."""

from __future__ import annotations

import atexit
import contextlib
import hashlib
import json
import os
import subprocess
import threading
import time
from collections.abc import Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from bench.host import cpu_affinity, reaper
from bench.host.policy import HostPolicy, PolicyError
from bench.host.processes import (
    LOG_TAIL_LINES,
    PortError,
    free_port,
    log_tail_of,
    port_is_free,
    read_log,
    terminate_group,
)
from bench.model_config import is_moe, read_model_config
from bench.server import sglang_patch as patch_probe
from bench.server.argv import ArgvError, ServerArgv, build_argv, resolve_python, sim_env
from bench.server.env import OFFLINE_ENV, ServerEnvError, build_server_env
from bench.server.flags import PATH_FLAGS
from bench.server.http import LaunchError, fetch_server_info, wait_healthy
from bench.server.known_bugs import identify_failure
from bench.server.requested import compare_requested
from bench.server.routing import RoutingPlan, plan_routing
from bench.server.spec_modes import (
    ENV_ROUND_ROBIN_EXPERTS,
    ENV_SPEC_V2,
    ENV_UNIFORM_EXPERTS,
    ResolvedMode,
    VersionError,
    resolve_mode,
)
from bench.sweep import SIMULATE_ACC_ENV, ServerConfig, ServerSpec

# The sim's working directory, so `-m synthetic.server` imports `bench` whether or not specbench is installed.
_PROJECT_ROOT = Path(__file__).resolve().parents[2]
# Environment the sweep may not set: the spec mode and the sim settings own these.
_OWNED_ENV_PREFIXES = ("SPECBENCH_SIM_",)
_OWNED_ENV = frozenset({ENV_SPEC_V2, ENV_UNIFORM_EXPERTS, ENV_ROUND_ROBIN_EXPERTS})

# The patch probe's own source first (it prints its JSON line under __main__), the version last.
_PATCH_PROBE = Path(patch_probe.__file__).read_text()
_VERSION_PROBE = """\
import importlib.metadata as m
try:
    print(m.version("sglang"))
except m.PackageNotFoundError:
    # A site tree on PYTHONPATH may lack the dist-info; the package knows its own version.
    from sglang.version import __version__
    print(__version__)
"""


@dataclass(eq=False)
class LaunchedServer:
    """One running (or attached) server and what it was verified to run."""

    base_url: str
    backend: str
    version: str
    spec_mode_requested: str | None
    resolved: ResolvedMode
    # Nothing of the launch for an external server (attached, not started).
    argv: list[str] = field(default_factory=list)
    env_delta: dict[str, str] = field(default_factory=dict)  # only what specbench set over its own base
    log_path: Path | None = None
    pid: int | None = None
    startup_s: float = 0.0
    server_info: dict[str, Any] = field(default_factory=dict)
    mismatches: list[str] = field(default_factory=list)  # one human line per difference from what was asked
    notes: list[str] = field(default_factory=list)  # version adaptations (renamed flags), other facts to keep
    # The CPUs every thread of the server's processes was pinned to and read back on; None: not pinned.
    cpu_affinity: list[int] | None = None
    # Expert routing of a dummy-weight MoE launch (bench/server/routing.py); None: real weights or dense.
    expert_routing: str | None = None
    # The specbench patch the server's SGLang carries (bench/server/sglang_patch.py); None: not probed.
    sglang_patch: str | None = None
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
        return log_tail_of(self.log_path, lines)

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
            "cpu_affinity": None if self.cpu_affinity is None else list(self.cpu_affinity),
            "expert_routing": self.expert_routing,
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
            terminate_group(proc, self._stop_timeout_s if timeout_s is None else timeout_s)
            if self._guard is not None:
                self._guard.release()
            self._stopped = True
            _LIVE.pop(id(self), None)

    def __enter__(self) -> LaunchedServer:
        return self

    def __exit__(self, *exc: object) -> None:
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
    return probe_sglang(python, timeout_s)[0]


def probe_sglang(python: str | None = None, timeout_s: float = 120.0) -> tuple[str, str | None]:
    """(SGLang version, specbench patch it carries) for the server's interpreter, probed with the server's own
    scrubbed environment (bench/server/env.py), never the caller's, which may hold the database URL."""
    interpreter = resolve_python(python)
    try:
        out = subprocess.run(
            [interpreter, "-c", _PATCH_PROBE + "\n" + _VERSION_PROBE],
            capture_output=True,
            text=True,
            timeout=timeout_s,
            check=False,
            env=build_server_env(os.environ, {}, {}),
            stdin=subprocess.DEVNULL,
        )
    except (OSError, subprocess.TimeoutExpired) as e:
        raise LaunchError(f"cannot ask {interpreter} for its SGLang version: {e}") from None
    version = out.stdout.strip().splitlines()[-1] if out.stdout.strip() else ""
    if out.returncode != 0 or not version:
        last = (out.stderr.strip().splitlines() or ["(no output)"])[-1]
        raise LaunchError(f"SGLang is not installed for {interpreter}: {last}")
    return version, _patch_line(out.stdout)


def _patch_line(stdout: str) -> str | None:
    for line in stdout.splitlines():
        if line.startswith('{"sglang_patch"'):
            try:
                state = json.loads(line)["sglang_patch"]
            except (ValueError, KeyError):
                return None
            return str(state) if state is not None else None
    return None


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
    policy: HostPolicy | None = None,
) -> LaunchedServer:
    """Start (or, for `external`, attach to) the server for `config` and verify what it runs; `version` skips
    detection and `policy` (a worker's HostPolicy) is checked before anything runs. LaunchError, after
    teardown, if the server cannot start, dies or is not healthy within `startup_timeout_s` (default: the
    spec's), naming a known SGLang bug its log shows (bench.server.known_bugs). A server running something
    else is returned with `mismatches` filled."""
    policy = policy or HostPolicy.author()
    try:
        spec = _host_checked(policy, spec, config)
    except PolicyError as e:
        raise LaunchError(f"cannot launch server: {e}") from None
    if spec.backend == "external":
        return attach_external(spec, config, version=version)
    # The config carries args/env (its identity; lists as tuples); a spec's own it lacks would be dropped.
    spec_args = {k: tuple(v) if isinstance(v, list) else v for k, v in spec.args.items()}
    # Fields the sweep turns into args/env of their own (load_format, accept_lengths) are not compared.
    cfg_args = {k: v for k, v in config.args if not (k == "load-format" and spec.load_format != "auto")}
    cfg_env = {
        k: v for k, v in config.env if not (k == SIMULATE_ACC_ENV and config.accept_length is not None)
    }
    if (spec.args and cfg_args != spec_args) or (spec.env and cfg_env != spec.env):
        raise LaunchError(
            "server.args/env differ from the config's args/env; build configs with bench.sweep.expand "
            f"(spec: {spec.args!r} {spec.env!r}; config: {dict(config.args)!r} {dict(config.env)!r})"
        )

    patch: str | None = None  # the stand-in and a caller-given version: not probed
    if spec.backend == "sim":
        version = spec.sim.version
    elif version is None:
        version, patch = probe_sglang(spec.python)
    host = "127.0.0.1"
    if port is None:
        try:
            port = free_port(host)
        except PortError as e:
            raise LaunchError(str(e)) from None
    elif not port_is_free(port, host):
        # Another server on that port would answer our health checks for a process that never binds.
        raise LaunchError(f"port {port} on {host} is already in use")

    plan = plan_launch(spec, config, version=version, port=port, gpus=gpus, log_dir=log_dir, policy=policy)
    built, env_delta, env = plan.argv, plan.env_delta, plan.env
    # Sim knobs come from the sweep alone: one exported by a developer would silently change the stand-in.
    dropped = sorted(k for k in os.environ if k.startswith(_OWNED_ENV_PREFIXES) and k not in env_delta)
    log_dir = Path(log_dir)
    log_dir.mkdir(parents=True, exist_ok=True)
    stamp = datetime.now(UTC).strftime("%Y%m%dT%H%M%S%fZ")
    log_path = log_dir / f"server-{config.key()}-{config.spec_mode or 'base'}-{port}-{stamp}.log"

    timeout = spec.startup_timeout_s if startup_timeout_s is None else startup_timeout_s
    t0 = time.monotonic()
    # No shell and no taskset: the launcher pins the process itself (below), so argv stays the server's own.
    with open(log_path, "wb") as log:
        try:
            proc = subprocess.Popen(
                built.argv,
                stdin=subprocess.DEVNULL,
                stdout=log,
                stderr=subprocess.STDOUT,
                env=env,
                # A worker's SGLang server runs in its log dir: a model id never names a path of the worker's.
                cwd=_PROJECT_ROOT if spec.backend == "sim" else (log_dir if policy.confined else None),
                start_new_session=True,  # own process group: teardown reaches the scheduler/detokenizer too
                close_fds=True,
            )
        except OSError as e:
            raise LaunchError(f"cannot start {built.argv[0]}: {e}") from None
    # The server dies with us, even on SIGKILL (bench/host/reaper.py).
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
            sglang_patch=patch,
            spec_mode_requested=config.spec_mode,
            resolved=ResolvedMode(None, "not resolved yet", config.algorithm is not None, version),
            notes=[
                *built.notes,
                *(f"inherited {k} not passed on (set by server.sim only)" for k in dropped),
                *plan.cpu_notes,
                *([plan.routing.warning] if plan.routing.warning else []),
            ],
            expert_routing=plan.routing.routing,
            _proc=proc,
            _stop_timeout_s=stop_timeout_s,
            _guard=guard,
        )
        _LIVE[id(server)] = server
        if plan.cpus is not None:
            # The new process has one thread yet; the threads and children it starts inherit this.
            _pin_started(proc.pid, plan.cpus)
        wait_healthy(proc, base_url, log_path, timeout)
        server.startup_s = time.monotonic() - t0
        info = fetch_server_info(base_url)
        if proc.poll() is not None:
            raise LaunchError(
                f"server exited with code {proc.returncode} right after becoming healthy",
                exit_code=proc.returncode,
                log_tail=log_tail_of(log_path),
            )
        server.server_info = info
        server.resolved = resolve_mode(version, info, read_log(log_path))
        server.mismatches = compare_requested(config, info, server.resolved, version)
        if plan.cpus is not None:
            _pin_server_tree(server, proc.pid, plan.cpus)
    except BaseException as e:
        # Every way out of a failed launch (KeyboardInterrupt included) takes the process group down first.
        if server is not None:
            server.stop()
        else:
            terminate_group(proc, stop_timeout_s)
            guard.release()
        if isinstance(e, LaunchError):
            e.pid, e.log_path = proc.pid, log_path
            if (named := _known_failure(e, version, config)) is not None:
                raise named from None
        raise
    return server


# Bytes of a failed launch's log tail that known-bug signatures read: a traceback is a few KiB at the end.
_SIGNATURE_BYTES = 256 * 1024


def _known_failure(err: LaunchError, version: str, config: ServerConfig) -> LaunchError | None:
    """`err` named as the known SGLang bug its log shows (bench.server.known_bugs), or None."""
    found = identify_failure(
        version, config.attention_backend, config.spec_mode, _log_end(err.log_path), steps=config.steps
    )
    if found is None:
        return None
    return LaunchError(
        f"{found.line()}\n{err.message}",
        exit_code=err.exit_code,
        log_tail=err.log_tail,
        pid=err.pid,
        log_path=err.log_path,
        known_bug=found.bug.key,
    )


def _log_end(path: Path | None) -> str:
    if path is None:
        return ""
    try:
        with open(path, "rb") as f:
            f.seek(0, os.SEEK_END)
            f.seek(max(0, f.tell() - _SIGNATURE_BYTES))
            return f.read().decode("utf-8", errors="replace")
    except OSError:
        return ""


def _host_checked(policy: HostPolicy, spec: ServerSpec, config: ServerConfig) -> ServerSpec:
    """`spec` with its interpreter name turned into the host's path, once the host allows everything the
    launch names (checked again: a symlink may have moved since the worker claimed the job)."""
    if spec.backend == "external":
        policy.check_external(spec.base_url)
        return spec
    policy.check_model(config.model, "model")
    if config.draft_model is not None:
        policy.check_model(config.draft_model, "draft_model")
    for name, value in config.args:
        if name in PATH_FLAGS:  # whatever its type: a list or a number is refused, not skipped
            policy.check_model(value, f"server.args.{name}")
    python = policy.interpreter(spec.python)
    return spec if python == spec.python else spec.model_copy(update={"python": python})


@dataclass(frozen=True)
class LaunchPlan:
    argv: ServerArgv
    env_delta: dict[str, str]  # what specbench and the sweep set
    env: dict[str, str]  # the server's whole environment: env_delta over the host's small base
    cpus: cpu_affinity.CpuList | None = None  # what the server is pinned to; None: not pinned
    cpu_notes: tuple[str, ...] = ()  # why it is pinned when the sweep did not ask, overlaps with the client
    routing: RoutingPlan = field(default_factory=lambda: RoutingPlan(None))  # dummy-weight MoE routing


def plan_launch(
    spec: ServerSpec,
    config: ServerConfig,
    *,
    version: str,
    port: int,
    gpus: Sequence[int] | None = None,
    log_dir: str | Path = "logs/servers",
    policy: HostPolicy | None = None,
) -> LaunchPlan:
    """A launch's argv and env (`launch` starts it, `run --dry-run` prints it); LaunchError lists all."""
    if spec.backend == "external":
        raise LaunchError("backend external launches nothing")
    policy = policy or HostPolicy.author()
    try:
        built = build_argv(
            config,
            backend=spec.backend,
            version=version,
            port=port,
            python=spec.python,
            trust_remote_code=policy.trust_remote_code,
        )
    except (ArgvError, VersionError) as e:
        raise LaunchError(str(e)) from None
    # Dummy weights on a MoE model: the release's balanced-routing switch, set like the spec-mode switch.
    routing = plan_routing(
        version=version,
        load_format=spec.load_format,
        setting=spec.balanced_routing,
        moe=is_moe(read_model_config(config.model)),
    )
    env_delta = _env_delta(spec, config, {**built.mode_env, **routing.env}, gpus)
    if not policy.hub_downloads:  # set over whatever the host's environment says: the host chose offline
        env_delta.update(OFFLINE_ENV)
    if spec.backend == "sim" and spec.sim.shared_gpu:
        # The stand-ins share one emulated GPU (gpu_ledger.py), named by a digest: job text is no path.
        device = hashlib.sha256(env_delta.get("CUDA_VISIBLE_DEVICES", "all").encode()).hexdigest()[:16]
        env_delta["SPECBENCH_SIM_GPU_LEDGER"] = str(Path(log_dir).resolve() / f"sim-gpu-{device}.json")
    # Built from nothing (bench.server.env): the worker's own environment holds the database URL.
    try:
        env = build_server_env(os.environ, dict(config.env), env_delta, hub_downloads=policy.hub_downloads)
    except ServerEnvError as e:
        raise LaunchError(f"cannot launch server: {e}") from None
    cpus, cpu_notes = _server_cpus(spec)
    return LaunchPlan(built, env_delta, env, cpus, cpu_notes, routing)


def _server_cpus(spec: ServerSpec) -> tuple[cpu_affinity.CpuList | None, tuple[str, ...]]:
    """The CPUs to pin the server to, checked against this host's, with notes for its record."""
    pin = cpu_affinity.runner_pin()
    if spec.cpu_affinity is None:
        if pin is None:
            return None, ()
        # A child inherits its parent's CPUs: else `--client-cpus` would squeeze the server onto the client's.
        before = tuple(sorted(pin.before))
        return before, (
            f"server.cpu_affinity unset: the server runs on the runner's CPUs from before --client-cpus "
            f"({cpu_affinity.format_cpu_list(before)})",
        )
    try:
        cpu_affinity.check_allowed(spec.cpu_affinity, "server.cpu_affinity")
    except cpu_affinity.AffinityError as e:
        raise LaunchError(f"cannot launch server: {e}") from None
    shared = sorted(set(spec.cpu_affinity) & set(pin.cpus)) if pin is not None else []
    if shared:
        return spec.cpu_affinity, (
            f"server.cpu_affinity shares CPU(s) {cpu_affinity.format_cpu_list(shared)} with --client-cpus",
        )
    return spec.cpu_affinity, ()


def _pin_started(pid: int, cpus: cpu_affinity.CpuList) -> None:
    try:
        os.sched_setaffinity(pid, cpus)
    except ProcessLookupError:  # died at once: waiting for it to become healthy reports why, with its log
        pass
    except OSError as e:
        raise LaunchError(
            f"cannot pin the server to CPUs {cpu_affinity.format_cpu_list(cpus)}: {e}"
        ) from None


def _pin_server_tree(server: LaunchedServer, pid: int, cpus: cpu_affinity.CpuList) -> None:
    """Pin every thread of the ready server again; one reading back other CPUs is a mismatch."""
    try:
        tree = cpu_affinity.pin_tree(pid, cpus)
    except cpu_affinity.AffinityError as e:
        raise LaunchError(f"server.cpu_affinity: {e}") from None
    listed = cpu_affinity.format_cpu_list(cpus)
    server.cpu_affinity = list(cpus)
    server.notes.append(f"pinned {tree.processes} process(es), {tree.threads} thread(s) to CPUs {listed}")
    server.mismatches.extend(f"cpu_affinity: {line}" for line in tree.stray)


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
        version=detected,
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
        f"server.env.{name}: set by specbench itself (spec mode / balanced routing / sim settings), "
        "not by the sweep"
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
