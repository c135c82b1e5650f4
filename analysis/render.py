"""Every view specbench writes, as CSV, JSON or Markdown, from one declaration of its columns.

A view lists its `Column`s and `Document.text` writes it in each format, for the CLI and the dashboard alike;
the view keeps its rows, the JSON fields around them and its Markdown prose. Every row says its kind of number
(analysis.labels.run_kind) in a `kind` column: in the view's tuple, or `with_kind` for a view of one run.

No CSV cell starts a formula (OWASP, "CSV Injection": `=HYPERLINK(...)` in a model name becomes a link,
`=cmd|' /C calc'!A0` runs a program): a cell starting with `=`, `+`, `-`, `@`, a tab or a carriage return gets
OWASP's leading `'`. Numbers, and text that is exactly a decimal number (`-5.2`, `1e-3`), stay as they are;
`-1+2`, `-cmd` and `-inf` get the `'`. Control characters but newline and tab are escaped (text.printable).
"""

from __future__ import annotations

import csv
import io
import json
import re
import unicodedata
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field, replace
from typing import TYPE_CHECKING, Any, Literal

from analysis import md
from analysis.plain import missing, plain
from analysis.text import has_control, printable

if TYPE_CHECKING:  # pandas loads with the first table written: the queue verbs that print JSON never need it
    import pandas as pd

Format = Literal["csv", "json", "md"]
DASH = "–"  # no value, in Markdown


@dataclass(frozen=True)
class Column:
    """A view's column: row key, Markdown header, number format (`d`: an integer, in CSV too), no-value mark,
    text (escaped, left-aligned) or number (right-aligned); `show` builds the Markdown cell from the row."""

    key: str
    head: str = ""
    fmt: str = ""
    text: bool = False
    missing: str = DASH
    show: Callable[[Mapping[str, Any]], str] | None = None

    def cell(self, row: Mapping[str, Any]) -> str:
        if self.show is not None:
            return self.show(row)
        v = row.get(self.key)
        if missing(v):
            return self.missing
        return md.text(v) if self.text else number(v, self.fmt)


def columns(keys: Iterable[str], *, ints: Iterable[str] = (), text: Iterable[str] = ()) -> tuple[Column, ...]:
    """The columns of `keys`, in order: those in `ints` integers, those in `text` text, the rest numbers."""
    ints, text = set(ints), set(text)
    return tuple(Column(k, fmt="d" if k in ints else "", text=k in text) for k in keys)


# ------------------------------------------------------------------------------------------- numbers


def number(v: Any, fmt: str = "", mark: str = DASH) -> str:
    """`v` in format `fmt` ("d": as an integer), or `mark` for no value."""
    if missing(v):
        return mark
    return format(int(v) if fmt == "d" else v, fmt)


def magnitude(v: Any, mark: str = DASH) -> str:
    """A measured value to the precision it needs: `1,234` from 100 up, `12.35` below."""
    if missing(v):
        return mark
    x = float(v)
    return f"{x:,.0f}" if abs(x) >= 100 else f"{x:,.2f}"


def signed_pct(v: Any, minus: str = "-") -> str:
    """A relative change as `+5.0%`; `minus="−"` for prose, where a typographic minus reads better."""
    return DASH if missing(v) else f"{float(v) * 100:+.1f}%".replace("-", minus)


def interval(low: Any, high: Any, fmt: str = ".3f") -> str:
    """`[0.950, 1.050]`, or a dash when either end is missing."""
    return DASH if missing(low) or missing(high) else f"[{low:{fmt}}, {high:{fmt}}]"


# ------------------------------------------------------------------------------------------- Markdown


def md_table(rows: Iterable[Mapping[str, Any]], cols: Sequence[Column]) -> list[str]:
    return [
        "| " + " | ".join(c.head or c.key for c in cols) + " |",
        "|" + "|".join("---" if c.text else "---:" for c in cols) + "|",
        *("| " + " | ".join(c.cell(r) for c in cols) + " |" for r in rows),
    ]


def md_title(text: Any) -> list[str]:
    """A bold title line (user text: it holds sweep names) and the blank line under it."""
    return [f"**{md.text(text)}**", ""]


# ------------------------------------------------------------------------------------------- CSV

# OWASP's list: a cell starting with one of these (after padding, normalised) is a formula or starts one.
_FORMULA_START = re.compile(r"^[=+\-@\t\r\n]")
# OWASP's own starts that are also white space: never skipped as padding.
_BREAKS = "\t\r\n"
_NUMBER = re.compile(r"[ ]*[+-]?(?:\d+(?:\.\d*)?|\.\d+)(?:[eE][+-]?\d+)?[ ]*")


def csv_cell(value: Any) -> Any:
    """`value` as a CSV cell: a formula's start gets a leading `'`, control characters are escaped."""
    if not isinstance(value, str):
        return value
    text = printable(value, multiline=True)
    if starts_formula(text) and not _NUMBER.fullmatch(text):
        return "'" + text
    return text


def starts_formula(text: str) -> bool:
    """Whether `text`'s first character that shows, NFKC-normalised (`＝` is `=`), is one of _FORMULA_START."""
    i = 0
    # Skipped as padding: spaces of any kind and format characters (zero-width space, word joiner, BOM).
    while i < len(text) and (
        (text[i].isspace() and text[i] not in _BREAKS) or unicodedata.category(text[i]) == "Cf"
    ):
        i += 1
    return bool(_FORMULA_START.match(unicodedata.normalize("NFKC", text[i : i + 4])))


def _neutral(value: Any) -> Any:
    # A cell opening with a letter or digit (ASCII or not) starts no formula: only the rest needs `csv_cell`.
    if isinstance(value, str) and (not value[:1].isalnum() or has_control(value)):
        return csv_cell(value)
    return value


def safe_frame(df: pd.DataFrame) -> pd.DataFrame:
    """`df` with every text cell (and column name) passed through `csv_cell`; numeric columns untouched."""
    import pandas as pd

    out = df.copy()
    for col in out.columns:
        s = out[col]
        if pd.api.types.is_numeric_dtype(s) or pd.api.types.is_datetime64_any_dtype(s):
            continue
        out[col] = s.map(_neutral)  # one regex search per cell: 100k rows in a few hundredths of a second
    out.columns = [csv_cell(c) if isinstance(c, str) else c for c in out.columns]
    return out


def frame_of(rows: pd.DataFrame | Sequence[Mapping[str, Any]], cols: Sequence[Column]) -> pd.DataFrame:
    """The declared columns that `rows` has, in declared order; integers stay integers (never 3.0)."""
    import pandas as pd

    if isinstance(rows, pd.DataFrame):
        frame = rows[[c.key for c in cols if c.key in rows.columns]]
    else:
        frame = pd.DataFrame.from_records(list(rows), columns=[c.key for c in cols])
    ints = {c.key: "Int64" for c in cols if c.fmt == "d" and c.key in frame.columns}
    return frame.astype(ints) if ints else frame


def csv_text(
    rows: pd.DataFrame | Sequence[Mapping[str, Any]],
    cols: Sequence[Column] | None = None,
    *,
    preamble: Sequence[str] = (),
    float_format: str | None = "%.6g",
) -> str:
    """The rows (their `cols`, else all) as formula-safe CSV, floats to 6 significant digits, no value empty;
    each `preamble` line (`# ...`) is one cell above the header, quoted if it holds a comma."""
    import pandas as pd

    frame = rows if cols is None else frame_of(rows, cols)
    assert isinstance(frame, pd.DataFrame)  # records are written by their declared columns
    buf = io.StringIO()
    csv.writer(buf, lineterminator="\n").writerows([line] for line in preamble)
    safe_frame(frame).to_csv(buf, index=False, float_format=float_format, lineterminator="\n", na_rep="")
    return buf.getvalue()


def comment_value(v: Any) -> str:
    """A value on one `#` line of a CSV preamble: backslashes and control characters (newlines too) escaped,
    since a newline in a model name once injected a header row."""
    if v is None:
        return ""
    return "".join(
        "\\\\" if c == "\\" else c if c.isprintable() else c.encode("unicode_escape").decode("ascii")
        for c in str(v)
    )


# ------------------------------------------------------------------------------------------- JSON


def records(frame: pd.DataFrame) -> list[dict[str, Any]]:
    """The rows as plain JSON values (analysis.plain)."""
    return [{k: plain(v) for k, v in rec.items()} for rec in frame.to_dict(orient="records")]


def json_text(doc: dict[str, Any] | list[Any]) -> str:
    """`doc` as indented JSON of plain values (analysis.plain), ending in a newline."""
    return json.dumps(plain(doc), indent=2, default=str) + "\n"


# ------------------------------------------------------------------------------------------- a view


@dataclass(frozen=True)
class Document:
    """A view to write: rows, columns, JSON fields before (`head`) and after (`tail`) rows, CSV preamble."""

    rows: pd.DataFrame | Sequence[Mapping[str, Any]]
    columns: tuple[Column, ...]
    markdown: Callable[[], str]
    head: Mapping[str, Any] = field(default_factory=dict)
    tail: Mapping[str, Any] = field(default_factory=dict)
    rows_key: str = "rows"
    preamble: tuple[str, ...] = ()

    def text(self, fmt: Format) -> str:
        if fmt == "csv":
            return csv_text(self.rows, self.columns, preamble=self.preamble)
        if fmt == "json":
            rows = records(frame_of(self.rows, self.columns))
            return json_text({**self.head, self.rows_key: rows, **self.tail})
        return self.markdown()


KIND = Column("kind", text=True)


def with_kind(doc: Document, kind: str) -> Document:
    """`doc` with `kind` in a first column and the JSON head: for a view whose rows do not carry it."""
    import pandas as pd

    rows = (
        doc.rows.assign(kind=kind)
        if isinstance(doc.rows, pd.DataFrame)
        else [{**r, "kind": kind} for r in doc.rows]
    )
    return replace(doc, rows=rows, columns=(KIND, *doc.columns), head={**doc.head, "kind": kind})
