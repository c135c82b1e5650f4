"""What differs between two sweeps, field by field: the check that keeps a resumed run one procedure.
Measurement settings (measure.*, warmup, repeats, cpu_affinity, timeouts) are in no point key, so `run
--resume` with an edited sweep would measure by two procedures; the runner refuses on any difference here.
Parsed sweeps are compared (`model_dump()`, computed defaults resolved), so comments, order and spelled-out
defaults change nothing."""

import json
from typing import Any, Final, NamedTuple

from bench.sweep.spec import SweepSpec


class _Unset:
    """A key one side's mapping lacks (free-form mappings such as server.args and server.env)."""

    def __repr__(self) -> str:
        return "UNSET"


UNSET: Final = _Unset()


class FieldChange(NamedTuple):
    path: str  # dotted, [i] for an entry of a list of mappings: `measure.min_window_s`, `workload[1].seed`
    old: Any  # UNSET where the old sweep has no such key
    new: Any  # UNSET where the new sweep has no such key


def sweep_changes(old: SweepSpec, new: SweepSpec) -> list[FieldChange]:
    """Every field whose value differs between `old` and `new`, in schema order; [] for the same sweep."""
    return _changes("", _resolved(old), _resolved(new))


def _resolved(spec: SweepSpec) -> dict[str, Any]:
    """`spec.model_dump()` with each null that means a computed default resolved (SweepSpec's properties)."""
    dump = spec.model_dump()
    dump["measure"]["min_window_s"] = spec.min_window_s
    dump["measure"]["drift_check"] = spec.drift_check
    dump["warmup"]["after_start_s"] = spec.warmup_after_start_s
    if spec.measure.ratio_target is not None:
        dump["measure"]["max_repeats"] = spec.max_pair_repeats
    return dump


def describe_changes(changes: list[FieldChange], limit: int = 10) -> str:
    """`path: old -> new` for the first `limit` changes, comma-separated, then `and N more`."""
    shown = [f"{c.path}: {show_value(c.old)} -> {show_value(c.new)}" for c in changes[:limit]]
    if len(changes) > limit:
        shown.append(f"and {len(changes) - limit} more")
    return ", ".join(shown)


def show_value(value: Any, width: int = 60) -> str:
    """A value as the sweep would spell it (JSON flow style), cut to `width`."""
    text = "(unset)" if value is UNSET else json.dumps(value, default=str, ensure_ascii=False)
    return text if len(text) <= width else text[: width - 3] + "..."


def _changes(path: str, old: Any, new: Any) -> list[FieldChange]:
    if isinstance(old, dict) and isinstance(new, dict):
        keys = [*old, *(k for k in new if k not in old)]
        return [
            change
            for k in keys
            for change in _changes(f"{path}.{k}" if path else str(k), old.get(k, UNSET), new.get(k, UNSET))
        ]
    if _mapping_list(old) and _mapping_list(new) and len(old) == len(new):
        # A list of workloads: name the entry and field that changed, not the whole list.
        return [
            change
            for i, (a, b) in enumerate(zip(old, new, strict=True))
            for change in _changes(f"{path}[{i}]", a, b)
        ]
    return [] if _same(old, new) else [FieldChange(path, old, new)]


def _mapping_list(value: Any) -> bool:
    return isinstance(value, list | tuple) and any(isinstance(x, dict) for x in value)


def _same(old: Any, new: Any) -> bool:
    # `True == 1`, but a flag's `1` and `true` differ: bool is its own type; `10` and `10.0` match.
    if isinstance(old, list | tuple) and isinstance(new, list | tuple):
        return len(old) == len(new) and all(_same(a, b) for a, b in zip(old, new, strict=True))
    return isinstance(old, bool) == isinstance(new, bool) and old == new
