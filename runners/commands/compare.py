"""`specbench compare BASELINE CANDIDATE`: point-by-point verdicts, as a PR comment, CSV or JSON."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated, Literal

import typer

from analysis import report
from analysis.compare import compare_runs, verdict_counts
from bench.stats.compare import DEFAULT_CONFIDENCE, DEFAULT_THRESHOLD
from db import queries as q
from runners.common import DbOption, err_console, fail, open_db

EXIT_REGRESSION = 1


def register(app: typer.Typer) -> None:
    app.command("compare")(compare)


def compare(
    baseline: Annotated[str, typer.Argument(help="Baseline run: id, uid (prefix), `latest` or `latest~N`.")],
    candidate: Annotated[str, typer.Argument(help="Candidate run, same forms.")],
    db: DbOption = None,
    format: Annotated[Literal["md", "csv", "json"], typer.Option("--format", help="md | csv | json")] = "md",
    metric: Annotated[str, typer.Option(help="Metric to compare (a points column).")] = "output_throughput",
    threshold: Annotated[
        float, typer.Option(help="Smallest relative change flagged (0.05 = 5%).", min=0.0)
    ] = DEFAULT_THRESHOLD,
    confidence: Annotated[
        float, typer.Option(help="Interval confidence.", min=0.5, max=0.999)
    ] = DEFAULT_CONFIDENCE,
    method: Annotated[
        Literal["t", "bootstrap"], typer.Option(help="t: Welch on log values; bootstrap: ratio of medians.")
    ] = "t",
    output: Annotated[
        Path | None, typer.Option("--output", "-o", help="Write here instead of stdout.")
    ] = None,
    fail_on_regression: Annotated[
        bool,
        typer.Option("--fail-on-regression", help=f"Exit {EXIT_REGRESSION} when any point regressed (CI)."),
    ] = False,
) -> None:
    """Compare two runs point by point: Δ with an interval and a verdict for every configuration."""
    engine = open_db(db)
    try:
        a = q.resolve_run(engine, baseline)
        b = q.resolve_run(engine, candidate)
        q.metric_column(metric)
    except q.QueryError as e:
        fail(str(e))
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
    if format == "md":
        text = report.to_markdown(
            table, run_a, run_b, metric=metric, threshold=threshold, confidence=confidence
        )
    elif format == "csv":
        text = report.to_csv(table)
    else:
        text = report.to_json(table, run_a, run_b)
    if output is None:
        typer.echo(text, nl=False)
    else:
        output.write_text(text)
    counts = verdict_counts(table)
    err_console.print(
        f"run {b} vs baseline {a}: " + ", ".join(f"{n} {v}" for v, n in counts.items() if n) + f" ({metric})"
    )
    if fail_on_regression and counts["regression"]:
        raise typer.Exit(EXIT_REGRESSION)
