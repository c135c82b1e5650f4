"""Tables for the terminal and for logs: one renderer every verb uses.

A table fits its width (a terminal's, or `COLUMNS` when piped): names are cut or wrapped, then the least
important columns left out, a footnote says which. Piped without `COLUMNS`: every column, a line per row.
"""

import os
import textwrap
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field, replace
from typing import Any

from rich import box
from rich.cells import cell_len
from rich.console import Console
from rich.table import Table
from rich.text import Text

from analysis.text import printable

RICH_GAP = 2
COMPACT_GAP = 2


@dataclass(frozen=True)
class Column:
    header: str
    justify: str = "left"  # left | right
    drop: int = 0  # 0 = always shown; higher numbers are left out first
    markup: bool = False  # cells are Rich markup we wrote; others are plain, so user text is never markup
    shrink: int = 0  # the narrowest a cut may make it (cells end in `…`); 0 = never cut
    fold: bool = False  # wrap cut cells instead (prose)
    middle: bool = False  # cut in the middle (`synthetic-…0324-h100`): names sharing a long prefix
    cell: Callable[[Any], str] | None = None  # a row's cell in this column, for print_rows


@dataclass
class Layout:
    """Which columns show at which width, and what the footnote says."""

    keep: list[int]
    widths: dict[int, int]
    hidden: list[str] = field(default_factory=list)
    cut: list[str] = field(default_factory=list)


def _plain(value: str, column: Column) -> str:
    return Text.from_markup(value).plain if column.markup else value


def fit(columns: Sequence[Column], rows: Sequence[Sequence[str]], width: int | None, gap: int) -> Layout:
    """The columns to show and their widths for `width` (None: every column at its natural width)."""
    plain = [[_plain(v, c) for v, c in zip(r, columns, strict=True)] for r in rows]
    natural = [
        max([cell_len(c.header), *(cell_len(line) for r in plain for line in r[i].splitlines() or [""])])
        for i, c in enumerate(columns)
    ]
    keep = list(range(len(columns)))
    hidden: list[str] = []
    while True:
        widths = {i: natural[i] for i in keep}
        if width is None:
            return Layout(keep, widths, hidden)
        excess = sum(widths.values()) + gap * (len(keep) - 1) - width
        room = sum(max(0, natural[i] - columns[i].shrink) for i in keep if columns[i].shrink)
        droppable = [i for i in keep if columns[i].drop > 0]
        if excess <= 0:
            return Layout(keep, widths, hidden)
        if room >= excess or not droppable:
            cut = _shrink(widths, columns, excess)
            return Layout(keep, widths, hidden, [columns[i].header for i in cut if not columns[i].fold])
        worst = max(droppable, key=lambda i: (columns[i].drop, i))
        keep.remove(worst)
        hidden.append(columns[worst].header)


def _shrink(widths: dict[int, int], columns: Sequence[Column], excess: int) -> list[int]:
    """Narrow the widest cuttable column, one cell at a time, until `excess` is gone or none can give more."""
    cut: set[int] = set()
    while excess > 0:
        can = [i for i in widths if columns[i].shrink and widths[i] > columns[i].shrink]
        if not can:
            break
        widest = max(can, key=lambda i: (widths[i], i))
        widths[widest] -= 1
        cut.add(widest)
        excess -= 1
    return sorted(cut)


def _cut(text: str, width: int, middle: bool = False) -> str:
    if cell_len(text) <= width:
        return text
    if middle and width >= 5:
        tail = ""
        for ch in reversed(text):  # the end, as many cells as half the room holds
            if cell_len(ch + tail) > (width - 1) // 2:
                break
            tail = ch + tail
        head = Text(text)
        head.truncate(width - 1 - cell_len(tail))
        return head.plain + "…" + tail
    t = Text(text)
    t.truncate(width, overflow="ellipsis")
    return t.plain


def compact_lines(
    columns: Sequence[Column], rows: Sequence[Sequence[str]], layout: Layout | None = None
) -> list[str]:
    """Aligned plain-text lines, header first, columns two spaces apart, at full width unless `layout`."""
    layout = layout or fit(columns, rows, None, COMPACT_GAP)
    out = [_line([columns[i].header for i in layout.keep], columns, layout)]
    for r in rows:
        cells: list[list[str]] = []
        for i in layout.keep:
            text = " ".join(_plain(r[i], columns[i]).splitlines())
            w = layout.widths[i]
            if columns[i].fold and cell_len(text) > w:
                cells.append(textwrap.wrap(text, w, break_on_hyphens=False) or [""])  # names stay whole
            else:
                cells.append([_cut(text, w, columns[i].middle)])
        for n in range(max(len(c) for c in cells)):
            out.append(_line([c[n] if n < len(c) else "" for c in cells], columns, layout))
    return out


def _line(values: Sequence[str], columns: Sequence[Column], layout: Layout) -> str:
    parts = []
    for v, i in zip(values, layout.keep, strict=True):
        w = layout.widths[i]
        v = _cut(v, w, columns[i].middle)
        pad = " " * (w - cell_len(v))
        parts.append(pad + v if columns[i].justify == "right" else v + pad)
    return "  ".join(parts).rstrip()


def _rich_table(
    title: str | None, columns: Sequence[Column], rows: Sequence[Sequence[str]], layout: Layout
) -> Table:
    table = Table(
        title=title,
        box=box.SIMPLE_HEAD,
        pad_edge=False,
        collapse_padding=True,
        title_justify="left",
        show_edge=False,
    )
    for i in layout.keep:
        c = columns[i]
        table.add_column(
            c.header,
            justify="right" if c.justify == "right" else "left",
            width=layout.widths[i],
            no_wrap=not c.fold,
            overflow="fold" if c.fold else "ellipsis",
        )
    for r in rows:
        table.add_row(
            *(
                Text.from_markup(r[i])
                if columns[i].markup
                else Text(_cut(r[i], layout.widths[i], True) if columns[i].middle else r[i])
                for i in layout.keep
            )
        )
    return table


def _env_width() -> int | None:
    """`COLUMNS` when set to a sensible width: piped output then fits it."""
    text = os.environ.get("COLUMNS", "").strip()
    return int(text) if text.isdigit() and int(text) >= 20 else None


def _footnote(layout: Layout, width: int, terminal: bool) -> str | None:
    parts = []
    if layout.hidden:
        parts.append(
            f"{len(layout.hidden)} column(s) left out to fit {width} columns: {', '.join(layout.hidden)}"
        )
    if layout.cut:
        parts.append(f"{', '.join(layout.cut)} cut short (…)")
    if not parts:  # wrapped cells lose nothing: no footnote for them alone
        return None
    every = "widen the terminal, or pipe the output" if terminal else "unset COLUMNS"
    return "; ".join(parts) + f" ({every} for every column)"


def say(console: Console, text: str | Text, style: str | None = None) -> None:
    """A line of prose next to a table, wrapped as the table is fitted (a log line stays one line)."""
    line = text if isinstance(text, Text) else Text(text)
    if style:
        line.stylize(style)
    if console.is_terminal:
        console.print(line)
        return
    width = _env_width()
    if width is None:
        console.print(line, soft_wrap=True)
        return
    for part in textwrap.wrap(line.plain, width) or [""]:
        console.print(part, markup=False, highlight=False, soft_wrap=True)


def print_table(
    console: Console, columns: Sequence[Column], rows: Sequence[Sequence[str]], *, title: str | None = None
) -> None:
    """Print rows under `columns`: fitted to a terminal, or to `COLUMNS` when piped, or whole in a log."""
    # Escaped before anything is measured, so an escaped control character keeps its column aligned.
    columns = [replace(c, header=printable(c.header)) for c in columns]
    rows = [[printable(v) for v in r] for r in rows]
    title = printable(title) if title else title
    if not console.is_terminal:
        if title:
            say(console, title)  # wrapped to COLUMNS when set, like the table under it
        width = _env_width()
        layout = fit(columns, rows, width, COMPACT_GAP)
        for line in compact_lines(columns, rows, layout):
            console.print(line, markup=False, highlight=False, soft_wrap=True)
        note = _footnote(layout, width, terminal=False) if width is not None else None
        if note:
            say(console, note)
        return
    layout = fit(columns, rows, console.width, RICH_GAP)
    console.print(_rich_table(title, columns, rows, layout))
    note = _footnote(layout, console.width, terminal=True)
    if note:
        console.print(Text(note, style="dim"))


def print_rows(
    console: Console, columns: Sequence[Column], rows: Iterable[Any], *, title: str | None = None
) -> None:
    """`print_table` of what each column's `cell` makes of each row."""
    cells = [[c.cell(r) if c.cell is not None else "" for c in columns] for r in rows]
    print_table(console, columns, cells, title=title)
