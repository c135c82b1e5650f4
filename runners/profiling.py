"""Profiles of sweep points: after a point's measured windows, capture SGLang traces and store them.

Artifacts lie under the artifacts directory: $SPECBENCH_ARTIFACTS_DIR, else `artifacts/` next to a SQLite
database file, else `./artifacts`. Each capture gets `run-<id>/point-<id>-<time>/` and the server writes its
trace files there directly. The `profiles` table records the host and absolute path of each file, so with
PostgreSQL and several worker hosts a trace stays on the host that captured it unless the artifacts directory
is a shared mount (docs/profiles.md).
"""

from __future__ import annotations

import hashlib
import os
import re
import socket
import time
from pathlib import Path
from typing import Any

from sqlalchemy import Engine

from bench.client import LoadClient
from bench.profile.capture import CaptureResult, capture_profile, start_profile_body
from bench.profile.summary import distortion, summarize
from bench.profile.trace import TraceError, load_trace
from bench.sweep import PointPlan, SweepSpec
from bench.workload import build_prompts
from db.engine import session_scope
from db.models import Profile, Run
from runners import store

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
    """Capture and store the profile of `plan` if the sweep asks for one; the ids of the rows written.

    Runs after the point's repeats are stored, never inside a measured window. A failed capture is stored
    as a `failed` row with the reason and never fails the point.
    """
    if not wants_profile(spec, plan):
        return []
    prof = spec.profile
    assert prof is not None
    with session_scope(engine) as s:
        run = s.get(Run, run_id)
        assert run is not None
        point = store.get_or_create_point(s, run, plan, si_id)
        point_id, tpot, accept = point.id, point.tpot_mean_ms, point.accept_length
    out_dir = artifacts_root(engine) / f"run-{run_id}" / f"point-{point_id}-{time.strftime('%Y%m%dT%H%M%S')}"
    body = start_profile_body(
        out_dir, prof.steps, prof.activities, with_stack=prof.with_stack, record_shapes=prof.record_shapes
    )
    # Enough requests that the load outlasts the profile: the point's own count, at least four waves.
    prompts = build_prompts(plan.workload, max(plan.num_prompts, 4 * plan.batch_size))
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
    ids = []
    with session_scope(engine) as s:
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


def _rows(
    result: CaptureResult, steps: int, tpot: float | None, accept: float | None, threshold: float
) -> list[dict[str, Any]]:
    capture = {
        "body": result.body,
        "seconds": round(result.seconds, 3),
        "stopped_by_us": result.stopped_by_us,
    }
    if not result.files:
        return [
            {
                "status": "failed",
                "error": result.error or "no trace file",
                "tp_rank": 0,
                "summary": {"capture": capture},
            }
        ]
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
