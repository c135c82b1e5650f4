"""analysis.plain: the one value conversion of the JSON exports (compare report, points export, windows and
v2-vs-v1 views), and the edge cases the four copies it replaced got wrong."""

from __future__ import annotations

import json
from datetime import UTC, date, datetime, time
from decimal import Decimal
from typing import Any

import numpy as np
import pandas as pd
import pytest

from analysis import v2_vs_v1
from analysis import windows as windows_view
from analysis.plain import missing, plain

T = datetime(2026, 3, 1, 12, 0, 5, tzinfo=UTC)


def strict_json(text: str) -> Any:
    """json.loads that refuses NaN and Infinity, which are not JSON (JavaScript's JSON.parse and jq reject them)."""

    def refuse(const: str) -> Any:
        raise ValueError(f"not JSON: {const}")

    return json.loads(text, parse_constant=refuse)


@pytest.mark.parametrize(
    ("value", "expected"),
    [
        (None, None),
        (pd.NA, None),
        (pd.NaT, None),
        (float("nan"), None),
        (np.float64("nan"), None),
        (np.float32("nan"), None),
        (Decimal("NaN"), None),
        (np.datetime64("NaT"), None),
        (float("inf"), None),
        (-float("inf"), None),
        (np.float32("-inf"), None),
        (Decimal("Infinity"), None),
        (1.5, 1.5),
        (np.float32(0.5), 0.5),
        (np.int64(7), 7),
        (np.bool_(True), True),
        (True, True),
        (3, 3),
        ("text", "text"),
        (Decimal("2.25"), 2.25),
        (T, "2026-03-01T12:00:05+00:00"),
        (pd.Timestamp(T), "2026-03-01T12:00:05+00:00"),
        (np.datetime64("2026-03-01T12:00:05"), "2026-03-01T12:00:05"),
        (date(2026, 3, 1), "2026-03-01"),
        (time(12, 0, 5), "12:00:05"),
        ({"a": float("nan"), "b": [np.int64(1), T]}, {"a": None, "b": [1, "2026-03-01T12:00:05+00:00"]}),
        ((1, float("inf")), [1, None]),
    ],
)
def test_plain(value: Any, expected: Any) -> None:
    got = plain(value)
    assert got == expected and type(got) is type(expected)
    json.dumps(got, allow_nan=False)  # always serialisable, without default= and without NaN


def test_missing_is_no_value_not_a_falsy_one() -> None:
    assert all(missing(v) for v in (None, pd.NA, pd.NaT, float("nan"), np.float32("nan"), Decimal("NaN")))
    assert not any(missing(v) for v in (0, 0.0, "", False, float("inf"), [], {}))


def test_windows_json_writes_a_datetime_as_iso_and_no_infinity() -> None:
    # window_started_at as Python datetimes (an object column, as a mixed-timezone read gives) and a telemetry
    # value of inf (a hand edit): before, default=str wrote "2026-03-01 12:00:05+00:00" and json wrote Infinity.
    frame = windows_view.windows(
        pd.DataFrame(
            {
                "order_index": [0, 1],
                "batch_size": [1, 1],
                "spec_mode": ["v1", "v1"],
                "repeat": [0, 1],
                "status": ["ok", "ok"],
                "output_throughput": [100.0, 110.0],
                "window_started_at": pd.Series([T, None], dtype=object),
                "telemetry": [{"power_mean_w": float("inf")}, {"power_mean_w": 500.0}],
            }
        )
    )
    doc = strict_json(windows_view.document(frame).text("json"))
    assert doc["rows"][0]["window_started_at"] == "2026-03-01T12:00:05+00:00"
    assert doc["rows"][1]["window_started_at"] is None
    assert doc["rows"][0]["power_mean_w"] is None and doc["rows"][1]["power_mean_w"] == 500.0


def test_v2_vs_v1_json_writes_a_missing_integer_as_null() -> None:
    # A nullable integer column holds pd.NA for a missing value: default=str wrote it as the text "<NA>".
    frame = pd.DataFrame(
        {"batch_size": [1, 4], "topk": pd.array([1, None], dtype="Int64"), "ratio": [1.1, np.inf]}
    )
    doc = strict_json(v2_vs_v1.document(frame).text("json"))
    assert doc["rows"] == [
        {"batch_size": 1, "topk": 1, "ratio": 1.1},
        {"batch_size": 4, "topk": None, "ratio": None},
    ]
