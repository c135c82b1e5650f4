"""Capturing a profile from a live server: load at the point's concurrency, `/start_profile`, collect the
files. With `num_steps` (SGLang 0.5.13's `ProfileReqInput`) the server stops by itself and each TP rank writes
`<profile_id>-TP-<rank>.trace.json.gz` into `output_dir`; the capture polls until every file is whole, and
`/stop_profile` flushes what was recorded if the load ends or the timeout passes first."""

import asyncio
import time
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import aiohttp

from bench.client import LoadClient
from bench.profile.trace import TraceError, load_trace
from bench.workload import Prompt

POLL_S = 0.2
FLUSH_WAIT_S = 30.0


@dataclass
class CaptureResult:
    body: dict[str, Any]
    files: list[Path] = field(default_factory=list)
    error: str | None = None
    stopped_by_us: bool = False  # /stop_profile had to flush (load ended or timeout)
    seconds: float = 0.0


def start_profile_body(
    output_dir: Path,
    num_steps: int,
    activities: Sequence[str],
    *,
    with_stack: bool = False,
    record_shapes: bool = False,
) -> dict[str, Any]:
    """The JSON for `/start_profile`; with_stack and record_shapes off (SGLang's default on slows the CPU)."""
    return {
        "output_dir": str(output_dir),
        "num_steps": num_steps,
        "activities": list(activities),
        "with_stack": with_stack,
        "record_shapes": record_shapes,
    }


async def capture_profile(
    client: LoadClient,
    prompts: Sequence[Prompt],
    concurrency: int,
    body: dict[str, Any],
    *,
    expected_files: int = 1,
    settle_s: float = 2.0,
    timeout_s: float = 300.0,
    request_timeout_s: float = 600.0,
    temperature: float = 0.0,
) -> CaptureResult:
    """Drive load, profile `body["num_steps"]` steps under it, and return the trace files once complete."""
    out_dir = Path(body["output_dir"])
    out_dir.mkdir(parents=True, exist_ok=True)
    result = CaptureResult(body=body)
    t0 = time.monotonic()
    load = asyncio.create_task(
        client.run_closed_loop(prompts, concurrency, request_timeout_s, temperature=temperature)
    )
    try:
        await asyncio.wait({load}, timeout=settle_s)
        if load.done():
            result.error = "the load ended before profiling could start (raise num_prompts or lower settle_s)"
            return result
        status, text = await _post(client, "/start_profile", body)
        if status != 200:
            result.error = f"/start_profile answered HTTP {status}: {text.strip()[:300]}"
            return result
        deadline = time.monotonic() + timeout_s
        while True:
            files = _complete_files(out_dir)
            if len(files) >= expected_files:
                result.files = files
                return result
            timed_out = time.monotonic() >= deadline
            if (load.done() or timed_out) and not result.stopped_by_us:
                # Fewer steps ran than asked for: make the server write what it has.
                result.stopped_by_us = True
                await _post(client, "/stop_profile", {})
                deadline = time.monotonic() + FLUSH_WAIT_S
            elif timed_out:
                result.files = files
                where = f"{len(files)} of {expected_files} trace file(s) in {out_dir}"
                result.error = (
                    f"timed out waiting for the trace ({where}); a server on another host writes its traces "
                    "there, not here"
                )
                return result
            await asyncio.sleep(POLL_S)
    finally:
        result.seconds = time.monotonic() - t0
        load.cancel()
        await asyncio.gather(load, return_exceptions=True)


async def _post(client: LoadClient, path: str, body: dict[str, Any]) -> tuple[int, str]:
    try:
        async with client.session.post(
            client.base_url + path, json=body, timeout=aiohttp.ClientTimeout(total=60)
        ) as resp:
            return resp.status, await resp.text()
    except (aiohttp.ClientError, TimeoutError) as e:
        return 0, f"{type(e).__name__}: {e}"


def _complete_files(out_dir: Path) -> list[Path]:
    """Trace files that are whole: SGLang writes them in place, so a half-written gzip is skipped."""
    done = []
    for p in sorted(out_dir.glob("*.trace.json.gz")):
        try:
            load_trace(p)
        except TraceError:
            continue
        done.append(p)
    return done
