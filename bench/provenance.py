"""Where a run's numbers came from: software versions, GPU, host, specbench checkout and model identity.

Every probe is cheap and cannot fail the run: versions from installed metadata (nothing imports sglang or CUDA
kernels), commands as argv with a timeout, `torch.version.cuda` read from its file; torch is imported only for
the GPU fallback without nvidia-smi. A CPU-only box reports GPU "none", count 0. Keys with a `runs` column are
db.models.PROVENANCE_COLUMNS plus `simulated`; the rest lands in runs.provenance (JSON)."""

import ast
import hashlib
import importlib.util
import json
import os
import platform
import shutil
import socket
import subprocess
from collections.abc import Mapping, Sequence
from importlib import metadata
from pathlib import Path
from typing import Any

from bench.files import FileReadError, read_regular_file
from bench.host.cpu_affinity import parse_cpu_list
from bench.host.gpus import assigned_gpus, describe
from bench.model_config import MAX_CONFIG_BYTES, SYNTH_MANIFEST, model_shape

NONE = "none"  # an absent package or GPU; versions stay strings so columns never mix types
SPECBENCH_FALLBACK_VERSION = "0.1.0"
COMMIT_ENV = "SPECBENCH_GIT_COMMIT"  # for checkouts copied without .git (e.g. the lent GPU machine)

_SGL_KERNEL_DISTS = ("sglang-kernel", "sgl-kernel")  # renamed upstream; either may be installed
_FLASH_MLA_DIST = "sgl-flash-mla"  # later sglang releases ship FlashMLA separately
_CMD_TIMEOUT_S = 10.0

# `model_shape` (bench.model_config.model_shape) is the one nested value.
Provenance = dict[str, str | int | dict[str, Any] | None]


def _dist(name: str) -> metadata.Distribution | None:
    try:
        return metadata.distribution(name)
    except metadata.PackageNotFoundError:
        return None


def package_version(*names: str) -> str:
    """Version of the first installed distribution among `names`, else "none"."""
    for name in names:
        if (d := _dist(name)) is not None:
            return str(d.version)
    return NONE


def vcs_commit(name: str) -> str | None:
    """The commit a distribution was installed from (pip writes it for VCS and local git installs)."""
    d = _dist(name)
    raw = d.read_text("direct_url.json") if d is not None else None
    if not raw:
        return None
    try:
        commit = json.loads(raw).get("vcs_info", {}).get("commit_id")
    except (ValueError, AttributeError):
        return None
    return str(commit) if commit else None


def flash_mla_source() -> str:
    """FlashMLA's package: sgl_kernel.flash_mla (0.5.13.x) or sgl-flash-mla, from file lists."""
    if (version := package_version(_FLASH_MLA_DIST)) != NONE:
        return f"{_FLASH_MLA_DIST} {version}"
    for name in _SGL_KERNEL_DISTS:
        if (d := _dist(name)) is not None:
            has = d.files is None or any("flash_mla" in str(f) for f in d.files)  # no RECORD: trust it
            return f"{name} {d.version}" if has else NONE
    return NONE


def _run(argv: list[str], cwd: Path | None = None) -> str | None:
    """stdout of a command, or None when it is missing, fails or hangs."""
    if shutil.which(argv[0]) is None:
        return None
    try:
        proc = subprocess.run(
            argv, cwd=cwd, capture_output=True, text=True, timeout=_CMD_TIMEOUT_S, check=False
        )
    except (OSError, subprocess.SubprocessError):
        return None
    return proc.stdout if proc.returncode == 0 else None


def _torch_cuda_version() -> str:
    """`torch.version.cuda` from torch/version.py, without the import (over a second of CPU per process)."""
    try:
        spec = importlib.util.find_spec("torch")
        locations = list(spec.submodule_search_locations or []) if spec is not None else []
        for location in locations:
            source = Path(location, "version.py")
            if source.is_file():
                return _assigned_string(source.read_text(), "cuda") or NONE
    except (OSError, ImportError, ValueError, SyntaxError):  # torch absent or broken: never fail the run
        pass
    return NONE


def _assigned_string(source: str, name: str) -> str | None:
    """The string literal a module assigns to `name` at top level (`cuda: Optional[str] = '12.8'`), if any."""
    for node in ast.parse(source).body:
        match node:
            case (
                ast.Assign(targets=[ast.Name(id=target)], value=value)
                | ast.AnnAssign(target=ast.Name(id=target), value=value)
            ) if target == name:
                return (
                    value.value if isinstance(value, ast.Constant) and isinstance(value.value, str) else None
                )
    return None


def gpu_info(indices: Sequence[int] | None = None) -> tuple[str, int, str]:
    """(GPU name(s), count, driver) of the run's GPUs; ("none", 0, "none") without one."""
    return describe(assigned_gpus(indices))


def _specbench_root() -> Path:
    return Path(__file__).resolve().parent.parent


def git_commit() -> tuple[str | None, int | None]:
    """(HEAD of the specbench checkout, 1 if it has uncommitted changes to tracked files), or env/None."""
    root = _specbench_root()
    if (root / ".git").exists():  # an installed copy must not report some enclosing repository's HEAD
        head = _run(["git", "-C", str(root), "rev-parse", "HEAD"])
        if head and head.strip():
            status = _run(["git", "-C", str(root), "status", "--porcelain", "--untracked-files=no"])
            return head.strip(), (None if status is None else int(bool(status.strip())))
    env = os.environ.get(COMMIT_ENV, "").strip()
    return (env or None), None


_MODEL_KEYS = (
    "model_identity",
    "model_path",
    "model_architectures",
    "model_hash",
    "model_synth",
    "model_shape",
)


def model_info(model_path: str) -> Provenance:
    """Identity of a model: a local directory gets architectures + a content hash (config, index, weight names
    and sizes, a synthetic checkpoint's weights hash); anything else is an id."""
    path = Path(model_path).expanduser()
    if not os.path.isdir(path) or (config_bytes := _checkpoint_file(path / "config.json")) is None:
        return {**dict.fromkeys(_MODEL_KEYS), "model_identity": model_path[:200], "model_path": model_path}
    try:
        cfg = json.loads(config_bytes)
        archs = cfg.get("architectures") or []
    except (ValueError, AttributeError, RecursionError):
        cfg, archs = None, []
    arch = ",".join(str(a) for a in archs) or "unknown"
    parts = [config_bytes]
    parts += [_checkpoint_file(index) or b"" for index in sorted(path.glob("*.safetensors.index.json"))]
    for weights in sorted(path.glob("*.safetensors")):
        parts.append(f"{weights.name}:{weights.stat().st_size}".encode())
    synth = _synth_summary(path)
    if synth is not None and synth[1]:  # a preset has no weights hash: its identity stays its config's
        parts.append(synth[1].encode())
    digest = hashlib.sha256(b"".join(len(p).to_bytes(8, "little") + p for p in parts)).hexdigest()[:16]
    return {
        "model_identity": f"{arch}@{digest}"[:200],
        "model_path": str(path),
        "model_architectures": arch,
        "model_hash": digest,
        "model_synth": synth[0] if synth is not None else None,
        # What a step computes (widths, depth, experts, dtype): how a shard run and its TP-N run are paired.
        "model_shape": model_shape(cfg) if isinstance(cfg, dict) else None,
    }


def _synth_summary(path: Path) -> tuple[str, str] | None:
    """(human summary, weights sha256) from a specbench synthetic checkpoint's manifest, if any."""
    if (raw := _checkpoint_file(path / SYNTH_MANIFEST)) is None:
        return None
    try:
        m = json.loads(raw)
        if "preset" in m:  # a config-only preset (synthetic/model/presets.py): no weights to hash
            tp = f" tp={m['tp']}" if "tp" in m else ""
            layers = (
                f"{m.get('layers')}/{m['published_layers']}" if "published_layers" in m else m.get("layers")
            )
            return f"preset {m['preset']} layers={layers}{tp}", ""
        sizes = m.get("sizes", {})
        summary = (
            f"{m['mode']} seed={m['seed']} hidden={sizes.get('hidden')} layers={sizes.get('layers')} "
            f"vocab={sizes.get('vocab')}"
        )
        return summary, str(m.get("sha256", {}).get("model.safetensors", ""))
    except (ValueError, KeyError, TypeError, AttributeError, RecursionError):
        return None


def _checkpoint_file(path: Path) -> bytes | None:
    """A checkpoint's JSON file, bounded and non-blocking (bench/files.py: a FIFO hung the run), or None."""
    try:
        return read_regular_file(path, MAX_CONFIG_BYTES, "a model file")
    except FileReadError:
        return None


def cpu_topology(
    sys_cpu: Path = Path("/sys/devices/system/cpu"), cpuinfo: Path = Path("/proc/cpuinfo")
) -> Provenance:
    """CPU model, logical CPUs and SMT siblings ("0,8 1,9 ..."): which recorded CPUs share a core
    (docs/results/2026-12-04-h200-v3-slice-grid-part2.md)."""
    groups: dict[str, int] = {}  # the kernel's sibling list -> its first CPU, to order them
    for f in sys_cpu.glob("cpu[0-9]*/topology/thread_siblings_list"):
        try:
            text = f.read_text(encoding="ascii").strip()
            groups[text] = parse_cpu_list(text)[0]
        except (OSError, ValueError):
            continue
    model = None
    try:
        for line in cpuinfo.read_text(encoding="utf-8", errors="replace").splitlines():
            key, _, value = line.partition(":")
            if key.strip() == "model name":
                model = value.strip()
                break
    except OSError:
        pass
    return {
        "cpu_model": model,
        "cpu_count": os.cpu_count(),
        "cpu_smt_groups": " ".join(sorted(groups, key=groups.__getitem__)) or None,
    }


def collect_provenance(
    model_path: str | None = None,
    server_info: Mapping[str, Any] | None = None,
    gpus: Sequence[int] | None = None,
) -> Provenance:
    """Everything a run records about where it ran; never raises on a missing GPU, tool or package. `gpus`:
    the run's GPU indices (name and count describe those: series identity). With `server_info`, the server's
    `version` wins over the local sglang and a `specbench_sim` key marks the run simulated."""
    gpu_name, gpu_count, driver = gpu_info(gpus)
    commit, dirty = git_commit()
    local_sglang = package_version("sglang")
    specbench = package_version("specbench")
    prov: Provenance = {
        "sglang_version": local_sglang,
        "sglang_version_source": "package" if local_sglang != NONE else NONE,
        "sglang_local_version": local_sglang,
        "sglang_commit": vcs_commit("sglang"),
        "sgl_kernel_version": package_version(*_SGL_KERNEL_DISTS),
        "flashinfer_version": package_version("flashinfer-python", "flashinfer"),
        "flash_mla_source": flash_mla_source(),
        "transformers_version": package_version("transformers"),
        "torch_version": package_version("torch"),
        "cuda_version": _torch_cuda_version(),
        "driver_version": driver,
        "gpu_name": gpu_name,
        "gpu_count": gpu_count,
        "host": socket.gethostname(),
        "python_version": platform.python_version(),
        "specbench_version": specbench if specbench != NONE else SPECBENCH_FALLBACK_VERSION,
        "git_commit": commit,
        "git_dirty": dirty,
        "simulated": False,
    }
    prov.update(cpu_topology())
    prov.update(model_info(model_path) if model_path is not None else dict.fromkeys(_MODEL_KEYS))
    if server_info:
        version = server_info.get("version")
        if isinstance(version, str) and version.strip():
            prov["sglang_version"] = version.strip()
            prov["sglang_version_source"] = "server_info"
        if (sim := server_info.get("specbench_sim")) is not None:
            prov["simulated"] = True
            if isinstance(sim, Mapping):
                # The GPUs the stand-in emulates (one per TP rank), apart from the host's (gpu_name/count).
                name, n = sim.get("gpu_name"), sim.get("gpu_count")
                prov["sim_gpu_name"] = None if name is None else str(name)
                prov["sim_gpu_count"] = n if isinstance(n, int) and not isinstance(n, bool) else None
    return prov
