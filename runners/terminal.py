"""Text bound for a terminal: control characters are shown as escapes (analysis.text.printable), never sent raw.

Every console of the CLI runs what it prints through `printable` (`guard`, a Rich render hook: messages,
f-strings, errors), the tables escape each cell before measuring it (runners/tables.py, so columns stay
aligned), and the logs of the long-running verbs go through `LogFormatter`.
"""

from __future__ import annotations

import logging

from rich.console import Console, ConsoleOptions, ConsoleRenderable, RenderableType, RenderHook, RenderResult
from rich.measure import Measurement
from rich.segment import Segment

from analysis.text import has_control, printable


class _Escaped:
    """A renderable as Rich renders it, with the text of every segment escaped (control segments, which Rich
    itself emits to move the cursor, pass unchanged)."""

    def __init__(self, inner: RenderableType):
        self.inner = inner

    def __rich_console__(self, console: Console, options: ConsoleOptions) -> RenderResult:
        for seg in console.render(self.inner, options):
            if seg.control or not has_control(seg.text):
                yield seg
            else:
                yield Segment(printable(seg.text, multiline=True), seg.style)

    def __rich_measure__(self, console: Console, options: ConsoleOptions) -> Measurement:
        return Measurement.get(console, options, self.inner)


class _EscapeHook(RenderHook):
    def process_renderables(self, renderables: list[ConsoleRenderable]) -> list[ConsoleRenderable]:
        return [_Escaped(r) for r in renderables]


def guard(console: Console) -> Console:
    """`console`, with everything it prints from now on escaped by `printable` (newlines kept), and a closed
    pipe left to the CLI (`runners.cli.reader_gone`: exit 0) instead of Rich's own exit 1."""
    console.push_render_hook(_EscapeHook())
    console.on_broken_pipe = _reader_gone  # type: ignore[method-assign]
    return console


def _reader_gone() -> None:
    raise BrokenPipeError("stdout's reader went away")


class LogFormatter(logging.Formatter):
    """A log formatter whose lines carry no raw control characters (a traceback keeps its newlines)."""

    def format(self, record: logging.LogRecord) -> str:
        return printable(super().format(record), multiline=True)


def log_to_stderr(level: int = logging.INFO) -> None:
    """The logging set-up of the long-running verbs (worker, scheduler): timestamped lines on stderr."""
    handler = logging.StreamHandler()
    handler.setFormatter(LogFormatter("%(asctime)s %(name)s %(message)s"))
    logging.basicConfig(level=level, handlers=[handler])
