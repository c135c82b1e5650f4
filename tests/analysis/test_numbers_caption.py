"""The one caption of what a run's numbers are made of, and what speculation over the baseline means for
each model class."""

from __future__ import annotations

from analysis.labels import model_class, numbers_caption, spec_over_baseline_caption

SHARD = {
    "model": ".models/deepseek-v3-tp8-shard-40l",
    "model_synth": "preset deepseek-v3-tp8-shard layers=40/61 tp=8",
}
SLICE = {"model": ".models/deepseek-v3-slice-4l", "model_synth": None}


def test_numbers_caption() -> None:
    assert numbers_caption(
        {**SHARD, "dummy_weights": True, "accept_lengths": [2.5], "routings": ["balanced"]}
    ) == ("dummy weights, acceptance pinned at 2.5, balanced routing")
    assert numbers_caption(
        {**SHARD, "dummy_weights": True, "accept_lengths": [2.5, 1.8], "routings": ["collapsed"]}
    ) == ("dummy weights, acceptance pinned at 1.8 and 2.5, routing collapsed")
    mixed = numbers_caption({"dummy_weights": True, "routings": ["balanced", "collapsed"]})
    assert (
        mixed
        == "dummy weights, acceptance not pinned, routing balanced on some servers and collapsed on others"
    )
    # A slice stored before specbench recorded routing: its MoE layers collapsed.
    assert numbers_caption({**SLICE, "dummy_weights": True, "accept_lengths": [2.5]}).endswith(
        "routing collapsed"
    )
    assert numbers_caption({"dummy_weights": True, "model": "org/some-model"}).endswith(
        "routing not recorded"
    )
    assert numbers_caption({"dummy_weights": False, "accept_lengths": []}) == ""  # real weights, as drafted


def test_spec_over_baseline_caption_per_model_class() -> None:
    slice_text = spec_over_baseline_caption({**SLICE, "dummy_weights": True})
    assert slice_text.startswith(
        "Host-bound slice: the draft is 15x heavier than in a deployment, routing collapsed."
    )
    shard_text = spec_over_baseline_caption({**SHARD, "dummy_weights": True, "routings": ["balanced"]})
    assert shard_text.startswith("One GPU of a TP-8 DeepSeek-V3 deployment: 40 of 61 layers")
    assert "1.5x" in shard_text and "all-reduces" in shard_text and "(balanced routing)" in shard_text
    full = {**SHARD, "model_synth": "preset deepseek-v3-tp8-shard layers=61/61 tp=8"}
    assert "of 61 layers" not in spec_over_baseline_caption(full)
    assert model_class({"model_synth": "agree seed=0 hidden=1024 layers=2 vocab=32000"}) == "toy"
    assert model_class({"model": "/models/DeepSeek-V3"}) == "full"
    assert spec_over_baseline_caption(SHARD, simulated=True).startswith("Stand-in server")


def test_the_pr_comment_says_what_the_numbers_are_made_of() -> None:
    import pandas as pd

    from analysis import report
    from analysis.compare import COMPARE_COLUMNS

    facts = {**SHARD, "dummy_weights": True, "accept_lengths": [2.5], "routings": ["balanced"]}
    run = {
        "id": 1,
        "uid": "abc",
        "status": "done",
        "sweep_name": "s",
        "trigger": "manual",
        "caption_facts": facts,
    }
    empty = pd.DataFrame(columns=list(COMPARE_COLUMNS))
    for short in (False, True):
        text = report.to_markdown(empty, run, {**run, "id": 2}, short=short)
        assert "| Numbers | dummy weights, acceptance pinned at 2.5, balanced routing |" in text
    plain_runs = report.to_markdown(empty, {"id": 1}, {"id": 2}, short=True)
    assert "| Numbers |" not in plain_runs  # nothing to say: the short form leaves the row out
