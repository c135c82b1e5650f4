"""A run's points for PR discussions and spreadsheets: CSV with a `#` metadata header, JSON, Markdown."""

import csv
import io
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from sqlalchemy import Integer, String, select
from sqlalchemy.orm import Session

from analysis import correctness, md
from analysis.labels import SIMULATED, STAND_IN_TAG, SYNTHETIC_TAG, config_label, numbers_caption, run_kind
from analysis.plain import plain
from analysis.render import Column, Document, comment_value, md_table
from bench import catalog
from db.models import Point, Run, ServerInstance
from db.queries import RUN_COLUMNS, caption_facts

# One exported point: its identity, the catalogue's exported metrics (throughput with its interval), series.
_IDENTITY: tuple[str, ...] = (
    *("run_id", "point_id", "status", "reason", "batch_size", "algorithm", "steps", "topk", "draft_tokens"),
    *("spec_mode", "spec_mode_resolved", "server_instance", "attention_backend", "tp", "input_len"),
    *("output_len", "num_prompts"),
)
_INTERVAL: dict[str, tuple[str, ...]] = {
    "output_throughput": ("output_throughput_ci_low", "output_throughput_ci_high")
}
# What the numbers stand on: pinned acceptance, a dummy MoE's routing, the step's floor (bench/floor.py).
_BASIS: tuple[str, ...] = ("accept_length_pinned", "expert_routing", "step_floor_ms", "floor_fraction")
EXPORT_COLUMNS: tuple[str, ...] = (
    *_IDENTITY,
    *(col for name in catalog.EXPORTED for col in (name, *_INTERVAL.get(name, ()))),
    *_BASIS,
    "repeats",
    "fingerprint",
    # The correctness gate (docs/reference/correctness-gate.md): a `fail` row's speed is a wrong path's.
    *correctness.COLUMNS,
)
# A run as the export header describes it: what `db.queries` reads of a run, less the error text.
RUN_METADATA: tuple[str, ...] = tuple(c for c in RUN_COLUMNS if c != "error")


_SPECIAL = {"point_id": Point.id, "server_instance": ServerInstance.id}
_EXPORT_SELECT = tuple(
    _SPECIAL[c].label(c) if c in _SPECIAL else getattr(Point, c).label(c) for c in EXPORT_COLUMNS
)
# Each column typed as the schema types it; after the run id, the run's kind of numbers (labels.run_kind).
_TYPED: tuple[Column, ...] = tuple(
    Column(c.name, fmt="d" if isinstance(c.type, Integer) else "", text=isinstance(c.type, String))
    for c in _EXPORT_SELECT
)
VIEW: tuple[Column, ...] = (_TYPED[0], Column("kind", text=True), *_TYPED[1:])


class ExportError(LookupError):
    pass


@dataclass
class Export:
    runs: list[dict[str, Any]]
    rows: list[dict[str, Any]]
    all_status: bool


def collect(session: Session, run_ids: list[int] | None = None, *, all_status: bool = False) -> Export:
    """Points of the given runs (default: the latest run); only `ok` points unless `all_status`."""
    if not run_ids:
        latest = session.scalars(select(Run.id).order_by(Run.id.desc()).limit(1)).first()
        if latest is None:
            raise ExportError("the database holds no runs yet; run `specbench run SWEEP.yaml` first")
        run_ids = [latest]
    runs = list(session.scalars(select(Run).where(Run.id.in_(run_ids)).order_by(Run.id)))
    if missing := sorted(set(run_ids) - {r.id for r in runs}):
        raise ExportError(f"no run with id {', '.join(map(str, missing))}")
    # Row tuples, not ORM objects: at 100k points a mapped Point cost ~80 us a row, a tuple ~5 us.
    q = (
        select(*_EXPORT_SELECT)
        .outerjoin(ServerInstance, ServerInstance.id == Point.server_instance_id)
        .where(Point.run_id.in_(run_ids))
        .order_by(Point.run_id, Point.id)
    )
    if not all_status:
        q = q.where(Point.status == "ok")
    kinds = {r.id: run_kind(r.simulated, r.trigger) for r in runs}
    rows = [
        {**dict(zip(EXPORT_COLUMNS, values, strict=True)), "kind": kinds[values[0]]}
        for values in session.connection().execute(q)
    ]
    engine = session.get_bind()
    run_meta = []
    for r in runs:
        facts = caption_facts(engine, r.id)  # type: ignore[arg-type]  # a Session here is bound to an Engine
        run_meta.append(
            {
                **{k: plain(getattr(r, k)) for k in RUN_METADATA},
                "kind": kinds[r.id],
                "numbers": numbers_caption(facts) or None,
                "floor_note": facts.get("floor_note"),
                "sglang_patch": (r.provenance or {}).get("sglang_patch"),
            }
        )
    return Export(runs=run_meta, rows=rows, all_status=all_status)


def document(export: Export) -> Document:
    """The export in every format; the CSV starts with `#` lines that describe each run."""
    return Document(
        export.rows,
        VIEW,
        lambda: to_markdown(export),
        head={"runs": export.runs, "all_status": export.all_status},
        rows_key="points",
        preamble=_preamble(export),
    )


def _preamble(export: Export) -> tuple[str, ...]:
    lines: list[str] = []
    for run in export.runs:
        lines.append(f"# run {comment_value(run['id'])}")
        lines += [f"#   {k}: {comment_value(v)}" for k, v in run.items()]
    lines.append(
        f"# points: {'all statuses' if export.all_status else 'status ok only (--all-status for all)'}"
    )
    return tuple(lines)


def _interval(r: Mapping[str, Any]) -> str:
    lo, hi = r["output_throughput_ci_low"], r["output_throughput_ci_high"]
    return "-" if lo is None else f"{max(lo, 0):,.0f}-{hi:,.0f}"


_MD: tuple[Column, ...] = (
    Column("config", text=True, show=lambda r: md.text(config_label(r, with_batch=False))),
    Column("status", text=True),
    Column("batch_size", "bs", "d", missing="-"),
    Column(
        "output_throughput",
        "out tok/s",
        show=lambda r: correctness.speed_md(r["output_throughput"], r.get("correctness"), ",.0f"),
    ),
    Column("ci", "95% CI", show=_interval),
    *(
        Column(key, head, fmt, missing="-")
        for head, key, fmt in (
            ("accept len", "accept_length", ".2f"),
            ("TTFT p50 ms", "ttft_p50_ms", ".1f"),
            ("TTFT p99 ms", "ttft_p99_ms", ".1f"),
            ("TPOT p50 ms", "tpot_p50_ms", ".2f"),
            ("ITL p50 ms", "itl_p50_ms", ".2f"),
            ("E2E p50 ms", "e2e_p50_ms", ".0f"),
            ("floor ms", "step_floor_ms", ".2f"),
            ("floor frac", "floor_fraction", ".2f"),
        )
    ),
    Column("correctness", "check", show=lambda r: correctness.verdict_md(r["correctness"])),
)


_KIND_NOTES: dict[Any, str] = {
    SIMULATED: f" ({STAND_IN_TAG}: numbers from the stand-in server's model, not a GPU)",
    SYNTHETIC_TAG: " (synthetic load-test history, not a measurement)",
}


def to_markdown(export: Export) -> str:
    """A PR-ready table per run: provenance first, then one row per point grouped by server config."""
    out: list[str] = []
    for run in export.runs:
        sim = _KIND_NOTES.get(run.get("kind"), "")
        # Stored names and versions are user text: escaped or in code spans (analysis.md).
        out += [
            f"**Run {md.text(run['id'])}** {md.code(run['sweep_name'])}{sim}, {md.text(run['status'])}, "
            f"started {md.text(run['started_at'])}",
            "",
            md.text(
                f"GPU {run['gpu_name']} x{run['gpu_count']} (driver {run['driver_version']}, CUDA "
                f"{run['cuda_version']}), sglang {run['sglang_version']}{_patched(run)}, "
                f"sgl-kernel {run['sgl_kernel_version']}, "
                f"flashinfer {run['flashinfer_version']}, FlashMLA from {run['flash_mla_source']}, torch "
                f"{run['torch_version']},",
                line_start=True,
            )
            + f" model {md.code(run['model'])}, specbench {md.text(run['specbench_version'])} @ "
            + md.text(str(run["git_commit"])[:10]),
            "",
        ]
        if run.get("numbers"):
            out += [md.text(f"Numbers: {run['numbers']}.", line_start=True), ""]
        rows = [r for r in export.rows if r["run_id"] == run["id"]]
        failed = {
            config_label(r, with_batch=False): str(r.get("correctness_reason") or "")
            for r in rows
            if correctness.is_wrong(r.get("correctness"))
        }
        out += correctness.banner_md(list(failed.items()), f"run {run['id']}")
        out += [*md_table(rows, _MD), ""]
        if not (any(r.get("step_floor_ms") is not None for r in rows) or run.get("floor_note")):
            continue
        floor = (
            "floor: the least time one step (speculative: one cycle) can take, the bytes it must read over "
            "the GPU's memory bandwidth; floor frac = floor / measured step (TPOT, x tokens per verify for "
            "speculation); above 1 is impossible."
        )
        note = f" {run['floor_note']}." if run.get("floor_note") else ""
        out += [md.text(floor + note, line_start=True), ""]
    return "\n".join(out)


def _patched(run: dict[str, Any]) -> str:
    """ ", patched: NAME" when the run's SGLang carried a specbench patch (bench/server/sglang_patch.py)."""
    patch = run.get("sglang_patch")
    return f" (patched: {patch})" if patch not in (None, "none") else ""


def read_csv_rows(text: str) -> list[dict[str, str]]:
    """Parse an export back: the header is only the leading `#` (or quoted `"# ...`) lines, as a quoted value
    further down may hold a line starting with `#`."""
    lines = text.splitlines(keepends=True)
    start = next((i for i, line in enumerate(lines) if not line.startswith(("#", '"#'))), len(lines))
    return list(csv.DictReader(io.StringIO("".join(lines[start:]))))
