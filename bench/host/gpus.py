"""Which GPUs this host has: the one detector, for workers (job matching) and provenance (what a run used).

Detection asks `nvidia-smi` first (no CUDA context, names the exact board), then reads the driver's files
under /proc, then asks torch, else reports no GPU: a host without one can still run jobs on the stand-in
server. A dry run never imports torch (`find_gpus(torch=False)`)."""

import glob
import os
import shutil
import subprocess
import sys
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

NVIDIA_SMI_ARGV = ["nvidia-smi", "--query-gpu=index,name,driver_version,uuid", "--format=csv,noheader"]
PROC_GPUS = "/proc/driver/nvidia/gpus"
NONE = "none"


@dataclass(frozen=True)
class Gpu:
    index: int
    name: str
    driver: str = field(default="unknown", compare=False)  # torch does not expose it
    # The board's own identity ("GPU-5f1c2a3b-..."): host names repeat across borrowed hosts, boards do not.
    uuid: str = field(default="", compare=False)


Runner = Callable[[list[str]], str]


def _run_nvidia_smi(argv: list[str]) -> str:
    done = subprocess.run(argv, capture_output=True, text=True, timeout=30, check=True)
    return done.stdout


def parse_nvidia_smi(output: str) -> list[Gpu]:
    gpus = []
    for line in output.splitlines():
        if not line.strip():
            continue
        index, name, *rest = (c.strip() for c in line.split(","))
        driver = rest[0] if rest else "unknown"
        gpus.append(Gpu(int(index), name, driver, rest[1] if len(rest) > 1 else ""))
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


def proc_gpus(root: str = PROC_GPUS) -> list[Gpu]:
    """The NVIDIA driver's own list under /proc (a folder per GPU named by PCI address; `information` names
    the model), in PCI order, nvidia-smi's default index order: no process started, no CUDA."""
    gpus = []
    for i, info in enumerate(sorted(glob.glob(os.path.join(glob.escape(root), "*", "information")))):
        try:
            with open(info, encoding="utf-8", errors="replace") as f:
                fields = dict(line.split(":", 1) for line in f.read(65536).splitlines() if ":" in line)
        except OSError:
            continue
        model, uuid = (fields.get(k, "").strip() for k in ("Model", "GPU UUID"))
        gpus.append(Gpu(i, model or "unknown", uuid=uuid))
    return gpus


def find_gpus(run: Runner | None = None, *, torch: bool = True) -> tuple[list[Gpu], str]:
    """The GPUs and what told: nvidia-smi, else /proc, else (`torch`) torch; ([], what was asked) if none."""
    if run is not None or shutil.which(NVIDIA_SMI_ARGV[0]):
        try:
            return parse_nvidia_smi((run or _run_nvidia_smi)(list(NVIDIA_SMI_ARGV))), "nvidia-smi"
        except (OSError, subprocess.SubprocessError, ValueError, IndexError):
            pass
    if found := proc_gpus():
        return found, PROC_GPUS
    if torch:
        return _torch_gpus(), "torch"
    return [], f"nvidia-smi and {PROC_GPUS}"


def detect_gpus(run: Runner | None = None) -> list[Gpu]:
    """The host's GPUs, in nvidia-smi's index order; [] when there are none."""
    return find_gpus(run)[0]


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


def assigned_gpus(indices: Sequence[int] | None = None, run: Runner | None = None) -> list[Gpu]:
    """The GPUs a run's servers use: `indices` (a worker's `--gpus`) when given, else CUDA_VISIBLE_DEVICES
    when it lists indices, else every GPU detected. None detected at all: no GPU (a stand-in run)."""
    detected = detect_gpus(run)
    return select_gpus(detected, visible_indices() if indices is None else indices) if detected else []


def visible_indices() -> list[int] | None:
    """CUDA_VISIBLE_DEVICES as GPU indices, or None when unset or given as UUIDs."""
    raw = os.environ.get("CUDA_VISIBLE_DEVICES")
    if raw is None:
        return None
    parts = [p.strip() for p in raw.split(",") if p.strip()]
    return [int(p) for p in parts] if all(p.isdigit() for p in parts) else None


def describe(gpus: Sequence[Gpu]) -> tuple[str, int, str]:
    """(distinct names joined by " + ", count, driver) as provenance records them; ("none", 0, "none")."""
    if not gpus:
        return NONE, 0, NONE
    names = list(dict.fromkeys(g.name for g in gpus))
    return " + ".join(names), len(gpus), gpus[0].driver


def unmet(
    requires: Mapping[str, Any],
    gpus: Sequence[Gpu],
    labels: Sequence[str] = (),
    offers: Mapping[str, Sequence[str]] | None = None,
) -> str | None:
    """Why these GPUs, labels and offers (HostPolicy.offered) do not meet the requirements, or None."""
    want_count = int(requires.get("count", 0) or 0)
    if want_name := str(requires.get("gpu") or "").lower():
        fitting = [g for g in gpus if want_name in g.name.lower()]
        if not fitting and want_count <= 1:
            return f"needs one {requires['gpu']} GPU"
        if len(fitting) < max(want_count, 1):
            return f"needs {max(want_count, 1)} x {requires['gpu']}, has {len(fitting)}"
    elif len(gpus) < want_count:
        return f"needs {want_count} GPU(s), has {len(gpus)}"
    if missing := sorted(set(requires.get("labels") or ()) - set(labels)):
        return f"needs worker label(s) {', '.join(missing)}"
    offers = offers or {}
    python = requires.get("python")
    if python is not None and python not in (offers.get("python") or ()):
        return f"needs a worker that offers interpreter {python!r} (worker --python {python}=PATH)"
    external = requires.get("external")
    if external is not None and external not in (offers.get("external") or ()):
        return f"needs a worker allowed to measure {external} (worker --allow-external {external})"
    return None


def matches(
    requires: Mapping[str, Any],
    gpus: Sequence[Gpu],
    labels: Sequence[str] = (),
    offers: Mapping[str, Sequence[str]] | None = None,
) -> bool:
    return unmet(requires, gpus, labels, offers) is None
