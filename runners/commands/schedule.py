"""`specbench schedule add|list|remove`: cron schedules (UTC) of sweeps; `specbench scheduler` fires them."""

from pathlib import Path
from typing import Annotated, Any, Literal

import typer
from rich.markup import escape

from analysis.render import json_text
from bench.sweep import SweepError, read_sweep_text
from runners import schedules
from runners.common import (
    MAX_ID,
    MAX_PRIORITY,
    DbOption,
    check_label,
    console,
    err_console,
    fail,
    failing,
    open_db,
)
from runners.gpus import requires_text
from runners.sweep_input import sweep_requirements
from runners.tables import Column, print_rows

schedule_app = typer.Typer(
    name="schedule",
    help="Sweeps on a cron schedule (UTC). Missed fire times: only the latest is enqueued.",
    no_args_is_help=True,
)


@schedule_app.command("add")
def add(
    sweep: Annotated[Path, typer.Argument(help="Sweep YAML; its text is stored with the schedule.")],
    cron: Annotated[
        str, typer.Option("--cron", help="Five-field cron in UTC, e.g. '0 2 * * *'; must fire within a year.")
    ],
    db: DbOption = None,
    label: Annotated[str | None, typer.Option(help="Label of each run, e.g. nightly.")] = None,
    requires: Annotated[str | None, typer.Option(help="As for submit: gpu=NAME,count=N,labels=a+b.")] = None,
    priority: Annotated[
        int, typer.Option(min=-MAX_PRIORITY, max=MAX_PRIORITY, help="Priority of the jobs it enqueues.")
    ] = 0,
) -> None:
    """Add a schedule. The sweep is validated now and stored; edit the file, then remove and re-add."""
    need = sweep_requirements(sweep, requires)
    with failing(ValueError):
        expr = schedules.check_cron(cron)
    engine = open_db(db)
    with failing(SweepError):
        sid = schedules.add_schedule(
            engine,
            expr,
            read_sweep_text(sweep),
            sweep_path=str(sweep),
            label=check_label(label),
            requires=need,
            priority=priority,
        )
    console.print(f"schedule {sid} added: {expr} (UTC)")


@schedule_app.command("list")
def list_(
    db: DbOption = None,
    format: Annotated[Literal["table", "json"], typer.Option("--format", help="table or json")] = "table",
) -> None:
    """List schedules with their last and next fire times."""
    rows = schedules.list_schedules(open_db(db))
    if format == "json":
        typer.echo(json_text(rows), nl=False)
        return
    columns = [
        Column("id", "right", cell=lambda r: str(r["id"])),
        Column("cron", cell=lambda r: str(r.get("cron") or "?")),
        Column("sweep", cell=lambda r: str(r.get("sweep") or "?")),
        Column("label", drop=2, cell=lambda r: str(r.get("label") or "")),
        Column("requires", drop=3, cell=lambda r: requires_text(r.get("requires"))),
        Column("priority", "right", drop=4, cell=lambda r: str(r.get("priority", ""))),
        Column(
            "state",
            cell=lambda r: "broken" if r.get("broken") else "enabled" if r.get("enabled") else "disabled",
        ),
        # Nothing fired yet: "never", not the time it was added.
        Column("last fire", drop=1, cell=lambda r: _ts(r.get("last_fire_time"), "never")),
        Column("next fire", cell=lambda r: _ts(r.get("next_fire_time"))),
    ]
    print_rows(console, columns, rows, title="schedules (UTC)")
    for r in rows:
        if r.get("broken"):
            # Why, in full: the scheduler skips it (and says so in its log) until it is mended.
            err_console.print(
                f"schedule {r['id']} is broken and skipped: {escape(str(r['broken']))}", soft_wrap=True
            )


@schedule_app.command("remove")
def remove(
    schedule_id: Annotated[int, typer.Argument(min=1, max=MAX_ID, help="Schedule id (see schedule list).")],
    db: DbOption = None,
) -> None:
    """Remove a schedule; the jobs it enqueued stay."""
    if not schedules.remove_schedule(open_db(db), schedule_id):
        fail(f"no schedule {schedule_id}")
    console.print(f"schedule {schedule_id} removed")


def _ts(value: Any, none: str = "-") -> str:
    return value.strftime("%Y-%m-%d %H:%M") if hasattr(value, "strftime") else none
