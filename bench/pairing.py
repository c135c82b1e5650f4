"""The order in which a v1/v2 pair is measured, so slow drift cancels instead of landing on one side.

Two server configs that differ only in spec mode form a pair (A = the mode listed first, B = the other).
Per point their repeats run interleaved in ABBA order across repeats:

    A0 B0 | B1 A1 | A2 B2 | B3 A3 | ...

A linear drift over the pair's windows then adds the same amount to A's and B's mean, and repeat r of A and
repeat r of B sit next to each other in time, so the v2/v1 ratio can be paired by repeat.

With both servers alive at once (`server.pair_colocate`), the runner follows that order window by window.
When the second server cannot start next to the first (GPU memory), it falls back to alternating restarts:
the same ABBA sequence cut into runs of one side, one server start per run (`restart_blocks`):

    A[0] | B[0, 1] | A[1, 2] | B[2, 3] | ... (each block measures every point of that side for those repeats)
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Literal

from bench.sweep import ServerGroup

Side = Literal["A", "B"]


def abba_sides(repeat: int) -> tuple[Side, Side]:
    """The order of the two sides in one repeat: A B for even repeats, B A for odd ones."""
    return ("A", "B") if repeat % 2 == 0 else ("B", "A")


def abba_order(repeats: int) -> list[tuple[int, Side]]:
    """(repeat, side) in measurement order: A0 B0 B1 A1 A2 B2 B3 A3 ..."""
    return [(r, side) for r in range(repeats) for side in abba_sides(r)]


def paired_repeats(a: Mapping[int, int | None], b: Mapping[int, int | None]) -> list[int]:
    """The repeats both sides hold, measured by one invocation of the run (repeat -> invocation, None for runs
    stored before invocations were recorded). A resumed run can finish repeat r on one side after the other
    side's window ran in an earlier invocation, on another server or a lost host: not a pair."""
    return sorted(r for r in set(a) & set(b) if a[r] == b[r])


def restart_blocks(repeats: int) -> list[tuple[Side, list[int]]]:
    """The ABBA order as runs of one side: one server start per block when the two cannot coexist."""
    blocks: list[tuple[Side, list[int]]] = []
    for r, side in abba_order(repeats):
        if blocks and blocks[-1][0] == side:
            blocks[-1][1].append(r)
        else:
            blocks.append((side, [r]))
    return blocks


@dataclass(frozen=True)
class Pair:
    a: ServerGroup
    b: ServerGroup

    def side(self, side: Side) -> ServerGroup:
        return self.a if side == "A" else self.b


Unit = ServerGroup | Pair


def pair_units(groups: Sequence[ServerGroup], paired: bool) -> list[Unit]:
    """Groups in launch order, with each v1/v2 pair (same config but the mode) joined into one `Pair`.

    A pair needs the same points on both sides (always true for an expanded sweep); anything unmatched
    (baseline, a lone mode) stays a single group.
    """
    if not paired:
        return list(groups)
    by_key: dict[str, list[ServerGroup]] = {}
    for g in groups:
        if g.server.spec_mode is not None:
            by_key.setdefault(g.server.pair_key(), []).append(g)
    out: list[Unit] = []
    taken: set[int] = set()
    for g in groups:
        if id(g) in taken:
            continue
        mates = by_key.get(g.server.pair_key(), []) if g.server.spec_mode is not None else []
        other = next((m for m in mates if m is not g and id(m) not in taken), None)
        if other is not None and len(mates) == 2 and _same_points(g, other):
            out.append(Pair(g, other))
            taken |= {id(g), id(other)}
        else:
            out.append(g)
            taken.add(id(g))
    return out


def _same_points(a: ServerGroup, b: ServerGroup) -> bool:
    def shape(g: ServerGroup) -> list[tuple[int, str, int, int]]:
        return [(p.batch_size, p.workload.key(), p.num_prompts, p.repeats) for p in g.points]

    return shape(a) == shape(b)
