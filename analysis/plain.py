"""Values as JSON and a CSV header take them: the one conversion every export uses (report, export, windows,
v2_vs_v1).

What reaches an export comes from pandas (numpy scalars, NaN for SQL NULL, `pd.NA` in nullable integer
columns, `NaT`, Timestamps) or from the database (datetimes, and `Decimal` where PostgreSQL computes a
NUMERIC). `json.dumps` rejects some of these (pd.NA, Decimal, date) and writes others as invalid JSON (NaN,
Infinity), and `default=str` would write a datetime with a space and pd.NA as the text "<NA>". So:

- no value (None, pd.NA, NaT, NaN of any float type) and a non-finite number (±inf: JSON has none, and no
  stored measurement is infinite) become None: `null` in JSON, an empty cell;
- a date, time or datetime (pandas Timestamps and numpy datetime64 included) becomes its ISO 8601 text;
- a numpy scalar becomes the Python number or bool it holds, a Decimal a float;
- a dict, list or tuple (a JSON column such as a run's provenance) is converted item by item (a tuple as a
  list); anything else is returned as it is.
"""

from __future__ import annotations

import math
import sys
from datetime import date, datetime, time
from decimal import Decimal
from typing import Any

import numpy as np


def missing(v: Any) -> bool:
    """No value: None, pandas' NA or NaT, or a NaN (a Python, numpy or Decimal float)."""
    if v is None:
        return True
    pd = sys.modules.get(
        "pandas"
    )  # its NA and NaT exist only once pandas is loaded: the queue verbs never load it
    if pd is not None and (v is pd.NA or v is pd.NaT):
        return True
    if isinstance(v, float | np.floating):
        return bool(np.isnan(v))
    if isinstance(v, np.datetime64 | np.timedelta64):
        return bool(np.isnat(v))
    return isinstance(v, Decimal) and v.is_nan()


def plain(v: Any) -> Any:
    """`v` as a plain JSON value (see the module docstring)."""
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
