"""Speculation over the baseline measured like v2/v1 (measure.baseline_pairs), end to end on the stand-in: the
chain that swaps one server per step, ABBA windows per pair, each pair's own repeats, the spec-vs-baseline view
paired by link (and v2/v1 not mixed up with it), its exports, and blocks on a GPU that holds one server."""

from __future__ import annotations

import itertools
import json
import math
import statistics
from collections.abc import Iterator
from pathlib import Path

import pytest
from sqlalchemy import Engine, select
from typer.testing import CliRunner

from analysis import spec_vs_baseline, v2_vs_v1
from bench.stats.ratio import paired_ratio
from bench.sweep import expand, parse_sweep
from db.engine import session_scope
from db.migrate import open_database
from db.models import Point, ServerInstance
from runners.cli import app
from runners.estimate import chain_starts
from runners.steps import schedule
from runners.sweep_runner import RunOutcome, execute_sweep
from tests.fixtures.chain import CHAIN, CHAIN_ONE_SERVER, Window, windows
from tests.fixtures.db import sqlite_only

pytestmark = pytest.mark.slow  # whole sweeps on live stand-in servers: scheduled first (tests/conftest.py)


@pytest.fixture(scope="module")
def chain(
    module_db_url: str, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[tuple[Engine, RunOutcome]]:
    """CHAIN measured once per database; the tests below only read it."""
    engine = open_database(module_db_url)
    spec = parse_sweep(CHAIN)
    out = execute_sweep(spec, CHAIN, engine, log_dir=tmp_path_factory.mktemp("chain"), show_progress=False)
    yield engine, out
    engine.dispose()


def _by_link(rows: list[Window]) -> dict[str, list[Window]]:
    out: dict[str, list[Window]] = {}
    for w in rows:
        assert w.link is not None, w  # every window of a chain was measured for a pair
        out.setdefault(w.link, []).append(w)
    return out


def test_the_chain_interleaves_the_baseline_with_each_mode_keeping_one_server_up(
    chain: tuple[Engine, RunOutcome],
) -> None:
    engine, out = chain
    assert out.status in ("done", "unstable") and out.points_stored == out.points_total == 6
    # base~v1, v1~v2, v2~base: four starts for three configs (the baseline again for the last pair)
    assert out.launches == 4 == chain_starts(schedule(expand(parse_sweep(CHAIN)), parse_sweep(CHAIN)))
    rows = windows(engine)
    with session_scope(engine) as s:
        servers = list(s.scalars(select(ServerInstance).order_by(ServerInstance.id)))
        planned = {p.spec_mode or "base": p.repeats_planned for p in s.scalars(select(Point))}
    assert [si.spec_mode_requested or "base" for si in servers] == ["base", "v1", "v2", "base"]
    assert all(si.status == "stopped" and si.env["specbench.pair"] == "colocated" for si in servers)
    # Each config's points plan 3 repeats for each of its two pairs.
    assert planned == {"base": 6, "v1": 6, "v2": 6}
    links = _by_link(rows)
    assert len(links) == 3
    kept = 0
    for link, ws in links.items():
        a_key = link.split("~")[0]
        assert {w.link_mode for w in ws} == {"abba"}
        for bs in (1, 2):
            seq = [w for w in ws if w.batch == bs]
            sides = "".join("A" if _key(engine, w) == a_key else "B" for w in seq)
            assert sides == "ABBAAB", (link, sides)  # A0 B0 B1 A1 A2 B2
            assert [w.link_repeat for w in seq] == [0, 0, 1, 1, 2, 2]
        # the two servers of a pair were up together: each window on its side's one server
        assert len({w.server for w in ws}) == 2
        kept += len({w.server for w in ws} & {w.server for o, ow in links.items() if o != link for w in ow})
    # v1's and v2's servers each measured two pairs: the chain kept them up (two shared servers, each seen from
    # both of its pairs); the baseline was started twice
    assert kept == 4
    # The drift check at the end: on the baseline still up for the last pair, a later start than the one that
    # measured the reference's first window, and said so.
    assert (
        out.drift is not None and out.drift.label == "baseline (no spec)" and out.drift.same_server is False
    )
    assert "a later start of its server config" in out.drift.note
    # A point's repeats: every index once, each pair its own (no repeat measured twice, none skipped)
    for mode in ("base", "v1", "v2"):
        for bs in (1, 2):
            assert sorted(w.repeat for w in rows if w.mode == mode and w.batch == bs) == list(range(6))


def _key(engine: Engine, w: Window) -> str:
    """The server config key of a window's server."""
    with session_scope(engine) as s:
        si = s.get(ServerInstance, w.server)
        assert si is not None
        return si.config_key


def _pairs(rows: list[Window], link_modes: tuple[str, str], bs: int) -> tuple[list[float], list[float]]:
    """The ok pairs (base side first) of one pair at one batch size, by link repeat, straight from the rows."""
    first, second = link_modes
    shared = {w.link for w in rows if w.mode == first} & {w.link for w in rows if w.mode == second}
    assert len(shared) == 1
    (link,) = shared

    def ok(mode: str) -> dict[int, float]:
        return {
            int(w.link_repeat): float(w.throughput)  # type: ignore[arg-type]
            for w in rows
            if w.mode == mode and w.batch == bs and w.link == link and w.status == "ok" and w.throughput
        }

    a, b = ok(first), ok(second)
    common = sorted(set(a) & set(b))
    return [a[r] for r in common], [b[r] for r in common]


def test_spec_vs_baseline_pairs_each_mode_with_the_baseline_windows_measured_against_it(
    chain: tuple[Engine, RunOutcome],
) -> None:
    engine, out = chain
    rows = windows(engine)
    table = spec_vs_baseline.load(engine, out.run_id)
    assert len(table) == 4 and set(table["spec_mode"]) == {"v1", "v2"}
    for r in table.to_dict("records"):
        base, spec = _pairs(rows, ("base", r["spec_mode"]), r["batch_size"])
        assert r["pairing"] == "interleaved" and r["parts"] == "1"
        assert r["steps"] == 2 and r["accept_length"] == 2.5
        if len(base) < 2:  # a busy host can make windows unstable: then too few pairs for an interval
            assert r["method"] != "paired"
            continue
        iv = paired_ratio(base, spec)
        assert (r["method"], r["n"]) == ("paired", len(base))
        assert r["ratio"] == pytest.approx(iv.ratio) and r["ci_low"] == pytest.approx(iv.low)
        assert r["ci_high"] == pytest.approx(iv.high)
        # the medians are the points' own, over every ok window of both of their pairs
        ok_base = [
            w.throughput for w in rows if w.mode == "base" and w.batch == r["batch_size"] and w.status == "ok"
        ]
        assert r["baseline_output_throughput"] == pytest.approx(statistics.median(ok_base))  # type: ignore[type-var]
    # v2/v1 pairs only the windows of the v1~v2 pair, though each side has three more (against the baseline)
    ratios = v2_vs_v1.load(engine, out.run_id, profiles=False)
    for r in ratios.to_dict("records"):
        v1, v2 = _pairs(rows, ("v1", "v2"), r["batch_size"])
        if len(v1) >= 2:
            assert (r["method"], r["n"], r["pairing"]) == ("paired", len(v1), "interleaved")
            assert r["ratio"] == pytest.approx(
                math.exp(statistics.fmean(math.log(b / a) for a, b in zip(v1, v2, strict=True)))
            )


def test_spec_vs_baseline_exports(chain: tuple[Engine, RunOutcome], module_db_url: str) -> None:
    _, out = chain
    run = ["export", "--db", module_db_url, "--run", str(out.run_id), "--view", "spec-vs-baseline"]
    csv = CliRunner().invoke(app, [*run, "--format", "csv"])
    assert csv.exit_code == 0, csv.output
    # every row says what its numbers are (the stand-in's: simulated), in the first column
    assert csv.stdout.splitlines()[0].split(",") == ["kind", *spec_vs_baseline.COLUMNS]
    assert {line.split(",")[0] for line in csv.stdout.splitlines()[1:]} == {"simulated"}
    assert len(csv.stdout.splitlines()) == 1 + 4
    js = json.loads(CliRunner().invoke(app, [*run, "--format", "json"]).stdout)
    assert js["view"] == "spec-vs-baseline" and len(js["rows"]) == 4
    assert js["kind"] == "simulated" and {r["kind"] for r in js["rows"]} == {"simulated"}
    assert [(p["part"], p["status"]) for p in js["parts"]] == [(1, out.status)]  # where the run ran
    assert {r["pairing"] for r in js["rows"]} == {"interleaved"}
    md = CliRunner().invoke(app, [*run, "--format", "md"]).stdout
    assert f"Speculation over the no-spec baseline, run #{out.run_id} chain" in md
    assert "| spec/base | 95% CI |" in md and md.count("| interleaved | 1 |") == 4


@sqlite_only
def test_a_gpu_that_holds_one_server_measures_the_chain_in_blocks(engine: Engine, tmp_path: Path) -> None:
    """The second server of the first pair cannot start next to the first: every pair in blocks, the chain's
    shared server carried from one pair's last block into the next pair's first, and the views say so. The
    order of starts and blocks is the executor's: on SQLite only (`chain` reads the interleaved chain back on
    PostgreSQL too)."""
    spec = parse_sweep(CHAIN_ONE_SERVER)
    out = execute_sweep(spec, CHAIN_ONE_SERVER, engine, log_dir=tmp_path, show_progress=False)
    assert out.status in ("done", "unstable")
    with session_scope(engine) as s:
        servers = list(s.scalars(select(ServerInstance).order_by(ServerInstance.id)))
    failed = [si for si in servers if si.status == "failed"]
    assert len(failed) == 1 and "alternating restarts" in (failed[0].error or "")
    measured = [si for si in servers if si.status == "stopped"]
    # blocks A[0] | B[0,1] | A[1,2] | B[2] per pair, three pairs, each pair after the first on the server the
    # one before left up: 4 + 3 + 3 starts (the estimate counts the same), and the failed one
    steps = schedule(expand(spec), spec)
    assert len(measured) == 10 == chain_starts(steps, blocks=True) and out.launches == 11
    rows = windows(engine)
    assert {w.link_mode for w in rows} == {"blocks"}
    links = _by_link(rows)
    for ws in links.values():
        # a block: consecutive windows on one server, every batch size for the block's repeats, in ABBA order
        blocks: list[list[Window]] = []
        for w in ws:
            if blocks and blocks[-1][-1].server == w.server:
                blocks[-1].append(w)
            else:
                blocks.append([w])
        assert [sorted({w.link_repeat for w in b}) for b in blocks] == [[0], [0, 1], [1, 2], [2]]  # type: ignore[type-var]
        assert all({w.batch for w in b} == {1, 2} for b in blocks)
        assert [b[0].mode for b in blocks][::2] == [blocks[0][0].mode] * 2  # A, B, A, B
        assert len({w.server for w in ws}) == 4  # a start per block (the first may be carried over)
    ordered = list(links.values())
    for before, after in itertools.pairwise(ordered):
        assert before[-1].server == after[0].server  # the shared server went on into the next pair
    table = spec_vs_baseline.load(engine, out.run_id)
    assert set(table["pairing"]) == {"blocks"}
    assert set(v2_vs_v1.load(engine, out.run_id, profiles=False)["pairing"]) == {"blocks"}
    assert "blocks: the GPU held one server at a time" in spec_vs_baseline.to_markdown(table)
