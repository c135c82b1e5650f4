"""Two runs compared point by point (analysis.compare), or refused: what `specbench compare` and ci print."""

import functools
from dataclasses import dataclass
from typing import Literal

import pandas as pd
from sqlalchemy import Engine

from analysis import report
from analysis.comparability import Refusal, refusal
from analysis.compare import compare_runs, verdict_counts
from analysis.stats.compare import DEFAULT_CONFIDENCE, DEFAULT_THRESHOLD, Method
from db import queries as q

TextFormat = Literal["md", "comment", "csv", "json"]


@dataclass(frozen=True)
class CompareResult:
    """Candidate run `b` against baseline `a`, with a refusal when they do not compare."""

    table: pd.DataFrame
    run_a: dict[str, object]
    run_b: dict[str, object]
    metric: str
    refused: Refusal | None

    @property
    def counts(self) -> dict[str, int]:
        return verdict_counts(self.table)


def compare_result(
    engine: Engine,
    a: int,
    b: int,
    *,
    metric: str = "output_throughput",
    threshold: float = DEFAULT_THRESHOLD,
    confidence: float = DEFAULT_CONFIDENCE,
    method: Method = "t",
) -> CompareResult:
    sides = [(q.run_points(engine, r), q.run_samples(engine, r, [metric])) for r in (a, b)]
    table = compare_runs(
        *sides[0], *sides[1], metric=metric, threshold=threshold, confidence=confidence, method=method
    )
    run_a, run_b = q.run_info(engine, a), q.run_info(engine, b)

    @functools.cache
    def series_of(run_id: int) -> set[str]:
        return set(q.fingerprints_of_runs(engine, [run_id]))

    refused = refusal(run_a, run_b, table, q.run_choices(engine), series_of)
    return CompareResult(table, run_a, run_b, metric, refused)


def render(
    result: CompareResult, format: TextFormat, *, threshold: float, confidence: float
) -> tuple[str, dict[str, int]]:
    """The comparison as text in `format` (md, comment, csv or json), and the verdict counts."""
    doc = report.document(
        result.table,
        result.run_a,
        result.run_b,
        metric=result.metric,
        threshold=threshold,
        confidence=confidence,
        short=format == "comment",
    )
    text = doc.text("csv" if format == "csv" else "json" if format == "json" else "md")
    return text, result.counts
