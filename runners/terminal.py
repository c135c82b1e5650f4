"""Text bound for a terminal: control characters shown as escapes (analysis.text.printable), never raw.

Consoles via `guard`, tables per cell (runners/tables.py), logs via `LogFormatter`.
"""

import logging

from rich.console import Console, ConsoleOptions, ConsoleRenderable, RenderableType, RenderHook, RenderResult
from rich.measure import Measurement
from rich.segment import Segment

from analysis.text import has_control, printable


class _Escaped:
    """A renderable with every text segment escaped (Rich's own control segments pass unchanged)."""

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
    """`console` escaping all it prints, a closed pipe left to the CLI (exit 0, not Rich's 1)."""
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
