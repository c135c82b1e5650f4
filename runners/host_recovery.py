"""What a dead specbench process on this host left behind: its servers, and its rows (issue 30 §8).

A SIGKILL runs no cleanup: `reap_servers` (at every command's start) stops servers whose watchdog died too;
`close_dead_owners` (on opening the database to write) marks its runs `partial`, its server rows `reaped`, and
ends its job's lease. Rows name their owner (bench.host.reaper.owner): only its host judges, not by pid alone.
"""

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
    """Mark this host's runs whose process is gone `partial`, their servers `reaped`; a line per change."""
    notes: list[str] = []
    # SQLite: the write lock before reading, so no resume slips in between; PostgreSQL: lock the rows we
    # judge, skipping those another process holds (a resume in flight).
    with engine.connect().execution_options(**{SQLITE_IMMEDIATE: True}) as conn:
        now = db_now(conn)
        runs = conn.execute(
            select(Run.id, Run.owner, Run.job_id)
            .where(Run.status == "running")
            .with_for_update(skip_locked=True)
        ).all()
        for run_id, owner, job_id in (r for r in runs if reaper.owner_gone(r.owner)):
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
        for si_id, run_id, owner in (s for s in servers if reaper.owner_gone(s.owner)):
            pid, host = owner["pid"], owner["host"]
            error = (
                f"its launcher (pid {pid} on {host}) died without stopping it; the server's watchdog or the "
                "reaper stopped it"
            )
            changed = conn.execute(
                update(ServerInstance)
                .where(ServerInstance.id == si_id, ServerInstance.stopped_at.is_(None))
                .values(status="reaped", stopped_at=now, error=error)
            ).rowcount
            if changed:
                notes.append(
                    f"server {si_id} of run {run_id}: its launcher (pid {pid}) is gone, closed as reaped"
                )
        conn.commit()
    return notes
