"""A run's points against their physical floors (bench/floor.py); every status is kept: `invalid` (faster than
its floor) is exactly the one to show."""

import pandas as pd

from analysis.labels import config_label, none_if_nan
from bench.floor import FLOOR_TOLERANCE, measured_step_ms

FLOOR_COLUMNS: tuple[str, ...] = (
    *("series", "spec_mode", "batch_size", "status", "step_floor_ms", "measured_step_ms", "floor_fraction"),
    "impossible",
)


def floor_rows(points: pd.DataFrame) -> pd.DataFrame:
    """One row per point with a floor (db.queries.run_points), FLOOR_COLUMNS."""
    if points["step_floor_ms"].isna().all():
        return pd.DataFrame(columns=list(FLOOR_COLUMNS))
    f = points[points["step_floor_ms"].notna()]
    rows = []
    for r in f.to_dict(orient="records"):
        speculative = none_if_nan(r.get("algorithm")) is not None
        accept = none_if_nan(r.get("accept_length_weighted"))
        accept = accept if accept is not None else none_if_nan(r.get("accept_length"))
        tpot = none_if_nan(r.get("tpot_mean_ms"))
        step = measured_step_ms(tpot, accept, speculative)
        fraction = none_if_nan(r.get("floor_fraction"))
        acc = none_if_nan(r.get("accept_length_pinned"))
        rows.append(
            {
                "series": config_label(r, with_batch=False) + (f" acc {acc:g}" if acc is not None else ""),
                "spec_mode": none_if_nan(r.get("spec_mode")) or "baseline",
                "batch_size": int(r["batch_size"]),
                "status": r.get("status"),
                "step_floor_ms": float(r["step_floor_ms"]),
                "measured_step_ms": step,
                "floor_fraction": fraction,
                "impossible": fraction is not None and fraction > FLOOR_TOLERANCE,
            }
        )
    return pd.DataFrame(rows, columns=list(FLOOR_COLUMNS)).sort_values(
        ["series", "batch_size"], ignore_index=True
    )
