"""The chaos bench's verdicts: what the database and the processes' logs hold once the fleet has stopped."""

from __future__ import annotations

import re
import uuid
from collections import Counter
from collections.abc import Callable
from pathlib import Path
from typing import Any

from sqlalchemy import Engine, create_engine, func, select, text

from db.engine import resolve_url
from db.models import Job, Point, Run, Sample, ServerInstance

CLAIM = re.compile(r"job (\d+) claimed by (\S+) \(attempt (\d+)/\d+\)(?:; (\d+) earlier lease expiries)?")


def audit(engine: Engine, job_ids: list[int], repeats_per_job: int) -> dict[str, Any]:
    """What the database holds after the bench: jobs done, repeats lost or stored twice, lease expiries."""
    with engine.connect() as conn:
        runs_per_job = Counter(conn.execute(select(Run.job_id).where(Run.job_id.in_(job_ids))).scalars())
        point_keys = Counter(
            (r, k)
            for r, k in conn.execute(
                select(Point.run_id, Point.point_key)
                .join(Run, Run.id == Point.run_id)
                .where(Run.job_id.in_(job_ids))
            )
        )
        # Keyed by job, not run: a repeat stored under two runs of one job is a duplicate too.
        repeats = Counter(
            (j, k, n)
            for j, k, n in conn.execute(
                select(Run.job_id, Point.point_key, Sample.repeat)
                .join(Sample, Sample.point_id == Point.id)
                .join(Run, Run.id == Point.run_id)
                .where(Run.job_id.in_(job_ids), Sample.status != "failed")
            )
        )
        statuses = Counter(conn.execute(select(Job.status).where(Job.id.in_(job_ids))).scalars())
        run_statuses = Counter(conn.execute(select(Run.status).where(Run.job_id.in_(job_ids))).scalars())
        expiries = conn.execute(select(func.coalesce(func.sum(Job.lease_expiries), 0))).scalar_one()
        # A server killed mid-point is `crashed`; one killed while it started is `failed`: both keep why.
        crashed = conn.execute(
            select(func.count()).select_from(ServerInstance).where(
                ServerInstance.exit_code.is_not(None), ServerInstance.log_tail.is_not(None)
            )
        ).scalar_one()  # fmt: skip
    expected = len(job_ids) * repeats_per_job
    distinct = len(repeats)
    return {
        "jobs": len(job_ids),
        "jobs done": statuses.get("done", 0),
        "run statuses": dict(sorted(run_statuses.items())),  # `unstable` (noisy points) also finishes a job
        "repeats expected": expected,
        "repeats stored": distinct,
        "points lost": max(expected - distinct, 0),
        "points duplicated": sum(n - 1 for n in point_keys.values() if n > 1)
        + sum(n - 1 for n in repeats.values() if n > 1),
        "jobs with more than one run": sum(1 for n in runs_per_job.values() if n > 1),
        "lease expiries": int(expiries),
        "dead servers stored with exit code + log tail": int(crashed),
    }


def double_claims(logs: list[Path]) -> tuple[int, int]:
    """Claims, and claims of the same job state by two workers. A claim moves a job out of `queued` and bumps
    its attempts; an expiry or a failure moves it back; so (job, attempt, earlier expiries) names one claim.
    (A SIGTERM release also gives an attempt back; this bench sends SIGTERM only after the last claim.)"""
    seen: Counter[tuple[int, int, int]] = Counter()
    for log in logs:
        for m in CLAIM.finditer(log.read_text(errors="replace")):
            seen[(int(m[1]), int(m[3]), int(m[4] or 0))] += 1
    return sum(seen.values()), sum(n - 1 for n in seen.values() if n > 1)


def tracebacks(logs: list[Path]) -> int:
    return sum(log.read_text(errors="replace").count("Traceback") for log in logs)


def fresh_schema(base_url: str) -> tuple[str, Callable[[], None]]:
    base = resolve_url(base_url)
    schema = f"chaos_{uuid.uuid4().hex[:10]}"
    admin = create_engine(base, isolation_level="AUTOCOMMIT", pool_pre_ping=True)
    with admin.connect() as c:
        c.execute(text(f'CREATE SCHEMA "{schema}"'))  # a name we generated: hex only
    sep = "&" if "?" in base else "?"

    def drop() -> None:
        with admin.connect() as c:
            c.execute(text(f'DROP SCHEMA "{schema}" CASCADE'))
        admin.dispose()

    return f"{base}{sep}options=-csearch_path%3D{schema}", drop
