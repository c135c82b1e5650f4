"""User text on its way out of specbench: control characters written as visible escapes, never raw.

A stored name or error text can hold ESC, OSC 8 or BEL sequences (recolour a terminal, forge a link, erase
lines) and bidi overrides that make it read otherwise ("Trojan Source"). `printable` writes each as an escape
(`\\x1b`, `\\u202e`), for the CLI (runners/terminal.py) and the CSV writer (analysis/render.py).
"""

import re

# C0 (tab and newline aside: below), DEL, C1, Unicode line/paragraph separators and the bidi controls.
_CONTROL = re.compile("[\x00-\x08\x0b-\x1f\x7f-\x9f\u061c\u200e\u200f\u2028-\u202e\u2066-\u2069]")
_LINE_BREAKS = re.compile("[\t\n]")


def _escape(match: re.Match[str]) -> str:
    code = ord(match.group())
    return f"\\x{code:02x}" if code < 0x100 else f"\\u{code:04x}"


def printable(text: str, *, multiline: bool = False) -> str:
    """`text` with every control character escaped; `multiline` keeps newlines and tabs (a CSV cell)."""
    out = _CONTROL.sub(_escape, text)
    return out if multiline else _LINE_BREAKS.sub(_escape, out)


def has_control(text: str) -> bool:
    """True if `text` holds a character `printable` escapes even with `multiline` (not a newline or tab)."""
    return _CONTROL.search(text) is not None
