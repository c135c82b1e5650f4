"""How many points a run has: the one definition `specbench runs`, the Overview and the Sweep page show.

`ok/planned`: a run cut short reads as cut (20/52), not as complete (20/21 of what it stored); out of the
stored points only where the plan is unknown (an imported or no longer valid sweep).
"""

from functools import lru_cache

from bench.sweep import SweepError, expand, parse_sweep


@lru_cache(maxsize=256)
def planned_points(sweep_yaml: str) -> int | None:
    """The points a run of this sweep text plans, as the runner counts them; None for an invalid sweep."""
    try:
        return sum(len(g.points) for g in expand(parse_sweep(sweep_yaml)))
    except SweepError:
        return None


def points_of(ok: int, stored: int, sweep_yaml: str | None) -> tuple[int, int]:
    """(ok, out of): out of the planned points, or of the stored ones where the plan is unknown or smaller."""
    planned = planned_points(sweep_yaml) if sweep_yaml else None
    return ok, planned if planned is not None and planned >= stored else stored


def points_text(ok: int, stored: int, sweep_yaml: str | None) -> str:
    have, of = points_of(ok, stored, sweep_yaml)
    return f"{have}/{of}"
