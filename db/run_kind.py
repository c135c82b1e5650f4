"""What kind of numbers a run holds, as every page, export and comment names it.

Real measurements carry no tag. A run on the stand-in server (`bench.sim`, no GPU) is "simulated (stand-in)":
its numbers come from a performance model. Runs written by `specbench seed` are "synthetic" history for load
tests. Both are `simulated` in the store; the trigger tells them apart.
"""

from __future__ import annotations

STAND_IN_TAG = "simulated (stand-in)"
SYNTHETIC_TAG = "synthetic"


def run_tag(simulated: object, trigger: object) -> str | None:
    """The tag shown next to a run, or None for a real measurement."""
    if trigger == SYNTHETIC_TAG:
        return SYNTHETIC_TAG
    if simulated is None or simulated != simulated:  # NULL, or NaN from a pandas frame
        return None
    return STAND_IN_TAG if bool(simulated) else None
