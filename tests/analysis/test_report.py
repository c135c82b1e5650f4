"""Run comparison tables, and their CSV and Markdown (PR comment) forms: the Markdown must render as a table."""

from __future__ import annotations

import io
import json
from datetime import UTC, datetime
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
from markdown_it import MarkdownIt
from sqlalchemy import Engine
from typer.testing import CliRunner

from analysis import report
from analysis.compare import COMPARE_COLUMNS, compare_runs, verdict_counts
from db import queries as q
from db.migrate import open_database
from runners.cli import app
from synthetic.history import SMALL_SHAPE
from synthetic.history.seed import seed_history
from tests.fixtures.markdown import markdown_tables
from tests.fixtures.report_data import KEYS, RUN_A, RUN_B, report_points, report_samples


@pytest.fixture
def table() -> pd.DataFrame:
    a = report_points(100, dict(zip(KEYS, [1000.0, 1500.0, 1700.0, 2900.0], strict=True)))
    # The candidate: v2 bs16 regressed 10%, v2 bs32 improved 8%, baseline unchanged, v1 with one repeat only.
    b = report_points(200, dict(zip(KEYS, [1001.0, 1490.0, 1530.0, 3132.0], strict=True)))
    b["steps"] = b["steps"].astype(float)  # pandas makes NULL-holding ints floats: pairing must not care
    sb = report_samples(b)
    sb = sb[~((sb["point_id"] == 201) & (sb["repeat"] > 0))]
    return compare_runs(a, report_samples(a), b, sb)


def test_pairing_and_verdicts(table: pd.DataFrame) -> None:
    assert list(table.columns) == list(COMPARE_COLUMNS)
    by = {(r["spec_mode"], r["batch_size"]): r for r in table.to_dict("records") if r["spec_mode"] != "v1"}
    assert by[("v2", 16)]["verdict"] == "regression"
    assert by[("v2", 16)]["delta"] == pytest.approx(-0.1, abs=1e-3)
    assert by[("v2", 32)]["verdict"] == "improvement"
    assert by[("baseline", 16)]["verdict"] == "no change"
    v1 = table[table["spec_mode"] == "v1"].iloc[0]
    assert v1["verdict"] == "insufficient data" and v1["n_candidate"] == 1
    assert verdict_counts(table) == {
        "regression": 1,
        "improvement": 1,
        "insufficient data": 1,
        "no change": 1,
    }
    assert list(table["verdict"]) == ["regression", "improvement", "insufficient data", "no change"]
    # Throughput changes with the same acceptance are per-step time: attribution says so.
    assert by[("v2", 16)]["why"] == "other (concurrency, prefill, scheduling) -10.0%"


def test_unmatched_points_are_listed() -> None:
    a = report_points(1, {("v2", 3, 16): 1000.0, ("v2", 3, 64): 3000.0})
    b = report_points(9, {("v2", 3, 16): 1000.0, ("v2", 4, 16): 1200.0})
    t = compare_runs(a, report_samples(a), b, report_samples(b))
    notes = dict(zip(t["config"], t["note"], strict=True))
    assert notes["EAGLE s3 v2 · bs64"] == "only in the baseline run"
    assert notes["EAGLE s4 v2 · bs16"] == "only in the candidate run"
    assert (t.loc[t["note"].str.startswith("only"), "verdict"] == "insufficient data").all()


def test_pairs_with_too_few_repeats_come_before_one_sided_rows() -> None:
    # In config order the one-sided rows (steps 1 only in A, steps 3 bs16 only in B) would come first.
    a = report_points(1, {("v2", 1, 4): 900.0, ("v2", 3, 64): 3000.0, ("v2", 4, 4): 1200.0})
    b = report_points(9, {("v2", 3, 16): 1000.0, ("v2", 3, 64): 3000.0, ("v2", 4, 4): 1200.0})
    t = compare_runs(
        a, report_samples(a, n=2), b, report_samples(b, n=2)
    )  # 2 repeats: every row is insufficient data
    assert set(t["verdict"]) == {"insufficient data"}
    one_sided = t["note"].str.startswith("only in the").tolist()
    assert one_sided == [False, False, True, True]


def test_markdown_renders_as_tables(table: pd.DataFrame) -> None:
    md = report.to_markdown(table, RUN_A, RUN_B)
    tables = markdown_tables(md)
    assert len(tables) == 2
    prov_head, prov = tables[0]
    assert prov_head == ["", "Baseline", "Candidate"]
    assert dict((r[0], r[1:]) for r in prov)["SGLang"] == ["0.5.13.post1 @ `abcdef0123`", "0.5.14"]
    head, rows = tables[1]
    assert head == [
        "Config",
        "Workload",
        "Baseline (geometric mean)",
        "Candidate",
        "Δ",
        "Interval",
        "Verdict",
        "Why",
    ]
    assert len(rows) == len(table)
    assert all(len(r) == len(head) for r in rows)
    assert rows[0][:2] == ["EAGLE s3 v2 · bs16", "in1024/out512"]
    assert rows[0][4] == "−10.0%" and rows[0][6] == "🔴 regression"
    html = MarkdownIt("commonmark").enable("table").render(md)
    assert html.count("<table>") == 2
    assert "**1 regression · 1 improvement · 1 insufficient data · 1 no change**" in md
    # Reproduction: install lines for both versions and the sweep, once since both runs share it.
    assert "pip install 'sglang @ git+https://github.com/sgl-project/sglang.git@abcdef0123456789" in md
    assert "pip install sglang==0.5.14" in md
    assert md.count("```yaml") == 1 and "specbench run flashmla-spec.yaml" in md


def test_markdown_escapes_pipes_and_trims_long_tables(table: pd.DataFrame) -> None:
    hostile = table.copy()
    hostile.loc[0, "why"] = "a | b\nc"
    md = report.to_markdown(hostile, {**RUN_A, "model": "m|x"}, RUN_B)
    tables = markdown_tables(md)
    assert len(tables) == 2 and all(len(r) == 3 for r in tables[0][1])
    assert tables[1][1][0][-1] == "a | b c"  # one cell: the escaped pipe did not split it
    big = pd.concat([table] * 20, ignore_index=True)
    md = report.to_markdown(big, RUN_A, RUN_B, max_rows=10)
    _, rows = markdown_tables(md)[1]
    assert len(rows) == 10 and "no change are in the CSV" in md
    synthetic = report.to_markdown(table, {**RUN_A, "trigger": "synthetic"}, RUN_B)
    assert "SYNTHETIC" in synthetic


def test_csv_round_trips(table: pd.DataFrame) -> None:
    text = report.document(table, RUN_A, RUN_B).text("csv")
    assert text.splitlines()[0] == ",".join(["kind", *COMPARE_COLUMNS])
    back = pd.read_csv(io.StringIO(text))
    assert list(back.columns) == ["kind", *COMPARE_COLUMNS]
    assert len(back) == len(table) and set(back["kind"]) == {"measured"}
    # A row of runs of two kinds says both, made-up first: it never reads as measured.
    mixed = pd.read_csv(
        io.StringIO(report.document(table, {**RUN_A, "trigger": "synthetic"}, RUN_B).text("csv"))
    )
    assert set(mixed["kind"]) == {"synthetic+measured"}
    assert list(back["verdict"]) == list(table["verdict"])
    assert list(back["config"]) == list(table["config"])
    for col in ("baseline", "candidate", "delta", "ci_low", "ci_high"):
        np.testing.assert_allclose(back[col].to_numpy(float), table[col].to_numpy(float), rtol=1e-5)


def test_csv_of_100k_rows_is_complete(table: pd.DataFrame) -> None:
    # Its speed (target < 2 s) is measured by benchmarks/dashboard_scale.py, not asserted here.
    big = pd.concat([table] * 25_000, ignore_index=True)
    text = report.document(big, RUN_A, RUN_B).text("csv")
    assert text.count("\n") == len(big) + 1


def test_json_is_plain(table: pd.DataFrame) -> None:
    doc = json.loads(report.document(table, RUN_A, RUN_B).text("json"))
    assert doc["counts"]["regression"] == 1
    assert doc["baseline"]["started_at"].startswith("2026-11-30")
    assert "sweep_yaml" not in doc["candidate"]
    assert len(doc["points"]) == len(table)


def test_json_has_no_nan_infinity_or_na(table: pd.DataFrame) -> None:
    """Every value strict JSON (analysis.plain): before, an infinite delta was written as `Infinity` (not JSON)
    and a missing value of a nullable integer column (pd.NA) made json.dumps raise."""
    edged = table.copy()
    edged.loc[0, "delta"] = np.inf
    edged["n_baseline"] = pd.array([None, *edged["n_baseline"][1:]], dtype="Int64")
    run_a = {**RUN_A, "finished_at": pd.NaT}

    def refuse(const: str) -> None:
        raise ValueError(f"not JSON: {const}")

    doc = json.loads(report.document(edged, run_a, RUN_B).text("json"), parse_constant=refuse)
    assert doc["points"][0]["delta"] is None and doc["points"][0]["n_baseline"] is None
    assert doc["points"][1]["n_baseline"] == int(table["n_baseline"][1])
    assert doc["baseline"]["finished_at"] is None


@pytest.fixture
def seeded_sqlite(sqlite_url: str) -> tuple[str, Engine]:
    eng = open_database(sqlite_url)
    seed_history(eng, 400, shape=SMALL_SHAPE, end=datetime(2026, 11, 30, tzinfo=UTC), seed=9)
    return sqlite_url, eng


def test_compare_cli(seeded_sqlite: tuple[str, Engine], tmp_path: Path) -> None:
    url, eng = seeded_sqlite
    runner = CliRunner()
    # The first and last runs of the H200 lane: the injected acceptance drop lies between them.
    runs = q.run_choices(eng).sort_values("started_at")
    h200 = runs[runs["gpu_name"] == "NVIDIA H200"]
    a, b = str(h200["id"].iloc[0]), str(h200["id"].iloc[-1])
    res = runner.invoke(app, ["compare", a, b, "--db", url, "--format", "md"])
    assert res.exit_code == 0, res.output
    assert len(markdown_tables(res.stdout)) == 2
    out = tmp_path / "cmp.csv"
    res = runner.invoke(app, ["compare", a, b, "--db", url, "--format", "csv", "-o", str(out)])
    assert res.exit_code == 0, res.output
    assert out.read_text().splitlines()[0] == ",".join(["kind", *COMPARE_COLUMNS])
    assert {line.split(",")[0] for line in out.read_text().splitlines()[1:]} == {"synthetic"}
    res = runner.invoke(app, ["compare", a, b, "--db", url, "--format", "json", "--fail-on-regression"])
    doc = json.loads(res.stdout)
    assert res.exit_code == (1 if doc["counts"]["regression"] else 0)
    res = runner.invoke(app, ["compare", a, "latest", "--db", url, "--metric", "bogus"])
    assert res.exit_code == 2 and "unknown metric" in res.output
    res = runner.invoke(app, ["compare", "99999", "latest", "--db", url])
    assert res.exit_code == 2
