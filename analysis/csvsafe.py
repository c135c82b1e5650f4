"""CSV that a spreadsheet opens as data: no cell starts a formula, no cell holds a terminal control sequence.

Excel, LibreOffice and Google Sheets read a cell that starts with `=`, `+`, `-` or `@` (or a tab or carriage
return before one) as a formula: `=HYPERLINK(...)` in a model name becomes a link, `=cmd|' /C calc'!A0` asks
to run a program (OWASP, "CSV Injection"). Every CSV writer of specbench passes its cells through `cell`
(or a whole frame through `frame`), which applies OWASP's rule: such a cell gets a leading `'`, which
spreadsheets show as text and never evaluate.

Numbers stay numbers. An int or float is written as it is (a negative number is not a formula), and so is
text that is exactly a decimal number, such as `-5.2`, `+3` or `1e-3`: a spreadsheet reads it as that number.
Text that only starts like one (`-1+2`, `-cmd`, `-inf`) gets the `'`. Leading spaces do not hide a formula:
` =1+1` gets one too.

Control characters other than newline and tab are written as escapes (analysis.text.printable), so `cat`
of an export cannot drive the terminal.
"""

from __future__ import annotations

import re
from typing import Any

import pandas as pd

from analysis.text import printable

# OWASP's list: a cell starting with one of these (after any spaces) is a formula or starts one.
_FORMULA_START = re.compile(r"^[ ]*[=+\-@\t\r\n]")
# What may need a change: a formula start, or a control character (a cheap vectorised test for `frame`).
_SUSPECT = re.compile(
    r"^[ ]*[=+\-@\t\r\n]|[\x00-\x08\x0b-\x1f\x7f-\x9f\u061c\u200e\u200f\u2028-\u202e\u2066-\u2069]"
)
_NUMBER = re.compile(r"[ ]*[+-]?(?:\d+(?:\.\d*)?|\.\d+)(?:[eE][+-]?\d+)?[ ]*")


def cell(value: Any) -> Any:
    """`value` as a CSV cell: text that would start a formula gets a leading `'`; anything else, numbers
    included, is returned as it is (text with its control characters escaped)."""
    if not isinstance(value, str):
        return value
    text = printable(value, multiline=True)
    if _FORMULA_START.match(text) and not _NUMBER.fullmatch(text):
        return "'" + text
    return text


def _cheap(value: Any) -> Any:
    return cell(value) if isinstance(value, str) and _SUSPECT.search(value) else value


def row(values: list[Any]) -> list[Any]:
    return [cell(v) for v in values]


def record(values: dict[str, Any]) -> dict[str, Any]:
    return {k: cell(v) for k, v in values.items()}


def frame(df: pd.DataFrame) -> pd.DataFrame:
    """`df` with every text cell (and column name) passed through `cell`; numeric columns are untouched."""
    out = df.copy()
    for col in out.columns:
        s = out[col]
        if pd.api.types.is_numeric_dtype(s) or pd.api.types.is_datetime64_any_dtype(s):
            continue
        # One cheap search per cell; only a suspect goes through `cell` (100k rows: a few hundredths of a s).
        out[col] = s.map(_cheap)
    out.columns = [cell(c) if isinstance(c, str) else c for c in out.columns]
    return out
