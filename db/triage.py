"""Humans' verdicts on flagged changes: read beside detected changes, one stored per series, metric, run."""

from collections.abc import Sequence
from typing import Any

import pandas as pd
from sqlalchemy import Engine, select
from sqlalchemy.orm import Session

from db.models import Triage
from db.query_common import QueryError, metric_column, read_frame
from db.types import utcnow

TRIAGE_STATES: tuple[str, ...] = ("open", "acknowledged", "dismissed")


def triage_for(
    engine: Engine, fingerprints: Sequence[str] | None = None, metric: str | None = None
) -> pd.DataFrame:
    stmt = select(Triage.__table__).order_by(Triage.id)
    if fingerprints is not None:
        fps = list(fingerprints)
        if not fps:
            return read_frame(engine, stmt.where(Triage.id < 0))
        stmt = stmt.where(Triage.fingerprint.in_(fps))
    if metric is not None:
        stmt = stmt.where(Triage.metric == metric)
    return read_frame(engine, stmt)


def set_triage(
    engine: Engine,
    *,
    fingerprint: str,
    metric: str,
    run_id: int | None,
    state: str,
    note: str | None = None,
    magnitude: float | None = None,
    kind: str = "change_point",
) -> int:
    """Record a human verdict on a flagged change (one row per series, metric and run; later verdicts win)."""
    change = {"fingerprint": fingerprint, "run_id": run_id, "magnitude": magnitude}
    return set_triage_many(engine, [change], metric=metric, state=state, note=note, kind=kind)[0]


def set_triage_many(
    engine: Engine,
    changes: Sequence[dict[str, Any]],
    *,
    metric: str,
    state: str,
    note: str | None = None,
    kind: str = "change_point",
) -> list[int]:
    """One verdict for many flagged changes (fingerprint, run_id, magnitude?) in one transaction."""
    if state not in TRIAGE_STATES:
        raise QueryError(f"triage state must be one of {', '.join(TRIAGE_STATES)}, not {state!r}")
    metric_column(metric)
    ids: list[int] = []
    with Session(engine, expire_on_commit=False) as s, s.begin():
        for change in changes:
            fingerprint, run_id = change["fingerprint"], change.get("run_id")
            run_id = None if run_id is None else int(run_id)
            row = s.scalars(
                select(Triage).where(
                    Triage.fingerprint == fingerprint,
                    Triage.metric == metric,
                    Triage.run_id.is_(None) if run_id is None else Triage.run_id == run_id,
                )
            ).first()
            if row is None:
                row = Triage(fingerprint=fingerprint, metric=metric, run_id=run_id, kind=kind)
                s.add(row)
            row.state = state
            row.note = (note or "").strip() or None
            row.kind = kind
            magnitude = change.get("magnitude")
            if magnitude is not None:
                row.magnitude = float(magnitude)
            row.updated_at = utcnow()
            s.flush()
            ids.append(int(row.id))
    return ids
