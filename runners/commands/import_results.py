"""`specbench import-results FILE.jsonl`: bench_serving `--output-file` results as an `imported` run.

A run per file, a point per line, the same bytes never twice; checked whole (issue 30 §7), one transaction.
"""

import functools
import hashlib
import math
from pathlib import Path
from typing import Annotated, Any

import typer
from sqlalchemy import select
from sqlalchemy.exc import SQLAlchemyError
from sqlalchemy.orm import Session

from bench.bench_serving_io import BenchServingFormatError, ResultLine, read_line
from db.engine import SQLITE_IMMEDIATE
from db.fingerprint import point_fingerprint
from db.models import Point, Run, Sample
from db.types import utcnow
from db.validate import RowProblem, check_row
from runners import dbretry
from runners.common import DbOption, check_text, console, fail, open_db
from runners.recovery import OutagePolicy

IMPORTED_BACKEND = "imported"
# The columns' widths (db/models.py: runs.sweep_name, runs.model, runs.gpu_name).
NAME_LENGTH, MODEL_LENGTH, GPU_LENGTH = 100, 500, 100
MAX_GPUS = 1024
# A results file is a line per run of bench_serving: kilobytes, megabytes with per-request details.
MAX_FILE_BYTES = 512 * 2**20


def import_results(
    file: Annotated[Path, typer.Argument(help="A bench_serving --output-file (JSON lines).")],
    db: DbOption = None,
    name: Annotated[
        str | None, typer.Option(help="Sweep name for the run. Default: the file's name.")
    ] = None,
    model: Annotated[
        str | None, typer.Option(help="Model, when the lines carry no server_info.model_path.")
    ] = None,
    gpu: Annotated[
        str, typer.Option(help="GPU the results were measured on (the file does not say).")
    ] = "none",
    gpu_count: Annotated[int, typer.Option(min=0, max=MAX_GPUS, help="Number of GPUs.")] = 0,
) -> None:
    """Import SGLang bench_serving results (JSONL) as a run, so they sit next to specbench's own.
    Every line is checked first: a field of the wrong type or out of range refuses the whole file, naming
    line and field."""
    check_text("--name", name, NAME_LENGTH)
    check_text("--model", model, MODEL_LENGTH)
    check_text("--gpu", gpu, GPU_LENGTH)
    if not file.is_file():  # a FIFO, a device or a directory is not a results file either
        fail(f"no file at {file}")
    if file.stat().st_size > MAX_FILE_BYTES:
        fail(f"{file}: larger than {MAX_FILE_BYTES // 2**20} MiB; not a bench_serving results file")
    raw = file.read_bytes()
    lines: list[tuple[int, ResultLine]] = []
    for n, text in enumerate(raw.decode(errors="replace").splitlines(), 1):
        if not text.strip():
            continue
        try:
            lines.append((n, read_line(text)))
        except BenchServingFormatError as exc:
            fail(f"{file}:{n}: {exc}; nothing imported")
    if not lines:
        fail(f"{file} holds no bench_serving result")
    digest = hashlib.sha256(raw).hexdigest()
    # A new row per use: the one checked here, and one per attempt of the transaction below.
    new_run = functools.partial(
        _run,
        lines,
        file=file,
        digest=digest,
        name=name or file.name,
        model=model,
        gpu=gpu,
        gpu_count=gpu_count,
    )
    run = new_run()
    points = [(n, _point_values(run, i, line)) for i, (n, line) in enumerate(lines)]
    try:  # everything is checked against its column before anything is written (PostgreSQL refuses mid-way)
        check_row(Run, _column_values(run), f"{file}: run ({_run_source(lines, model)})")
        for n, values in points:
            check_row(Point, values, f"{file}:{n}")
    except RowProblem as e:
        fail(f"{e}; nothing imported")
    engine = open_db(db)

    def store(s: Session) -> tuple[int, bool]:
        existing = s.scalars(
            select(Run.id).where(Run.backend == IMPORTED_BACKEND, Run.sweep_hash == digest).limit(1)
        ).first()
        if existing is not None:
            return int(existing), False
        new = new_run()
        s.add(new)
        s.flush()
        args: dict[str, Any] = {}
        for (_, line), (_, values) in zip(lines, points, strict=True):
            point = Point(**{**values, "run_id": new.id})
            s.add(point)
            s.flush()
            s.add(Sample(point_id=point.id, repeat=0, status="ok", **line.metrics))
            args[point.point_key] = {k: _json_safe(v) for k, v in line.args.items()}
        # bench_serving's arguments per point, for `export --format bench-serving-json` to write back.
        new.provenance = {**new.provenance, "bench_serving_args": args}
        new.status, new.finished_at = "done", utcnow()
        return int(new.id), True

    try:
        # One transaction, retried as a whole while the database is locked or away (as `run` waits).
        run_id, added = dbretry.in_session(
            engine.execution_options(**{SQLITE_IMMEDIATE: True}),
            store,
            what="importing results",
            policy=OutagePolicy.from_env(),
        )
    except dbretry.DatabaseUnavailable as e:
        fail(f"{e}; nothing imported")
    except SQLAlchemyError as e:  # what the checks above did not foresee: the transaction is undone
        fail(f"{file}: cannot import: {type(e).__name__}: {dbretry.short(e)}; nothing imported")
    if not added:
        console.print(f"{file} is already imported as run {run_id}; nothing to do", soft_wrap=True)
        return
    console.print(
        f"imported {len(lines)} bench_serving result(s) from {file} as run {run_id} (model {run.model}, imported)",
        soft_wrap=True,
    )


def _column_values(row: Any) -> dict[str, Any]:
    """An ORM object's column values that are set (defaults the database fills are left out)."""
    return {c.name: getattr(row, c.key) for c in row.__table__.columns if getattr(row, c.key) is not None}


def _run_source(lines: list[tuple[int, ResultLine]], model: str | None) -> str:
    """Where the run's model and versions come from: --model, or the first line with a server_info."""
    n = next((n for n, ln in lines if ln.server), None)
    return f"server_info of line {n}" if n is not None and model is None else "the command line"


def _run(
    lines: list[tuple[int, ResultLine]],
    *,
    file: Path,
    digest: str,
    name: str,
    model: str | None,
    gpu: str,
    gpu_count: int,
) -> Run:
    server = next((ln.server for _, ln in lines if ln.server), {})
    backends = sorted({str(ln.args.get("backend")) for _, ln in lines if ln.args.get("backend")})
    return Run(
        sweep_name=name[:NAME_LENGTH],
        sweep_yaml=f"# imported from bench_serving results: {file.name}\n",
        sweep_hash=digest,
        trigger="import",
        label=f"bench_serving {', '.join(backends) or '?'} results from {file.name}"[:200],
        backend=IMPORTED_BACKEND,
        status="running",
        model=model or str(server.get("model_path") or "unknown"),
        sglang_version=_str(server.get("version")),
        gpu_name=gpu,
        gpu_count=gpu_count,
        # The stand-in says so in its /server_info; bench_serving copies that into each line.
        simulated="specbench_sim" in server,
        provenance={
            "imported_from": str(file),
            "client": "sglang.bench_serving",
            "backends": backends,
            "sha256": digest,
        },
    )


def _point_values(run: Run, index: int, line: ResultLine) -> dict[str, Any]:
    """The columns of the point one result line becomes (all but run_id, which the run gets on insert)."""
    srv = line.server
    algorithm = _str(srv.get("speculative_algorithm"))
    steps = _int(srv.get("speculative_num_steps")) if algorithm else None
    topk = _int(srv.get("speculative_eagle_topk")) if algorithm else None
    draft_tokens = _int(srv.get("speculative_num_draft_tokens")) if algorithm else None
    backend = _str(srv.get("attention_backend")) or "unknown"
    tp = _int(srv.get("tp_size")) or 1
    batch_size = line.batch_size or 0  # 0: the line ran at a request rate, not a fixed concurrency
    dataset = str(line.args.get("dataset_name") or "unknown")[:16]
    workload_key = f"{dataset}:bench_serving:in{line.input_len}:out{line.output_len}"
    # The series key, as a sweep's points have it (PointPlan.series): identity columns and fingerprint.
    series: dict[str, Any] = {
        "model": run.model,
        "draft_model": None,
        "attention_backend": backend,
        "tp": tp,
        "algorithm": algorithm,
        "steps": steps,
        "topk": topk,
        "draft_tokens": draft_tokens,
        "spec_mode": None,
        "batch_size": batch_size,
        "workload_key": workload_key,
        "gpu_name": run.gpu_name,
        "gpu_count": run.gpu_count,
    }
    return {
        "point_key": f"imported:{index}:bs{batch_size}:{workload_key}"[:300],
        "fingerprint": point_fingerprint(**series),
        "status": "ok",
        "reason": None,
        "dataset": dataset,
        "input_len": line.input_len,
        "output_len": line.output_len,
        "num_prompts": line.completed,
        "repeats": 1,
        "repeats_planned": 1,
        **series,
        **line.metrics,
    }


def _json_safe(v: Any) -> Any:
    """request_rate inf is `Infinity` in bench_serving's file; PostgreSQL's JSON refuses it: kept as text."""
    if isinstance(v, float) and not math.isfinite(v):
        return str(v)
    return v


def _str(v: Any) -> str | None:
    return None if v is None else str(v)


def _int(v: Any) -> int | None:
    return v if isinstance(v, int) and not isinstance(v, bool) else None
