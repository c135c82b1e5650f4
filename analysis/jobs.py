"""Why a queued job waits: one sentence for `specbench jobs` and the Jobs page alike."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from datetime import UTC, datetime
from typing import Any

from bench.host.gpus import Gpu, unmet


def _aware(t: datetime) -> datetime:
    return t if t.tzinfo is not None else t.replace(tzinfo=UTC)


def why_waiting(
    requires: Mapping[str, Any],
    not_before: datetime | None,
    workers: Sequence[Mapping[str, Any]],
    now: datetime,
) -> str:
    """Why a queued job is not running yet, in a few words ("" when a live, idle worker can claim it now).

    `workers` as `db.queue_queries.workers` lists them (gpu_name, gpu_count, labels, state, current job).
    """
    if not_before is not None and _aware(not_before) > _aware(now):
        return f"retry backoff until {_aware(not_before):%H:%M:%S} UTC"
    live = [w for w in workers if w.get("state") not in ("lost", "stopped")]
    if not live:
        return "no worker is running: start one with `specbench worker`"
    fitting, reasons = [], []
    for w in live:
        gpus = [Gpu(i, str(w.get("gpu_name") or "")) for i in range(int(w.get("gpu_count") or 0))]
        why = unmet(requires, gpus, list(w.get("labels") or ()))
        if why is None:
            fitting.append(w)
        else:
            reasons.append(why)
    if not fitting:
        most = max(int(w.get("gpu_count") or 0) for w in live)
        return f"no live worker can run it: {reasons[0]} (the largest has {most} GPU(s))"
    if all(w.get("current_job_id") for w in fitting):
        return f"waits for a free worker ({len(fitting)} can run it, all busy)"
    return ""
