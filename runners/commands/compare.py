"""`specbench compare [BASELINE CANDIDATE]`: point-by-point verdicts, as a PR comment, CSV or JSON."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated, Literal

import typer
from sqlalchemy import Engine

from analysis import report
from analysis.compare import comparable_pair, compare_runs, verdict_counts
from analysis.stats.compare import DEFAULT_CONFIDENCE, DEFAULT_THRESHOLD, Method
from db import queries as q
from runners.common import (
    RUN_REF_HELP,
    ConfidenceOption,
    DbOption,
    ThresholdOption,
    err_console,
    fail,
    open_db_readonly,
    resolve_run_ref,
    write_output,
)

EXIT_REGRESSION = 1
Format = Literal["md", "comment", "csv", "json"]


def register(app: typer.Typer) -> None:
    app.command("compare")(compare)


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
        Format, typer.Option("--format", help="md (full), comment (short PR comment), csv or json")
    ] = "md",
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
        typer.Option("--fail-on-regression", help=f"Exit {EXIT_REGRESSION} when any point regressed (CI)."),
    ] = False,
) -> None:
    """Compare two runs point by point: Δ with an interval and a verdict for every configuration.

    Without run arguments: the two latest comparable runs (same model and GPU class, both measured or both
    simulated).
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
    try:
        q.metric_column(metric)
    except q.QueryError as e:
        fail(str(e))
    text, counts = compare_report(
        engine, a, b, format=format, metric=metric, threshold=threshold, confidence=confidence, method=method
    )
    if output is None:
        typer.echo(text, nl=False)
    else:
        write_output(output, text)
    err_console.print(
        f"run {b} vs baseline {a}: " + ", ".join(f"{n} {v}" for v, n in counts.items() if n) + f" ({metric})"
    )
    if fail_on_regression and counts["regression"]:
        raise typer.Exit(EXIT_REGRESSION)


def compare_report(
    engine: Engine,
    a: int,
    b: int,
    *,
    format: Format = "md",
    metric: str = "output_throughput",
    threshold: float = DEFAULT_THRESHOLD,
    confidence: float = DEFAULT_CONFIDENCE,
    method: Method = "t",
) -> tuple[str, dict[str, int]]:
    """Run `b` against baseline `a`: the report text in `format`, and the verdict counts."""
    table = compare_runs(
        q.run_points(engine, a),
        q.run_samples(engine, a, [metric]),
        q.run_points(engine, b),
        q.run_samples(engine, b, [metric]),
        metric=metric,
        threshold=threshold,
        confidence=confidence,
        method=method,
    )
    run_a, run_b = q.run_info(engine, a), q.run_info(engine, b)
    if format in ("md", "comment"):
        text = report.to_markdown(
            table,
            run_a,
            run_b,
            metric=metric,
            threshold=threshold,
            confidence=confidence,
            short=format == "comment",
        )
    elif format == "csv":
        text = report.to_csv(table)
    else:
        text = report.to_json(table, run_a, run_b)
    return text, verdict_counts(table)
