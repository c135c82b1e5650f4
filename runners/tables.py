"""Tables for the terminal and for logs: one renderer every verb uses.

On a terminal a Rich table that fits the terminal's width: when all columns would not fit without folding
their cells, the least important columns are left out (and a footnote says which), never wrapped into
unreadable multi-line cells. When stdout is not a terminal (CI logs, pipes, `| tee`) a compact layout
instead: plain aligned columns, one line per row, no box characters and no colour codes, so `grep`, `cut`
and a CI log viewer see every row whole.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, replace

from rich import box
from rich.console import Console
from rich.measure import Measurement
from rich.table import Table
from rich.text import Text

from analysis.text import printable


@dataclass(frozen=True)
class Column:
    header: str
    justify: str = "left"  # left | right
    # 0 = always shown; higher numbers are left out first when a terminal is too narrow.
    drop: int = 0
    # Cells of this column are Rich markup we wrote (`[green]ok[/]`); every other cell is shown as plain text,
    # so user text (sweep, model and host names) can never be read as markup.
    markup: bool = False


def _rich_table(title: str | None, columns: Sequence[Column], rows: Sequence[Sequence[str]]) -> Table:
    table = Table(title=title, box=box.SIMPLE_HEAD, pad_edge=False, title_justify="left", show_edge=False)
    for c in columns:
        table.add_column(c.header, justify="right" if c.justify == "right" else "left", no_wrap=True)
    for r in rows:
        table.add_row(
            *(Text.from_markup(v) if c.markup else Text(v) for v, c in zip(r, columns, strict=True))
        )
    return table


def _fits(console: Console, table: Table) -> bool:
    # Measured without the console's limit: Rich clamps a measurement to the width it may use.
    unbounded = console.options.update_width(10_000)
    return Measurement.get(console, unbounded, table).maximum <= console.width


def _plain(value: str, column: Column) -> str:
    return Text.from_markup(value).plain if column.markup else value


def compact_lines(columns: Sequence[Column], rows: Sequence[Sequence[str]]) -> list[str]:
    """Aligned plain-text lines: header, then one line per row, columns two spaces apart."""
    cells = [
        [c.header for c in columns],
        *[[_plain(v, c) for v, c in zip(r, columns, strict=True)] for r in rows],
    ]
    widths = [max(len(row[i]) for row in cells) for i in range(len(columns))]
    out = []
    for row in cells:
        parts = [
            v.rjust(w) if c.justify == "right" else v.ljust(w)
            for v, w, c in zip(row, widths, columns, strict=True)
        ]
        out.append("  ".join(parts).rstrip())
    return out


def print_table(
    console: Console,
    columns: Sequence[Column],
    rows: Sequence[Sequence[str]],
    *,
    title: str | None = None,
) -> None:
    """Print rows under `columns`: a fitted Rich table on a terminal, the compact layout otherwise.

    Cells of `markup` columns may carry Rich markup (`[green]ok[/]`); the compact layout strips it.
    """
    # Escaped before anything is measured, so an escaped control character keeps its column aligned.
    columns = [replace(c, header=printable(c.header)) for c in columns]
    rows = [[printable(v) for v in r] for r in rows]
    title = printable(title) if title else title
    if not console.is_terminal:
        if title:
            console.print(title, markup=False, highlight=False, soft_wrap=True)
        for line in compact_lines(columns, rows):
            console.print(line, markup=False, highlight=False, soft_wrap=True)
        return
    keep = list(range(len(columns)))
    hidden: list[str] = []
    while True:
        table = _rich_table(title, [columns[i] for i in keep], [[r[i] for i in keep] for r in rows])
        droppable = [i for i in keep if columns[i].drop > 0]
        if _fits(console, table) or not droppable:
            break
        worst = max(droppable, key=lambda i: (columns[i].drop, i))
        keep.remove(worst)
        hidden.append(columns[worst].header)
    console.print(table)
    if hidden:
        console.print(
            f"[dim]{len(hidden)} column(s) left out to fit {console.width} columns: {', '.join(hidden)} "
            "(widen the terminal, or pipe the output for every column)[/]"
        )
