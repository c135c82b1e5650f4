"""What every read query shares: the column lists, the metric guard, the frame reader. Rules for speed at a
million points and safety: Core selects with bound parameters, a metric picks a mapped column from
`METRIC_FIELDS` (never spliced into SQL); only the needed columns (points have ~70); per-series reads walk
`ix_points_fingerprint_created`, per-run reads `ix_points_run_id`. Results are pandas DataFrames (UTC)."""

from collections.abc import Iterable, Iterator, Sequence
from typing import Any, TypeVar, cast

import pandas as pd
from sqlalchemy import Engine, Executable
from sqlalchemy.orm import InstrumentedAttribute

from db.fingerprint import FINGERPRINT_FIELDS
from db.models import METRIC_FIELDS, PROVENANCE_COLUMNS, Point

# A series across runs is one fingerprint, GPU included; a configuration (compared across GPUs) leaves it out.
SERIES_COLUMNS: tuple[str, ...] = FINGERPRINT_FIELDS
CONFIG_COLUMNS: tuple[str, ...] = tuple(c for c in FINGERPRINT_FIELDS if c not in ("gpu_name", "gpu_count"))
RUN_COLUMNS: tuple[str, ...] = (
    *("id", "uid", "sweep_name", "status", "trigger", "label", "backend", "simulated", "started_at"),
    *("finished_at", "model", *PROVENANCE_COLUMNS, "error"),
)
PROBLEM_STATUSES: tuple[str, ...] = ("failed", "invalid", "mode_mismatch", "unstable")
# The factors attribution needs travel with every series and run read.
FACTOR_METRICS: tuple[str, ...] = ("output_throughput", "accept_length", "tpot_mean_ms")


class QueryError(LookupError):
    """A run or metric the database does not have; the message is fit for a user."""


def metric_column(name: str) -> InstrumentedAttribute[Any]:
    if name not in METRIC_FIELDS:
        raise QueryError(f"unknown metric {name!r}; choose one of {', '.join(METRIC_FIELDS)}")
    return cast(InstrumentedAttribute[Any], getattr(Point, name))


def attrs(model: type, names: str) -> list[InstrumentedAttribute[Any]]:
    """The mapped columns of `model` named in `names` (space-separated), in order."""
    return [getattr(model, n) for n in names.split()]


def read_frame(engine: Engine, stmt: Executable) -> pd.DataFrame:
    with engine.connect() as conn:
        result = conn.execute(stmt)
        # Plain tuples: handing pandas Row objects costs a failed attribute probe per row (2x slower).
        return pd.DataFrame.from_records([tuple(r) for r in result], columns=list(result.keys()))


def checked_metrics(names: Iterable[str]) -> list[str]:
    """The metric names, each checked against the schema, duplicates dropped, order kept."""
    out = list(dict.fromkeys(names))
    for n in out:
        metric_column(n)
    return out


T = TypeVar("T")
# Stay under every driver's bound-parameter limit in `IN (...)` lists.
IN_CHUNK = 5000


def chunks(items: Sequence[T], size: int = IN_CHUNK) -> Iterator[list[T]]:
    """`items` in consecutive lists of at most `size`."""
    for i in range(0, len(items), size):
        yield list(items[i : i + size])
