"""Values as JSON and a CSV header take them: the one conversion every export uses.

pandas and the database hand over numpy scalars, NaN / pd.NA / NaT, Timestamps and Decimals, which
`json.dumps` rejects or writes as invalid JSON. No value and ±inf become None; a date or time its ISO 8601
text; a numpy scalar or Decimal a Python number; a dict, list or tuple is converted item by item.
"""

import math
import sys
from collections.abc import Callable
from datetime import date, datetime, time
from decimal import Decimal
from typing import Any

import numpy as np


def missing(v: Any) -> bool:
    """No value: None, pandas' NA or NaT, or a NaN (a Python, numpy or Decimal float)."""
    if v is None:
        return True
    # pandas' NA and NaT exist only once pandas is loaded: the queue verbs never load it.
    pd = sys.modules.get("pandas")
    if pd is not None and (v is pd.NA or v is pd.NaT):
        return True
    if isinstance(v, float | np.floating):
        return bool(np.isnan(v))
    if isinstance(v, np.datetime64 | np.timedelta64):
        return bool(np.isnat(v))
    return isinstance(v, Decimal) and v.is_nan()


def cast_or_none(v: Any, cast: Callable[[Any], Any] = float) -> Any:
    """`cast(v)`, or None for no value."""
    return None if missing(v) else cast(v)


def plain(v: Any) -> Any:
    if missing(v):
        return None
    if isinstance(v, np.datetime64):
        v = v.astype("datetime64[us]").item()  # .item() of a nanosecond datetime64 is an int
    elif isinstance(v, np.generic):
        v = v.item()
    elif isinstance(v, Decimal):
        v = float(v)
    if isinstance(v, float):
        return v if math.isfinite(v) else None
    if isinstance(v, datetime | date | time):  # pd.Timestamp is a datetime
        return v.isoformat()
    if isinstance(v, dict):
        return {k: plain(x) for k, x in v.items()}
    if isinstance(v, list | tuple):
        return [plain(x) for x in v]
    return v
