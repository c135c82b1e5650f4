"""The Sweep page of a run measured against its baseline (measure.baseline_pairs): the spec-over-baseline cells
with their intervals next to v2/v1, how many parts the run took and on which hosts, and pairs measured in
blocks said so."""

from __future__ import annotations

import pytest
from sqlalchemy import delete, select, update

from bench.sweep import parse_sweep
from db.engine import session_scope
from db.migrate import open_database
from db.models import Point, Run, Sample
from runners.parts import PartHost
from runners.sweep_runner import execute_sweep
from tests.fixtures.chain import CHAIN, CHAIN_ONE_SERVER
from tests.fixtures.dashboard import md_tables, open_page, show

pytestmark = pytest.mark.slow  # stand-in sweeps, then the page


@pytest.fixture(scope="module")
def runs(tmp_path_factory: pytest.TempPathFactory) -> tuple[str, int, int]:
    """CHAIN in two parts on two hosts (the second continues after the first lost its last window), and
    CHAIN_ONE_SERVER (blocks)."""
    tmp = tmp_path_factory.mktemp("pairs-page")
    url = f"sqlite:///{tmp / 'pairs.db'}"
    engine = open_database(url)
    spec = parse_sweep(CHAIN)
    host_a, host_b = PartHost("gpu-a", "NVIDIA H200", 1), PartHost("gpu-b", "NVIDIA H100 80GB HBM3", 1)
    chain = execute_sweep(spec, CHAIN, engine, log_dir=tmp, show_progress=False, host=host_a).run_id
    with session_scope(engine) as s:
        last = s.scalars(select(Sample.id).join(Point).order_by(Sample.order_index.desc()).limit(1)).one()
        s.execute(delete(Sample).where(Sample.id == last))
        s.execute(update(Run).values(status="partial"))
    execute_sweep(spec, CHAIN, engine, log_dir=tmp, show_progress=False, host=host_b, resume_run_id=chain)
    one = parse_sweep(CHAIN_ONE_SERVER)
    blocks = execute_sweep(one, CHAIN_ONE_SERVER, engine, log_dir=tmp, show_progress=False).run_id
    engine.dispose()
    return url, chain, blocks


def test_the_page_shows_speculation_over_the_baseline_and_the_runs_parts(
    runs: tuple[str, int, int], monkeypatch: pytest.MonkeyPatch
) -> None:
    url, chain, _ = runs
    at = show(open_page(url, "pages/sweep.py", monkeypatch, run=str(chain)), "sw_tab", "v2 over v1")
    assert any(m.value == "##### Speculative over baseline, with intervals" for m in at.markdown)
    table = next(t for t in md_tables(at) if "spec/base" in t.columns)
    assert len(table) == 4 and set(table["mode"]) == {"v1", "v2"}
    assert set(table["batch"]) == {"1", "2"}
    captions = " ".join(c.value for c in at.caption)
    assert "Measured in 2 parts: gpu-a (H200×1), gpu-b (H100×1, " in captions
    # Part 2 re-measured one window alone (its partner ran in part 1). Whether that window joins its cell is
    # the drift check's call, which the stand-in's speed on a loaded host decides either way: the cell says
    # which, and only a cell that took it says blocks.
    parts_caption = next(c.value for c in at.caption if c.value.startswith("Measured in 2 parts"))
    agreed = ", agreed" in parts_caption  # not "did not agree", "not checked" or "check failed"
    joined = table[table["parts"].astype(str) == "1+2"]
    assert len(joined) == (1 if agreed else 0), (captions, table[["pairing", "parts"]])
    assert set(joined["pairing"]) <= {"blocks + interleaved"}
    assert set(table.drop(joined.index)["pairing"]) == {"interleaved"}
    assert ("measured in **blocks**" in captions) == agreed


def test_the_page_says_when_pairs_were_measured_in_blocks(
    runs: tuple[str, int, int], monkeypatch: pytest.MonkeyPatch
) -> None:
    url, _, blocks = runs
    at = open_page(url, "pages/sweep.py", monkeypatch, run=str(blocks))
    captions = " ".join(c.value for c in at.caption)
    assert "Some pairs were measured in **blocks**" in captions and "Measured in 2 parts" not in captions
    table = next(t for t in md_tables(show(at, "sw_tab", "v2 over v1")) if "spec/base" in t.columns)
    assert set(table["pairing"]) == {"blocks"}
