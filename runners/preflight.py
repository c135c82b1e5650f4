"""Before a sweep starts a server: what every launch would repeat, checked once, and what a dry run previews.

- `check(spec)`: a missing interpreter, SGLang or local model, or an unreadable workload or model config would
  fail every launch alike: `run`, `ci` and jobs stop with one error line (exit 2) and store no run.
- `launch_version(spec)`: the SGLang a dry run builds argv for: the installed one (read from package metadata;
  a dry run executes nothing, not even `server.python`), else the `[gpu]` extra's pin, saying which.
- `missing_paths(spec)`, `describe(spec)`: the dry run's warnings and its lines on pairing, ABBA, profiling.
"""

import importlib.metadata
import re
import sys
from pathlib import Path

from bench.host.policy import HostPolicy, PolicyError
from bench.model_config import model_config_problem, prompt_vocab
from bench.server.argv import ArgvError, resolve_python
from bench.server.launcher import LaunchError, detect_sglang_version, probe_sglang
from bench.server.sglang_patch import UNPATCHED, installed_patch, source_version
from bench.server.spec_modes import KNOWN_RELEASES
from bench.sweep import SweepSpec
from bench.workload import workload_problems
from runners.parts import Sglang

_PIN = re.compile(r"^sglang\s*==\s*([\w.+-]+)\s*;.*extra\s*==\s*['\"]gpu['\"]")


class PreflightError(Exception):
    """Every launch of the sweep would fail this way; the message says why and what to do."""


def pinned_sglang() -> str | None:
    """The SGLang release specbench's `[gpu]` extra pins (pyproject.toml), or None when not installed."""
    try:
        requires = importlib.metadata.requires("specbench") or []
    except importlib.metadata.PackageNotFoundError:
        return None
    return next((m.group(1) for req in requires if (m := _PIN.match(req))), None)


# Where an interpreter's tree keeps its packages, relative to the directory above its bin/.
_SITE_PACKAGES = ("lib/python3*/site-packages", "lib64/python3*/site-packages", "lib/python3/dist-packages")


def installed_sglang(python: str | None) -> str | None:
    """The SGLang installed for `python` (None: this one), from metadata, running nothing (issue 35 §7)."""
    if python is None:
        try:
            return importlib.metadata.version("sglang")
        except importlib.metadata.PackageNotFoundError:
            return source_version()  # a bundle's site tree has no dist-info
    try:
        interpreter = Path(resolve_python(python))  # looks the file up; runs nothing
    except ArgvError:
        return None
    root = interpreter.parent.parent  # not resolved: a venv's bin/python3 links to the base interpreter
    paths = [str(d) for pattern in _SITE_PACKAGES for d in sorted(root.glob(pattern)) if d.is_dir()]
    return next((str(d.version) for d in importlib.metadata.distributions(name="sglang", path=paths)), None)


def launch_version(spec: SweepSpec) -> tuple[str, str]:
    """(version, where it comes from) for the argv and env a dry run shows. Nothing is executed."""
    if spec.server.backend == "sim":
        return spec.server.sim.version, "emulated by the stand-in"
    if spec.server.backend == "external":
        return "?", "whatever the external server runs"
    installed = installed_sglang(spec.server.python)
    if installed is not None:
        return installed, "installed (read from its files)"
    pinned = pinned_sglang()
    if pinned is not None:
        return pinned, "not installed here, so the release specbench pins (pyproject.toml, [gpu] extra)"
    newest = ".".join(map(str, KNOWN_RELEASES[-1]))
    return newest, "not installed here, so the newest release specbench knows"


def part_sglang(spec: SweepSpec, policy: HostPolicy | None = None) -> Sglang:
    """The SGLang this invocation's servers run, known before any starts (an external one's: unknown)."""
    if spec.server.backend == "sim":
        return Sglang(spec.server.sim.version)
    if spec.server.backend == "external":
        return Sglang()
    try:
        version, patch = probe_sglang((policy or HostPolicy.author()).interpreter(spec.server.python))
    except (LaunchError, ArgvError, PolicyError):
        return Sglang()  # the first server's launch reports the same failure, with its log
    return Sglang(version, patch)


def installed_patch_state(spec: SweepSpec) -> str | None:
    """The patch state of the SGLang this interpreter imports, when the servers would run it; else None."""
    return installed_patch() if spec.server.backend == "sglang" and spec.server.python is None else None


def launch_patch(spec: SweepSpec) -> str | None:
    """The specbench patch the servers' SGLang carries, read from files (None: stand-in or external)."""
    if spec.server.backend != "sglang":
        return None
    if spec.server.python is not None:
        return "not read (server.python is another interpreter; the run records it)"
    state = installed_patch()
    if state is None:
        return "not read (SGLang is not importable here; the run records it)"
    return "none (unpatched)" if state == UNPATCHED else state


def is_local(path: str) -> bool:
    """A path on this host, not a Hugging Face id (`org/name`): starts with `/`, `~`, `.`, or has two `/`."""
    return path.startswith(("/", "~", ".")) or path.count("/") > 1


def missing_paths(spec: SweepSpec) -> list[str]:
    """The sweep's local paths (model, draft, workload file) that do not exist on this host."""
    candidates: list[tuple[str, object]] = [("workload.path", w.path) for w in spec.workloads]
    if spec.server.backend == "sglang":
        candidates = [("model", spec.model), ("draft_model", spec.draft_model), *candidates]
    return [
        f"{what} {value!r} does not exist on this host"
        for what, value in candidates
        if value and is_local(str(value)) and not Path(str(value)).expanduser().exists()
    ]


def check(spec: SweepSpec, policy: HostPolicy | None = None) -> None:
    """Raise PreflightError when every launch of `spec` would fail the same way on this host.

    `policy` (default: the author's) refuses first and alone: only paths it allows are looked at. Then every
    workload file is parsed whole and a local model's config.json read, on every backend: a bad file (a FIFO,
    /dev/zero, `output_len: 10**12`) is refused before a server spends minutes starting.
    """
    policy = policy or HostPolicy.author()
    refused = policy.problems(spec)
    if refused:
        raise PreflightError("; ".join(refused) + ". Nothing was run and no run stored.")
    found = problems(spec, policy)
    if found:
        # One line: a workload's bad lines are listed in it, separated, not on lines of their own.
        raise PreflightError(
            " ".join("; ".join(found).split())
            + ". No server of this sweep could start, so nothing was run and no run stored."
        )


def problems(spec: SweepSpec, policy: HostPolicy, *, execute: bool = True) -> list[str]:
    """What `check` refuses past the policy; `execute=False` (a dry run) reads SGLang's release from files."""
    found = workload_problems(spec.workloads, prompt_vocab(spec.model))
    if spec.server.backend != "external":
        found += [p for p in (model_config_problem(spec.model),) if p]
    if spec.server.backend != "sglang":
        return found
    found += [p for p in missing_paths(spec) if p.startswith(("model", "draft_model"))]
    try:
        python = policy.interpreter(spec.server.python)
        if execute:
            detect_sglang_version(python, timeout_s=120.0)
        else:
            where = resolve_python(python) if python is not None else sys.executable  # a lookup; runs nothing
            if installed_sglang(python) is None:
                raise LaunchError(f"SGLang is not installed for {where} (read from its files)")
    except (LaunchError, ArgvError) as e:
        where = "server.python" if spec.server.python else "this interpreter"
        found.insert(
            0,
            ("; ".join(e.problems) if isinstance(e, ArgvError) else str(e))
            + f"; install SGLang for {where} (pip install -e '.[gpu]'), or point server.python at one that has it",
        )
    return found


def describe(spec: SweepSpec) -> list[str]:
    """One line each on how the sweep pairs v1/v2, orders their repeats (ABBA) and profiles."""
    lines = []
    if spec.paired:
        if spec.server.pair_colocate:
            lines.append(
                "pairing: each v1/v2 pair runs colocated, both servers up side by side on the same GPU(s), the "
                "idle one waiting; if the second cannot start next to the first, the pair falls back to "
                "alternating restarts (docs/reference/paired-measurement.md)"
            )
        else:
            lines.append("pairing: v1/v2 pairs by alternating restarts (server.pair_colocate: false)")
        grow = (
            f"; measure.ratio_target {spec.measure.ratio_target:g} adds ABBA repeats up to "
            f"{spec.max_pair_repeats} until each v2/v1 interval is within ±{spec.measure.ratio_target:.0%}"
            if spec.measure.ratio_target is not None
            else ""
        )
        lines.append(
            f"ABBA: a pair's {spec.repeats} repeats alternate v1 v2 v2 v1 ..., so drift hits both sides alike and "
            f"v2/v1 carries a paired interval{grow}"
        )
    elif {"v1", "v2"} <= set(spec.grid.spec_modes):
        lines.append("pairing: off (measure.paired: false): v1 and v2 run one server at a time, no ABBA")
    if spec.profile is not None:
        p = spec.profile
        at = "every batch size" if p.at is None else "batch " + ", ".join(map(str, p.at))
        lines.append(
            f"profiling: a {'+'.join(p.activities)} trace of {p.steps} steps at {at} after each point's windows "
            "(outside them), summarised into speculative cycles with the profiler's own distortion"
        )
    else:
        lines.append("profiling: none (add a `profile:` section for CPU/GPU traces of chosen points)")
    return lines
