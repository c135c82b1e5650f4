"""Pair order (ABBA), restart blocks, pairing of expanded configs, and the new sweep fields."""

from __future__ import annotations

import pytest

from bench.pairing import Pair, abba_order, pair_units, restart_blocks
from bench.sweep import SweepError, expand, parse_sweep

BASE = """
name: p
model: m
server: {backend: sim}
grid: {batch_sizes: [1, 8], steps: [1, 2], accept_lengths: [1.8, 2.5]}
"""


def test_abba_order() -> None:
    order = abba_order(5)
    assert "".join(side for _, side in order) == "ABBAABBAAB"
    assert [r for r, _ in order] == [0, 0, 1, 1, 2, 2, 3, 3, 4, 4]
    # every repeat of each side appears exactly once
    assert sorted(order) == sorted([(r, s) for r in range(5) for s in ("A", "B")])


def test_restart_blocks_follow_abba() -> None:
    assert restart_blocks(4) == [("A", [0]), ("B", [0, 1]), ("A", [1, 2]), ("B", [2, 3]), ("A", [3])]
    assert restart_blocks(1) == [("A", [0]), ("B", [0])]


def test_accept_lengths_expand_to_one_config_per_value() -> None:
    spec = parse_sweep(BASE)
    groups = expand(spec)
    spec_groups = [g for g in groups if not g.server.is_baseline]
    assert len(spec_groups) == 2 * 2 * 2  # steps x accept lengths x modes
    for g in spec_groups:
        env = dict(g.server.env)
        assert env["SGLANG_SIMULATE_ACC_LEN"] == f"{g.server.accept_length:g}"
        assert f"acc={g.server.accept_length:g}" in g.server.label()
    keys = {g.server.key() for g in groups}
    assert len(keys) == len(groups)  # the pinned length is part of the server identity
    baseline = groups[0].server
    assert baseline.is_baseline and baseline.accept_length is None and not baseline.env
    # SGLang clamps the pinned length to [1, steps + 1]: steps 1 cannot show more than 2
    clamped = {
        (g.server.steps, g.server.accept_length): g.server.expected_accept_length() for g in spec_groups
    }
    assert clamped[(1, 2.5)] == 2.0 and clamped[(2, 2.5)] == 2.5 and clamped[(1, 1.8)] == 1.8


def test_pairs_join_configs_that_differ_only_in_mode() -> None:
    groups = expand(parse_sweep(BASE))
    units = pair_units(groups, paired=True)
    pairs = [u for u in units if isinstance(u, Pair)]
    assert len(pairs) == 4 and len(units) == 5  # baseline stays alone
    for p in pairs:
        assert (p.a.server.spec_mode, p.b.server.spec_mode) == ("v1", "v2")
        assert p.a.server.pair_key() == p.b.server.pair_key()
        assert (p.a.server.steps, p.a.server.accept_length) == (p.b.server.steps, p.b.server.accept_length)
    assert pair_units(groups, paired=False) == groups


def test_keys_of_sweeps_without_the_new_fields_do_not_change() -> None:
    # A config's key is its identity across runs; fields added later must not move old keys.
    spec = parse_sweep("name: p\nmodel: m\nserver: {backend: sim}\ngrid: {batch_sizes: [1], steps: [3]}\n")
    v1 = next(g.server for g in expand(spec) if g.server.spec_mode == "v1")
    assert "accept_length" not in v1.to_dict() and "load-format" not in dict(v1.args)


def test_defaults_by_backend_and_pairing() -> None:
    sim = parse_sweep(BASE)
    assert sim.repeats == 5  # both modes: pairs need more repeats
    assert sim.min_window_s == 0.0
    gpu = parse_sweep(BASE.replace("backend: sim", "backend: sglang"))
    assert gpu.min_window_s == 10.0
    one_mode = parse_sweep(BASE.replace("steps: [1, 2]", "steps: [1, 2], spec_modes: [v2]"))
    assert one_mode.repeats == 3 and not one_mode.paired
    explicit = parse_sweep(BASE + "repeats: 2\nmeasure: {min_window_s: 1.5}\n")
    assert explicit.repeats == 2 and explicit.min_window_s == 1.5


def test_load_format_becomes_the_flag() -> None:
    spec = parse_sweep(BASE.replace("backend: sim", "backend: sim, load_format: dummy"))
    assert all(dict(g.server.args)["load-format"] == "dummy" for g in expand(spec))


@pytest.mark.parametrize(
    ("extra", "needle"),
    [
        ("grid: {batch_sizes: [1], accept_lengths: [0.5]}", "must be >= 1.0 (got 0.5)"),
        ("grid: {batch_sizes: [1], accept_lengths: [2, 2]}", "duplicate"),
        (
            "grid: {batch_sizes: [1], accept_lengths: [2]}\nserver: {backend: sim, env: {SGLANG_SIMULATE_ACC_LEN: 2}}",
            "set by grid.accept_lengths",
        ),
        (
            "grid: {batch_sizes: [1]}\nserver: {backend: sim, load_format: dummy, args: {load-format: auto}}",
            "load_format",
        ),
        (
            "grid: {batch_sizes: [1], spec_modes: [v2], baseline: false, accept_lengths: [2]}\n"
            "server: {backend: external, base_url: 'http://127.0.0.1:1'}",
            "accept_lengths",
        ),
    ],
)
def test_bad_combinations(extra: str, needle: str) -> None:
    with pytest.raises(SweepError) as e:
        parse_sweep(f"name: p\nmodel: m\n{extra}\n")
    assert needle in str(e.value)
