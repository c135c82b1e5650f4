"""Extra ABBA repeats for a colocated pair until its ratio interval is as narrow as the sweep asks.

`measure.ratio_target` (e.g. 0.05) and `measure.max_repeats`: after the planned `repeats`, the pair keeps
measuring repeat r = repeats, repeats+1, ... in the same ABBA alternation until the paired 95% interval of its
output throughput ratio (v2/v1, or speculation over the baseline) lies within ratio x (1 +- target), or
max_repeats is reached. The interval is the one the views report (ok repeats of the link, one invocation per
pair, the parts that may combine), read back from the database, so a resumed run counts what it stored before.
Repeats here are the link's (bench.pairing.Slot maps them onto a point's).
"""

from __future__ import annotations

from collections.abc import Callable, Iterable

from sqlalchemy.orm import Session

from bench.pairing import Pair, Slot, paired_repeats
from bench.stats.ratio import half_width, paired_ratio
from bench.sweep import PointPlan
from runners import store
from runners.executor import SweepExecutor

Values = dict[int, tuple[float, int | None]]


def measured_repeats(planned: int, stored: Iterable[int]) -> int:
    """Repeats a point (or pair) holds so far: the planned ones, or more where an extension was stored
    (repeat r stored means r + 1 repeats)."""
    return max([planned, *(r + 1 for r in stored)])


def narrow_enough(width: float | None, target: float) -> bool:
    """The pair's interval reaches no further than `target` from its centre (two pairs at least)."""
    return width is not None and width <= target


def in_link(values: Values, slot: Slot, combines: Callable[[int | None], bool] | None = None) -> Values:
    """A point's values (repeat -> (value, invocation)) of one link, keyed by the link's repeat; only those of
    the invocations that `combines` (the parts whose pairs may combine with this one's), when given."""
    out: Values = {}
    for index, (value, inv) in values.items():
        r = slot.link_repeat(index)
        if r is not None and (combines is None or combines(inv)):
            out[r] = (value, inv)
    return out


def relative_half_width(a: Values, b: Values) -> float | None:
    """How far the paired 95% interval of b/a reaches from its centre, as a fraction (None below 2 pairs).
    `a`, `b`: repeat -> (value, invocation), store.ok_values."""
    common = paired_repeats({r: v[1] for r, v in a.items()}, {r: v[1] for r, v in b.items()})
    if len(common) < 2:
        return None
    iv = paired_ratio([a[r][0] for r in common], [b[r][0] for r in common])
    return half_width(iv.low, iv.ratio, iv.high)


def pair_half_width(executor: SweepExecutor, pair: Pair, a: PointPlan, b: PointPlan) -> float | None:
    def read(s: Session) -> tuple[Values, Values]:
        return store.ok_values(s, executor.run_id, a.key()), store.ok_values(s, executor.run_id, b.key())

    va, vb = executor.write(read, f"reading the interval of {a.key()} against {b.key()}")
    combine = executor.parts.combines
    return relative_half_width(in_link(va, pair.slot_a, combine), in_link(vb, pair.slot_b, combine))


def next_repeat(executor: SweepExecutor, pair: Pair, a: PointPlan, b: PointPlan, measured: int) -> int | None:
    """The next link repeat to add to the pair (a, b) after `measured` repeats, or None when it is done."""
    target = executor.spec.measure.ratio_target
    if target is None or not executor.spec.repeats_may_grow(a) or measured >= executor.spec.max_pair_repeats:
        return None
    if narrow_enough(pair_half_width(executor, pair, a, b), target):
        return None
    return measured
