"""Extra ABBA repeats for a colocated pair until its ratio interval is as narrow as the sweep asks.

After the planned repeats, until the paired 95% interval of the throughput ratio lies within ratio x
(1 +- `measure.ratio_target`), or `measure.max_repeats`. The interval is read back from the database, so a
resumed run counts what it stored. Repeats are the link's.
"""

from collections.abc import Callable, Iterable

from sqlalchemy.orm import Session

from bench.pairing import Pair, Slot, paired_repeats
from bench.stats.ratio import half_width, paired_ratio
from bench.sweep import PointPlan
from runners import store
from runners.executor import SweepExecutor

Values = dict[int, tuple[float, int | None]]


def measured_repeats(planned: int, stored: Iterable[int]) -> int:
    """Repeats held so far: the planned ones, or r + 1 where extension repeat r was stored."""
    return max([planned, *(r + 1 for r in stored)])


def narrow_enough(width: float | None, target: float) -> bool:
    """The pair's interval reaches no further than `target` from its centre (two pairs at least)."""
    return width is not None and width <= target


def in_link(values: Values, slot: Slot, combines: Callable[[int | None], bool] | None = None) -> Values:
    """A point's values of one link by link repeat; only the invocations that `combines`, when given."""
    out: Values = {}
    for index, (value, inv) in values.items():
        r = slot.link_repeat(index)
        if r is not None and (combines is None or combines(inv)):
            out[r] = (value, inv)
    return out


def relative_half_width(a: Values, b: Values) -> float | None:
    """The paired 95% interval of b/a's half-width as a fraction of its centre (None below 2 pairs)."""
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
