"""Reads of the `profiles` table for the dashboard and the exports (Core selects, bound parameters)."""

from typing import Any

from sqlalchemy import Engine, select

from db.models import Point, Profile, Run

# What makes a v1 profile and a v2 profile "the same point": everything but the spec mode.
PAIR_KEYS = (
    *("batch_size", "steps", "topk", "draft_tokens", "accept_length_pinned", "workload_key", "algorithm"),
    *("activities_key",),
)


def runs_with_profiles(engine: Engine) -> list[dict[str, Any]]:
    stmt = (
        select(
            *(getattr(Run, c) for c in ("id", "sweep_name", "started_at", "label", "simulated", "trigger")),
            *(getattr(Run, c) for c in ("gpu_name", "gpu_count", "sglang_version", "sglang_commit")),
        )
        .where(Run.id.in_(select(Profile.run_id).distinct()))
        .order_by(Run.id.desc())
    )
    with engine.connect() as c:
        return [dict(r._mapping) for r in c.execute(stmt)]


_PROFILE_COLUMNS = (
    *("id", "point_id", "spec_mode", "batch_size", "activities", "num_steps", "tp_rank", "status", "error"),
    *("host", "path", "sha256", "size_bytes", "summary"),
)
# The point's configuration and unprofiled figures.
_POINT_COLUMNS = (
    *("algorithm", "steps", "topk", "draft_tokens", "workload_key", "accept_length", "accept_length_pinned"),
    *("tpot_mean_ms", "output_throughput"),
)


def run_profiles(engine: Engine, run_id: int) -> list[dict[str, Any]]:
    """Every profile row of a run (rank 0 first), with the point's configuration and unprofiled figures."""
    stmt = (
        select(*(getattr(Profile, c) for c in _PROFILE_COLUMNS), *(getattr(Point, c) for c in _POINT_COLUMNS))
        .join(Point, Point.id == Profile.point_id)
        .where(Profile.run_id == run_id)
        .order_by(Profile.batch_size, Point.steps, Profile.spec_mode, Profile.tp_rank, Profile.id)
    )
    with engine.connect() as c:
        rows = [dict(r._mapping) for r in c.execute(stmt)]
    for r in rows:
        r["activities_key"] = "+".join(sorted(r["activities"] or []))
    return rows


def profile_pairs(rows: list[dict[str, Any]], tp_rank: int = 0) -> list[dict[str, Any]]:
    """v1/v2 pairs of ok profiles of the same point configuration (latest capture of each side wins)."""
    sides: dict[tuple[Any, ...], dict[str, dict[str, Any]]] = {}
    for r in rows:
        if r["status"] != "ok" or r["tp_rank"] != tp_rank or r["spec_mode"] not in ("v1", "v2"):
            continue
        key = tuple(r[k] for k in PAIR_KEYS)
        sides.setdefault(key, {})[r["spec_mode"]] = r
    return [
        {**dict(zip(PAIR_KEYS, key, strict=True)), "v1": s["v1"], "v2": s["v2"]}
        for key, s in sides.items()
        if "v1" in s and "v2" in s
    ]
