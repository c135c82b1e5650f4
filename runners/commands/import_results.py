"""`specbench import-results FILE.jsonl`: bench_serving `--output-file` results as an `imported` run.

One run per file, one point (with one repeat) per result line. The run is marked `backend: imported`,
`trigger: import`; points keep what the line knows: concurrency (the batch size), lengths, every metric the
catalogue maps, the server-reported accept length, and from `server_info` (when the line has one) the model,
attention backend, TP size and speculative settings. What the file does not know stays empty. A file
already imported (same bytes) is not imported twice.
"""

from __future__ import annotations

import hashlib
import math
from pathlib import Path
from typing import Annotated, Any

import typer
from sqlalchemy import select

from bench.bench_serving_io import BenchServingFormatError, ResultLine, read_line
from db.engine import session_scope
from db.fingerprint import point_fingerprint
from db.models import Point, Run, Sample
from db.types import utcnow
from runners.common import DbOption, console, fail, open_db

IMPORTED_BACKEND = "imported"


def register(app: typer.Typer) -> None:
    app.command("import-results")(import_results)


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
    gpu_count: Annotated[int, typer.Option(min=0, help="Number of GPUs.")] = 0,
) -> None:
    """Import SGLang bench_serving results (JSONL) as a run, so they sit next to specbench's own."""
    if not file.is_file():
        fail(f"no file at {file}")
    raw = file.read_bytes()
    lines: list[ResultLine] = []
    for n, text in enumerate(raw.decode(errors="replace").splitlines(), 1):
        if not text.strip():
            continue
        try:
            lines.append(read_line(text))
        except BenchServingFormatError as exc:
            fail(f"{file}:{n}: {exc}")
    if not lines:
        fail(f"{file} holds no bench_serving result")
    digest = hashlib.sha256(raw).hexdigest()
    engine = open_db(db)
    with session_scope(engine) as s:
        existing = s.scalars(
            select(Run.id).where(Run.backend == IMPORTED_BACKEND, Run.sweep_hash == digest).limit(1)
        ).first()
        if existing is not None:
            console.print(f"{file} is already imported as run {existing}; nothing to do", soft_wrap=True)
            return
        run = _run(
            lines, file=file, digest=digest, name=name or file.name, model=model, gpu=gpu, gpu_count=gpu_count
        )
        s.add(run)
        s.flush()
        args: dict[str, Any] = {}
        for i, line in enumerate(lines):
            args[_point(s, run, i, line)] = {k: _json_safe(v) for k, v in line.args.items()}
        # bench_serving's arguments per point, for `export --format bench-serving-json` to write back.
        run.provenance = {**run.provenance, "bench_serving_args": args}
        run.status = "done"
        run.finished_at = utcnow()
        run_id, model_name = run.id, run.model
    console.print(
        f"imported {len(lines)} bench_serving result(s) from {file} as run {run_id} (model {model_name}, imported)",
        soft_wrap=True,
    )


def _run(
    lines: list[ResultLine],
    *,
    file: Path,
    digest: str,
    name: str,
    model: str | None,
    gpu: str,
    gpu_count: int,
) -> Run:
    server = next((ln.server for ln in lines if ln.server), {})
    backends = sorted({str(ln.args.get("backend")) for ln in lines if ln.args.get("backend")})
    return Run(
        sweep_name=name[:100],
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


def _point(session: Any, run: Run, index: int, line: ResultLine) -> str:
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
    point = Point(
        run_id=run.id,
        point_key=f"imported:{index}:bs{batch_size}:{workload_key}"[:300],
        fingerprint=point_fingerprint(**series),
        status="ok",
        reason=None,
        dataset=dataset,
        input_len=line.input_len,
        output_len=line.output_len,
        num_prompts=line.completed,
        repeats=1,
        repeats_planned=1,
        **series,
        **line.metrics,
    )
    session.add(point)
    session.flush()
    session.add(Sample(point_id=point.id, repeat=0, status="ok", **line.metrics))
    return point.point_key


def _json_safe(v: Any) -> Any:
    """request_rate inf is `Infinity` in bench_serving's file, which PostgreSQL's JSON refuses: keep it as text."""
    if isinstance(v, float) and not math.isfinite(v):
        return str(v)
    return v


def _str(v: Any) -> str | None:
    return None if v is None else str(v)


def _int(v: Any) -> int | None:
    return v if isinstance(v, int) and not isinstance(v, bool) else None
