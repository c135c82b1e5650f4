"""Why a queued job waits, why a failed one failed, when a schedule fires next: for CLI, page and worker."""

from collections import Counter
from collections.abc import Mapping, Sequence
from datetime import UTC, datetime
from typing import Any

from bench.host.gpus import Gpu, unmet
from bench.server.refusal import refused


def _aware(t: datetime) -> datetime:
    return t if t.tzinfo is not None else t.replace(tzinfo=UTC)


def next_fire(expr: str, now: datetime) -> datetime:
    """A cron expression's next fire time after `now` (UTC)."""
    from croniter import croniter

    value = croniter(expr, now).get_next(datetime)
    assert isinstance(value, datetime)
    return value


def why_waiting(
    requires: Mapping[str, Any],
    not_before: datetime | None,
    workers: Sequence[Mapping[str, Any]],
    now: datetime,
) -> str:
    """Why a queued job is not running yet ("" when a live idle worker can claim it now)."""
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


def _cause_of(failure: Mapping[str, Any]) -> str | None:
    """Why one unmeasured point cannot be measured by trying again, or None when another try may do."""
    if failure.get("known_bug"):
        return f"known SGLang bug {failure['known_bug']}"
    if failure.get("status") == "mode_mismatch":
        return "the server ran another spec mode than asked: its release decides that"
    return refused(failure.get("exit_code"), failure.get("log_tail"))


def cannot_succeed(failures: Sequence[Mapping[str, Any]]) -> bool:
    """Whether every unmeasured point (db.queue_queries.run_failures) failed as another attempt would (a known
    SGLang bug, refused arguments, a missing model, a spec mode the release will not run): no retry then."""
    return bool(failures) and all(_cause_of(f) is not None for f in failures)


def failure_cause(failures: Sequence[Mapping[str, Any]], most: int = 3) -> str:
    """Why a run's points failed, one clause per distinct reason with its count, most frequent first
    ("2 failed: server crashed in spec v2's draft extend: known SGLang bug ..."); "" when none failed."""
    ranked = Counter(
        (str(f.get("status") or "failed"), " ".join(str(f.get("reason") or "no reason recorded").split()))
        for f in failures
    ).most_common()
    parts = [f"{n} {status}: {reason}" for (status, reason), n in ranked[:most]]
    if len(ranked) > most:
        parts.append(f"{len(ranked) - most} other reason(s)")
    return "; ".join(parts)
