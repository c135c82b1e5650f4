"""`specbench runs`: the stored runs, newest first, so their ids can be given to other verbs; `--yaml RUN`
prints the sweep one run started from."""

import sys
from typing import Annotated, Any, Literal

import pandas as pd
import typer
from rich.markup import escape
from sqlalchemy import Engine

from analysis.labels import none_if_nan, run_kind, short_gpu
from analysis.render import columns, csv_text, json_text
from analysis.run_counts import points_text
from analysis.text import printable
from bench.server.sglang_patch import is_patched
from db import queries as q
from runners.common import RUN_REF_HELP, DbOption, console, open_db_readonly, resolve_run_ref
from runners.tables import Column, print_table

JSON_FIELDS = (
    *("id", "uid", "name", "label", "status", "trigger", "backend", "simulated", "kind", "model", "gpu"),
    *("gpu_count", "sglang_version", "sglang_patch", "started", "finished", "points", "points_ok"),
    # How many invocations the run took and where they ran (runners/parts.py): a run grows across GPU hosts.
    *("parts", "hosts"),
)
VIEW = columns(
    JSON_FIELDS,
    ints=("id", "gpu_count", "points", "points_ok", "parts"),
    text=(
        *("uid", "name", "label", "status", "trigger", "backend", "kind", "model", "gpu"),
        *("sglang_version", "sglang_patch", "hosts"),
    ),
)


def runs(
    db: DbOption = None,
    format: Annotated[
        Literal["table", "csv", "json"], typer.Option("--format", help="table, csv or json")
    ] = "table",
    name: Annotated[str | None, typer.Option(help="Only sweeps whose name contains this.")] = None,
    gpu: Annotated[
        str | None, typer.Option(help="Only runs on a GPU whose name contains this (h200).")
    ] = None,
    status: Annotated[
        Literal["running", "done", "unstable", "partial", "failed"] | None,
        typer.Option(help="Only runs in this state."),
    ] = None,
    simulated: Annotated[
        bool | None,
        typer.Option(
            "--simulated/--real",
            help="Only simulated runs (stand-in server, synthetic history), or only real measurements.",
            show_default=False,
        ),
    ] = None,
    limit: Annotated[
        int | None, typer.Option(help="At most this many (newest first).", min=1, max=1_000_000)
    ] = None,
    yaml: Annotated[
        str | None,
        typer.Option(
            "--yaml",
            metavar="RUN",
            help=f"Print only the sweep YAML this run stored, exactly as stored ({RUN_REF_HELP}): "
            "`> sweep.yaml` gives the file that resumes it (`specbench run sweep.yaml --resume-run RUN`).",
            show_default=False,
        ),
    ] = None,
) -> None:
    """List runs newest first: id, sweep, GPU, simulated, status, start, points (ok out of planned) and, for a
    run measured in several parts, how many and on which hosts."""
    engine = open_db_readonly(db)
    if yaml is not None:
        _print_sweep_yaml(engine, yaml)
        return
    frame = q.list_runs(engine, name=name, gpu=gpu, status=status, simulated=simulated, limit=limit)
    parts = q.run_parts(engine, [int(i) for i in frame["id"]])
    records = [_record(r, parts[int(r["id"])]) for r in frame.to_dict("records")]
    if format == "json":
        typer.echo(json_text(records), nl=False)
    elif format == "csv":
        typer.echo(csv_text(records, VIEW), nl=False)
    else:
        _table(records, list(frame["sweep_yaml"]))


def _print_sweep_yaml(engine: Engine, ref: str) -> None:
    # As bytes, which echo writes untouched whatever the encoding: a redirect gives the text the run stored.
    # A terminal gets control characters escaped (a valid sweep holds none, but a stored row may).
    text: str = q.run_info(engine, resolve_run_ref(engine, ref))["sweep_yaml"]
    if sys.stdout.isatty():
        text = printable(text, multiline=True)
    typer.echo(text.encode(), nl=False)


def _iso(value: Any) -> str | None:
    if value is None or pd.isna(value):
        return None
    ts = pd.Timestamp(value)
    return (ts if ts.tzinfo is not None else ts.tz_localize("UTC")).isoformat()


def _hosts(parts: list[dict[str, Any]]) -> str | None:
    """The hosts a run's parts ran on, in order, each once (`gpu-a, gpu-b`); None before parts existed."""
    return ", ".join(dict.fromkeys(str(p["host"]) for p in parts)) or None


def _record(row: dict[str, Any], parts: list[dict[str, Any]]) -> dict[str, Any]:
    # pandas 3 keeps a text column's NULLs as NaN once the point counts are merged in: None again here, so
    # the table prints them empty and the JSON says null.
    text = {
        k: none_if_nan(row[k]) for k in ("label", "trigger", "backend", "model", "gpu_name", "sglang_version")
    }
    return {
        "id": int(row["id"]),
        "uid": row["uid"],
        "name": row["sweep_name"],
        "label": text["label"],
        "status": row["status"],
        "trigger": text["trigger"],
        "backend": text["backend"],
        "simulated": bool(row["simulated"]),
        "kind": run_kind(row["simulated"], text["trigger"]),
        "model": text["model"],
        "gpu": text["gpu_name"],
        "gpu_count": int(row["gpu_count"]),
        "sglang_version": text["sglang_version"],
        "sglang_patch": sglang_patch(row.get("provenance")),
        "started": _iso(row["started_at"]),
        "finished": _iso(row["finished_at"]),
        "points": int(row["points"]),
        "points_ok": int(row["points_ok"]),
        "parts": len(parts),
        "hosts": _hosts(parts),
    }


def sglang_patch(provenance: Any) -> str | None:
    """The patch the run's SGLang carried ("none": unpatched; None: not recorded, e.g. the stand-in)."""
    value = provenance.get("sglang_patch") if isinstance(provenance, dict) else None
    return str(value) if value is not None else None


def _table(records: list[dict[str, Any]], sweeps: list[str | None]) -> None:
    if not records:
        console.print("no runs match")
        return
    columns = [
        # The id is what every other verb takes: never cut, never left out.
        Column("id", "right"),
        Column("started (UTC)"),
        Column("name", shrink=14, middle=True),  # seeded names differ only at their end
        Column("status", markup=True),
        Column("gpu", shrink=7),
        Column("kind"),
        Column("points", "right", drop=1),
        Column("sglang", drop=2),
        Column("label", drop=3, shrink=10),
        Column("parts", drop=4, shrink=12),
    ]
    style = {"done": "green", "running": "cyan", "unstable": "yellow", "partial": "yellow", "failed": "red"}
    rows = [
        [
            str(r["id"]),
            (r["started"] or "")[:16].replace("T", " "),
            r["name"],
            f"[{style.get(r['status'], 'white')}]{escape(r['status'])}[/]",  # stored text: never markup
            short_gpu(r["gpu"], r["gpu_count"]) if r["gpu_count"] else "none",
            r["kind"],
            points_text(r["points_ok"], r["points"], y),
            (r["sglang_version"] or "?") + (" patched" if is_patched(r["sglang_patch"]) else ""),
            r["label"] or "",
            f"{r['parts']}: {r['hosts']}" if r["parts"] > 1 else "",
        ]
        for r, y in zip(records, sweeps, strict=True)
    ]
    if all(r["parts"] <= 1 for r in records):  # no run grew across hosts: the column would say nothing
        columns, rows = columns[:-1], [row[:-1] for row in rows]
    print_table(console, columns, rows)
