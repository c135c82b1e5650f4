"""`specbench export --format bench-serving-json`: points as bench_serving `--output-file` lines.

Each catalogue metric with a bench_serving key (`median_ttft_ms`, `p99_itl_ms`, ...) goes under it, with
bench_serving's argument keys: diffable against a bench_serving run, read back by `specbench import-results`.
specbench's own points say `backend: specbench` (closed loop: `request_rate` inf, `max_concurrency` = batch
size, `random_range_ratio` 1); imported points give back their file's arguments.
"""

from typing import Any

from sqlalchemy import select
from sqlalchemy.orm import Session

from analysis.labels import config_label, run_kind
from bench import catalog
from bench.bench_serving_io import to_line
from db.models import Point, Run

_METRIC_FIELDS = tuple(m.name for m in catalog.METRICS if m.bench_serving)
_IDENTITY = (
    *("id", "run_id", "point_key", "status", "batch_size", "algorithm", "steps", "topk", "spec_mode"),
    *("dataset", "input_len", "output_len"),
)


def bench_serving_lines(session: Session, run_ids: list[int], *, all_status: bool = False) -> list[str]:
    runs = {r.id: r for r in session.scalars(select(Run).where(Run.id.in_(run_ids)))}
    cols = [getattr(Point, c) for c in (*_IDENTITY, *_METRIC_FIELDS)]
    q = select(*cols).where(Point.run_id.in_(run_ids)).order_by(Point.run_id, Point.id)
    if not all_status:
        q = q.where(Point.status == "ok")
    out = []
    for values in session.connection().execute(q):
        row = dict(zip((*_IDENTITY, *_METRIC_FIELDS), values, strict=True))
        run = runs[row["run_id"]]
        saved = (run.provenance or {}).get("bench_serving_args", {}).get(row["point_key"])
        args: dict[str, Any] = dict(saved) if saved else _native_args(row)
        if isinstance(args.get("request_rate"), str):
            args["request_rate"] = float(args["request_rate"])  # "inf" was stored as text
        extra = {
            "specbench": {
                "run_id": row["run_id"],
                "point_id": row["id"],
                "status": row["status"],
                "config": config_label(row),
                "simulated": bool(run.simulated),
                "kind": run_kind(run.simulated, run.trigger),
            }
        }
        out.append(to_line({k: row[k] for k in _METRIC_FIELDS}, args, extra))
    return out


def _native_args(row: dict[str, Any]) -> dict[str, Any]:
    return {
        "tag": f"specbench run {row['run_id']}: {config_label(row)}",
        "backend": "specbench",
        "dataset_name": row["dataset"],
        "request_rate": float("inf"),
        "max_concurrency": row["batch_size"],
        "sharegpt_output_len": None,
        "random_input_len": row["input_len"],
        "random_output_len": row["output_len"],
        "random_range_ratio": 1.0,
    }
