"""Profiles of sweep points: after a point's windows, SGLang traces under the artifacts directory, recorded
with host and path (docs/reference/profiles.md)."""

import hashlib
import os
import re
import socket
import time
from pathlib import Path
from typing import Any

from sqlalchemy import Engine
from sqlalchemy.orm import Session

from bench.client import LoadClient
from bench.model_config import prompt_vocab
from bench.profile.capture import CaptureResult, capture_profile, start_profile_body
from bench.profile.summary import DEFAULT_DISTORTION_THRESHOLD, distortion, summarize
from bench.profile.trace import TraceError, load_trace
from bench.sweep import PointPlan, SweepSpec
from bench.workload import build_prompts
from db import profile_queries as pq
from db.models import Profile, Run
from runners import dbretry, store

ARTIFACTS_ENV = "SPECBENCH_ARTIFACTS_DIR"
_RANK = re.compile(r"-TP-(\d+)")


def artifacts_root(engine: Engine) -> Path:
    env = os.environ.get(ARTIFACTS_ENV)
    if env:
        return Path(env).expanduser().resolve()
    url = engine.url
    if url.get_backend_name() == "sqlite" and url.database and url.database != ":memory:":
        return Path(url.database).expanduser().resolve().parent / "artifacts"
    return Path("artifacts").resolve()


def wants_profile(spec: SweepSpec, plan: PointPlan) -> bool:
    prof = spec.profile
    if prof is None or plan.server.is_baseline:  # no speculative cycles to find without spec decoding
        return False
    return prof.at is None or plan.batch_size in prof.at


async def profile_point(
    engine: Engine, spec: SweepSpec, plan: PointPlan, client: LoadClient, run_id: int, si_id: int
) -> list[int]:
    """Capture and store `plan`'s profile after its windows if asked; a failed capture never fails a point."""
    if not wants_profile(spec, plan):
        return []
    prof = spec.profile
    assert prof is not None

    def read_point(s: Session) -> tuple[int, float | None, float | None]:
        run = s.get_one(Run, run_id)
        point = store.get_or_create_point(s, run, plan, si_id)
        return point.id, point.tpot_mean_ms, point.accept_length

    point_id, tpot, accept = dbretry.in_session(engine, read_point, what=f"reading {plan.key()}")
    out_dir = artifacts_root(engine) / f"run-{run_id}" / f"point-{point_id}-{time.strftime('%Y%m%dT%H%M%S')}"
    body = start_profile_body(
        out_dir, prof.steps, prof.activities, with_stack=prof.with_stack, record_shapes=prof.record_shapes
    )
    # Enough requests that the load outlasts the profile: the point's own count, at least four waves.
    prompts = build_prompts(
        plan.workload, max(plan.num_prompts, 4 * plan.batch_size), prompt_vocab(spec.model)
    )
    result = await capture_profile(
        client,
        prompts,
        plan.batch_size,
        body,
        expected_files=plan.server.tp,
        settle_s=prof.settle_s,
        timeout_s=prof.timeout_s,
        request_timeout_s=spec.request_timeout_s,
        temperature=plan.workload.temperature,
    )
    rows = _rows(result, prof.steps, tpot, accept, prof.distortion_threshold)

    def write(s: Session) -> list[int]:
        ids = []
        for row in rows:
            p = Profile(
                run_id=run_id,
                point_id=point_id,
                spec_mode=plan.server.spec_mode,
                batch_size=plan.batch_size,
                activities=list(prof.activities),
                num_steps=prof.steps,
                host=socket.gethostname(),
                **row,
            )
            s.add(p)
            s.flush()
            ids.append(p.id)
        return ids

    return dbretry.in_session(engine, write, what=f"storing the profile of {plan.key()}")


def _rows(
    result: CaptureResult, steps: int, tpot: float | None, accept: float | None, threshold: float
) -> list[dict[str, Any]]:
    capture = {
        "body": result.body,
        "seconds": round(result.seconds, 3),
        "stopped_by_us": result.stopped_by_us,
    }
    if not result.files:
        why = result.error or "no trace file"
        return [{"status": "failed", "error": why, "tp_rank": 0, "summary": {"capture": capture}}]
    rows = []
    for path in result.files:
        m = _RANK.search(path.name)
        try:
            summary = summarize(load_trace(path))
            summary["distortion"] = distortion(
                (summary["cycle_ms"] or {}).get("median"), tpot, accept, threshold
            )
            status, error = "ok", result.error
        except TraceError as e:
            summary, status, error = {}, "failed", str(e)
        summary["capture"] = {**capture, "num_steps": steps}
        data = path.read_bytes()
        rows.append(
            {
                "status": status,
                "error": error,
                "tp_rank": int(m.group(1)) if m else 0,
                "path": str(path),
                "sha256": hashlib.sha256(data).hexdigest(),
                "size_bytes": len(data),
                "summary": summary,
            }
        )
    return rows


def resummarize(engine: Engine, run_id: int, search: Path | None = None) -> list[dict[str, Any]]:
    """Summarise a run's stored traces again and update their rows; one line per ok profile row.

    A trace missing at its path is looked for under `search` and used only if its sha256 matches.
    """
    out: list[dict[str, Any]] = []
    for row in pq.run_profiles(engine, run_id):
        if row["status"] != "ok" or not row["path"]:
            continue
        old = row["summary"] or {}
        line = {"id": row["id"], "point_id": row["point_id"], "before": old.get("cycles"), "after": None}
        path = _find_trace(Path(row["path"]), row["sha256"], search)
        if path is None:
            out.append({**line, "result": "missing"})
            continue
        try:
            summary = summarize(load_trace(path))
        except TraceError as e:
            out.append({**line, "result": f"unreadable: {e}"})
            continue
        threshold = (old.get("distortion") or {}).get("threshold")
        summary["distortion"] = distortion(
            (summary["cycle_ms"] or {}).get("median"),
            row["tpot_mean_ms"],
            row["accept_length"],
            float(threshold) if threshold else DEFAULT_DISTORTION_THRESHOLD,
        )
        if "capture" in old:
            summary["capture"] = old["capture"]

        def write(s: Session, pid: int = row["id"], new: dict[str, Any] = summary) -> None:
            s.get_one(Profile, pid).summary = new

        dbretry.in_session(engine, write, what=f"updating profile {row['id']}")
        out.append({**line, "after": summary["cycles"], "result": "updated"})
    return out


def _find_trace(path: Path, sha256: str | None, search: Path | None) -> Path | None:
    if path.is_file():
        return path
    if search is None:
        return None
    for cand in sorted(search.rglob(path.name)):
        if cand.is_file() and (sha256 is None or hashlib.sha256(cand.read_bytes()).hexdigest() == sha256):
            return cand
    return None
