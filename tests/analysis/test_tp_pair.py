"""Which two runs are a one-GPU shard and its TP deployment (analysis.tp_pair), and what the comparison
concludes from its rows (analysis.tp_compare.conclusion)."""

from __future__ import annotations

from typing import Any

import pandas as pd
import pytest

from analysis.tp_compare import COLUMNS, conclusion, conclusion_lines
from analysis.tp_pair import PairRefused, RunSide, check_pair, default_pair, pair_notes, pair_problems
from bench.model_config import model_shape
from synthetic.model.presets import preset_config

SHARD_61 = model_shape(preset_config("deepseek-v3-tp8-shard", 61))
SHARD_40 = model_shape(preset_config("deepseek-v3-tp8-shard", 40))
WHOLE_61 = model_shape(preset_config("deepseek-v3-tp8-shard", 61, tp=1))


def side(run_id: int, tps: list[int], shape: dict[str, Any] | None, **kw: Any) -> RunSide:
    facts = {
        "id": run_id,
        "sweep_name": f"sweep-{run_id}",
        "sglang_version": "0.5.13.post1",
        "gpu_name": "NVIDIA H200",
        "gpu_count": max(tps, default=1),
        "simulated": False,
        "model_shape": shape,
        "model_synth": None,
        "tps": tps,
        **kw,
    }
    return RunSide.from_facts(facts)


def test_the_shard_preset_pairs_with_the_whole_model_at_tp_8() -> None:
    assert pair_problems(side(1, [1], SHARD_61), side(2, [8], WHOLE_61)) == []
    assert check_pair(side(1, [1], SHARD_61), side(2, [8], WHOLE_61)) == []


def test_another_depth_or_width_is_named() -> None:
    (why,) = pair_problems(side(1, [1], SHARD_40), side(2, [8], WHOLE_61))
    assert "num_hidden_layers 40 vs 61" in why and "run #1's model is not one GPU of run #2's" in why
    (why,) = pair_problems(side(1, [1], SHARD_61), side(2, [4], WHOLE_61))  # TP 4 holds 32 heads a GPU
    assert "num_attention_heads 16 vs 32" in why and "intermediate_size 2304 vs 4608" in why


def test_roles_widths_and_kinds_of_numbers() -> None:
    (same,) = pair_problems(side(1, [1], SHARD_61), side(1, [1], SHARD_61))
    assert "same run" in same
    swapped = pair_problems(side(2, [8], WHOLE_61), side(1, [1], SHARD_61))
    assert len(swapped) == 2
    assert "run #2 is not a one-GPU shard run" in swapped[0] and "the shard run is one at tp 1" in swapped[0]
    assert not any("--" in why for why in swapped)  # no option names: the page shows these words too
    assert "run #1 is not a tensor-parallel run" in swapped[1]
    (mixed,) = pair_problems(side(1, [1], SHARD_61), side(2, [4, 8], WHOLE_61))
    assert "ran at tp 4/8" in mixed
    (kinds,) = pair_problems(side(1, [1], SHARD_61, simulated=True), side(2, [8], WHOLE_61))
    assert "stand-in's" in kinds and "real" in kinds


def test_runs_without_a_shape_pair_by_their_preset_summary() -> None:
    shard = side(1, [1], None, model_synth="preset deepseek-v3-tp8-shard layers=61/61 tp=8")
    whole = side(2, [8], None, model_synth="preset deepseek-v3-tp8-shard layers=61/61 tp=1")
    assert pair_problems(shard, whole) == []
    (why,) = pair_problems(shard, side(2, [4], None, model_synth=whole.synth))
    assert "1/8 of the model" in why and "(1/4 per GPU)" in why
    short = side(1, [1], None, model_synth="preset deepseek-v3-tp8-shard layers=40/61 tp=8")
    assert "layers 40 vs 61" in pair_problems(short, whole)[0]
    (unknown,) = pair_problems(side(1, [1], None), whole)
    assert "cannot tell whether the models pair: run #1 record" in unknown


def test_a_refusal_lists_every_reason() -> None:
    with pytest.raises(PairRefused) as e:
        check_pair(side(2, [8], WHOLE_61), side(1, [1], SHARD_61, simulated=True))
    lines = str(e.value).splitlines()
    assert lines[0] == "run #2 and run #1 are not a shard and its TP deployment:"
    assert len(lines) == 4 and all(line.startswith("- ") for line in lines[1:])


def test_notes_do_not_refuse() -> None:
    shard = side(1, [1], SHARD_61, gpu_name="NVIDIA H100 80GB HBM3", sglang_version="0.5.12")
    tp = side(2, [8], WHOLE_61, gpu_count=4)
    assert pair_problems(shard, tp) == []
    notes = pair_notes(shard, tp)
    assert any("H100" in n and "two GPUs" in n for n in notes)
    assert any("0.5.12" in n for n in notes)
    assert any("recorded 4 GPU(s) for tp 8" in n for n in notes)


def test_the_stand_in_records_its_emulated_gpus() -> None:
    tp = side(2, [8], WHOLE_61, gpu_count=0, gpu_name="none", sim_gpu_count=8, sim_gpu_name="NVIDIA H200")
    assert (tp.gpus, tp.gpu_name) == (8, "NVIDIA H200")
    assert tp.describe() == "run #2 sweep-2: tp 8 on 8x NVIDIA H200"


def test_default_pair_is_the_newest_that_pairs() -> None:
    sides = {
        5: side(5, [8], WHOLE_61),
        4: side(4, [1], SHARD_40),  # newest shard, another depth
        3: side(3, [1], SHARD_61),
        2: side(2, [8], WHOLE_61),
        1: side(1, [1], SHARD_61),
    }
    widths = {r: list(s.tps) for r, s in sides.items()}
    assert default_pair([5, 4, 3, 2, 1], widths, sides.__getitem__) == (3, 5)
    assert default_pair([4, 2], widths, sides.__getitem__) is None


def _rows(rows: list[dict[str, Any]]) -> pd.DataFrame:
    base = dict.fromkeys(COLUMNS)
    return pd.DataFrame([{**base, "workload_key": "w", **r} for r in rows], columns=list(COLUMNS))


def _cell(batch: int, shard: str, tp: str, err: float | None, err_ar: float | None) -> list[dict[str, Any]]:
    agree = None if "insufficient data" in (shard, tp) else shard == tp
    common = {
        "batch_size": batch,
        "steps": 1,
        "accept_length": 1.8,
        "shard_verdict": shard,
        "tp_verdict": tp,
        "verdicts_agree": agree,
        "cycle_error": err,
        "cycle_error_with_all_reduce": err_ar,
    }
    return [{**common, "mode": "v1"}, {**common, "mode": "v2"}]


def test_conclusion_counts_verdicts_per_batch_and_the_errors() -> None:
    frame = _rows(
        [
            {"batch_size": 1, "mode": "baseline", "cycle_error": -0.5},  # baseline errors are not counted
            *_cell(1, "faster", "faster", -0.20, 0.02),
            *_cell(8, "faster", "slower", -0.25, -0.12),
            *_cell(64, "no clear difference", "faster", -0.30, None),
        ]
    )
    c = conclusion(frame)
    assert c["verdicts_by_batch"] == {
        1: {"cells": 1, "agree": 1, "disagree": 0, "opposite": 0, "undecided": 0},
        8: {"cells": 1, "agree": 0, "disagree": 1, "opposite": 1, "undecided": 0},
        64: {"cells": 1, "agree": 0, "disagree": 1, "opposite": 0, "undecided": 0},
    }
    assert c["predicts_every_batch"] is False
    assert c["cycle_error"]["rows"] == 6 and c["cycle_error"]["max_abs"] == pytest.approx(0.30)
    assert c["cycle_error_with_all_reduce"]["rows"] == 4
    assert c["cycle_error_with_all_reduce"]["max_abs"] == pytest.approx(0.12)
    assert c["cycle_error_with_all_reduce"]["within_target"] == 2
    assert c["within_target"] is False
    lines = conclusion_lines(c, 8)
    assert lines[0].startswith("The shard does not predict the TP-8 v2/v1 verdict at every batch size")
    assert "batch 8: 1 of 1 disagree (1 opposite)" in lines[0]
    assert "not within the 10% aim" in lines[2]


def test_conclusion_when_everything_agrees_or_is_open() -> None:
    c = conclusion(
        _rows([*_cell(1, "slower", "slower", -0.2, 0.05), *_cell(8, "faster", "faster", -0.2, -0.08)])
    )
    assert c["predicts_every_batch"] is True and c["within_target"] is True
    assert conclusion_lines(c, 8)[0].startswith(
        "The shard predicts the TP-8 v2/v1 verdict at every batch size"
    )
    open_ = conclusion(_rows(_cell(1, "faster", "insufficient data", None, None)))
    assert open_["predicts_every_batch"] is None and open_["within_target"] is None
    assert "No TP-8 profile with all-reduce figures" in conclusion_lines(open_, 8)[-1]
