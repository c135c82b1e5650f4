"""Sweep files: validation reports every problem at once; expansion groups points by server config."""

from __future__ import annotations

import pytest

from bench.sweep import SweepError, expand, load_sweep, parse_sweep
from tests.paths import REPO_ROOT

BASE = """
name: t
model: sim-tiny
server: {backend: sim, attention_backend: flashmla}
grid: {batch_sizes: [1, 4], spec_modes: [v1, v2], steps: [1, 2, 3], topk: [1], baseline: true}
workload: {input_len: 32, output_len: 16}
repeats: 2
"""


def test_shipped_sweeps_are_valid() -> None:
    paths = sorted((REPO_ROOT / "sweeps").glob("*.yaml"))
    assert len(paths) >= 10  # from any working directory: a glob that finds nothing checks nothing
    for path in paths:
        load_sweep(path)


def test_launches_equal_distinct_server_configs() -> None:
    groups = expand(parse_sweep(BASE))
    # baseline + 2 modes x 3 steps
    assert len(groups) == 7
    assert len({g.server.key() for g in groups}) == 7
    assert groups[0].server.is_baseline
    assert all(len(g.points) == 2 for g in groups)
    assert {p.batch_size for g in groups for p in g.points} == {1, 4}
    # topk 1: draft tokens are steps+1, exactly what SGLang will resolve
    assert {(g.server.steps, g.server.draft_tokens) for g in groups[1:]} == {(1, 2), (2, 3), (3, 4)}


def test_point_keys_are_stable_and_unique() -> None:
    a = [p.key() for g in expand(parse_sweep(BASE)) for p in g.points]
    b = [p.key() for g in expand(parse_sweep(BASE)) for p in g.points]
    assert a == b
    assert len(set(a)) == len(a)


def test_auto_num_prompts_gives_full_waves() -> None:
    spec = parse_sweep(BASE.replace("batch_sizes: [1, 4]", "batch_sizes: [1, 16]"))
    counts = {p.batch_size: p.num_prompts for p in expand(spec)[0].points}
    assert counts == {1: 8, 16: 64}


@pytest.mark.parametrize(
    ("patch", "needle"),
    [
        (("topk: [1]", "topk: [2]"), "not supported by attention backend 'flashmla'"),
        (("baseline: true}", "baseline: true, draft_tokens: [8]}"), "steps*topk+1"),
        (("baseline: true}", "baseline: true, draft_tokens: [3]}"), "overwrites draft_tokens"),
        (("steps: [1, 2, 3]", "steps: [0]"), "grid.steps[0]: must be >= 1 (got 0)"),
        (("batch_sizes: [1, 4]", "batch_sizes: [0, 4]"), "grid.batch_sizes[0]: must be >= 1 (got 0)"),
        (("spec_modes: [v1, v2]", "spec_modes: [v3]"), "spec_modes"),
        (("backend: sim,", "backend: external,"), "server.base_url: required"),
        (("repeats: 2", "repeats: 0"), "repeats"),
        (("name: t", "name: 'bad name!'"), "name: use letters"),
    ],
)
def test_bad_sweeps_are_refused_with_reason(patch: tuple[str, str], needle: str) -> None:
    text = BASE.replace(*patch)
    assert text != BASE
    with pytest.raises(SweepError) as e:
        parse_sweep(text, "x.yaml")
    assert needle in str(e.value), str(e.value)
    assert str(e.value).startswith("x.yaml: invalid sweep")


def test_all_problems_are_reported_at_once() -> None:
    text = BASE.replace("topk: [1]", "topk: [2]").replace("steps: [1, 2, 3]", "steps: [0, 1]")
    with pytest.raises(SweepError) as e:
        parse_sweep(text)
    assert len(e.value.problems) >= 2


def test_cross_field_problems_alone_are_reported_once_each() -> None:
    # Every field well-typed, two combinations wrong: the second validation round used to repeat them.
    text = BASE.replace("batch_sizes: [", "batch_sizes: [1, 1, ").replace("topk: [1]", "topk: [2]")
    with pytest.raises(SweepError) as e:
        parse_sweep(text)
    assert len(e.value.problems) >= 2
    assert len(e.value.problems) == len(set(e.value.problems)), e.value.problems


def test_passthrough_args_are_checked() -> None:
    bad = BASE.replace(
        "attention_backend: flashmla}",
        "attention_backend: flashmla, args: {speculative-num-steps: 3, no-such-flag: 1, --mem-fraction-static: 0.5}}",
    )
    with pytest.raises(SweepError) as e:
        parse_sweep(bad)
    msg = str(e.value)
    assert "set by the sweep itself" in msg
    assert "unknown SGLang flag 'no-such-flag'" in msg
    assert "without leading dashes" in msg


def test_external_refuses_server_grid() -> None:
    text = BASE.replace("backend: sim,", "backend: external, base_url: 'http://127.0.0.1:30000',")
    with pytest.raises(SweepError) as e:
        parse_sweep(text)
    assert "cannot sweep" in str(e.value)
    ok = text.replace("spec_modes: [v1, v2], steps: [1, 2, 3]", "spec_modes: [v2], steps: [3]").replace(
        "baseline: true", "baseline: false"
    )
    groups = expand(parse_sweep(ok))
    assert len(groups) == 1


def test_unknown_keys_and_yaml_errors() -> None:
    with pytest.raises(SweepError, match="unknown key 'bogus'"):
        parse_sweep(BASE + "\nbogus: 1\n")
    with pytest.raises(SweepError, match="not valid YAML"):
        parse_sweep("name: [unclosed")
    with pytest.raises(SweepError, match="file not found"):
        load_sweep("/nonexistent/sweep.yaml")


def test_a_bad_workload_is_explained_for_the_shape_that_was_written() -> None:
    # `workload` is one mapping or a list of them; a mapping's error must not read "should be a valid list".
    one = BASE.replace("{input_len: 32, output_len: 16}", "{input_len: 0, output_len: 16}")
    with pytest.raises(SweepError) as e:
        parse_sweep(one)
    assert e.value.problems == ["workload.input_len: must be >= 1 (got 0)"]
    many = BASE.replace("{input_len: 32, output_len: 16}", "[{input_len: 8}, {output_len: 0}]")
    with pytest.raises(SweepError) as e:
        parse_sweep(many)
    assert e.value.problems == ["workload[1].output_len: must be >= 1 (got 0)"]
    with pytest.raises(SweepError) as e:
        parse_sweep(BASE.replace("{input_len: 32, output_len: 16}", "5"))
    assert e.value.problems == ["workload: must be one workload or a list of workloads (mappings)"]


def test_env_values_become_strings() -> None:
    spec = parse_sweep(
        BASE.replace(
            "attention_backend: flashmla}",
            "attention_backend: flashmla, env: {SGLANG_SIMULATE_ACC_LEN: 2.5}}",
        )
    )
    assert spec.server.env == {"SGLANG_SIMULATE_ACC_LEN": "2.5"}


def test_drift_check_defaults_on_for_gpu_servers_and_pairs_off_for_unpaired_stand_in() -> None:
    base = "name: d\nmodel: m\ngrid: {batch_sizes: [1], spec_modes: [%s]}\nserver: {backend: %s}\n"
    assert parse_sweep(base % ("v1, v2", "sim")).drift_check  # a pair: drift is what interleaving cancels
    assert not parse_sweep(base % ("v2", "sim")).drift_check  # would only restart a stand-in
    assert parse_sweep(base % ("v2", "sglang")).drift_check
    assert parse_sweep(base % ("v2", "sim") + "measure: {drift_check: true}\n").drift_check
