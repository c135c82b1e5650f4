"""A run's parts: each invocation recorded with its host, GPU, SGLang and patch, start and end (run_parts).

A run grown across borrowed hosts stays one experiment: another SGLang or patch is refused (sglang_conflict);
a part on another host or GPU first re-measures a point of the part before (`PartState.check`); two parts'
pairs combine only on the same host and GPU or when that check agreed (bench.pairing.part_groups).
"""

from __future__ import annotations

import socket
import statistics
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

from sqlalchemy import func, select
from sqlalchemy.orm import Session

from bench.host.gpus import assigned_gpus, describe
from bench.pairing import PartRecord, part_groups, part_of
from bench.results import SampleResult
from bench.sweep import PointPlan, ServerConfig
from db.models import Point, Run, RunPart, Sample
from db.types import utcnow
from runners.resume_guard import ResumeRefused

UNKNOWN_HOST = "unknown"


@dataclass(frozen=True)
class PartHost:
    """Where a part runs: the host's name and the GPUs its servers use."""

    host: str
    gpu_name: str = "none"
    gpu_count: int = 0

    @classmethod
    def here(cls, gpus: Sequence[int] | None = None) -> PartHost:
        boards = assigned_gpus(gpus)
        name, count, _ = describe(boards)
        return cls(host_name(socket.gethostname(), [g.uuid for g in boards]), name, count)

    @property
    def gpu(self) -> str:
        return f"{self.gpu_count}x {self.gpu_name}" if self.gpu_count else "no GPU"


def host_name(hostname: str, uuids: Sequence[str]) -> str:
    """The host's name and first GPU board id: borrowed hosts share names (`vm`), boards tell them apart."""
    known = [u.removeprefix("GPU-")[:8] for u in uuids if u]
    if not known:
        return hostname
    more = f" +{len(known) - 1}" if len(known) > 1 else ""
    return f"{hostname} (GPU-{known[0]}{more})"


@dataclass(frozen=True)
class Sglang:
    """The SGLang a part's servers run and its specbench patch ("none"); None: not known (yet)."""

    version: str | None = None
    patch: str | None = None


class PartRefused(ResumeRefused):
    """The run was measured on another SGLang release or patch: continuing would join two experiments."""


def _record(row: RunPart) -> PartRecord:
    agrees = row.check.get("agrees") if isinstance(row.check, dict) else None
    gpu = f"{row.gpu_count}x {row.gpu_name}" if row.gpu_count else "no GPU"
    return PartRecord(row.part, row.invocation, row.host, gpu, agrees if isinstance(agrees, bool) else None)


def sglang_conflict(run_id: int, earlier: Sequence[RunPart | Mapping[str, Any]], now: Sglang) -> str | None:
    """Why run `run_id`'s parts `earlier` (rows or records) cannot continue on `now`'s SGLang, or None."""
    for part in earlier:
        row = part if isinstance(part, Mapping) else {c: getattr(part, c) for c in _IDENTITY}
        for what, then, here in (
            ("SGLang", row["sglang_version"], now.version),
            ("SGLang patch", row["sglang_patch"], now.patch),
        ):
            if then is not None and here is not None and then != here:
                return (
                    f"run {run_id} was measured with {what} {then} (part {row['part']} on {row['host']}) and "
                    f"this host's is {here}: that is another experiment, so it is not resumed; start a new run "
                    "(drop --resume / --resume-run), or continue it where its SGLang is"
                )
    return None


_IDENTITY = ("part", "host", "sglang_version", "sglang_patch")


@dataclass
class PartState:
    """This invocation's part, whether its pairs combine with earlier parts', and its pending drift check."""

    run_id: int
    number: int
    row_id: int
    invocation: int
    host: PartHost
    records: list[PartRecord]
    tolerance: float
    sglang: Sglang = field(default_factory=Sglang)
    # The part to check against, and its ok windows' output throughput per point key.
    previous: PartRecord | None = None
    reference: dict[str, list[float]] = field(default_factory=dict)
    checked: bool = False

    @property
    def check_pending(self) -> bool:
        return self.previous is not None and not self.checked

    def combines(self, invocation: int | None) -> bool:
        """A window of `invocation` may pair with this part's in one interval (same group of parts)."""
        groups = part_groups(self.records)
        return groups.get(part_of(self.records, invocation) or self.number) == groups[self.number]

    def reference_plan(self, config: ServerConfig, plans: Sequence[PointPlan]) -> PointPlan | None:
        """The point of `config` the part before measured most (ties: the largest batch), or None."""
        measured = [p for p in plans if p.server == config and self.reference.get(p.key())]
        return max(measured, key=lambda p: (len(self.reference[p.key()]), p.batch_size), default=None)

    def verdict(self, plan: PointPlan, result: SampleResult | None) -> dict[str, Any]:
        """The stored check: agrees when the new window is within the earlier ones' range or +-tolerance."""
        assert self.previous is not None
        earlier = self.reference[plan.key()]
        median = statistics.median(earlier)
        found: dict[str, Any] = {
            "against_part": self.previous.part,
            "against_host": self.previous.host,
            "against_gpu": self.previous.gpu,
            "point_key": plan.key(),
            "label": plan.server.label(),
            "batch_size": plan.batch_size,
            "earlier": {"windows": len(earlier), "median": median, "min": min(earlier), "max": max(earlier)},
            "tolerance": self.tolerance,
        }
        metrics = result.metrics if result is not None else None
        if (
            result is None
            or result.status == "failed"
            or metrics is None
            or metrics.output_throughput is None
        ):
            why = result.reason if result is not None else "no result"
            return {**found, "agrees": False, "error": f"re-measurement failed: {why}"}
        now = float(metrics.output_throughput)
        change = now / median - 1.0
        agrees = min(earlier) <= now <= max(earlier) or abs(change) <= self.tolerance
        return {
            **found,
            "now": {"output_throughput": now, "tpot_mean_ms": metrics.tpot_mean_ms, "status": result.status},
            "change": change,
            "agrees": bool(agrees),
        }

    def check(
        self,
        config: ServerConfig,
        plans: Sequence[PointPlan],
        measure: Callable[[PointPlan], SampleResult | None],
        write: Callable[[Callable[[Session], None], str], None],
    ) -> dict[str, Any] | None:
        """Re-measure a point of `config` the part before measured, if pending, and store the verdict."""
        if not self.check_pending:
            return None
        plan = self.reference_plan(config, plans)
        if plan is None:
            return None
        found = self.verdict(plan, measure(plan))
        self.checked = True
        self.records = [
            PartRecord(r.part, r.invocation, r.host, r.gpu, found["agrees"]) if r.part == self.number else r
            for r in self.records
        ]

        def store(s: Session) -> None:
            row = s.get(RunPart, self.row_id)
            if row is not None:
                row.check = found

        write(store, "storing the drift check against the part before")
        return found

    def server_sglang(self, s: Session, version: str | None, patch: str | None) -> None:
        """Record a server's SGLang if the part knew none yet; PartRefused if earlier parts ran another."""
        if (self.sglang.version is not None or version is None) and (
            self.sglang.patch is not None or patch is None
        ):
            return
        now = Sglang(self.sglang.version or version, self.sglang.patch or patch)
        earlier = s.scalars(
            select(RunPart)
            .where(RunPart.run_id == self.run_id, RunPart.part < self.number)
            .order_by(RunPart.part)
        ).all()
        problem = sglang_conflict(self.run_id, earlier, now)
        if problem is not None:
            raise PartRefused(problem)
        self.sglang = now
        row = s.get(RunPart, self.row_id)
        if row is not None:
            row.sglang_version, row.sglang_patch = now.version, now.patch


def next_order_index(s: Session, run_id: int) -> int:
    """Where this invocation's windows start in the run's order: after every stored one, failed too."""
    last, count = s.execute(
        select(func.max(Sample.order_index), func.count(Sample.id))
        .join(Point, Sample.point_id == Point.id)
        .where(Point.run_id == run_id)
    ).one()
    return int(last) + 1 if last is not None else int(count)


def earlier_parts(s: Session, run: Run) -> list[RunPart]:
    """The run's parts so far; a run from before parts gets its first part from its provenance."""
    rows = list(s.scalars(select(RunPart).where(RunPart.run_id == run.id).order_by(RunPart.part)))
    if rows or next_order_index(s, run.id) == 0:
        return rows
    first = RunPart(
        run_id=run.id,
        part=1,
        invocation=0,
        host=run.host or UNKNOWN_HOST,
        gpu_name=run.gpu_name,
        gpu_count=run.gpu_count,
        sglang_version=run.sglang_version if run.provenance.get("server_version") else None,
        sglang_patch=run.provenance.get("sglang_patch"),
        status=run.status,
        started_at=run.started_at,
        finished_at=run.finished_at,
    )
    s.add(first)
    s.flush()
    return [first]


def open_part(
    s: Session,
    run: Run,
    earlier: list[RunPart],
    host: PartHost,
    sglang: Sglang,
    tolerance: float,
    started_at: datetime,
) -> PartState:
    """Record this invocation as the run's next part; `started_at` names it so a retried commit adds none."""
    row = next((r for r in earlier if r.started_at == started_at), None)
    if row is not None:
        earlier = [r for r in earlier if r.part < row.part]
    else:
        row = RunPart(
            run_id=run.id,
            part=(earlier[-1].part if earlier else 0) + 1,
            invocation=next_order_index(s, run.id),
            host=host.host,
            gpu_name=host.gpu_name,
            gpu_count=host.gpu_count,
            sglang_version=sglang.version,
            sglang_patch=sglang.patch,
            status="running",
            started_at=started_at,
        )
        s.add(row)
        s.flush()
    number, invocation = int(row.part), int(row.invocation)
    records = [*(_record(r) for r in earlier), PartRecord(number, invocation, host.host, host.gpu)]
    state = PartState(run.id, number, int(row.id), invocation, host, records, tolerance, sglang)
    before = records[-2] if len(records) > 1 else None
    if before is not None and (before.host, before.gpu) != (host.host, host.gpu):
        state.previous = before
        state.reference = _ok_windows(s, run.id, records[:-1], before.part)
    return state


def _ok_windows(s: Session, run_id: int, parts: list[PartRecord], part: int) -> dict[str, list[float]]:
    """point key -> output throughput of the ok windows that part `part` measured."""
    rows = s.execute(
        select(Point.point_key, Sample.output_throughput, Sample.invocation)
        .join(Point, Sample.point_id == Point.id)
        .where(Point.run_id == run_id, Sample.status == "ok", Sample.output_throughput.is_not(None))
    )
    out: dict[str, list[float]] = {}
    for key, value, invocation in rows:
        if value is not None and value > 0 and part_of(parts, invocation) == part:
            out.setdefault(key, []).append(float(value))
    return out


def finish_part(s: Session, row_id: int, status: str, drift: dict[str, Any] | None) -> None:
    """The part's end: the run's status as this part left it, and its end-of-run drift check."""
    row = s.get(RunPart, row_id)
    if row is None:
        return
    row.status, row.finished_at = status, utcnow()
    if drift is not None:
        row.drift = drift
