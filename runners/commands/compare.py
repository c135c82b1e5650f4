"""`specbench compare [BASELINE CANDIDATE]`: point-by-point verdicts, as a PR comment, CSV or JSON."""

import sys
from pathlib import Path
from typing import Annotated, Literal

import typer
from rich.text import Text

from analysis import report
from analysis.comparability import KIND_MEANS
from analysis.compare import center_text, comparable_pair
from analysis.labels import run_tag
from analysis.plain import missing
from analysis.render import magnitude, signed_pct
from analysis.stats.compare import DEFAULT_CONFIDENCE, DEFAULT_THRESHOLD
from bench.catalog import direction_text, label
from db import queries as q
from runners.common import (
    RUN_REF_HELP,
    ConfidenceOption,
    DbOption,
    ThresholdOption,
    console,
    err_console,
    fail,
    failing,
    open_db_readonly,
    resolve_run_ref,
    write_output,
)
from runners.comparison import CompareResult, compare_result, render
from runners.exit_codes import ExitCode, answered
from runners.tables import Column, print_table, say

Format = Literal["table", "md", "comment", "csv", "json"]  # table, or one of comparison.TextFormat


def compare(
    baseline: Annotated[
        str | None,
        typer.Argument(help=f"Baseline run: {RUN_REF_HELP}. Default: see below.", show_default=False),
    ] = None,
    candidate: Annotated[
        str | None, typer.Argument(help="Candidate run, same forms.", show_default=False)
    ] = None,
    db: DbOption = None,
    format: Annotated[
        Format | None,
        typer.Option(
            "--format",
            help="table (fits the terminal), md (full Markdown), comment (short PR comment), csv or json. "
            "Default: table on a terminal, md when piped or written to --output.",
            show_default=False,
        ),
    ] = None,
    metric: Annotated[str, typer.Option(help="Metric to compare (a points column).")] = "output_throughput",
    threshold: ThresholdOption = DEFAULT_THRESHOLD,
    confidence: ConfidenceOption = DEFAULT_CONFIDENCE,
    method: Annotated[
        Literal["t", "bootstrap"],
        typer.Option(help="t: ratio of geometric means, Welch on logs; bootstrap: ratio of medians."),
    ] = "t",
    output: Annotated[
        Path | None, typer.Option("--output", "-o", help="Write here instead of stdout.")
    ] = None,
    fail_on_regression: Annotated[
        bool,
        typer.Option(
            "--fail-on-regression",
            help=f"Accepted for old scripts: compare always exits {int(ExitCode.FINDING)} on a regression.",
            hidden=True,
        ),
    ] = False,
) -> None:
    """Compare two runs point by point: Δ with an interval and a verdict for every configuration.

    Exits 1 when a point regressed, 0 when none did. Without run arguments: the two latest comparable runs
    (same model and GPU class, both measured or both simulated). Runs that share no configuration, or a
    stand-in run against a GPU run, are refused (exit 2) with the nearest comparison that means something.
    This compares two runs; `specbench regressions` looks for change points along each series' history.
    """
    engine = open_db_readonly(db)
    if (baseline is None) != (candidate is None):
        fail("give both runs (BASELINE CANDIDATE) or neither (the two latest comparable runs)")
    if baseline is None or candidate is None:
        pair = comparable_pair(q.run_choices(engine), lambda r: set(q.fingerprints_of_runs(engine, [r])))
        if pair is None:
            fail("no two runs in this database compare (same model and GPU class); name two runs to compare")
        a, b = pair
        err_console.print(f"comparing the two latest comparable runs: baseline {a}, candidate {b}")
    else:
        a, b = resolve_run_ref(engine, baseline), resolve_run_ref(engine, candidate)
        if a == b:  # as `ci` refuses it: a run against itself finds nothing and says so with confidence
            fail(f"baseline and candidate are the same run ({a})")
    with failing(q.QueryError):
        q.metric_column(metric)
    if format is None:
        format = "table" if output is None and sys.stdout.isatty() else "md"
    if format == "table" and output is not None:
        fail("--format table is for the terminal; write md, comment, csv or json to --output")
    result = compare_result(
        engine, a, b, metric=metric, threshold=threshold, confidence=confidence, method=method
    )
    if result.refused is not None:
        fail(f"runs {a} and {b} do not compare. {result.refused.text()}")
    counts = result.counts
    code = ExitCode.FINDING if counts["regression"] else ExitCode.OK
    with answered(code):
        if format == "table":
            print_compare(result, threshold=threshold, confidence=confidence)
        else:
            text, _ = render(result, format, threshold=threshold, confidence=confidence)
            if output is None:
                typer.echo(text, nl=False)
            else:
                write_output(output, text)
    err_console.print(
        f"run {b} vs baseline {a}: " + ", ".join(f"{n} {v}" for v, n in counts.items() if n) + f" ({metric})"
    )
    raise typer.Exit(code)


_VERDICT_STYLE = {
    "regression": ("red", "regression"),
    "improvement": ("green", "improvement"),
    "no change": ("dim", "no change"),
    "insufficient data": ("yellow", "too few data"),
}


def print_compare(result: CompareResult, *, threshold: float, confidence: float) -> None:
    """The comparison as a terminal table; interval, values and workload are left out first when narrow."""
    table, a, b, metric = result.table, result.run_a, result.run_b, result.metric
    say(
        console,
        Text(
            f"run {b['id']} ({b['sweep_name']}) vs baseline run {a['id']} ({a['sweep_name']}): ", style="bold"
        )
        + Text(f"{label(metric)}, {direction_text(metric)}"),
    )
    tag = run_tag(a.get("simulated"), a.get("trigger"))  # both runs hold one kind (analysis.comparability)
    if tag:
        say(console, f"⚠ both runs are {tag}: {KIND_MEANS[tag]}", "yellow")
    say(console, report.counts_line(result.counts), "bold")
    columns = [
        Column("verdict", markup=True),
        Column("config"),
        Column("Δ", "right"),
        Column(f"{confidence:.0%} interval", "right", drop=2),
        Column("baseline", "right", drop=3),
        Column("candidate", "right", drop=3),
        Column("why", shrink=18, fold=True),
    ]
    multi_workload = table["workload"].nunique() > 1
    multi_model = table["model"].nunique() > 1
    if multi_workload:
        columns.insert(2, Column("workload", drop=4, shrink=10))
    if multi_model:
        columns.insert(2, Column("model", drop=5, shrink=10))
    rows = []
    for r in table.to_dict("records"):
        style, word = _VERDICT_STYLE.get(r["verdict"], ("white", str(r["verdict"])))
        interval = "–" if missing(r["ci_low"]) else f"{signed_pct(r['ci_low'])}…{signed_pct(r['ci_high'])}"
        cells = [
            f"[{style}]{word}[/]",
            str(r["config"]),
            *([str(r["model"])] if multi_model else []),
            *([str(r["workload"])] if multi_workload else []),
            signed_pct(r["delta"]),
            interval,
            magnitude(r["baseline"]),
            magnitude(r["candidate"]),
            # The largest factor (the attribution lists them largest first); --format md has them all.
            str(r.get("why") or "").split(", ")[0] or str(r.get("note") or ""),
        ]
        rows.append(cells)
    print_table(console, columns, rows)
    one = "" if multi_workload else f" Workload: {table['workload'].iloc[0]}." if not table.empty else ""
    say(
        console,
        f"Δ = candidate / baseline − 1 of the repeats' {center_text(table)}s; flagged when the interval "
        f"excludes 0 and |Δ| ≥ {threshold:.0%}.{one} Markdown: --format md; PR comment: --format comment.",
        "dim",
    )
