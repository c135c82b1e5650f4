"""grid.accept_lengths as a mapping: each steps value pinned at its own acceptance (steps 1 at 1.8, steps 3 at
2.5), without the clamped cross a list makes."""

from __future__ import annotations

import pytest

from bench.sweep import SweepError, expand, parse_sweep

BASE = """
name: accept-map
model: sim-tiny
server: {{backend: sim}}
grid: {{batch_sizes: [8], spec_modes: [v1, v2], algorithm: NEXTN, steps: [1, 3], accept_lengths: {accepts}}}
"""


def test_a_mapping_pins_each_steps_value() -> None:
    groups = expand(parse_sweep(BASE.format(accepts="{1: [1.8], 3: [2.5]}")))
    spec = [(g.server.steps, g.server.accept_length, g.server.spec_mode) for g in groups if g.server.steps]
    assert spec == [(1, 1.8, "v1"), (1, 1.8, "v2"), (3, 2.5, "v1"), (3, 2.5, "v2")]
    assert all(g.server.accept_length_note() is None for g in groups)  # nothing clamped
    assert len(groups) == 5  # and the baseline
    crossed = expand(parse_sweep(BASE.format(accepts="[1.8, 2.5]")))
    assert len(crossed) == 9 and any(g.server.accept_length_note() for g in crossed)


@pytest.mark.parametrize(
    ("accepts", "message"),
    [
        ("{1: [1.8], 2: [2.5]}", "steps 2 is not in grid.steps"),
        ("{1: [1.8]}", "no entry for steps 3"),
        ("{1: [1.8, 1.8], 3: [2.5]}", "duplicate values"),
        ("{1: [], 3: [2.5]}", "grid.accept_lengths"),
        ("{1: [0.5], 3: [2.5]}", "grid.accept_lengths"),
    ],
)
def test_bad_mappings_are_refused(accepts: str, message: str) -> None:
    with pytest.raises(SweepError, match=message):
        parse_sweep(BASE.format(accepts=accepts))
