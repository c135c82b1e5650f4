"""`specbench jobs`: the queue, the workers with their heartbeats, and failed jobs with why they failed."""

from typing import Annotated, Any, Literal

import typer

from analysis.jobs import why_waiting
from analysis.render import json_text
from db import queue_queries
from runners import queue
from runners.common import MAX_ID, DbOption, console, fail, open_db
from runners.gpus import requires_text
from runners.tables import Column, print_rows

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
        Column("id", "right", cell=lambda r: str(r["id"])),
        Column("status", cell=lambda r: r["status"]),
        Column("sweep", cell=lambda r: r["sweep_name"]),
        Column("label", drop=3, cell=lambda r: r["label"] or ""),
        Column("prio", "right", drop=4, cell=lambda r: str(r["priority"])),
        Column("requires", drop=5, cell=lambda r: requires_text(r["requires"])),
        Column("attempts", "right", drop=2, cell=lambda r: f"{r['attempts']}/{r['max_attempts']}"),
        Column("worker", drop=2, cell=lambda r: r["worker_id"] or ""),
        Column("run", "right", cell=lambda r: str(r["run_id"] or "")),
        Column("why", drop=1, shrink=20, fold=True, cell=_why),
    ]
    print_rows(console, columns, rows, title="jobs")


def _why(job: dict[str, Any]) -> str:
    """A queued job: why it waits (and what its last attempt died of); a failed or canceled one: its error."""
    error = " ".join((job["last_error"] or "").split())
    if job["status"] == "queued":
        waits = job.get("waits") or ""
        return f"{waits}; last attempt: {error}" if error and waits else waits or error
    return error if job["status"] in ("failed", "canceled") else ""


def _workers_table(rows: list[dict[str, Any]]) -> None:
    columns = [
        Column("worker", cell=lambda r: r["id"]),
        Column("state", cell=lambda r: r["state"]),
        Column(
            "gpus", drop=1, cell=lambda r: f"{r['gpu_count']} x {r['gpu_name']}" if r["gpu_count"] else "none"
        ),
        Column("job", "right", cell=lambda r: str(r["current_job_id"] or "")),
        Column("last heartbeat", cell=_heartbeat),
    ]
    print_rows(console, columns, rows, title="workers")


def _heartbeat(worker: dict[str, Any]) -> str:
    return "-" if worker["heartbeat_age_s"] is None else f"{worker['heartbeat_age_s']:.0f} s ago"
