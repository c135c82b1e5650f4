"""CSV that a spreadsheet opens as data: no cell starts a formula, no cell holds a terminal control sequence.

Excel, LibreOffice and Google Sheets read a cell that starts with `=`, `+`, `-` or `@` (or a tab or carriage
return before one) as a formula: `=HYPERLINK(...)` in a model name becomes a link, `=cmd|' /C calc'!A0` asks
to run a program (OWASP, "CSV Injection"). Every CSV writer of specbench passes its cells through `cell`
(or a whole frame through `frame`), which applies OWASP's rule: such a cell gets a leading `'`, which
spreadsheets show as text and never evaluate.

Numbers stay numbers. An int or float is written as it is (a negative number is not a formula), and so is
text that is exactly a decimal number, such as `-5.2`, `+3` or `1e-3`: a spreadsheet reads it as that number.
Text that only starts like one (`-1+2`, `-cmd`, `-inf`) gets the `'`. Leading spaces do not hide a formula:
` =1+1` gets one too, and neither do look-alikes a spreadsheet may fold to ASCII: the cell is judged after
Unicode compatibility normalisation (NFKC: fullwidth `＝＋－＠` become `=+-@`) with leading spaces and invisible
characters (no-break space, zero-width space, byte-order mark, word joiner) set aside (issue 35).

Control characters other than newline and tab are written as escapes (analysis.text.printable), so `cat`
of an export cannot drive the terminal.
"""

from __future__ import annotations

import re
import unicodedata
from typing import Any

import pandas as pd

from analysis.text import printable

# OWASP's list: a cell starting with one of these (after padding, normalised) is a formula or starts one.
_FORMULA_START = re.compile(r"^[=+\-@\t\r\n]")
# OWASP's own starts that are also white space: never skipped as padding.
_BREAKS = "\t\r\n"
# Control characters `cell` escapes: a cell holding one always goes through it.
_CONTROL = re.compile("[\x00-\x08\x0b-\x1f\x7f-\x9f\u061c\u200e\u200f\u2028-\u202e\u2066-\u2069]")
_NUMBER = re.compile(r"[ ]*[+-]?(?:\d+(?:\.\d*)?|\.\d+)(?:[eE][+-]?\d+)?[ ]*")


def cell(value: Any) -> Any:
    """`value` as a CSV cell: text that would start a formula gets a leading `'`; anything else, numbers
    included, is returned as it is (text with its control characters escaped)."""
    if not isinstance(value, str):
        return value
    text = printable(value, multiline=True)
    if starts_formula(text) and not _NUMBER.fullmatch(text):
        return "'" + text
    return text


def starts_formula(text: str) -> bool:
    """Whether a spreadsheet may read `text` as a formula: its first character that shows, once normalised,
    is one of OWASP's (`=`, `+`, `-`, `@`, a tab or a line break)."""
    i = 0
    # Padding that shows nothing: spaces of any kind (a no-break space) and format characters (a zero-width
    # space, a word joiner, a byte-order mark).
    while i < len(text) and (
        (text[i].isspace() and text[i] not in _BREAKS) or unicodedata.category(text[i]) == "Cf"
    ):
        i += 1
    return bool(_FORMULA_START.match(unicodedata.normalize("NFKC", text[i : i + 4])))


def _cheap(value: Any) -> Any:
    # A cell opening with a letter or a digit (ASCII or not) starts no formula: only the rest needs `cell`.
    if isinstance(value, str) and (not value[:1].isalnum() or _CONTROL.search(value)):
        return cell(value)
    return value


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
