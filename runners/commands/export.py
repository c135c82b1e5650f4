"""`specbench export`: a run's points (or a view) as a terminal table, CSV (`#` metadata header), JSON, md."""

import sys
from pathlib import Path
from typing import Annotated, Any, Literal, Protocol

import pandas as pd
import typer
from sqlalchemy import Engine

from analysis import spec_vs_baseline, tp_compare, v2_vs_v1, windows
from analysis.bench_serving_export import bench_serving_lines
from analysis.export import ExportError, collect, document
from analysis.labels import SIMULATED, SYNTHETIC_TAG, parts_line, run_kind
from analysis.plain import plain
from analysis.render import Document, Format, with_kind
from db import queries as q
from db.engine import session_scope
from db.models import Run
from runners import export_table
from runners.common import (
    RUN_REF_HELP,
    DbOption,
    console,
    err_console,
    fail,
    failing,
    open_db_readonly,
    resolve_run_ref,
    write_output,
)


def export(
    db: DbOption = None,
    run: Annotated[
        list[str] | None,
        typer.Option("--run", help=f"Run (repeatable): {RUN_REF_HELP}. Default: latest.", show_default=False),
    ] = None,
    all_runs: Annotated[
        bool, typer.Option("--all-runs", help="Every run in the database (oldest first).")
    ] = False,
    format: Annotated[
        Literal["table", "csv", "json", "md", "bench-serving-json"] | None,
        typer.Option(
            "--format",
            help="table (fits the terminal), csv, json, md (a PR-ready table) or bench-serving-json "
            "(bench_serving --output-file lines). Default: table on a terminal, csv when piped or written to "
            "--output.",
            show_default=False,
        ),
    ] = None,
    all_status: Annotated[
        bool, typer.Option("--all-status", help="Include failed, invalid, unstable and mode_mismatch points.")
    ] = False,
    output: Annotated[
        Path | None, typer.Option("--output", "-o", help="Write here instead of stdout.")
    ] = None,
    view: Annotated[
        Literal["points", "v2-vs-v1", "spec-vs-baseline", "windows", "shard-vs-tp"],
        typer.Option(
            "--view",
            help="points: every point (default); v2-vs-v1: the v2/v1 ratio per batch size, steps and accept "
            "length with 95% intervals and a verdict (one run); spec-vs-baseline: each speculative point over "
            "the baseline at its batch size, with 95% intervals (paired where the run measured them against "
            "each other: measure.baseline_pairs), a verdict and the parts of the run it comes from (one run); "
            "windows: every measured window (one repeat of a point, any status) in measurement order with its GPU clock, power, temperature and host load, "
            "plus the throughput spread per configuration (one run); shard-vs-tp: a one-GPU shard run (--run) "
            "against its tensor-parallel deployment (--against): step times, both v2/v1 ratios with "
            "intervals and verdicts, floor fractions, the TP profile's all-reduce share and the cycle-time "
            "error.",
        ),
    ] = "points",
    against: Annotated[
        str | None,
        typer.Option(
            "--against",
            help=f"--view shard-vs-tp: the TP run to compare the shard (--run) with: {RUN_REF_HELP}.",
            show_default=False,
        ),
    ] = None,
) -> None:
    """Export points for PR discussions and spreadsheets."""
    if format is None:
        format = "table" if output is None and sys.stdout.isatty() else "csv"
    if format == "table" and output is not None:
        fail("--format table is for the terminal; write csv, json, md or bench-serving-json to --output")
    if all_runs and run:
        fail("give either --run or --all-runs, not both")
    if (view == "shard-vs-tp") != (against is not None):
        fail("--against goes with --view shard-vs-tp, and --view shard-vs-tp needs --against TP_RUN")
    engine = open_db_readonly(db)
    if view == "shard-vs-tp":
        if all_runs or len(run or []) != 1:
            fail("--view shard-vs-tp compares one shard run (--run) with one TP run (--against)")
        if format == "bench-serving-json":
            fail("--view shard-vs-tp writes csv, json or md, not bench-serving-json")
        assert run is not None and against is not None
        _export_shard_vs_tp(engine, run[0], against, format, output)
        return
    if all_runs:
        run_ids = sorted(int(i) for i in q.list_runs(engine)["id"])
        if not run_ids:
            fail("the database holds no runs yet; run `specbench run SWEEP.yaml` first")
    else:
        run_ids = list(dict.fromkeys(resolve_run_ref(engine, ref) for ref in (run or ["latest"])))
        if not run:
            err_console.print(f"exporting run {run_ids[0]} (the latest); --run picks another, --all-runs all")
    if view in _RUN_VIEWS:
        if format == "bench-serving-json":
            fail(f"--view {view} writes csv, json or md, not bench-serving-json")
        _export_run_view(engine, run_ids, view, format, output)
        return
    with failing(ExportError), session_scope(engine) as s:
        data = collect(s, run_ids, all_status=all_status)
        if format == "bench-serving-json":
            lines = bench_serving_lines(s, [r["id"] for r in data.runs], all_status=all_status)
    if format == "table":
        export_table.print_points(console, data)
        return
    text = (
        "".join(f"{line}\n" for line in lines)
        if format == "bench-serving-json"
        else document(data).text(format)
    )
    _emit(text, output, f"{len(data.rows)} points")


def _export_shard_vs_tp(
    engine: Engine, shard_ref: str, tp_ref: str, fmt: Format | Literal["table"], output: Path | None
) -> None:
    shard, tp = resolve_run_ref(engine, shard_ref), resolve_run_ref(engine, tp_ref)
    try:
        comparison = tp_compare.load(engine, shard, tp)
    except tp_compare.PairRefused as e:
        fail(f"{e}\n(--run names the shard run, at tp 1; --against the TP run, at one tp > 1)")
    for line in comparison.missing + comparison.notes:
        err_console.print(f"note: {line}", markup=False, highlight=False)
    if fmt == "table":
        heading = f"shard run {shard} vs TP run {tp}"
        export_table.print_frame(console, comparison.frame, heading, export_table.SHARD_VS_TP_FIRST)
        return
    _emit(tp_compare.document(comparison).text(fmt), output, f"{len(comparison.frame)} shard/TP rows")


class RunView(Protocol):
    """A single-run view of analysis (v2_vs_v1, spec_vs_baseline, windows): its frame and its document."""

    def load(self, engine: Engine, run_id: int) -> pd.DataFrame: ...
    def document(
        self, frame: pd.DataFrame, meta: dict[str, Any] | None = None, title: str | None = None
    ) -> Document: ...


# --view -> (the module, why it takes one run, its title around the run's, what a row is)
_RUN_VIEWS: dict[str, tuple[RunView, str, str, str]] = {
    "v2-vs-v1": (
        v2_vs_v1,
        "--view v2-vs-v1 compares the modes inside one run",
        "v2 (overlap) over v1 (non-overlap), {run}",
        "v2/v1 cells",
    ),
    "spec-vs-baseline": (
        spec_vs_baseline,
        "--view spec-vs-baseline compares the modes with the baseline inside one run",
        "Speculation over the no-spec baseline, {run}",
        "spec/baseline cells",
    ),
    "windows": (
        windows,
        "--view windows lists the measured windows of one run",
        "Measured windows of {run}, in measurement order",
        "windows",
    ),
}


def _export_run_view(
    engine: Engine, run_ids: list[int], view: str, fmt: Format | Literal["table"], output: Path | None
) -> None:
    module, why, title, rows = _RUN_VIEWS[view]
    meta = _one_run_meta(engine, run_ids, why)
    frame = module.load(engine, meta["run_id"])
    if fmt == "table":
        heading = title.format(run=_run_title(meta))
        if view == "v2-vs-v1":
            export_table.print_v2_vs_v1(console, frame, heading)
        else:
            export_table.print_frame(console, frame, heading, export_table.WINDOWS_FIRST)
        return
    text = with_kind(module.document(frame, meta, title.format(run=_run_title(meta))), meta["kind"]).text(fmt)
    _emit(text, output, f"{len(frame)} {rows}")


def _one_run_meta(engine: Engine, run_ids: list[int], why: str) -> dict[str, Any]:
    """The one run a single-run view reads, as its JSON header and title describe it; exit 2 otherwise."""
    if len(run_ids) != 1:
        fail(f"{why}: give one --run (got {len(run_ids)})")
    with session_scope(engine) as s:
        found = s.get(Run, run_ids[0])
        if found is None:
            fail(f"no run {run_ids[0]}")
        meta: dict[str, Any] = {
            "run_id": found.id,
            "run_uid": found.uid,
            "sweep": found.sweep_name,
            "sglang_version": found.sglang_version,
            "gpu": f"{found.gpu_count}x {found.gpu_name}" if found.gpu_count else "no GPU",
            "simulated": found.simulated,
            "kind": run_kind(found.simulated, found.trigger),
        }
    # Where each part of the run ran, and its drift check against the part before (runners/parts.py).
    run_id = int(meta["run_id"])
    meta["parts"] = [{k: plain(v) for k, v in p.items()} for p in q.run_parts(engine, [run_id])[run_id]]
    return meta


def _run_title(meta: dict[str, Any]) -> str:
    """`run #ID SWEEP: SGLang VERSION on GPU` and its parts if several; plain (Markdown writers escape it)."""
    parts = parts_line(meta.get("parts") or [])
    return (
        f"run #{meta['run_id']} {meta['sweep']}: SGLang {meta['sglang_version'] or '?'} on {meta['gpu']}"
        + (f" ({_MADE_UP[meta['kind']]})" if meta["kind"] in _MADE_UP else "")
        + (f"; {parts}" if parts else "")
    )


# What a single-run view's title says of numbers specbench made up (a measured run's title says nothing).
_MADE_UP = {SIMULATED: "stand-in server, simulated numbers", SYNTHETIC_TAG: "synthetic history, not measured"}


def _emit(text: str, output: Path | None, wrote: str) -> None:
    if output is None:
        typer.echo(text, nl=False)
    else:
        write_output(output, text)
        typer.echo(f"wrote {wrote} to {output}", err=True)
