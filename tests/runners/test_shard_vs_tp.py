"""Shard vs TP-8 on the stand-in, end to end: a shard run (the deepseek-v3-tp8-shard preset at tp 1) and a
TP-8 run (the whole model, `--tp 1`, at `server.tp: 8`), each into its own database as two hosts would write
them, imported into one (SQLite and PostgreSQL), compared with `specbench export --view shard-vs-tp`, and
shown on the dashboard's Shard vs TP page."""

from __future__ import annotations

import csv
import io
import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from sqlalchemy import select
from streamlit.testing.v1 import AppTest
from typer.testing import CliRunner

from analysis.tp_compare import COLUMNS
from bench.sweep import parse_sweep
from db.engine import session_scope
from db.migrate import open_database
from db.models import Point, Run
from runners.cli import app
from runners.sweep_runner import execute_sweep
from synthetic.model.presets import build_preset
from synthetic.server.config import PerfParams
from tests.paths import REPO_ROOT

pytestmark = pytest.mark.slow  # whole sweeps on live stand-in servers: scheduled first (tests/conftest.py)

BATCHES = (1, 4)
SWEEP = """
name: {name}
model: {model}
server:
  backend: sim
  tp: {tp}
  load_format: dummy
  sim: {{seed: 7}}
grid: {{batch_sizes: [1, 4], spec_modes: [v1, v2], algorithm: NEXTN, steps: [1], accept_lengths: [1.8],
        baseline: true}}
workload: {{input_len: 256, output_len: 32}}
repeats: 4
profile: {{steps: 10, activities: [GPU], at: [1, 4], settle_s: 0.2}}
"""
APP = str(REPO_ROOT / "dashboard" / "app.py")


def _cli(*args: str) -> Any:
    return CliRunner().invoke(app, list(args))


@pytest.fixture(scope="module")
def two_hosts(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    """The shard run and the TP-8 run, each in its own SQLite database (profiles next to it)."""
    d = tmp_path_factory.mktemp("shard-vs-tp")
    shard_model = build_preset(d / "shard", "deepseek-v3-tp8-shard", 2)
    whole_model = build_preset(d / "whole", "deepseek-v3-tp8-shard", 2, tp=1)
    out: dict[str, Path] = {}
    for side, model, tp in (("shard", shard_model, 1), ("tp8", whole_model, 8)):
        text = SWEEP.format(name=f"sim-{side}", model=model, tp=tp)
        (d / side).mkdir(exist_ok=True)
        db = d / side / f"{side}.db"
        eng = open_database(f"sqlite:///{db}")
        result = execute_sweep(parse_sweep(text), text, eng, log_dir=d / side / "logs", show_progress=False)
        eng.dispose()
        assert result.status in ("done", "unstable"), result.error
        out[side] = db
    return out


@pytest.fixture
def combined(two_hosts: dict[str, Path], db_url: str) -> Iterator[tuple[str, int, int]]:
    """Both runs imported into one database (SQLite or PostgreSQL): (url, shard run id, TP run id)."""
    for side in ("shard", "tp8"):
        res = _cli("import", str(two_hosts[side]), "--db", db_url)
        assert res.exit_code == 0, res.output
    eng = open_database(db_url)
    with session_scope(eng) as s:
        ids = {r.sweep_name: r.id for r in s.scalars(select(Run))}
    eng.dispose()
    yield db_url, ids["sim-shard"], ids["sim-tp8"]


def test_the_tp_run_records_eight_gpus_and_the_model_shapes(two_hosts: dict[str, Path]) -> None:
    eng = open_database(f"sqlite:///{two_hosts['tp8']}")
    with session_scope(eng) as s:
        run = s.scalars(select(Run)).one()
        assert run.simulated and run.gpu_count == 0  # the host has no GPU: the stand-in's are emulated
        assert (run.provenance["sim_gpu_count"], run.provenance["sim_gpu_name"]) == (8, "NVIDIA H200")
        shape = run.provenance["model_shape"]
        assert shape["num_attention_heads"] == 128 and shape["num_hidden_layers"] == 2
        assert shape["quantization_config"]["weight_block_size"] == [128, 128]
    eng.dispose()


def _export(url: str, shard: int, tp: int, fmt: str) -> str:
    res = _cli(
        "export",
        "--db",
        url,
        "--view",
        "shard-vs-tp",
        "--run",
        str(shard),
        "--against",
        str(tp),
        "--format",
        fmt,
    )
    assert res.exit_code == 0, res.output
    return str(res.stdout)


def test_export_lists_every_batch_with_both_step_times_ratios_and_the_all_reduce_share(
    combined: tuple[str, int, int],
) -> None:
    url, shard, tp = combined
    rows = list(csv.DictReader(io.StringIO(_export(url, shard, tp, "csv"))))
    assert list(rows[0]) == ["kind", *COLUMNS]
    assert {r["kind"] for r in rows} == {"simulated"}  # both runs on the stand-in: every row says so
    assert {int(r["batch_size"]) for r in rows} == set(BATCHES)
    for batch in BATCHES:
        modes = {r["mode"]: r for r in rows if int(r["batch_size"]) == batch}
        assert set(modes) == {"baseline", "v1", "v2"}
        for mode, r in modes.items():
            shard_step, tp_step = float(r["shard_step_ms"]), float(r["tp_step_ms"])
            assert shard_step > 0 and tp_step > 0
            assert float(r["step_ratio"]) == pytest.approx(tp_step / shard_step, rel=1e-4)
            assert 0 < float(r["shard_floor_fraction"]) < 1 and 0 < float(r["tp_floor_fraction"]) < 1
            if mode == "baseline":
                assert r["shard_ratio"] == r["tp_all_reduce_share"] == ""
                continue
            for side in ("shard", "tp"):
                low, ratio, high = (float(r[f"{side}_{c}"]) for c in ("ci_low", "ratio", "ci_high"))
                assert low <= ratio <= high
                assert r[f"{side}_verdict"] in ("faster", "slower", "no clear difference")
            assert r["verdicts_agree"] == str(r["shard_verdict"] == r["tp_verdict"])
            # The stand-in's TP-8 verify holds tp_comm x 7 of all-reduce (synthetic/server/profiler.py).
            ar_ms, share = float(r["tp_all_reduce_ms"]), float(r["tp_all_reduce_share"])
            assert ar_ms == pytest.approx(PerfParams().tp_comm_ms * 7, abs=0.01)
            assert share == pytest.approx(ar_ms / float(r["tp_profile_cycle_ms"]), rel=0.05)
            assert float(r["tp_all_reduce_kernels"]) == 16
            predicted = shard_step + ar_ms
            assert float(r["shard_plus_all_reduce_ms"]) == pytest.approx(predicted, rel=1e-4)
            assert float(r["cycle_error_with_all_reduce"]) == pytest.approx(predicted / tp_step - 1, abs=1e-4)
            assert float(r["cycle_error"]) == pytest.approx(shard_step / tp_step - 1, abs=1e-4)


def test_json_and_markdown_carry_the_conclusion(combined: tuple[str, int, int]) -> None:
    url, shard, tp = combined
    doc = json.loads(_export(url, shard, tp, "json"))
    assert doc["view"] == "shard-vs-tp"
    assert (doc["shard"]["tp"], doc["tp"]["tp"], doc["tp"]["gpus"]) == (1, 8, 8)
    assert doc["kind"] == doc["shard"]["kind"] == doc["tp"]["kind"] == "simulated"
    assert {r["kind"] for r in doc["rows"]} == {"simulated"}
    c = doc["conclusion"]
    assert set(c["verdicts_by_batch"]) == {str(b) for b in BATCHES}
    # The summary is the rows' errors: every speculative point has a TP profile. Which error is smaller is left
    # to the measured step times (a loaded host stretches one run's more than the other's).
    spec_rows = [r for r in doc["rows"] if r["mode"] != "baseline"]
    for col in ("cycle_error", "cycle_error_with_all_reduce"):
        errors = [abs(r[col]) for r in spec_rows]
        assert c[col]["rows"] == len(errors) == 2 * len(BATCHES)
        assert c[col]["max_abs"] == pytest.approx(max(errors))
    target = c["target"]
    assert c["within_target"] == (c["cycle_error_with_all_reduce"]["max_abs"] <= target)
    assert len(doc["rows"]) == 3 * len(BATCHES)
    text = _export(url, shard, tp, "md")
    assert text.startswith(f"**Shard vs TP-8: run #{shard} sim-shard: tp 1 on 1x NVIDIA H200 (stand-in)")
    assert "v2/v1 verdict" in text and "With the all-reduce time of the TP-8 profile" in text
    largest = f"largest {c['cycle_error_with_all_reduce']['max_abs']:.1%}"
    assert (
        largest in text and f"{'within' if c['within_target'] else 'not within'} the {target:.0%} aim" in text
    )
    assert text.count("| baseline |") == len(BATCHES)


def test_pairs_that_are_not_one_are_refused(combined: tuple[str, int, int]) -> None:
    url, shard, tp = combined
    swapped = _cli("export", "--db", url, "--view", "shard-vs-tp", "--run", str(tp), "--against", str(shard))
    assert swapped.exit_code == 2
    assert "is not a one-GPU shard run" in swapped.output and "is not a tensor-parallel run" in swapped.output
    assert "--run names the shard run" in " ".join(swapped.output.split())  # the CLI names its options
    same = _cli("export", "--db", url, "--view", "shard-vs-tp", "--run", str(shard), "--against", str(shard))
    assert same.exit_code == 2 and "same run" in same.output
    lonely = _cli("export", "--db", url, "--view", "shard-vs-tp", "--run", str(shard))
    assert lonely.exit_code == 2 and "needs --against" in lonely.output
    stray = _cli("export", "--db", url, "--view", "v2-vs-v1", "--run", str(shard), "--against", str(tp))
    assert stray.exit_code == 2 and "--against goes with --view shard-vs-tp" in stray.output


def test_a_tp_run_of_another_depth_is_refused(two_hosts: dict[str, Path], tmp_path: Path) -> None:
    """The TP run's recorded model shape says 2 layers; a shard run of 3 layers does not pair with it."""
    url = f"sqlite:///{tmp_path / 'c.db'}"
    for side in ("shard", "tp8"):
        assert _cli("import", str(two_hosts[side]), "--db", url).exit_code == 0
    eng = open_database(url)
    with session_scope(eng) as s:
        runs = {r.sweep_name: r for r in s.scalars(select(Run))}
        shard = runs["sim-shard"]
        shard.provenance = {
            **shard.provenance,
            "model_shape": {**shard.provenance["model_shape"], "num_hidden_layers": 3},
        }
        ids = runs["sim-shard"].id, runs["sim-tp8"].id
    eng.dispose()
    res = _cli("export", "--db", url, "--view", "shard-vs-tp", "--run", str(ids[0]), "--against", str(ids[1]))
    assert res.exit_code == 2
    assert "is not one GPU of run" in res.output and "num_hidden_layers 3 vs 2" in res.output


def test_runs_without_a_shared_cell_say_what_is_missing(two_hosts: dict[str, Path], tmp_path: Path) -> None:
    """Every point of the TP run moved to another workload: nothing to compare, every cell named."""
    url = f"sqlite:///{tmp_path / 'c.db'}"
    for side in ("shard", "tp8"):
        assert _cli("import", str(two_hosts[side]), "--db", url).exit_code == 0
    eng = open_database(url)
    with session_scope(eng) as s:
        runs = {r.sweep_name: r.id for r in s.scalars(select(Run))}
        for p in s.scalars(select(Point).where(Point.run_id == runs["sim-tp8"])):
            p.workload_key = "random:random:in999:out1:seed1:t0.0"
    eng.dispose()
    res = _cli(
        "export",
        "--db",
        url,
        "--view",
        "shard-vs-tp",
        "--run",
        str(runs["sim-shard"]),
        "--against",
        str(runs["sim-tp8"]),
    )
    assert res.exit_code == 2
    assert "share no measured cell" in res.output
    assert "batch 4 steps 1 accept len 1.8 v2: only in the shard run" in res.output
    assert "batch 1 baseline: only in the TP run" in res.output


def test_the_dashboard_page_renders_the_pair(
    combined: tuple[str, int, int], monkeypatch: pytest.MonkeyPatch
) -> None:
    url, shard, tp = combined
    monkeypatch.setenv("DATABASE_URL", url)
    at = AppTest.from_file(APP, default_timeout=60)
    at.run()
    at.switch_page("pages/shard_vs_tp.py").run()
    assert not at.exception, [e.value for e in at.exception]
    # The pair is found by itself: the newest shard run that pairs with the newest TP run.
    assert (at.selectbox(key="tp_shard").value, at.selectbox(key="tp_tp").value) == (shard, tp)
    assert len(at.get("vega_lite_chart")) == 2
    (table,) = at.dataframe
    frame = table.value
    assert sorted(set(frame["batch_size"])) == list(BATCHES)
    spec = frame[frame["mode"] != "baseline"]
    assert spec["tp_all_reduce_share_pct"].notna().all() and spec["shard_ci_low"].notna().all()
    conclusion = [*at.success, *at.warning]
    assert any("v2/v1 verdict at every batch size" in m.value for m in conclusion)
    assert len(at.get("download_button")) == 2
    # Swapped by hand: the page says why they do not pair instead of drawing anything.
    at.selectbox(key="tp_shard").set_value(tp)
    at.selectbox(key="tp_tp").set_value(shard).run()
    assert not at.exception
    assert any("not a shard and its TP deployment" in w.value for w in at.warning)
    assert any("is not a one-GPU shard run" in m.value for m in at.markdown)
    assert not at.get("vega_lite_chart")
    # In the page's words, not the CLI's: no option names (--run, --against) anywhere on it.
    shown = [e.value for e in (*at.markdown, *at.warning, *at.info, *at.caption)]
    assert not [t for t in shown if "--run" in t or "--against" in t or "specbench " in t], shown


def _page(url: str, monkeypatch: pytest.MonkeyPatch, **params: str) -> AppTest:
    monkeypatch.setenv("DATABASE_URL", url)
    at = AppTest.from_file(APP, default_timeout=60)
    for k, v in params.items():
        at.query_params[k] = v
    at.run()
    at.switch_page("pages/shard_vs_tp.py").run()
    assert not at.exception, [e.value for e in at.exception]
    return at


def test_the_page_without_runs_or_without_a_pair(
    two_hosts: dict[str, Path], tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    empty = f"sqlite:///{tmp_path / 'empty.db'}"
    open_database(empty).dispose()
    assert any("No runs in" in i.value for i in _page(empty, monkeypatch).info)
    lonely = f"sqlite:///{tmp_path / 'shard-only.db'}"
    assert _cli("import", str(two_hosts["shard"]), "--db", lonely).exit_code == 0
    at = _page(lonely, monkeypatch)
    assert any("No shard/TP pair in this database" in i.value for i in at.info)
    assert any("the same run" in m.value for m in at.markdown)  # one run: picked for both sides, and said
    assert not at.get("vega_lite_chart")


def test_a_link_names_the_pair(combined: tuple[str, int, int], monkeypatch: pytest.MonkeyPatch) -> None:
    url, shard, tp = combined
    at = _page(url, monkeypatch, shard=str(tp), tp=str(shard))  # swapped by the link
    assert (at.selectbox(key="tp_shard").value, at.selectbox(key="tp_tp").value) == (tp, shard)
    assert any("not a shard and its TP deployment" in w.value for w in at.warning)
    at = _page(url, monkeypatch, shard=str(shard), tp="99999")
    assert any("does not hold" in w.value for w in at.warning)  # an unknown run: said, the default shown


def test_profile_summarize_shows_the_all_reduce_rows_of_a_tp_rank(two_hosts: dict[str, Path]) -> None:
    traces = sorted((two_hosts["tp8"].parent / "artifacts").rglob("*-TP-*.trace.json.gz"))
    ranks = {t.name.split("-TP-")[1].split(".")[0] for t in traces}
    assert ranks == {str(r) for r in range(8)}  # one file per rank, as SGLang writes them
    rank0 = next(t for t in traces if "-TP-0." in t.name)
    res = _cli("profile", "summarize", str(rank0))
    assert res.exit_code == 0, res.output
    assert "all-reduce per cycle (ms)" in res.output and "all-reduce share of the cycle (%)" in res.output
    doc = json.loads(_cli("profile", "summarize", str(rank0), "--format", "json").stdout)
    assert doc["collectives"]["all_reduce"]["kernels_per_cycle"]["median"] == 16
    shard_traces = sorted((two_hosts["shard"].parent / "artifacts").rglob("*-TP-0.trace.json.gz"))
    one_gpu = json.loads(_cli("profile", "summarize", str(shard_traces[0]), "--format", "json").stdout)
    assert one_gpu["collectives"] == {}
