"""The argv (and sim environment) of one server from validated fields, never a shell string: the program is
`<python> -m sglang.launch_server` or `<python> -m synthetic.server`, each value its own argv element."""

import itertools
import math
import os
import re
import shutil
import sys
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Literal

from bench.server.flags import PATH_FLAGS, check_passthrough_flag, path_value_problem
from bench.server.spec_modes import SpecMode, VersionError, launch_settings, parse_version
from bench.sweep import ServerConfig, SimSettings

LaunchBackend = Literal["sglang", "sim"]
Scalar = str | int | float | bool
# Lists are for nargs="+" flags such as `cuda-graph-bs`: one flag followed by its values.
ArgInput = Scalar | Sequence[str | int | float]

PROGRAM_MODULE: dict[str, str] = {"sglang": "sglang.launch_server", "sim": "synthetic.server"}

# Flags renamed in 0.5.14 (old spelling deprecated, gone and ambiguous by 0.5.23); a sweep may use either.
_RENAMED_IN_0_5_14: dict[str, str] = {
    "cuda-graph-max-bs": "cuda-graph-max-bs-decode",
    "cuda-graph-bs": "cuda-graph-bs-decode",
}
_NEW_SPELLING_SINCE = (0, 5, 14)
_OLD_SPELLING = {new: old for old, new in _RENAMED_IN_0_5_14.items()}

# Attention backends that exist only in part of the supported range (contract §1.2).
_BACKEND_SINCE: dict[str, tuple[int, int, int]] = {
    "dsa": (0, 5, 13),
    "cutedsl_mla": (0, 5, 13),
    "qsa": (0, 5, 23),
    "llada2_cfg_flashinfer": (0, 5, 23),
    "hpc_ops": (0, 5, 23),
    "minicpm_flashattn": (0, 5, 23),
    "minicpm_flashinfer": (0, 5, 23),
}
_BACKEND_REMOVED_BY: dict[str, tuple[int, int, int]] = {
    "cutlass_mla": (0, 5, 23),
    "dual_chunk_flash_attn": (0, 5, 23),
}

_BACKEND_NAME = re.compile(r"^[a-z0-9_]{1,64}$")
_ALGORITHM_NAME = re.compile(r"^[A-Z0-9_]{1,64}$")
_PYTHON_NAME = re.compile(r"^python(\d+(\.\d+)?)?$")


class ArgvError(ValueError):
    """A server config this SGLang version cannot be launched with; `problems` lists every reason."""

    def __init__(self, problems: list[str]):
        self.problems = problems
        super().__init__("cannot launch server:\n" + "\n".join(f"  - {p}" for p in problems))


@dataclass(frozen=True)
class ServerArgv:
    argv: list[str]
    mode_env: dict[str, str]  # spec-mode environment (SGLANG_ENABLE_SPEC_V2 where the version has it)
    # What was adapted to the version, e.g. a renamed flag; for the run's record.
    notes: list[str] = field(default_factory=list)


def resolve_python(python: str | None) -> str:
    """The interpreter that runs the server module; a config may choose it but not a different program."""
    if python is None:
        return sys.executable
    if "\0" in python or "\n" in python:
        raise ArgvError([f"server.python {python!r}: contains a NUL or newline"])
    found = python if os.sep in python else shutil.which(python)
    if not found or not os.path.isfile(found) or not os.access(found, os.X_OK):
        raise ArgvError([f"server.python {python!r}: not an executable file"])
    if not _PYTHON_NAME.match(Path(found).name):
        raise ArgvError(
            [f"server.python {python!r}: must be a Python interpreter (python, python3, python3.12, ...)"]
        )
    return found


def program(backend: LaunchBackend, python: str | None) -> list[str]:
    """`[python, "-m", module]`: the only programs the launcher starts; the sim runs on this interpreter."""
    if backend not in PROGRAM_MODULE:
        raise ArgvError([f"backend {backend!r} launches nothing"])
    interpreter = sys.executable if backend == "sim" else resolve_python(python)
    return [interpreter, "-m", PROGRAM_MODULE[backend]]


def sim_env(sim: SimSettings) -> dict[str, str]:
    """SPECBENCH_SIM_* variables for the stand-in server."""
    env = {
        "SPECBENCH_SIM_VERSION": sim.version,
        "SPECBENCH_SIM_ACCEPTANCE_RATE": repr(sim.acceptance_rate),
        "SPECBENCH_SIM_SEED": str(sim.seed),
        "SPECBENCH_SIM_TIME_SCALE": repr(sim.time_scale),
        "SPECBENCH_SIM_INSTANT": "1" if sim.instant else "0",
        "SPECBENCH_SIM_STARTUP_S": repr(sim.startup_s),
    }
    if sim.fault:
        env["SPECBENCH_SIM_FAULT"] = sim.fault
    return env


def _check_text(what: str, value: str, problems: list[str]) -> None:
    if not value:
        problems.append(f"{what}: empty")
    elif any(c in value for c in "\0\n\r"):
        problems.append(f"{what}: contains a NUL or newline")
    elif value.startswith("-"):
        # argparse would read it as a flag; no SGLang path or name legitimately starts with '-'.
        problems.append(f"{what} {value!r}: must not start with '-'")


def _render_value(name: str, value: str | int | float, problems: list[str]) -> str | None:
    if isinstance(value, bool):
        problems.append(f"server.args.{name}: true/false is only valid as the whole value, not in a list")
        return None
    if isinstance(value, float):
        if not math.isfinite(value):
            problems.append(f"server.args.{name}: {value!r} is not a finite number")
            return None
        return repr(value)
    if isinstance(value, int):
        return str(value)
    if isinstance(value, str):
        _check_text(f"server.args.{name}", value, problems)
        return value
    problems.append(f"server.args.{name}: unsupported value type {type(value).__name__}")
    return None


def translate_args(
    args: Mapping[str, ArgInput] | Sequence[tuple[str, ArgInput]], version: str
) -> tuple[list[str], list[str]]:
    """`args` as argv plus rename notes: True `--name`, False nothing, [a, b] `--name a b`, x `--name x`."""
    items = list(args.items()) if isinstance(args, Mapping) else list(args)
    problems: list[str] = []
    notes: list[str] = []
    release = parse_version(version)
    new_spelling = release >= _NEW_SPELLING_SINCE
    seen: dict[str, str] = {}
    out: list[str] = []
    for name, value in items:
        aliased = name in _RENAMED_IN_0_5_14 or name in _OLD_SPELLING
        msg = check_passthrough_flag(name)
        if msg and not aliased:
            problems.append(f"server.args: {msg}")
            continue
        target = name
        if new_spelling and name in _RENAMED_IN_0_5_14:
            target = _RENAMED_IN_0_5_14[name]
        elif not new_spelling and name in _OLD_SPELLING:
            target = _OLD_SPELLING[name]
        if target in seen:
            problems.append(f"server.args: {seen[target]!r} and {name!r} set the same SGLang flag --{target}")
            continue
        seen[target] = name
        if target != name:
            notes.append(f"--{name} passed as --{target} for SGLang {version}")
        if name in PATH_FLAGS and (msg := path_value_problem(f"server.args.{name}", value)):
            problems.append(msg)
            continue
        if isinstance(value, bool):  # True: the bare flag; False: left out
            out += [f"--{target}"] if value else []
            continue
        if isinstance(value, (str, int, float)):
            if (one := _render_value(name, value, problems)) is not None:
                out += [f"--{target}", one]
            continue
        if not value:
            problems.append(f"server.args.{name}: empty list")
            continue
        rendered = [_render_value(name, v, problems) for v in value]
        if None not in rendered:
            out += [f"--{target}", *(r for r in rendered if r is not None)]
    if problems:
        raise ArgvError(problems)
    return out, notes


def _check_config(cfg: ServerConfig, version: str, problems: list[str]) -> None:
    _check_text("model", cfg.model, problems)
    if cfg.draft_model is not None:
        _check_text("draft_model", cfg.draft_model, problems)
    if not _BACKEND_NAME.match(cfg.attention_backend):
        problems.append(f"attention_backend {cfg.attention_backend!r}: expected a name such as 'flashmla'")
    else:
        release = parse_version(version)
        since = _BACKEND_SINCE.get(cfg.attention_backend)
        removed = _BACKEND_REMOVED_BY.get(cfg.attention_backend)
        if since and release < since:
            problems.append(f"attention backend {cfg.attention_backend!r} does not exist in SGLang {version}")
        if removed and release >= removed:
            problems.append(
                f"attention backend {cfg.attention_backend!r} was removed from SGLang by {version}"
            )
    if isinstance(cfg.tp, bool) or not isinstance(cfg.tp, int) or cfg.tp < 1:
        problems.append(f"tp {cfg.tp!r}: must be a positive integer")
    spec = (cfg.algorithm, cfg.steps, cfg.topk, cfg.draft_tokens)
    if cfg.algorithm is None:
        if any(x is not None for x in spec) or cfg.spec_mode is not None:
            problems.append(
                "baseline config (no algorithm) must not set steps, topk, draft tokens or spec mode"
            )
        return
    if not _ALGORITHM_NAME.match(cfg.algorithm):
        problems.append(f"algorithm {cfg.algorithm!r}: expected an upper-case name such as 'EAGLE'")
    for what, n in (("steps", cfg.steps), ("topk", cfg.topk), ("draft_tokens", cfg.draft_tokens)):
        # SGLang asserts that the three are set together (contract §1.2).
        if isinstance(n, bool) or not isinstance(n, int) or n < 1:
            problems.append(f"{what} {n!r}: must be a positive integer when an algorithm is set")
    if cfg.spec_mode not in ("v1", "v2"):
        problems.append(f"spec_mode {cfg.spec_mode!r}: must be 'v1' or 'v2' when an algorithm is set")


def build_argv(
    cfg: ServerConfig,
    *,
    backend: LaunchBackend,
    version: str,
    port: int,
    python: str | None = None,
    host: str = "127.0.0.1",
    trust_remote_code: bool = False,
) -> ServerArgv:
    """Argv of one server for `cfg` on `version`; `trust_remote_code` is the host's. ArgvError lists all."""
    problems: list[str] = []
    try:
        parse_version(version)
    except VersionError as e:
        raise ArgvError([str(e)]) from None
    if isinstance(port, bool) or not isinstance(port, int) or not 0 < port < 65536:
        problems.append(f"port {port!r}: must be 1-65535")
    if host not in ("127.0.0.1", "localhost", "::1", "0.0.0.0"):
        problems.append(f"host {host!r}: the launcher binds loopback (or all interfaces) only")
    _check_config(cfg, version, problems)
    passthrough: list[str] = []
    notes: list[str] = []
    try:
        passthrough, notes = translate_args(cfg.args, version)
    except ArgvError as e:
        problems += [p for p in e.problems if p not in problems]
    if problems:
        raise ArgvError(problems)

    flags = {
        "--model-path": cfg.model,
        "--host": host,
        "--port": str(port),
        "--attention-backend": cfg.attention_backend,
        "--tp-size": str(cfg.tp),
    }
    mode: SpecMode | None = None
    if cfg.algorithm is not None:
        mode = cfg.spec_mode
        flags["--speculative-algorithm"] = cfg.algorithm
        flags["--speculative-num-steps"] = str(cfg.steps)
        flags["--speculative-eagle-topk"] = str(cfg.topk)
        flags["--speculative-num-draft-tokens"] = str(cfg.draft_tokens)
        if cfg.draft_model:
            flags["--speculative-draft-model-path"] = cfg.draft_model
    mode_flags, mode_env = launch_settings(version, mode)
    argv = [*program(backend, python), *itertools.chain.from_iterable(flags.items())]
    argv += mode_flags + passthrough + (["--trust-remote-code"] if trust_remote_code else [])
    return ServerArgv(argv, mode_env, notes)
