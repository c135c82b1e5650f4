"""The one "recent regressions" pipeline: what the Overview page shows and `specbench regressions` prints.

Every series with an ok point in the last `since` is scanned with `lookback` more history; a change counts
when its first run is inside `since`. One function, one set of defaults: the two never disagree.
"""

from datetime import datetime, timedelta

import pandas as pd
from sqlalchemy import Engine

from analysis.changes import CHANGE_COLUMNS, attach_triage, scan_changes
from analysis.labels import series_label
from analysis.stats.changepoint import ChangePointParams
from db import queries as q
from db import triage
from db.types import utcnow

DEFAULT_SINCE = timedelta(days=30)
DEFAULT_LOOKBACK = timedelta(days=60)
RESULT_COLUMNS: tuple[str, ...] = (*CHANGE_COLUMNS, "state", "note", "series")


def recent_changes(
    engine: Engine,
    metric: str = "output_throughput",
    params: ChangePointParams | None = None,
    *,
    since: timedelta = DEFAULT_SINCE,
    lookback: timedelta = DEFAULT_LOOKBACK,
    now: datetime | None = None,
) -> pd.DataFrame:
    """Every change (either way, any triage state) starting within `since`: RESULT_COLUMNS, newest first."""
    cutoff = (now or utcnow()) - since
    metrics = list(dict.fromkeys([metric, *q.FACTOR_METRICS]))
    history = q.series_history(engine, since=cutoff - lookback, metrics=metrics)
    active = history.loc[pd.to_datetime(history["created_at"], utc=True) >= cutoff, "fingerprint"].unique()
    changes = scan_changes(history[history["fingerprint"].isin(set(active))], metric, params)
    changes = changes[pd.to_datetime(changes["started_at"], utc=True) >= cutoff]
    if changes.empty:
        return pd.DataFrame({c: pd.Series(dtype=object) for c in RESULT_COLUMNS})
    fingerprints = changes["fingerprint"].unique().tolist()
    changes = attach_triage(changes, triage.triage_for(engine, fingerprints, metric))
    names = {
        r["fingerprint"]: series_label(r) for r in q.series_describe(engine, fingerprints).to_dict("records")
    }
    changes = changes.assign(series=changes["fingerprint"].map(names))
    return changes.reindex(columns=list(RESULT_COLUMNS)).reset_index(drop=True)


def flagged(
    changes: pd.DataFrame, *, include_improvements: bool = False, include_dismissed: bool = False
) -> pd.DataFrame:
    """The changes a person should look at: regressions not yet dismissed, unless asked for more."""
    keep = pd.Series(True, index=changes.index)
    if not include_improvements:
        keep &= changes["direction"] == "regression"
    if not include_dismissed:
        keep &= changes["state"] != "dismissed"
    return changes[keep].reset_index(drop=True)
