"""No CSV specbench writes opens a formula in a spreadsheet (issue 30 §6): OWASP's rule in analysis.render, and a
test per writer on a database whose every stored text field starts with `=HYPERLINK(...),=1+1`.

The writers: `export` (points, with its `#` header lines), `export --view v2-vs-v1`, `export --view windows`,
`compare --format csv` (also the Compare page's download), `runs --format csv`, and the dashboard's table
downloads (tests/dashboard/test_hostile_pages.py downloads them in a browser).
"""

from __future__ import annotations

import csv
import io
from pathlib import Path

import pandas as pd
import pytest
from typer.testing import CliRunner

from analysis import render, report
from analysis.compare import compare_runs
from analysis.export import read_csv_rows
from runners.cli import app
from tests.fixtures.report_data import KEYS
from tests.fixtures.report_data import report_points as _points
from tests.fixtures.report_data import report_samples as _samples
from tests.hostile import EVIL_HOST, HOSTILE, RAW_CONTROL, formula_cells, hostile_database


@pytest.fixture(scope="module")
def hostile_url(tmp_path_factory: pytest.TempPathFactory, measured_runs: Path) -> str:
    return hostile_database(measured_runs, tmp_path_factory.mktemp("csv"))


def _csv(url: str, *argv: str) -> str:
    res = CliRunner().invoke(app, [*argv, "--db", url])
    assert res.exit_code == 0, res.output
    assert res.exception is None or isinstance(res.exception, SystemExit)
    return res.stdout


def _assert_neutral(text: str) -> None:
    assert EVIL_HOST in text  # the hostile text is there, as data
    assert formula_cells(text) == []
    assert "'=HYPERLINK(" in text  # neutralised, not dropped
    assert not RAW_CONTROL.search(text)  # a `cat` of the file cannot drive the terminal


# Issue 35: the guard skipped cells that begin with a no-break space, a zero-width space, a byte-order mark or
# a fullwidth `=`; a spreadsheet that folds or drops them still reads a formula.
LOOK_ALIKES = (
    "\u00a0=1+1",  # no-break space
    '\u200b=HYPERLINK("http://evil.invalid")',  # zero-width space
    "\ufeff=1+1",  # byte-order mark
    "\u2060@SUM(A1)",  # word joiner
    "\u3000+1+1",  # ideographic space
    "\uff1d1+1",  # fullwidth =
    "\uff0b1+1",  # fullwidth +
    "\uff0dcmd",  # fullwidth -
    "\uff20SUM(A1)",  # fullwidth @
    "\ufe62x",  # small plus
    "\u00a0\u200b\ufeff\uff1d1",  # several at once
)


@pytest.mark.parametrize("formula", LOOK_ALIKES)
def test_look_alike_formula_starts_are_neutralised(formula: str) -> None:
    assert render.csv_cell(formula) == "'" + formula
    frame = render.safe_frame(pd.DataFrame({"name": [formula, "ok"], formula: [1.0, 2.0]}))
    assert frame["name"].tolist() == ["'" + formula, "ok"]
    assert list(frame.columns) == ["name", "'" + formula]


def test_look_alikes_that_start_no_formula_stay() -> None:
    for value in ("\uff11\uff12", "ｍｏｄｅｌ", "\u00e9t\u00e9", "a\u00a0=b", "x\uff1d1"):
        assert render.csv_cell(value) == value


def test_the_rule() -> None:
    for formula in ("=1+1", "+1+1", "-1+1", "@SUM(A1)", "\t=1", " =1", "-cmd", "-inf", "=-5", "\n=1"):
        assert render.csv_cell(formula) == "'" + formula
    assert render.csv_cell("\r=1") == "\\x0d=1"  # a carriage return is escaped, which also defuses it
    for number in ("-5.2", "+3", "1e-3", "-.5", "5.", "-1E+08", " -2 "):
        assert render.csv_cell(number) == number  # a number is not a formula, and stays a number
    for value in (-5.2, -3, 0.0, None, True, "plain", "a=b", "x-1"):
        assert render.csv_cell(value) == value
    assert render.csv_cell("a\x1b[2Jb\nc\td") == "a\\x1b[2Jb\nc\td"  # newlines and tabs are data
    frame = render.safe_frame(pd.DataFrame({"=name": ["=1", "-5.2", "ok"], "v": [-5.2, 1.0, 2.0]}))
    assert list(frame.columns) == ["'=name", "v"]
    assert frame["'=name"].tolist() == ["'=1", "-5.2", "ok"]
    assert frame["v"].tolist() == [-5.2, 1.0, 2.0]


def test_export_points(hostile_url: str) -> None:
    text = _csv(hostile_url, "export", "--run", "1", "--all-status", "--format", "csv")
    _assert_neutral(text)
    # Each `#` header line is one cell (quoted where it holds a comma), so `,=1+1` never becomes a cell.
    header = [line for line in text.splitlines() if line.startswith(("#", '"#'))]
    assert all(len(next(csv.reader([line]))) == 1 for line in header)
    assert any(line.startswith('"#   model: =HYPERLINK(') for line in header)
    rows = read_csv_rows(text)  # the header is still skipped by the reader
    assert rows and all(r["run_id"] == "1" for r in rows)
    assert all(float(r["output_throughput"]) > 0 for r in rows if r["status"] == "ok")  # numbers stay numbers


def test_export_v2_vs_v1(hostile_url: str) -> None:
    text = _csv(hostile_url, "export", "--run", "1", "--view", "v2-vs-v1", "--format", "csv")
    assert formula_cells(text) == [] and not RAW_CONTROL.search(text)
    rows = list(csv.DictReader(io.StringIO(text)))
    assert rows and all(float(r["ratio"]) > 0 for r in rows)


def test_export_windows(hostile_url: str) -> None:
    text = _csv(hostile_url, "export", "--run", "1", "--view", "windows", "--format", "csv")
    assert formula_cells(text) == [] and not RAW_CONTROL.search(text)
    rows = list(csv.DictReader(io.StringIO(text)))
    assert rows and all(float(r["output_throughput"]) > 0 for r in rows if r["status"] == "ok")


def test_compare(hostile_url: str) -> None:
    text = _csv(hostile_url, "compare", "1", "2", "--format", "csv")
    assert formula_cells(text) == [] and not RAW_CONTROL.search(text)
    deltas = [float(r["delta"]) for r in csv.DictReader(io.StringIO(text)) if r["delta"]]
    assert deltas and any(d < 0 for d in deltas)  # negative numbers are written as numbers
    # The same writer (analysis.render, also the Compare page's download) with hostile text in every text column.
    a = _points(100, dict(zip(KEYS, [1000.0, 1500.0, 1700.0, 2900.0], strict=True)))
    b = _points(200, dict(zip(KEYS, [1001.0, 1490.0, 1530.0, 3132.0], strict=True)))
    table = compare_runs(a, _samples(a), b, _samples(b))
    text_columns = [c for c in table.columns if table[c].dtype == object or str(table[c].dtype) == "str"]
    hostile = report.document(table.assign(**dict.fromkeys(text_columns, HOSTILE)), {}, {}).text("csv")
    _assert_neutral(hostile)


def test_runs(hostile_url: str) -> None:
    text = _csv(hostile_url, "runs", "--format", "csv")
    _assert_neutral(text)
    rows = list(csv.DictReader(io.StringIO(text)))
    assert [r["id"] for r in rows] == ["2", "1"]
    assert all(r["model"].startswith("'=HYPERLINK(") for r in rows)


@pytest.mark.parametrize("view", ["points", "v2-vs-v1", "windows", "shard-vs-tp", "compare", "runs"])
def test_every_declared_view_writes_text_columns_formula_safe(view: str) -> None:
    """The one writer (analysis.render) for every view's declared columns, shard-vs-tp's included (its CSV
    once skipped the guard): hostile text in each text column, numbers in the rest, no formula cell out."""
    from analysis import export, tp_compare, v2_vs_v1, windows
    from runners.commands import runs

    cols = {
        "points": export.VIEW,
        "v2-vs-v1": v2_vs_v1.VIEW,
        "windows": windows.VIEW,
        "shard-vs-tp": tp_compare.VIEW,
        "compare": report.VIEW,
        "runs": runs.VIEW,
    }[view]
    assert any(c.text for c in cols)
    row = {c.key: HOSTILE if c.text else (-3 if c.fmt == "d" else -2.5) for c in cols}
    text = render.csv_text([row, row], cols)
    _assert_neutral(text)
    values = next(csv.DictReader(io.StringIO(text)))
    assert {v for k, v in values.items() if not next(c for c in cols if c.key == k).text} <= {"-3", "-2.5"}


def test_a_writer_without_the_helper_would_fail() -> None:
    """The check itself: a raw pandas CSV of a hostile cell has a formula cell."""
    raw = pd.DataFrame({"model": ['=HYPERLINK("http://e","x"),=1+1']}).to_csv(index=False)
    assert formula_cells(raw) != []
    assert formula_cells(render.safe_frame(pd.DataFrame({"model": ["=1,=2"]})).to_csv(index=False)) == []
