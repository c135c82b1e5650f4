"""Which GPUs this host has, and whether they meet a job's requirements.

Detection asks `nvidia-smi` first (it needs no CUDA context and names the exact board), then torch, and
otherwise reports no GPU: a host without one can still run jobs on the stand-in server.
"""

from __future__ import annotations

import glob
import shutil
import subprocess
import sys
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

NVIDIA_SMI_ARGV = ["nvidia-smi", "--query-gpu=index,name", "--format=csv,noheader"]
REQUIREMENT_KEYS = frozenset({"gpu", "count", "labels"})


@dataclass(frozen=True)
class Gpu:
    index: int
    name: str


Runner = Callable[[list[str]], str]


def _run_nvidia_smi(argv: list[str]) -> str:
    done = subprocess.run(argv, capture_output=True, text=True, timeout=30, check=True)
    return done.stdout


def parse_nvidia_smi(output: str) -> list[Gpu]:
    gpus = []
    for line in output.splitlines():
        if not line.strip():
            continue
        index, _, name = line.partition(",")
        gpus.append(Gpu(int(index.strip()), name.strip()))
    return gpus


def _torch_gpus() -> list[Gpu]:
    if sys.platform == "linux" and not glob.glob("/dev/nvidia[0-9]*"):
        return []  # no NVIDIA device nodes: torch would find nothing, after seconds of importing
    try:
        import torch  # optional, and slow to import: only when nvidia-smi is absent
    except ImportError:
        return []
    try:
        if not torch.cuda.is_available():
            return []
        return [Gpu(i, torch.cuda.get_device_name(i)) for i in range(torch.cuda.device_count())]
    except RuntimeError:  # a driver that is present but broken counts as no GPU, not a crash
        return []


def detect_gpus(run: Runner | None = None) -> list[Gpu]:
    """The host's GPUs, in nvidia-smi's index order; [] when there are none."""
    if run is not None or shutil.which(NVIDIA_SMI_ARGV[0]):
        try:
            return parse_nvidia_smi((run or _run_nvidia_smi)(list(NVIDIA_SMI_ARGV)))
        except (OSError, subprocess.SubprocessError, ValueError):
            pass
    return _torch_gpus()


def parse_gpu_list(text: str | None) -> list[int] | None:
    """`--gpus 0,1,3` as indices; None means every GPU detected."""
    if text is None or not text.strip():
        return None
    out = []
    for part in text.split(","):
        part = part.strip()
        if not part.isdigit():
            raise ValueError(f"--gpus: {part!r} is not a GPU index (expected e.g. 0,1,2)")
        out.append(int(part))
    if len(set(out)) != len(out):
        raise ValueError("--gpus: duplicate index")
    return out


def select_gpus(detected: Sequence[Gpu], indices: Sequence[int] | None) -> list[Gpu]:
    """The GPUs this worker may use. Indices that were not detected keep an unknown name, so a host where
    detection fails can still hand its GPUs to the server, but cannot match a job that names a GPU type."""
    if indices is None:
        return list(detected)
    by_index = {g.index: g for g in detected}
    return [by_index.get(i, Gpu(i, "unknown")) for i in indices]


def parse_requires(text: str | None) -> dict[str, Any]:
    """`gpu=H100,count=8,labels=a+b` into a dict; unknown keys are an error, not silently ignored."""
    if text is None or not text.strip():
        return {}
    out: dict[str, Any] = {}
    for part in text.split(","):
        key, sep, value = part.partition("=")
        key, value = key.strip(), value.strip()
        if not sep or not value:
            raise ValueError(f"--requires: {part!r} is not key=value")
        if key not in REQUIREMENT_KEYS:
            raise ValueError(
                f"--requires: unknown key {key!r} (known: {', '.join(sorted(REQUIREMENT_KEYS))})"
            )
        if key == "count":
            if not value.isdigit() or int(value) < 1:
                raise ValueError(f"--requires: count={value!r} must be a positive integer")
            out[key] = int(value)
        elif key == "labels":
            out[key] = sorted({v for v in value.split("+") if v})
        else:
            out[key] = value
    return out


def requirements_for(sweep_backend: str, tp: int, explicit: Mapping[str, Any]) -> dict[str, Any]:
    """What a job needs. A real SGLang server needs at least `tp` GPUs even when the user said nothing,
    so a GPU-less worker never claims a job it can only fail."""
    req = dict(explicit)
    if sweep_backend == "sglang":
        req["count"] = max(int(req.get("count", 0)), tp)
    return req


def unmet(requires: Mapping[str, Any], gpus: Sequence[Gpu], labels: Sequence[str] = ()) -> str | None:
    """Why these GPUs and labels do not meet the requirements, or None when they do."""
    want_count = int(requires.get("count", 0) or 0)
    want_name = str(requires.get("gpu") or "").lower()
    if want_name:
        fitting = [g for g in gpus if want_name in g.name.lower()]
        if not fitting:
            return f"needs a {requires['gpu']} GPU"
        if len(fitting) < max(want_count, 1):
            return f"needs {max(want_count, 1)} x {requires['gpu']}, has {len(fitting)}"
    elif len(gpus) < want_count:
        return f"needs {want_count} GPU(s), has {len(gpus)}"
    missing = sorted(set(requires.get("labels") or ()) - set(labels))
    if missing:
        return f"needs worker label(s) {', '.join(missing)}"
    return None


def matches(requires: Mapping[str, Any], gpus: Sequence[Gpu], labels: Sequence[str] = ()) -> bool:
    return unmet(requires, gpus, labels) is None
