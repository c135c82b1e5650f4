"""`specbench scheduler`: enqueue due fire times of every schedule, exactly once however many run."""

import signal
import threading
from typing import Annotated

import typer

from runners.common import DbOption, OutageOption, fail, open_db
from runners.dbretry import DatabaseUnavailable
from runners.recovery import OutagePolicy, RecoveryPolicy
from runners.schedules import run_scheduler
from runners.terminal import log_to_stderr


def scheduler(
    db: DbOption = None,
    interval_s: Annotated[
        float, typer.Option("--interval-s", min=0.01, max=86_400.0, help="Seconds between ticks.")
    ] = 30.0,
    once: Annotated[
        bool, typer.Option("--once", help="One tick, then exit (cron-driven setups, tests).")
    ] = False,
    db_outage_limit_s: OutageOption = None,
) -> None:
    """Enqueue due scheduled sweeps (and requeue jobs of dead workers), until SIGTERM."""
    log_to_stderr()
    engine = open_db(db, ride_out_outage=OutagePolicy.from_env(db_outage_limit_s))
    stop = threading.Event()
    for sig in (signal.SIGTERM, signal.SIGINT):
        signal.signal(sig, lambda *_: stop.set())
    policy = RecoveryPolicy(outage=OutagePolicy.from_env(db_outage_limit_s))
    try:
        run_scheduler(engine, interval_s=interval_s, once=once, stop=stop, policy=policy)
    except DatabaseUnavailable as e:
        if not stop.is_set():
            fail(str(e))
    finally:
        engine.dispose()
