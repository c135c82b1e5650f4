"""Values checked against the columns that will hold them, before an import writes anything (issue 30 §7).
SQLite keeps whatever it is given (text in an integer column, `'yesterday'` as a timestamp, bad JSON, a NUL
byte); PostgreSQL refuses some of it mid-transaction and accepts other nonsense (a negative batch size, a uid
of `../../etc/passwd`). So each value, as the driver returns it, is checked against its column's type, width,
PostgreSQL's range and a few domain rules; the first problem is reported as `table row N: column: problem`
and nothing is imported."""

import json
import math
from collections.abc import Callable, Iterable, Mapping
from datetime import datetime
from functools import cache, partial
from typing import Any

from sqlalchemy import JSON, Boolean, Column, Float, Integer, String, Text
from sqlalchemy.sql.schema import Table

from db.models import UID, Base
from db.types import UTCDateTime

INT32 = 2**31 - 1  # PostgreSQL's INTEGER
# Past this a measurement is nonsense (PostgreSQL would store 1e300 and ruin every mean downstream).
MAX_FLOAT = 1e15
MAX_JSON_CHARS = 16 * 2**20
# Integers that may be negative: a server's exit code (-9: SIGKILL); every other counts or is an id.
SIGNED_INTEGERS = frozenset({"exit_code"})
# Floats that may be negative (interval bounds, a triage's change); a new column is non-negative until listed.
SIGNED_FLOATS = frozenset({"output_throughput_ci_low", "output_throughput_ci_high", "magnitude"})
# The statuses the code writes and reads (runners/store.py, bench.results.STATUS_SEVERITY): nothing else.
STATUSES: dict[str, frozenset[str]] = {
    "runs": frozenset({"running", "done", "unstable", "partial", "failed"}),
    "points": frozenset({"ok", "invalid", "failed", "mode_mismatch", "unstable"}),
    "samples": frozenset({"ok", "invalid", "failed", "mode_mismatch", "unstable"}),
}


class RowProblem(ValueError):
    """A value that does not fit where it would be stored: `where` (table and row), `column`, and why."""

    def __init__(self, where: str, column: str, why: str):
        self.where, self.column, self.why = where, column, why
        super().__init__(f"{where}: {column}: {why}")


def _shown(value: Any) -> str:
    text = repr(value)
    return text if len(text) <= 40 else text[:37] + "..."


def _text_problem(value: Any, length: int | None = None) -> str | None:
    if not isinstance(value, str):
        return f"must be text (got {_shown(value)})"
    if "\x00" in value:
        return "holds a NUL byte"
    if length is not None and len(value) > length:
        return f"longer than {length} characters ({len(value):,})"
    return None


def _json_problem(value: Any) -> str | None:
    if isinstance(value, bytes | bytearray):
        value = bytes(value).decode("utf-8", "replace")
    try:
        if isinstance(value, str):
            if len(value) > MAX_JSON_CHARS:
                return f"JSON longer than {MAX_JSON_CHARS:,} characters"
            value = json.loads(value)
        # PostgreSQL's json refuses NaN, Infinity and NUL escapes; the C serialiser also bounds the depth.
        text = json.dumps(value, allow_nan=False)
    except RecursionError:
        return "JSON nested too deep"
    except (TypeError, ValueError) as e:
        return f"not JSON ({str(e)[:60]})"
    if "\\u0000" in text:
        return "JSON holds a NUL character"
    return None


def _time_problem(value: Any) -> str | None:
    if isinstance(value, datetime):
        return None
    if isinstance(value, str):
        try:
            datetime.fromisoformat(value)
        except ValueError:
            return f"not an ISO 8601 timestamp (got {_shown(value)})"
        return None
    return f"must be a timestamp (got {_shown(value)})"


def _checker(column: Column[Any]) -> Callable[[Any], str | None]:
    """The check of one column's values: its type decided once, not per value (an import checks millions)."""
    t = column.type
    may_be_null = column.nullable or column.primary_key or column.server_default is not None
    if isinstance(t, UTCDateTime):
        check = _time_problem
    elif isinstance(t, JSON):
        check = _json_problem
    elif isinstance(t, Boolean):
        check = _bool_problem
    elif isinstance(t, Integer):
        check = partial(_int_problem, least=-INT32 - 1 if column.name in SIGNED_INTEGERS else 0)
    elif isinstance(t, Float):
        check = partial(_float_problem, floor=-MAX_FLOAT if column.name in SIGNED_FLOATS else 0.0)
    elif isinstance(t, String | Text):
        check = partial(_text_problem, length=getattr(t, "length", None))
    else:
        return lambda _value: None

    def checked(value: Any) -> str | None:
        if value is None:
            return None if may_be_null else "required"
        return check(value)

    return checked


def _bool_problem(value: Any) -> str | None:
    return (
        None if isinstance(value, bool) or value in (0, 1) else f"must be true or false (got {_shown(value)})"
    )


def _int_problem(value: Any, least: int) -> str | None:
    if isinstance(value, bool) or not isinstance(value, int):
        return f"must be a whole number (got {_shown(value)})"
    if not least <= value <= INT32:
        return f"must be a whole number from {least:,} to {INT32:,} (got {_shown(value)})"
    return None


def _float_problem(value: Any, floor: float) -> str | None:
    if isinstance(value, bool) or not isinstance(value, int | float):
        return f"must be a number (got {_shown(value)})"
    if not math.isfinite(value):
        return f"must be a finite number (got {_shown(value)})"
    if not floor <= value <= MAX_FLOAT:
        return f"must be a number from {floor:g} to {MAX_FLOAT:g} (got {_shown(value)})"
    return None


def problem(column: Column[Any], value: Any) -> str | None:
    """Why `value` cannot be stored in `column` (None: it can)."""
    return _checker(column)(value)


def domain_problem(table: str, column: str, value: Any) -> str | None:
    """The rules a stored row keeps beyond its type: a run uid that is a uid, a status the code knows."""
    if value is None:
        return None
    if table == "runs" and column == "uid" and not (isinstance(value, str) and UID.fullmatch(value)):
        return f"not a run uid (got {_shown(value)})"
    if column == "status" and table in STATUSES and value not in STATUSES[table]:
        return f"must be one of {', '.join(sorted(STATUSES[table]))} (got {_shown(value)})"
    if column == "tp" and isinstance(value, int) and value < 1:
        return f"must be at least 1 (got {value})"
    return None


_DOMAIN_COLUMNS = frozenset({"uid", "status", "tp"})


@cache
def _checkers(table: Table, skip: frozenset[str]) -> tuple[tuple[str, Callable[[Any], str | None]], ...]:
    out = []
    for column in table.columns:
        if column.name in skip:
            continue
        check = _checker(column)
        if column.name in _DOMAIN_COLUMNS:
            check = partial(_with_domain, check, table.name, column.name)
        out.append((column.name, check))
    return tuple(out)


def _with_domain(check: Callable[[Any], str | None], table: str, column: str, value: Any) -> str | None:
    return check(value) or domain_problem(table, column, value)


def check_row(model: type[Base], values: Mapping[str, Any], where: str, *, skip: Iterable[str] = ()) -> None:
    """Raise RowProblem for the first value `model`'s table cannot store (absent, `skip` unchecked)."""
    table = model.__table__
    assert isinstance(table, Table)
    for name, check in _checkers(table, frozenset(skip)):
        if name in values:
            why = check(values[name])
            if why is not None:
                raise RowProblem(where, name, why)
