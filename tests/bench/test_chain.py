"""The chain of pairs that measures the baseline against the speculative modes (measure.baseline_pairs), each
config's repeats split among its pairs (Slot), and which parts of a run may combine their pairs."""

from __future__ import annotations

import itertools

import pytest

from bench.pairing import Pair, PartRecord, Slot, chain, part_groups, part_of, restart_blocks
from bench.sweep import SweepError, expand, parse_sweep

GRID = """
name: chain
model: m
server: {backend: sim}
grid: {batch_sizes: [1, 8], steps: [3, 1], accept_lengths: {1: [1.8], 3: [2.5]}}
repeats: 3
measure: {baseline_pairs: [v1, v2]}
"""


def _name(pair: Pair) -> str:
    def one(side: str) -> str:
        cfg = pair.side(side).server  # type: ignore[arg-type]
        return "base" if cfg.is_baseline else f"{cfg.spec_mode}s{cfg.steps}"

    return f"{one('A')}~{one('B')}"


def _links(text: str) -> list[Pair]:
    spec = parse_sweep(text)
    units = chain(expand(spec), spec.paired, spec.measure.baseline_pairs)
    assert all(isinstance(u, Pair) for u in units), units
    return [u for u in units if isinstance(u, Pair)]


def test_the_chain_swaps_one_server_per_step_and_measures_steps_3_first() -> None:
    links = _links(GRID)
    assert [_name(p) for p in links] == [
        *("base~v1s3", "v1s3~v2s3", "v2s3~base"),
        *("base~v1s1", "v1s1~v2s1", "v2s1~base"),
    ]
    # Consecutive pairs share a server: the one the step keeps up is the next pair's first side.
    for before, after in itertools.pairwise(links):
        assert before.b.server == after.a.server
    # steps listed [1, 3]: steps 1 first
    assert _name(_links(GRID.replace("steps: [3, 1]", "steps: [1, 3]"))[0]) == "base~v1s1"


def test_one_mode_paired_with_the_baseline_walks_a_path_through_it() -> None:
    links = _links(GRID.replace("baseline_pairs: [v1, v2]", "baseline_pairs: [v1]"))
    # into the baseline for steps 3, out of it for steps 1: one start per server config
    assert [_name(p) for p in links] == ["v2s3~v1s3", "v1s3~base", "base~v1s1", "v1s1~v2s1"]
    alone = _links(
        GRID.replace("grid: {", "grid: {spec_modes: [v2], ").replace("pairs: [v1, v2]", "pairs: [v2]")
    )
    assert [_name(p) for p in alone] == ["v2s3~base", "base~v2s1"]


def test_each_pair_takes_its_own_repeats_of_a_point() -> None:
    links = _links(GRID)
    slots: dict[str, list[Slot]] = {}
    for pair in links:
        for side in ("A", "B"):
            group = pair.side(side)  # type: ignore[arg-type]
            slots.setdefault(group.server.key(), []).append(pair.slot(side))  # type: ignore[arg-type]
            # every point plans the sweep's repeats for each pair its config is in
            assert {p.repeats for p in group.points} == {3 * pair.slot(side).stride}  # type: ignore[arg-type]
        assert pair.repeats == 3
    counts = sorted(len(s) for s in slots.values())
    assert counts == [2, 2, 2, 2, 4]  # the baseline is in four pairs, each speculative config in two
    for config_slots in slots.values():
        stride = len(config_slots)
        indices = [s.index(r) for s in config_slots for r in range(5)]  # extensions past 3 included
        assert sorted(indices) == list(range(5 * stride))  # disjoint, and nothing skipped
        assert [s.last for s in config_slots] == [False] * (stride - 1) + [True]
        for s in config_slots:
            assert [s.link_repeat(s.index(r)) for r in range(5)] == list(range(5))
            assert all(o.link_repeat(s.index(0)) is None for o in config_slots if o is not s)


def test_blocks_follow_abba_and_end_on_the_side_the_next_pair_keeps() -> None:
    # Three repeats: A[0] | B[0, 1] | A[1, 2] | B[2]: the chain's shared server (B, the next pair's A) is up last.
    assert restart_blocks(3) == [("A", [0]), ("B", [0, 1]), ("A", [1, 2]), ("B", [2])]


@pytest.mark.parametrize(
    ("change", "message"),
    [
        ("baseline_pairs: [v1, v1]", "measure.baseline_pairs: duplicate values"),
        ("baseline_pairs: [v3]", "baseline_pairs"),
    ],
)
def test_baseline_pairs_is_checked(change: str, message: str) -> None:
    with pytest.raises(SweepError, match=message):
        parse_sweep(GRID.replace("baseline_pairs: [v1, v2]", change))


def test_baseline_pairs_needs_the_baseline_and_the_mode() -> None:
    with pytest.raises(SweepError, match=r"needs grid\.baseline: true"):
        parse_sweep(GRID.replace("steps: [3, 1]", "steps: [3, 1], baseline: false"))
    with pytest.raises(SweepError, match=r"v2 is not in grid.spec_modes \['v1'\]"):
        parse_sweep(GRID.replace("grid: {", "grid: {spec_modes: [v1], "))
    with pytest.raises(SweepError, match="backend external measures one server"):
        parse_sweep(
            GRID.replace("server: {backend: sim}", "server: {backend: external, base_url: 'http://h:1'}")
            .replace(", accept_lengths: {1: [1.8], 3: [2.5]}", "")
            .replace("steps: [3, 1]", "steps: [3]")
        )


def _part(n: int, invocation: int, host: str, agrees: bool | None = None, gpu: str = "1x H200") -> PartRecord:
    return PartRecord(n, invocation, host, gpu, agrees)


def test_parts_combine_on_one_host_or_when_the_check_agreed() -> None:
    parts = [
        _part(1, 0, "a"),
        _part(2, 40, "a"),  # same host and GPU: combines, no check needed
        _part(3, 90, "b", agrees=True),  # another host that agreed with part 2
        _part(4, 130, "c", agrees=False),  # disagreed: a group of its own
        _part(5, 170, "c"),  # back to c's own group (same host as part 4)
        _part(6, 200, "c", gpu="1x H100"),  # another GPU, never checked: its own
    ]
    assert part_groups(parts) == {1: 1, 2: 1, 3: 1, 4: 4, 5: 4, 6: 6}


def test_a_window_belongs_to_the_latest_part_that_began_before_it() -> None:
    parts = [_part(1, 0, "a"), _part(2, 40, "b"), _part(3, 40, "c"), _part(4, 75, "c")]
    assert part_of(parts, 0) == 1 and part_of(parts, 39) == 1
    assert part_of(parts, 40) == 3  # part 2 stored nothing: its start is part 3's
    assert part_of(parts, 75) == 4 and part_of(parts, 10_000) == 4
    assert part_of(parts, None) == 1  # windows stored before invocations were recorded
    assert part_of([], 5) is None
