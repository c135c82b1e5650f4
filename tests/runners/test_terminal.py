"""Stored text reaches the terminal with its control characters escaped (issue 30 §9): ESC and OSC 8 sequences,
BEL, C1 controls and bidi overrides in names never drive the terminal of whoever lists runs, jobs,
regressions or comparisons, nor the terminal that tails a worker's or the scheduler's log."""

from __future__ import annotations

import io
import logging
from pathlib import Path

import pytest
from rich.console import Console
from typer.testing import CliRunner

from analysis.text import printable
from runners.cli import app
from runners.tables import Column, print_table
from runners.terminal import LogFormatter, guard
from tests.hostile import EVIL_HOST, RAW_CONTROL, hostile_database

OSC8 = f"\x1b]8;;http://{EVIL_HOST}"


@pytest.fixture(scope="module")
def hostile_url(tmp_path_factory: pytest.TempPathFactory, measured_runs: Path) -> str:
    return hostile_database(measured_runs, tmp_path_factory.mktemp("term"))


def test_printable() -> None:
    assert printable("a\x1b[31mb\x07c\x9bd\u202ee") == "a\\x1b[31mb\\x07c\\x9bd\\u202ee"
    assert printable("one\ntwo\tthree") == "one\\x0atwo\\x09three"  # a table cell stays on its line
    assert printable("one\ntwo\tthree", multiline=True) == "one\ntwo\tthree"
    assert printable("naïve ünïcode 名前 ✓") == "naïve ünïcode 名前 ✓"


@pytest.mark.parametrize(
    "argv",
    [
        ["runs"],
        ["runs", "--format", "json"],
        ["runs", "--name", "HYPERLINK"],
        ["jobs"],
        ["jobs", "--format", "json"],
        ["schedule", "list"],
        ["schedule", "list", "--format", "json"],
        ["regressions", "--since", "3650d", "--include-improvements", "--include-dismissed"],
        ["compare", "1", "2"],
        ["compare", "1", "2", "--format", "comment"],
        ["compare", "1", "2", "--format", "json"],
        ["export", "--run", "2", "--format", "md"],
        ["export", "--run", "2", "--format", "json"],
        ["export", "--run", "2", "--view", "v2-vs-v1", "--format", "md"],
        ["export", "--run", "2", "--view", "windows", "--format", "md"],
        ["triage", "2", "--state", "acknowledged", "--dry-run"],
        ["runs", "--yaml", "1"],
        ["compare", "1", f"{EVIL_HOST}\x1b]8;;x\x07"],  # an error message quoting what was typed
    ],
)
def test_verbs_print_no_raw_control_characters(hostile_url: str, argv: list[str]) -> None:
    res = CliRunner().invoke(app, [*argv, "--db", hostile_url])
    assert res.exception is None or isinstance(res.exception, SystemExit), repr(res.exception)
    assert "Traceback" not in res.output
    assert not RAW_CONTROL.search(res.output), repr(RAW_CONTROL.search(res.output))


def test_listing_shows_the_escapes(hostile_url: str) -> None:
    out = CliRunner().invoke(app, ["runs", "--db", hostile_url]).output
    assert "\\x1b]8;;http://evil.invalid" in out  # shown, so a reader sees what the name really holds


def test_a_terminal_table_escapes_cells_before_aligning_them() -> None:
    buf = io.StringIO()
    console = guard(Console(file=buf, force_terminal=True, width=200, color_system="standard"))
    print_table(
        console, [Column("name"), Column("n", "right")], [[f"a{OSC8}\x07b\u202e", "1"], ["plain", "22"]]
    )
    out = buf.getvalue()
    assert OSC8 not in out and "\x07" not in out and "\u202e" not in out
    assert "\\x1b]8;;http://evil.invalid\\x07b\\u202e" in out
    # Rich's own colour codes still work: the guard only escapes text, never its styling segments.
    console.print("[red]ok[/] " + OSC8)
    assert "\x1b[31mok" in buf.getvalue() and OSC8 not in buf.getvalue()


def test_log_lines_are_escaped() -> None:
    record = logging.LogRecord("specbench.worker", logging.INFO, "x", 1, "job of sweep %s", (OSC8,), None)
    line = LogFormatter("%(message)s").format(record)
    assert line == "job of sweep \\x1b]8;;http://evil.invalid"
