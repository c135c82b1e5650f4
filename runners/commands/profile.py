"""`specbench profile summarize TRACE.json.gz`: the speculative-cycle figures of any SGLang trace;
`specbench profile resummarize --run ID`: summarise a run's stored traces again and update their rows."""

from pathlib import Path
from typing import Annotated, Any, Literal

import typer
from rich.table import Table

from analysis.labels import KIND_TAG, MEASURED, SIMULATED
from analysis.render import json_text
from bench.profile.summary import DEFAULT_DISTORTION_THRESHOLD, distortion, summarize
from bench.profile.trace import TraceError, from_stand_in, load_trace
from runners.common import MAX_ID, DbOption, console, fail, failing, open_db
from runners.exit_codes import ExitCode

profile_app = typer.Typer(help="SGLang profiler traces: summarise speculative cycles.", no_args_is_help=True)


@profile_app.command("summarize")
def summarize_cmd(
    trace: Annotated[
        Path, typer.Argument(help="A trace SGLang wrote (<id>-TP-<rank>.trace.json.gz, or .json).")
    ],
    format: Annotated[Literal["json", "table"], typer.Option("--format", help="json or table")] = "table",
    tpot_ms: Annotated[
        float | None,
        typer.Option(min=0.0, max=1e6, help="Unprofiled TPOT of the same point (ms), for the distortion."),
    ] = None,
    accept_length: Annotated[
        float | None,
        typer.Option(
            min=0.0, max=1e3, help="Unprofiled accept length of the same point, for the distortion."
        ),
    ] = None,
    threshold: Annotated[
        float, typer.Option(min=0.0, max=1e3, help="Warn when profiled / unprofiled cycle time exceeds this.")
    ] = DEFAULT_DISTORTION_THRESHOLD,
    per_cycle: Annotated[bool, typer.Option("--per-cycle", help="JSON: keep the per-cycle rows.")] = False,
) -> None:
    """Cycles, cycle time, GPU busy and idle per cycle, and time per phase (medians with quartiles)."""
    with failing(TraceError):
        data = load_trace(trace)
        s = summarize(data)
    # What the figures are: a trace the stand-in server made up is simulated, whatever its numbers look like.
    s = {"kind": SIMULATED if from_stand_in(data) else MEASURED, **s}
    if tpot_ms is not None or accept_length is not None:
        s["distortion"] = distortion((s["cycle_ms"] or {}).get("median"), tpot_ms, accept_length, threshold)
    if format == "json":
        if not per_cycle:
            s.pop("per_cycle")
        typer.echo(json_text(s), nl=False)
        return
    _table(trace, s)


def _fmt(st: dict[str, Any] | None, scale: float = 1.0, digits: int = 3) -> str:
    if not st:
        return "-"
    return f"{st['median'] * scale:.{digits}f}  [{st['p25'] * scale:.{digits}f} .. {st['p75'] * scale:.{digits}f}]"


def _table(trace: Path, s: dict[str, Any]) -> None:
    if s["kind"] != MEASURED:
        console.print(
            f"[bold yellow]{KIND_TAG[s['kind']]}:[/] a trace of the stand-in server, no GPU", highlight=False
        )
    console.print(
        f"[bold]{trace.name}[/]: {s['cycles']} verify steps, {s['cycles_timed']} timed cycles "
        f"({s['track']} track; batch sizes {s['batch_sizes']}; {s['kernels']} kernels; "
        f"steps {s['steps_by_mode']})"
    )
    if s["cycles_with_prefill"]:
        console.print(f"{s['cycles_with_prefill']} cycle(s) held a prefill and are left out of the figures")
    t = Table("figure", "median  [p25 .. p75]")
    t.add_row("cycle (ms)", _fmt(s["cycle_ms"]))
    t.add_row("GPU busy (%)", _fmt(s["gpu_busy_fraction"], 100.0, 1))
    t.add_row("GPU idle per cycle (ms)", _fmt(s["gpu_idle_ms_per_cycle"]))
    t.add_row("largest GPU idle gap (ms)", _fmt(s["largest_idle_gap_ms"]))
    for name, ph in s["phases"].items():
        if ph["gpu_ms"]:
            t.add_row(f"GPU {name} (ms)", _fmt(ph["gpu_ms"]))
        if ph["cpu_ms"]:
            t.add_row(f"CPU {name} (ms)", _fmt(ph["cpu_ms"]))
    for kind, c in (s.get("collectives") or {}).items():
        t.add_row(f"{kind.replace('_', '-')} per cycle (ms)", _fmt(c["ms_per_cycle"]))
        t.add_row(f"{kind.replace('_', '-')} share of the cycle (%)", _fmt(c["share_of_cycle"], 100.0, 1))
    console.print(t)
    d = s.get("distortion")
    if d and d["ratio"] is not None:
        console.print(
            f"distortion: profiled {d['profiled_cycle_ms']:.3f} ms / unprofiled {d['unprofiled_cycle_ms']:.3f} ms"
            f" = x{d['ratio']:.2f}"
        )
        if d["warning"]:
            console.print(f"[bold yellow]warning:[/] {d['warning']}")


@profile_app.command("resummarize")
def resummarize_cmd(
    run: Annotated[int, typer.Option("--run", min=1, max=MAX_ID, help="The run whose profiles to redo.")],
    db: DbOption = None,
    search: Annotated[
        Path | None,
        typer.Option(
            help="Look here (recursively, by file name and sha256) for traces moved off their path."
        ),
    ] = None,
) -> None:
    """Summarise a run's stored traces again (after a summariser fix) and update the stored summaries."""
    from runners.profiling import resummarize

    lines = resummarize(open_db(db), run, search)
    if not lines:
        fail(f"run {run} has no ok profiles")
    for r in lines:
        console.print(
            f"profile {r['id']} (point {r['point_id']}): cycles {r['before']} -> {r['after']}: {r['result']}"
        )
    if any(r["result"] != "updated" for r in lines):
        raise typer.Exit(ExitCode.ERROR)  # no answer for those profiles
