"""Markdown that user text cannot break out of: table cells, inline code, fenced blocks, shell lines.

Names, hosts and sweep YAML come from whoever submitted a sweep; raw, they could close a `<details>`, inject
`<img>` or a link, end a table cell or close a code fence, so every user string passes one of these. GitHub
and Streamlit also make elements after parsing, where a backslash no longer counts (URLs, `www.`, `@name`,
`:emoji:`, `:material/icon:`, `:red[...]`): `text` breaks each such pattern with an invisible WORD JOINER.
"""

import html
import re
import shlex
from typing import Any

from analysis.text import printable

# The ASCII punctuation that can start something inline (CommonMark: an escaped one is always literal).
_INLINE = frozenset("\\`*_[]<>&|~$")
# U+2060 WORD JOINER: breaks a pattern that renderers match on parsed text, and shows as nothing.
WORD_JOINER = "\u2060"
# Where text becomes an element after parsing (`://`, `www.`, `@`, `:name:`, `:red[`): the joiner goes there.
_AFTER_PARSE = re.compile(r"(?i)(?<=:)(?=//)|(?<=\bwww)(?=\.)|(?<=@)(?=\S)|(?<=:)(?=[a-z_+-][\w/+-]*[:\[])")
# At the start of a line these make a heading, list, quote, setext underline or thematic break.
_LINE_START = re.compile(r"^([#>+=-]|\d+(?=[.)]))")
# Control characters, line separators and bidi controls (analysis.text lists the same ones).
_CONTROL = re.compile("[\x00-\x1f\x7f-\x9f\u061c\u200e\u200f\u2028-\u202e\u2066-\u2069]+")


def one_line(value: Any) -> str:
    """The value on one line: newlines, tabs and other control characters become single spaces."""
    return _CONTROL.sub(" ", str(value)).strip()


def text(value: Any, *, line_start: bool = False) -> str:
    """Literal inline text, safe in a table cell; `line_start`: it begins a line (where `#`, `1.` ...)."""
    plain = _AFTER_PARSE.sub(WORD_JOINER, one_line(value))
    escaped = "".join("\\" + c if c in _INLINE else c for c in plain)
    m = _LINE_START.match(escaped) if line_start else None
    if m:  # a digit run is kept and its `.`/`)` escaped; a single mark is escaped itself
        end = m.end()
        escaped = escaped[:end] + "\\" + escaped[end:] if m.group(1)[0].isdigit() else "\\" + escaped
    return escaped


def code(value: Any) -> str:
    """An inline code span, its ticks outnumbering any run inside; a pipe escaped (GFM ends a cell there)."""
    body = one_line(value).replace("|", "\\|")
    if not body:
        return ""
    ticks = "`" * (_longest_run(body, "`") + 1)
    pad = " " if body.startswith("`") or body.endswith("`") else ""
    return f"{ticks}{pad}{body}{pad}{ticks}"


def html_code(value: Any) -> str:
    """`<code>value</code>`, HTML-escaped: for raw HTML (a `<summary>`), where Markdown is not parsed."""
    return f"<code>{html.escape(one_line(value), quote=True)}</code>"


def fence(body: str, info: str = "") -> list[str]:
    """A fenced code block holding `body` verbatim; the fence is longer than any backtick run inside."""
    ticks = "`" * max(3, _longest_run(body, "`") + 1)
    # Control characters are shown as escapes: the block is printed to terminals too (`compare`, `export`).
    lines = printable(body, multiline=True).splitlines()
    return [ticks + one_line(info).replace("`", ""), *lines, ticks]


def shell(value: Any) -> str:
    """One shell word, for commands a reader will copy and run: quoted, on one line."""
    return shlex.quote(one_line(value))


def _longest_run(s: str, ch: str) -> int:
    return max((len(m) for m in re.findall(f"{re.escape(ch)}+", s)), default=0)
