"""The workers table: who is up, on which GPUs, doing what (the Jobs page and `specbench jobs workers`)."""

import socket
from collections.abc import Mapping, Sequence

from sqlalchemy import Engine, insert, update

from db.models import Worker
from runners.gpus import Gpu
from runners.job_states import db_now


def register_worker(
    engine: Engine,
    worker_id: str,
    *,
    pid: int,
    gpus: Sequence[Gpu],
    labels: Sequence[str],
    offers: Mapping[str, Sequence[str]] | None = None,
) -> None:
    names = sorted({g.name for g in gpus})
    with engine.begin() as conn:
        conn.execute(
            insert(Worker).values(
                id=worker_id,
                host=socket.gethostname(),
                pid=pid,
                gpus=[{"index": g.index, "name": g.name} for g in gpus],
                gpu_name=", ".join(names) if names else "none",
                gpu_count=len(gpus),
                labels=list(labels),
                offers={k: list(v) for k, v in (offers or {}).items()},
                status="idle",
                current_job_id=None,
                last_heartbeat=db_now(conn),
            )
        )


def worker_heartbeat(engine: Engine, worker_id: str, *, status: str, job_id: int | None) -> None:
    with engine.begin() as conn:
        conn.execute(
            update(Worker)
            .where(Worker.id == worker_id)
            .values(last_heartbeat=db_now(conn), status=status, current_job_id=job_id)
        )


def deregister_worker(engine: Engine, worker_id: str) -> None:
    worker_heartbeat(engine, worker_id, status="stopped", job_id=None)
