"""`specbench jobs`: the queue, the workers with their heartbeats, and failed jobs with why they failed."""

from __future__ import annotations

from typing import Annotated, Any, Literal

import typer

from analysis.jobs import why_waiting
from analysis.render import json_text
from db import queue_queries
from runners import queue
from runners.common import MAX_ID, DbOption, console, fail, open_db
from runners.tables import Column, print_table

_STATUSES = ("queued", "claimed", "running", "done", "failed", "canceled")


def jobs(
    db: DbOption = None,
    format: Annotated[Literal["table", "json"], typer.Option("--format", help="table or json")] = "table",
    status: Annotated[
        list[str] | None, typer.Option("--status", help="Only jobs in this state (repeatable).")
    ] = None,
    limit: Annotated[int, typer.Option(min=1, max=100_000, help="At most this many jobs.")] = 50,
    cancel: Annotated[
        int | None,
        typer.Option(
            "--cancel",
            min=1,
            max=MAX_ID,
            help="Cancel this job (a running one stops after its current point).",
        ),
    ] = None,
) -> None:
    """Show the job queue, the workers and their last heartbeat, and failed jobs."""
    for s in status or []:
        if s not in _STATUSES:
            fail(f"--status {s!r}: one of {', '.join(_STATUSES)}")
    engine = open_db(db)
    if cancel is not None:
        if not queue.cancel(engine, cancel):
            fail(f"job {cancel} is not queued or running (already finished, or no such job)")
        console.print(f"job {cancel} canceled")
        return
    rows = queue_queries.queue_jobs(engine, limit=limit, statuses=status)
    workers = queue_queries.workers(engine)
    counts = queue_queries.status_counts(engine)
    now = queue_queries.database_now(engine)
    for r in rows:
        queued = r["status"] == "queued"
        r["waits"] = why_waiting(r["requires"] or {}, r["not_before"], workers, now) if queued else None
    if format == "json":
        typer.echo(json_text({"counts": counts, "jobs": rows, "workers": workers}), nl=False)
        return
    console.print(" ".join(f"{s}: [bold]{counts.get(s, 0)}[/]" for s in _STATUSES))
    _jobs_table(rows)
    _workers_table(workers)


def _jobs_table(rows: list[dict[str, Any]]) -> None:
    columns = [
        Column("id", "right"),
        Column("status"),
        Column("sweep"),
        Column("label", drop=3),
        Column("prio", "right", drop=4),
        Column("requires", drop=5),
        Column("attempts", "right", drop=2),
        Column("worker", drop=2),
        Column("run", "right"),
        # Why a job waits or failed: wrapped rather than cut.
        Column("why", drop=1, shrink=20, fold=True),
    ]
    cells = [
        [
            str(r["id"]),
            r["status"],
            r["sweep_name"],
            r["label"] or "",
            str(r["priority"]),
            ",".join(f"{k}={v}" for k, v in (r["requires"] or {}).items()),
            f"{r['attempts']}/{r['max_attempts']}",
            r["worker_id"] or "",
            str(r["run_id"] or ""),
            _why(r),
        ]
        for r in rows
    ]
    print_table(console, columns, cells, title="jobs")


def _why(job: dict[str, Any]) -> str:
    """A queued job: why it waits (and what its last attempt died of); a failed or canceled one: its error."""
    error = " ".join((job["last_error"] or "").split())
    if job["status"] == "queued":
        waits = job.get("waits") or ""
        return f"{waits}; last attempt: {error}" if error and waits else waits or error
    return error if job["status"] in ("failed", "canceled") else ""


def _workers_table(rows: list[dict[str, Any]]) -> None:
    columns = [
        Column("worker"),
        Column("state"),
        Column("gpus", drop=1),
        Column("job", "right"),
        Column("last heartbeat"),
    ]
    cells = [
        [
            r["id"],
            r["state"],
            f"{r['gpu_count']} x {r['gpu_name']}" if r["gpu_count"] else "none",
            str(r["current_job_id"] or ""),
            "-" if r["heartbeat_age_s"] is None else f"{r['heartbeat_age_s']:.0f} s ago",
        ]
        for r in rows
    ]
    print_table(console, columns, cells, title="workers")
