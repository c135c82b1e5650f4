"""Every number specbench made up says so wherever it appears (issue 37): each output of each verb that shows a
run's numbers carries their kind, `measured`, `simulated` (the stand-in) or `synthetic` (seeded history), on
one database that holds all three. A test here fails when a view drops the kind of its rows."""

from __future__ import annotations

import csv
import io
import json
import re
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pytest

from analysis.export import read_csv_rows
from analysis.labels import KIND_TAG, MEASURED, SIMULATED, STAND_IN_TAG, SYNTHETIC_TAG, kinds_text, run_kind
from db.engine import session_scope
from db.migrate import open_database
from db.models import Profile
from synthetic.history import SMALL_SHAPE
from synthetic.history.seed import seed_history
from tests.fixtures.cli import run_cli
from tests.paths import REPO_ROOT

pytestmark = pytest.mark.slow  # stand-in sweeps on live servers

SIM = """
name: kinds-{name}
model: sim-tiny
server: {{backend: sim, attention_backend: flashmla, sim: {{acceptance_rate: {rate}, seed: 3, instant: true}}}}
grid: {{batch_sizes: [1, 8], spec_modes: [v1, v2], steps: [3], topk: [1], baseline: true}}
workload: {{input_len: 16, output_len: 32}}
repeats: 3
{profile}
"""
# settle_s 0: the instant stand-in finishes its load in milliseconds, so profiling starts with it (a settle
# of 0.05 s let the load end first on a quiet host); a short load is stopped and flushed, still a trace.
PROFILE = "profile: {steps: 6, activities: [CPU, GPU], at: [8], settle_s: 0, timeout_s: 30}"


class Kinds:
    """The database and one run of each kind in it (the stand-in's two: baseline and candidate)."""

    def __init__(self, url: str, runs: list[dict[str, Any]], sim_out: str, tmp: Path) -> None:
        self.url, self.runs, self.sim_out, self.tmp = url, runs, sim_out, tmp
        self.kind = {int(r["id"]): str(r["kind"]) for r in runs}

    def of(self, kind: str) -> list[int]:
        return sorted(i for i, k in self.kind.items() if k == kind)


@pytest.fixture(scope="module")
def kinds(tmp_path_factory: pytest.TempPathFactory) -> Kinds:
    tmp = tmp_path_factory.mktemp("kinds")
    url = f"sqlite:///{tmp / 'kinds.db'}"
    eng = open_database(url)
    seed_history(eng, 600, shape=SMALL_SHAPE, end=datetime.now(UTC), seed=0)  # as `make demo` seeds
    eng.dispose()
    done = run_cli("import", str(REPO_ROOT / "examples" / "h200-sglang-0.5.13.post1.db"), "--db", url)
    assert done.returncode == 0, done.stdout + done.stderr
    outs = []
    for name, rate, profile in (("base", 0.8, PROFILE), ("cand", 0.3, "")):
        sweep = tmp / f"{name}.yaml"
        sweep.write_text(SIM.format(name=name, rate=rate, profile=profile))
        done = run_cli("run", str(sweep), "--db", url, "--no-progress", "--log-dir", str(tmp / "logs"))
        assert done.returncode == 0, done.stdout + done.stderr
        outs.append(done.stdout)
    runs = json.loads(run_cli("runs", "--db", url, "--format", "json").stdout)
    return Kinds(url, runs, outs[0], tmp)


def test_vocabulary() -> None:
    assert run_kind(True, "manual") == SIMULATED and run_kind(False, "pr") == MEASURED
    assert run_kind(True, SYNTHETIC_TAG) == SYNTHETIC_TAG and run_kind(None, None) == MEASURED
    assert kinds_text([MEASURED, SYNTHETIC_TAG, MEASURED]) == "synthetic+measured"
    assert kinds_text([SIMULATED]) == SIMULATED and kinds_text([]) == MEASURED


def test_runs_name_each_kind_in_every_format(kinds: Kinds) -> None:
    assert kinds.of(SYNTHETIC_TAG) and kinds.of(MEASURED) and len(kinds.of(SIMULATED)) == 2
    assert all(r["kind"] == run_kind(r["simulated"], r["trigger"]) for r in kinds.runs)
    rows = list(csv.DictReader(io.StringIO(run_cli("runs", "--db", kinds.url, "--format", "csv").stdout)))
    assert {int(r["id"]): r["kind"] for r in rows} == kinds.kind
    table = run_cli("runs", "--db", kinds.url, env={"COLUMNS": "80"}).stdout
    shown = {
        int(line.split()[0]): line.split()
        for line in table.splitlines()
        if re.match(r"\s*\d+\s+\d{4}-", line)
    }
    assert set(shown) == set(kinds.kind), table
    assert all(kinds.kind[run] in cells for run, cells in shown.items()), table


def test_regressions_tag_the_seeded_history(kinds: Kinds) -> None:
    """The issue's case: the -6.0% on DeepSeek-V3-0324 · H100×8 comes from seeded history, and says so."""
    found = run_cli("regressions", "--db", kinds.url, "--format", "json")
    rows = json.loads(found.stdout)
    assert rows and {r["kind"] for r in rows} == {SYNTHETIC_TAG}, rows
    for columns in ("80", "200"):
        table = run_cli("regressions", "--db", kinds.url, env={"COLUMNS": columns}).stdout
        changes = [line for line in table.splitlines() if line.lstrip().startswith("-")]
        assert len(changes) == len(rows) and all(SYNTHETIC_TAG in line for line in changes), table
    run = str(rows[0]["run_id"])
    dry = run_cli(
        "triage", run, "--state", "dismissed", "--dry-run", "--db", kinds.url, env={"COLUMNS": "80"}
    )
    listed = [line for line in dry.stdout.splitlines() if "%" in line]
    assert listed and all(SYNTHETIC_TAG in line for line in listed), dry.stdout


def _export(kinds: Kinds, run: int, fmt: str, *more: str) -> str:
    out = run_cli("export", "--db", kinds.url, "--run", str(run), "--format", fmt, *more)
    assert out.returncode == 0, out.stdout + out.stderr
    return out.stdout


@pytest.mark.parametrize("kind", [MEASURED, SIMULATED, SYNTHETIC_TAG])
def test_export_points_says_the_kind_of_every_row(kinds: Kinds, kind: str) -> None:
    run = kinds.of(kind)[-1]
    rows = read_csv_rows(_export(kinds, run, "csv"))
    assert rows and {r["kind"] for r in rows} == {kind}
    doc = json.loads(_export(kinds, run, "json"))
    assert [r["kind"] for r in doc["runs"]] == [kind] and {p["kind"] for p in doc["points"]} == {kind}
    lines = [json.loads(line) for line in _export(kinds, run, "bench-serving-json").splitlines()]
    assert lines and {line["specbench"]["kind"] for line in lines} == {kind}
    md = _export(kinds, run, "md")
    title = {SIMULATED: STAND_IN_TAG, SYNTHETIC_TAG: "synthetic load-test history"}
    if kind != MEASURED:
        assert title[kind] in md.splitlines()[0], md[:300]
    shown = run_cli(
        "export", "--db", kinds.url, "--run", str(run), "--format", "table", env={"COLUMNS": "80"}
    )
    assert f"({KIND_TAG[kind]})" in shown.stdout.splitlines()[0]


@pytest.mark.parametrize("view", ["v2-vs-v1", "windows"])
@pytest.mark.parametrize("kind", [MEASURED, SIMULATED])
def test_single_run_views_say_the_kind_of_every_row(kinds: Kinds, view: str, kind: str) -> None:
    # The bundled H200 smoke run (the first imported) measured v1 and v2, as the stand-in runs did.
    run = kinds.of(kind)[0]
    rows = list(csv.DictReader(io.StringIO(_export(kinds, run, "csv", "--view", view))))
    assert rows and {r["kind"] for r in rows} == {kind}
    doc = json.loads(_export(kinds, run, "json", "--view", view))
    assert doc["kind"] == kind and {r["kind"] for r in doc["rows"]} == {kind}
    md = _export(kinds, run, "md", "--view", view)
    assert ("stand-in server, simulated numbers" in md.splitlines()[0]) == (kind == SIMULATED), md[:300]


def test_compare_says_both_runs_are_simulated_in_every_format(kinds: Kinds) -> None:
    base, cand = kinds.of(SIMULATED)
    common = ["compare", str(base), str(cand), "--db", kinds.url, "--metric", "accept_length", "--format"]
    rows = list(csv.DictReader(io.StringIO(run_cli(*common, "csv").stdout)))
    assert rows and {r["kind"] for r in rows} == {SIMULATED}
    doc = json.loads(run_cli(*common, "json").stdout)
    assert doc["baseline"]["kind"] == doc["candidate"]["kind"] == SIMULATED
    assert {p["kind"] for p in doc["points"]} == {SIMULATED}
    for fmt in ("md", "comment"):
        assert f"Both runs are **{STAND_IN_TAG}**" in run_cli(*common, fmt).stdout
    table = run_cli(*common, "table", env={"COLUMNS": "80"}).stdout
    assert f"both runs are {STAND_IN_TAG}" in table


def test_the_ci_pr_comment_says_both_runs_are_simulated(kinds: Kinds) -> None:
    """`specbench ci` writes the PR comment a reviewer reads: made-up numbers say so there too, both forms."""
    base, cand = kinds.of(SIMULATED)
    sweep = kinds.tmp / "cand.yaml"
    for fmt in ("comment", "md"):
        comment = kinds.tmp / f"pr-{fmt}.md"
        out = run_cli(
            *("ci", str(sweep), "--base-run", str(base), "--head-run", str(cand), "--db", kinds.url),
            *("--metric", "accept_length", "--format", fmt, "--comment", str(comment)),
        )
        assert out.returncode in (0, 1), out.stdout + out.stderr  # 1: the lower acceptance is a regression
        assert f"Both runs are **{STAND_IN_TAG}**" in comment.read_text()


def test_a_stand_in_run_and_its_gate_say_simulated(kinds: Kinds) -> None:
    assert f"({STAND_IN_TAG}): done" in kinds.sim_out  # the summary table's title
    run = kinds.of(SIMULATED)[0]
    gate = run_cli("gate", str(run), "--db", kinds.url)
    assert f"run {run} (kinds-base, {STAND_IN_TAG})" in gate.stdout, gate.stdout


def test_profile_summaries_say_whose_trace(kinds: Kinds) -> None:
    eng = open_database(kinds.url)
    with session_scope(eng) as s:
        paths = [Path(p.path) for p in s.query(Profile).filter(Profile.path.is_not(None))]
    eng.dispose()
    stand_in = next(p for p in paths if p.is_file())
    real = REPO_ROOT / "tests" / "fixtures" / "h200-v3slice-v1-bs8.trace.json.gz"
    for trace, kind in ((stand_in, SIMULATED), (real, MEASURED)):
        doc = json.loads(run_cli("profile", "summarize", str(trace), "--format", "json").stdout)
        assert doc["kind"] == kind
        table = run_cli("profile", "summarize", str(trace)).stdout
        assert (STAND_IN_TAG in table) == (kind == SIMULATED), table
