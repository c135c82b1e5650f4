"""Jobs: the queue, the workers with their last heartbeat, failed jobs with why they failed, the schedules."""

from datetime import datetime
from typing import Any

import pandas as pd
import streamlit as st

from analysis import md
from analysis.jobs import next_fire, why_waiting
from bench.sweep import SweepError, parse_sweep
from dashboard.components import layout
from dashboard.services import data
from db import queue_queries as qq

url = data.db_url()
st.title("Jobs")
st.caption("Sweeps queued with `specbench submit` or a schedule, and the workers that run them.")

try:
    engine = data.engine(url)
    ready = data.has_schema(url)
except Exception as e:  # an unreachable server or a bad URL: say so on the page instead of a traceback
    st.error(f"Cannot read the database {md.text(data.shown_url(url))}: {type(e).__name__}: {md.text(e)}")
    st.stop()
if not ready:
    st.info(f"{md.text(data.shown_url(url))} has no tables yet: run `specbench db upgrade --db URL`.")
    st.stop()
layout.synthetic_banner(url)

st.button("Refresh", icon=":material/refresh:", key="jobs_refresh")
now = qq.database_now(engine)
counts = qq.status_counts(engine)
workers = qq.workers(engine, now=now)
jobs = qq.queue_jobs(engine, limit=200)
failed = qq.failed_jobs(engine, limit=50)


def _age(seconds: float | None) -> str:
    if seconds is None:
        return "never"
    if seconds < 120:
        return f"{seconds:.0f} s ago"
    if seconds < 7200:
        return f"{seconds / 60:.0f} min ago"
    return f"{seconds / 3600:.1f} h ago"


def _sweep_name(text: str) -> str:
    try:
        return parse_sweep(text).name
    except SweepError:
        return "(a sweep that no longer validates)"


def _next_fire(cron: str, now: datetime) -> datetime | None:
    try:
        return next_fire(cron, now)
    except (ValueError, KeyError, OverflowError):  # a cron edited in the database: `schedule list` says why
        return None


def _requires(req: dict[str, Any] | None) -> str:
    return (
        ", ".join(f"{k}={'+'.join(v) if isinstance(v, list) else v}" for k, v in (req or {}).items()) or "any"
    )


def _cell(value: Any) -> Any:
    """What a table cell shows: nothing for no value (not "None"), a time as UTC text to the second."""
    if value is None:
        return ""
    if isinstance(value, datetime):
        return f"{value:%Y-%m-%d %H:%M:%S}"
    return value


# What every table of jobs starts with (field: header).
_JOB = {"id": "job", "status": "status", "sweep_name": "sweep", "label": "label"}


def _table(rows: list[dict[str, Any]], columns: dict[str, str], key: str) -> None:
    """`rows` as a table of `columns` (field: header)."""
    frame = pd.DataFrame(
        [{label: _cell(r.get(k)) for k, label in columns.items()} for r in rows],
        columns=list(columns.values()),
    )
    st.dataframe(frame, hide_index=True, width="stretch", key=key)


c1, c2, c3, c4, c5 = st.columns(5)
c1.metric("Queued", counts.get("queued", 0))
c2.metric("Running", counts.get("claimed", 0) + counts.get("running", 0))
c3.metric("Done", counts.get("done", 0))
c4.metric("Failed", counts.get("failed", 0))
c5.metric("Workers alive", sum(1 for w in workers if w["state"] in ("idle", "busy")))

st.subheader("Queue", anchor="queue")
waiting = [j for j in jobs if j["status"] in ("queued", "claimed", "running")]
if waiting:
    for j in waiting:
        j["requires_text"] = _requires(j["requires"])
        j["attempts_text"] = f"{j['attempts']}/{j['max_attempts']}"
        # The same words as `specbench jobs`: a backoff, no worker, no worker that fits, or all busy.
        j["waiting"] = (
            why_waiting(j["requires"] or {}, j["not_before"], workers, now) if j["status"] == "queued" else ""
        )
    _table(
        waiting,
        {
            **_JOB,
            "priority": "priority",
            "requires_text": "requires",
            "attempts_text": "attempts",
            "worker_id": "worker",
            "run_id": "run",
            "waiting": "waits because",
            "created_at": "submitted",
        },
        "jobs_queue",
    )
else:
    st.info(
        "Nothing queued or running. Queue a sweep with `specbench submit SWEEP.yaml`.",
        icon=":material/inbox:",
    )

st.subheader("Workers", anchor="workers")
if workers:
    for w in workers:
        w["heartbeat"] = _age(w["heartbeat_age_s"])
        w["gpus"] = f"{w['gpu_count']} x {w['gpu_name']}" if w["gpu_count"] else "none"
    _table(
        workers,
        {
            "id": "worker",
            "host": "host",
            "state": "state",
            "gpus": "gpus",
            "current_job_id": "job",
            "current_sweep": "sweep",
            "heartbeat": "last heartbeat",
            "last_heartbeat": "heartbeat at",
        },
        "jobs_workers",
    )
    lost = [w["id"] for w in workers if w["state"] == "lost"]
    if lost:
        st.warning(
            f"No heartbeat for a while from {', '.join(map(md.text, lost))}: killed or cut off. Their jobs go back to the "
            "queue when their leases expire.",
            icon=":material/heart_broken:",
        )
else:
    st.info("No worker has registered. Start one on a GPU host: `specbench worker --db URL`.")

st.subheader("Failed jobs", anchor="failed")
if failed:
    _table(
        failed,
        {
            **_JOB,
            "attempts": "attempts",
            "run_id": "run",
            "finished_at": "finished",
            "last_error": "last error",
        },
        "jobs_failed",
    )
    for j in failed[:20]:
        title = f"job {j['id']} · {md.text(j['sweep_name'])} · {md.text(j['status'])} after {j['attempts']} attempt(s)"
        with st.expander(title):
            # Plain text, not st.code: that loads a syntax highlighter (1.5 MB) the page does not need.
            st.text(j["last_error"] or "(no error recorded)")
else:
    st.success("No failed jobs.", icon=":material/check_circle:")

st.subheader("Schedules", anchor="schedules")
st.caption(
    "Sweeps on a cron schedule (UTC), added with `specbench schedule add`; `specbench scheduler` fires them."
)
scheduled = qq.schedules(engine)
if scheduled:
    for r in scheduled:
        r["sweep"] = r["sweep_path"] or _sweep_name(r["sweep_yaml"])
        r["requires_text"] = _requires(r["requires"])
        r["state"] = "broken" if r["broken"] else "enabled" if r["enabled"] else "disabled"
        r["last_fire"] = r["last_fire_time"] or "never"  # nothing fired yet
        r["next_fire"] = _next_fire(r["cron"], now) if r["enabled"] and not r["broken"] else None
    _table(
        scheduled,
        {
            "id": "schedule",
            "cron": "cron (UTC)",
            "sweep": "sweep",
            "label": "label",
            "requires_text": "requires",
            "priority": "priority",
            "state": "state",
            "last_fire": "last fire",
            "next_fire": "next fire",
        },
        "jobs_schedules",
    )
    for r in scheduled:
        if r["broken"]:
            st.warning(
                f"Schedule {r['id']} is broken and skipped until mended: {md.text(r['broken'])}",
                icon=":material/event_busy:",
            )
else:
    st.info("No schedule. Add one: `specbench schedule add SWEEP.yaml --cron '0 2 * * *'`.")

finished = [j for j in jobs if j["status"] in ("done", "canceled")][:20]
if finished:
    st.subheader("Recently finished", anchor="finished")
    _table(
        finished,
        {**_JOB, "trigger": "trigger", "attempts": "attempts", "run_id": "run", "finished_at": "finished"},
        "jobs_finished",
    )
