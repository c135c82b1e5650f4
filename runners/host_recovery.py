"""What a dead specbench process on this host left behind: its servers, and its rows (issue 30 §8).

A `specbench run` or worker killed with SIGKILL (or by the OOM killer, or a power cut) runs no cleanup:
  * its servers: their watchdogs take them down; should a watchdog have died too, `reap_servers` (run when any
    specbench command starts on the host, runners/cli.py) stops them (bench/host/reaper.py);
  * its rows: the run stays `running`, the servers' rows stay `ok` with no `stopped_at`. `close_dead_owners`
    (run when a specbench command opens the database for writing, runners/common.open_db) marks such a run
    `partial` ("interrupted") and closes such a server row as `reaped`; the queued job such a run belonged to
    has its lease end now (a worker runs its job in its own process, so the job's holder is gone too), so the
    next worker takes it at once instead of after the lease. A row names its owner (host, pid
    namespace, pid and start time, bench.host.reaper.owner), so only the host that ran it judges it, and a
    recycled pid is never taken for the owner.

A run resumed meanwhile by a live process names that process, and is left alone: the check and the resume
both write the run row, the check only where the row still names the dead owner.
"""

from __future__ import annotations

from collections.abc import Callable

from sqlalchemy import Engine, select, update

from bench.host import reaper
from db.engine import SQLITE_IMMEDIATE
from db.models import Job, Run, ServerInstance
from runners.job_states import ACTIVE, db_now

# Server rows that are open: the launcher would have set stopped_at and another status when it stopped them.
OPEN_SERVER_STATUSES = ("ok", "starting")


def reap_servers(report: Callable[[str], None]) -> None:
    """Stop servers on this host whose launcher is gone and whose watchdog died with it."""
    for pgid in reaper.reap_orphans():
        report(f"stopped server process group {pgid} left by a dead launcher")


def close_dead_owners(engine: Engine) -> list[str]:
    """Mark this host's runs whose process is gone `partial` and close their servers' rows as `reaped`;
    one line per row changed, for the user."""
    notes: list[str] = []
    # SQLite: take the write lock before reading, so a resume cannot slip between our read and our write.
    # PostgreSQL: lock the rows we judge; one another process holds (a resume in flight) is skipped.
    with engine.connect().execution_options(**{SQLITE_IMMEDIATE: True}) as conn:
        now = db_now(conn)
        runs = conn.execute(
            select(Run.id, Run.owner, Run.job_id)
            .where(Run.status == "running")
            .with_for_update(skip_locked=True)
        ).all()
        for run_id, owner, job_id in runs:
            if not reaper.owner_gone(owner):
                continue
            pid, host = owner["pid"], owner["host"]
            error = (
                f"interrupted: the specbench process running it (pid {pid} on {host}) is gone (killed or "
                f"crashed); resume it with specbench run SWEEP --resume-run {run_id}"
            )
            changed = conn.execute(
                update(Run)
                .where(Run.id == run_id, Run.status == "running")
                .values(status="partial", finished_at=now, error=error)
            ).rowcount
            if changed:
                notes.append(
                    f"run {run_id} was left running by pid {pid} on {host}, now gone: marked partial"
                )
            if changed and job_id is not None:
                lapsed = conn.execute(
                    update(Job)
                    .where(Job.id == job_id, Job.status.in_(ACTIVE), Job.lease_expires_at > now)
                    .values(lease_expires_at=now)
                ).rowcount
                if lapsed:
                    notes.append(f"job {job_id}: its worker is gone with run {run_id}; its lease ends now")
        servers = conn.execute(
            select(ServerInstance.id, ServerInstance.run_id, ServerInstance.owner)
            .where(ServerInstance.status.in_(OPEN_SERVER_STATUSES), ServerInstance.stopped_at.is_(None))
            .with_for_update(skip_locked=True)
        ).all()
        for si_id, run_id, owner in servers:
            if not reaper.owner_gone(owner):
                continue
            pid, host = owner["pid"], owner["host"]
            changed = conn.execute(
                update(ServerInstance)
                .where(ServerInstance.id == si_id, ServerInstance.stopped_at.is_(None))
                .values(
                    status="reaped",
                    stopped_at=now,
                    error=(
                        f"its launcher (pid {pid} on {host}) died without stopping it; the server's watchdog or "
                        "the reaper stopped it"
                    ),
                )
            ).rowcount
            if changed:
                notes.append(
                    f"server {si_id} of run {run_id}: its launcher (pid {pid}) is gone, closed as reaped"
                )
        conn.commit()
    return notes
