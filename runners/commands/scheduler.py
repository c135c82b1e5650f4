"""`specbench scheduler`: enqueue due fire times of every schedule, exactly once however many run."""

from __future__ import annotations

import logging
import signal
import threading
from typing import Annotated, Any

import typer

from runners.common import DbOption, open_db
from runners.schedules import run_scheduler


def register(app: typer.Typer) -> None:
    app.command("scheduler")(scheduler)


def scheduler(
    db: DbOption = None,
    interval_s: Annotated[
        float, typer.Option("--interval-s", min=0.01, help="Seconds between ticks.")
    ] = 30.0,
    once: Annotated[
        bool, typer.Option("--once", help="One tick, then exit (cron-driven setups, tests).")
    ] = False,
) -> None:
    """Enqueue due scheduled sweeps (and requeue jobs of dead workers), until SIGTERM."""
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(name)s %(message)s")
    engine = open_db(db)
    stop = threading.Event()

    def handler(_signum: int, _frame: Any) -> None:
        stop.set()

    signal.signal(signal.SIGTERM, handler)
    signal.signal(signal.SIGINT, handler)
    try:
        run_scheduler(engine, interval_s=interval_s, once=once, stop=stop)
    finally:
        engine.dispose()
