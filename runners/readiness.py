"""Would this sweep run here? `run --dry-run`'s checks of GPUs (count, type against tp), SGLang, the model and
the disk for logs and database. Nothing is run: SGLang's release is read from its files (preflight.py), the
GPUs from nvidia-smi or /proc, never from the sweep's interpreter or torch.

A `blocker` would stop the real run (exit 2): the dry run lists each and exits 2 too; a `warning` does not.
"""

import shutil
from collections import Counter
from dataclasses import dataclass
from pathlib import Path
from typing import Literal

from sqlalchemy.engine import make_url

from bench.host.gpus import Gpu, find_gpus, select_gpus, visible_indices
from bench.host.policy import HostPolicy
from bench.model_config import read_model_config
from bench.sweep import ServerGroup, SweepSpec
from db.engine import resolve_url
from runners import preflight

Level = Literal["ok", "warning", "blocker"]

# What a run writes besides its rows: a server's log, and one profiler trace (a few steps of a large model).
LOG_BYTES_PER_LAUNCH = 4 * 2**20
TRACE_BYTES = 64 * 2**20
STAND_IN_TRACE_BYTES = 64 * 2**10
# A stored request: its row, plus a chunk time and a token count per output token (JSON), from stored runs.
REQUEST_BYTES = 300
BYTES_PER_OUTPUT_TOKEN = 16
# A window runs past its prompt budget until measure.min_window_s: a margin for the requests it adds.
WINDOW_MARGIN = 4
# FlashMLA's kernels are built for Hopper (sm90) and Blackwell (sm100) GPUs.
FLASHMLA_GPUS = ("H100", "H800", "H200", "H20", "GH200", "B100", "B200", "GB200", "B300")


@dataclass(frozen=True)
class Finding:
    level: Level
    what: str  # GPUs, SGLang, model, disk, ...
    text: str

    def line(self) -> str:
        mark = {"ok": "ok  ", "warning": "warn", "blocker": "NO  "}[self.level]
        return f"  {mark} {self.what}: {self.text}"


def check(
    spec: SweepSpec,
    groups: list[ServerGroup],
    *,
    policy: HostPolicy,
    gpus: list[int] | None,
    log_dir: Path,
    db: str | None,
    detected: tuple[list[Gpu], str] | None = None,
) -> list[Finding]:
    """Every finding on whether `spec` would run on this host; `detected` (GPUs, their source): tests."""
    refused = policy.problems(spec)
    if refused:  # as the real run: the host's policy first and alone, nothing else is looked at
        return [Finding("blocker", "policy", p) for p in refused]
    # What the real run's preflight refuses (runners/preflight.py): every launch would fail the same way.
    out = [Finding("blocker", "launch", p) for p in preflight.problems(spec, policy, execute=False)]
    if spec.server.backend == "sglang":
        out += _sglang(spec)
        out += _model(spec, policy)
        out += _gpus(spec, groups, gpus, detected or find_gpus(torch=False))
    elif spec.server.backend == "sim":
        out.append(Finding("ok", "GPUs", "none needed: the stand-in server models them"))
    out += _disk(spec, groups, log_dir, db)
    return out


def _sglang(spec: SweepSpec) -> list[Finding]:
    version, where = preflight.launch_version(spec)
    if not where.startswith("installed"):
        return []  # preflight's problems say it is not installed, as the real run's check does
    return [
        Finding("ok", "SGLang", f"{version}, installed for the servers' interpreter (read from its files)")
    ]


def _model(spec: SweepSpec, policy: HostPolicy) -> list[Finding]:
    """A local model's folder must hold the config.json SGLang loads; a hub id comes from the hub's cache."""
    out = []
    for what, model in (("model", spec.model), ("draft model", spec.draft_model)):
        if not model:
            continue
        if not preflight.is_local(model):
            hub = "downloads allowed" if policy.hub_downloads else "offline: --allow-hub-downloads fetches it"
            out.append(Finding("warning", what, f"{model} is a Hugging Face id: the servers load it ({hub})"))
            continue
        folder = Path(model).expanduser()
        if not folder.exists():
            continue  # preflight's problems say so
        if read_model_config(folder) is None:
            out.append(
                Finding("blocker", what, f"{model} holds no readable config.json: SGLang cannot load it")
            )
        else:
            out.append(Finding("ok", what, f"{model}: config.json read"))
    return out


def _gpus(
    spec: SweepSpec, groups: list[ServerGroup], gpus: list[int] | None, detected: tuple[list[Gpu], str]
) -> list[Finding]:
    found, source = detected
    need = max((g.server.tp for g in groups), default=spec.server.tp)
    usable = select_gpus(found, gpus if gpus is not None else visible_indices())
    chosen = "--gpus" if gpus is not None else "CUDA_VISIBLE_DEVICES" if visible_indices() is not None else ""
    if not found:
        return [
            Finding("blocker", "GPUs", f"none found ({source} list none); the sweep's servers need {need}")
        ]
    kinds = Counter(g.name for g in usable)
    names = ", ".join(f"{n} x {name}" for name, n in kinds.items()) or "none"
    limit = f" of the {len(found)} found, as {chosen} picks them" if chosen else ""
    if len(usable) < need:
        out = [Finding("blocker", "GPUs", f"{names}{limit} ({source}); the sweep's tp {need} needs {need}")]
    else:
        out = [Finding("ok", "GPUs", f"{names}{limit} ({source}) for tp {need}")]
    unknown = [g for g in usable if g.name == "unknown"]
    if unknown:
        out.append(Finding("warning", "GPUs", f"{len(unknown)} index(es) in {chosen} that were not found"))
    if spec.server.attention_backend == "flashmla":
        other = sorted({g.name for g in usable if g.name != "unknown" and not _flashmla_gpu(g.name)})
        if other:
            text = (
                f"FlashMLA's kernels are for Hopper and Blackwell GPUs ({', '.join(FLASHMLA_GPUS)}); "
                f"{', '.join(other)} is none of them as far as specbench knows"
            )
            out.append(Finding("warning", "GPUs", text))
    if len(kinds) > 1:
        out.append(Finding("warning", "GPUs", f"mixed GPU types ({names}): a TP group runs at its slowest"))
    return out


def _flashmla_gpu(name: str) -> bool:
    words = name.upper().replace("-", " ").split()
    return any(w in FLASHMLA_GPUS for w in words)


def needed_bytes(spec: SweepSpec, groups: list[ServerGroup]) -> int:
    """About what a run of `spec` writes: every window's requests (with a margin), logs, profiler traces."""
    rows = traces = 0
    for g in groups:
        for p in g.points:
            repeats = spec.max_pair_repeats if spec.repeats_may_grow(p) else p.repeats
            per_request = REQUEST_BYTES + BYTES_PER_OUTPUT_TOKEN * p.workload.output_len
            rows += repeats * p.num_prompts * per_request * WINDOW_MARGIN
            if spec.profile is not None and (spec.profile.at is None or p.batch_size in spec.profile.at):
                traces += 0 if g.server.is_baseline else g.server.tp
    # The stand-in's traces hold a few KiB: it draws a few events per step, not every kernel of a model.
    trace = TRACE_BYTES if spec.server.backend == "sglang" else STAND_IN_TRACE_BYTES
    return rows + len(groups) * LOG_BYTES_PER_LAUNCH + traces * trace


def _disk(spec: SweepSpec, groups: list[ServerGroup], log_dir: Path, db: str | None) -> list[Finding]:
    need = needed_bytes(spec, groups)
    # One line per file system: the logs and the database on one disk share its free space.
    places: dict[int, tuple[Path, list[str]]] = {}
    wanted = [(log_dir, f"server logs ({log_dir})")]
    database = _sqlite_folder(db)
    if database is not None:
        wanted.append((database[0], f"the database ({database[1]})"))
    for path, purpose in wanted:
        folder = _existing(path)
        places.setdefault(folder.stat().st_dev, (folder, []))[1].append(purpose)
    out = []
    for folder, what in places.values():
        try:
            free = shutil.disk_usage(folder).free
        except OSError as e:
            out.append(Finding("warning", "disk", f"cannot read the free space of {folder}: {e}"))
            continue
        text = f"{_size(free)} free for {' and '.join(what)}; the run writes about {_size(need)}"
        out.append(Finding("blocker" if free < need else "ok", "disk", text))
    if database is None:
        out.append(Finding("ok", "disk", "the database is on a server: its disk is not checked here"))
    return out


def _sqlite_folder(db: str | None) -> tuple[Path, str] | None:
    """The folder of the SQLite file `db` names (and the file); None for a server or in-memory database."""
    try:
        url = make_url(resolve_url(db))
    except Exception:  # a bad --db: the run's own open says why; nothing to check here
        return None
    if url.get_backend_name() != "sqlite" or not url.database or url.database == ":memory:":
        return None
    path = Path(url.database).expanduser()
    return path.parent, str(path)


def _existing(path: Path) -> Path:
    """`path`, or the nearest folder above it that exists (the run creates the rest)."""
    path = path.expanduser().absolute()
    while not path.exists() and path != path.parent:
        path = path.parent
    return path


def _size(n: float) -> str:
    if n < 2**20:
        return f"{n / 2**10:,.0f} KiB"
    return f"{n / 2**20:,.0f} MiB" if n < 2**30 else f"{n / 2**30:,.1f} GiB"
