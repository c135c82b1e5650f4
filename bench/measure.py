"""The per-point procedure: warm up, then per repeat flush → measure → read the server's acceptance → judge.

1. Warmup: `warmup_waves` x `batch_size` requests at the measured concurrency and full output length, so
one-time costs (JIT, allocator growth, graphs at this batch size) fall outside every window; the flush after
it keeps the window free of prefix-cache hits (contract §6.1-6.2). 2. Per repeat: `POST /flush_cache` (also
resets the acceptance counters), the closed loop (the timed window), then `GET /server_info` for
`avg_spec_accept_length`, after the window, unlike bench_serving. 3. Metrics (`bench.metrics`) and a verdict,
worst first (`judge`; docs/reference/point-status.md). Each repeat is yielded as it ends, so the caller stores
it before the next starts; `overhead_s` is its time outside the window (warmup for the first, flush,
/server_info, aggregation).

The collector stays off inside the window (`gc_paused`): a full collection of the runner's ~260k objects took
23-148 ms on a loaded box and slowed every request in flight alike, which read as a server stall."""

import gc
import time
from collections import Counter
from collections.abc import AsyncIterator, Callable, Iterable, Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Any

from bench.client import FlushError, LoadClient, ServerUnavailableError, error_summary
from bench.host.loop_lag import LoopLag
from bench.host.telemetry import WindowTelemetry
from bench.metrics import compute_metrics
from bench.results import STATUS_SEVERITY, PointStatus, RequestRecord, SampleMetrics, SampleResult
from bench.workload import Prompt, window_prompt


@contextmanager
def gc_paused() -> Iterator[None]:
    """Collect and freeze the survivors (later collections skip them); no collector inside the block."""
    was_enabled = gc.isenabled()
    gc.collect()
    gc.freeze()
    gc.disable()
    try:
        yield
    finally:
        if was_enabled:
            gc.enable()


# p99 TTFT above this multiple of the median marks a repeat unstable...
UNSTABLE_TTFT_RATIO = 10.0
# ...unless the tail (p99 - median) is within this many x the longest client and server stalls in that window
# (docs/reference/point-status.md#host-load).
HOST_STALL_MULTIPLE = 3.0


@dataclass
class Window:
    """Where a repeat's window sat and what the GPU did meanwhile (stored next to the repeat's metrics)."""

    started_at: float | None = None  # wall clock (epoch s) of the first send
    telemetry: dict[str, Any] | None = None
    warmup_s: float = 0.0  # warmup before this window (the first repeat of a visit only)


@dataclass(frozen=True)
class WindowSettings:
    """How a point's windows run and are judged: all but prompts and repeats. `min_window_s`: the least
    window, past the prompts with `window_prompt` variants; a pinned `expected_accept_length` (clamped) missed
    by over `accept_tolerance` is `invalid`; `launch_mismatches` join each verdict."""

    batch_size: int
    warmup_waves: int
    request_timeout_s: float
    expect_spec: bool
    # With warmup: repeat the warmup waves until at least this long has passed (a freshly started server).
    warmup_min_s: float = 0.0
    temperature: float = 0.0
    flush_timeout_s: float = 60.0
    flush_retries: int = 5
    min_window_s: float = 0.0
    expected_accept_length: float | None = None
    accept_tolerance: float = 0.15
    telemetry: Callable[[], WindowTelemetry] | None = None
    launch_mismatches: Sequence[str] = ()


async def measure_point(
    client: LoadClient, prompts: Sequence[Prompt], repeats: Iterable[int], settings: WindowSettings
) -> AsyncIterator[SampleResult]:
    """One `SampleResult` per repeat number in `repeats` (`range(3)`, or the ones still missing)."""
    async for result, _ in measure_windows(client, prompts, repeats, settings):
        yield result


async def measure_windows(
    client: LoadClient, prompts: Sequence[Prompt], repeats: Iterable[int], settings: WindowSettings
) -> AsyncIterator[tuple[SampleResult, Window]]:
    """`measure_point`, with each repeat's `Window` (start time, GPU telemetry) alongside."""
    batch_size, timeout_s, temperature = settings.batch_size, settings.request_timeout_s, settings.temperature
    min_window_s, telemetry = settings.min_window_s, settings.telemetry
    if not prompts:
        raise ValueError("measure_point needs at least one prompt")
    pool = list(prompts)
    pending = iter(repeats)
    first = next(pending, None)
    if first is None:
        return
    overhead_start = time.perf_counter()

    warm = [prompts[i % len(prompts)] for i in range(max(settings.warmup_waves, 0) * batch_size)]
    warmup_s = 0.0
    if warm:
        t_warm = time.perf_counter()
        while True:
            wrecs, _ = await client.run_closed_loop(warm, batch_size, timeout_s, temperature=temperature)
            warmup_s = time.perf_counter() - t_warm
            errors = [r.error for r in wrecs if r.error]
            died = client.server_down or (bool(errors) and not await _alive(client))
            if died or not any(r.ok for r in wrecs):
                why = "server died" if died else "every request failed"
                yield _failed(first, f"warmup: {why}: {error_summary(errors)}", overhead_start)
                return
            if warmup_s >= settings.warmup_min_s:
                break

    repeat: int | None = first
    while repeat is not None:
        try:
            await client.flush_cache(timeout_s=settings.flush_timeout_s, retries=settings.flush_retries)
        except (ServerUnavailableError, FlushError) as e:
            yield _failed(repeat, f"flush before the window: {e}", overhead_start)
            return
        overhead = time.perf_counter() - overhead_start

        sampler = telemetry() if telemetry is not None else None
        window = Window(started_at=time.time(), warmup_s=warmup_s)
        warmup_s = 0.0
        lag = LoopLag()
        more = (lambda i: window_prompt(pool, i)) if min_window_s > 0 else None
        with gc_paused():
            if sampler is not None:
                sampler.start()
            lag.start()
            try:
                records, duration = await client.run_closed_loop(
                    prompts,
                    batch_size,
                    timeout_s,
                    temperature=temperature,
                    min_duration_s=min_window_s,
                    more=more,
                )
            finally:
                await lag.stop()
                if sampler is not None:
                    sampler.stop()
        after = time.perf_counter()
        died = client.server_down
        server_accept = server_stall = None
        if not died:
            try:
                info = await client.server_info()
                server_stall = server_stall_ms(info)
                server_accept = _server_accept_length(info)
            except ServerUnavailableError:
                died = True
            except (RuntimeError, ValueError):
                pass  # an odd /server_info answer costs the server-side figure, not the repeat
        if sampler is not None:
            window.telemetry = {**sampler.summary(), **lag.summary()}
            if server_stall is not None:  # the stand-in's; a real SGLang server reports none
                window.telemetry[SERVER_STALL_KEY] = server_stall
        metrics = compute_metrics(records, duration, server_accept)
        status, reason = judge(
            metrics,
            records,
            expect_spec=settings.expect_spec,
            server_died=died,
            launch_mismatches=settings.launch_mismatches,
            host_stall_ms=lag.max_ms,
            server_stall_ms=server_stall,
        )
        status, reason = _check_pinned_accept(
            status, reason, server_accept, settings.expected_accept_length, settings.accept_tolerance
        )
        overhead += time.perf_counter() - after
        yield SampleResult(repeat, status, reason, metrics, records, overhead_s=overhead), window
        if died:
            return
        overhead_start = time.perf_counter()
        repeat = next(pending, None)


def _check_pinned_accept(
    status: PointStatus, reason: str | None, reported: float | None, expected: float | None, tolerance: float
) -> tuple[PointStatus, str | None]:
    """A pinned acceptance the server did not deliver means the repeat measured something else."""
    if expected is None or reported is None or abs(reported - expected) <= tolerance:
        return status, reason
    why = (
        f"pinned accept length {expected:g} (SGLANG_SIMULATE_ACC_LEN, clamped to [1, steps+1]) but the "
        f"server reported {reported:.3f} (tolerance {tolerance:g})"
    )
    if STATUS_SEVERITY[status] >= STATUS_SEVERITY["invalid"]:
        return status, f"{reason}; {why}" if reason else why
    return "invalid", f"{why}; {reason}" if reason else why


def judge(
    m: SampleMetrics,
    records: Sequence[RequestRecord],
    *,
    expect_spec: bool,
    server_died: bool = False,
    launch_mismatches: Sequence[str] = (),
    host_stall_ms: float | None = None,
    server_stall_ms: float | None = None,
) -> tuple[PointStatus, str | None]:
    """The verdict on one repeat and its reason (every problem found, worst first). `launch_mismatches` make
    it a `mode_mismatch`; `host_stall_ms` (client, `LoopLag`) and `server_stall_ms` (where the server reports
    it) excuse a TTFT tail within `HOST_STALL_MULTIPLE` x their sum."""
    n = len(records)
    problems: list[tuple[PointStatus, str]] = []
    errors = [r.error for r in records if r.error is not None]
    if launch_mismatches:
        problems.append(("mode_mismatch", f"server ran something else: {'; '.join(launch_mismatches)}"))
    if server_died:
        problems.append(("failed", f"server died: {m.completed} of {n} requests completed"))
    if m.completed == 0:
        detail = f": {error_summary(errors)}" if errors else ""
        problems.append(("failed", f"all {n} requests failed{detail}"))
    else:
        has_spec = any(r.spec_verify_ct for r in records if r.ok)
        if expect_spec and not has_spec:
            problems.append(
                ("mode_mismatch", "speculative decoding expected, but no request reported spec_verify_ct")
            )
        if not expect_spec and has_spec:
            problems.append(("mode_mismatch", "baseline server, but requests reported spec_verify_ct"))
    if errors and m.completed > 0:
        problems.append(("invalid", f"{len(errors)} of {n} requests failed: {error_summary(errors)}"))
    if m.incomplete:
        problems.append(("invalid", f"{m.incomplete} of {n} requests never sent (dispatch stopped)"))
    if m.wrong_length:
        problems.append(("invalid", _wrong_length_reason(records)))
    p99, p50 = m.ttft_p99_ms, m.ttft_p50_ms
    held = {who: ms for who, ms in (("client", host_stall_ms), ("server", server_stall_ms)) if ms is not None}
    if (
        p99 is not None
        and p50 is not None
        and p99 > UNSTABLE_TTFT_RATIO * p50
        # A tail within the host's stalls (client's plus server's longest, one hold each) is not the server's.
        and (not held or p99 - p50 > HOST_STALL_MULTIPLE * sum(held.values()))
    ):
        stalls = " and ".join(f"the {who} up to {ms:.1f} ms" for who, ms in held.items())
        why = f"p99 TTFT {p99:.1f} ms > {UNSTABLE_TTFT_RATIO:g}x median TTFT {p50:.1f} ms"
        problems.append(("unstable", why + (f"; this host held {stalls}" if held else "")))
    if not problems:
        return "ok", None
    problems.sort(key=lambda p: -STATUS_SEVERITY[p[0]])
    return problems[0][0], "; ".join(reason for _, reason in problems)


def _wrong_length_reason(records: Sequence[RequestRecord]) -> str:
    groups = Counter(
        (r.completion_tokens, r.max_new_tokens)
        for r in records
        if r.ok and r.completion_tokens != r.max_new_tokens
    )
    parts = [
        f"{count} request{'s' if count > 1 else ''} returned {got} tokens, expected {want}"
        for (got, want), count in groups.most_common(3)
    ]
    if len(groups) > 3:
        parts.append(f"and {len(groups) - 3} more length(s)")
    return ", ".join(parts)


async def _alive(client: LoadClient) -> bool:
    try:
        await client.server_info()
    except ServerUnavailableError:
        return False
    return True


# Where a window's telemetry keeps the server's own longest stall (None: the server reports none).
SERVER_STALL_KEY = "server_loop_stall_max_ms"


def server_stall_ms(info: dict[str, object]) -> float | None:
    """The server's longest loop stall since the flush: the stand-in's (`specbench_sim`); SGLang: None."""
    sim = info.get("specbench_sim")
    value = sim.get("loop_stall_max_ms") if isinstance(sim, dict) else None
    if isinstance(value, bool) or not isinstance(value, int | float) or not value >= 0:
        return None
    return float(value)


def _server_accept_length(info: dict[str, object]) -> float | None:
    # PD-disaggregated deployments nest the decode server's info under "decode" (as bench_serving reads it).
    decode = info.get("decode")
    if isinstance(decode, list) and decode and isinstance(decode[0], dict):
        info = decode[0]
    states = info.get("internal_states")
    if not isinstance(states, list) or not states or not isinstance(states[0], dict):
        return None
    value = states[0].get("avg_spec_accept_length")
    return float(value) if isinstance(value, int | float) else None


def _failed(repeat: int, reason: str, overhead_start: float) -> tuple[SampleResult, Window]:
    """A failed repeat with no window; its overhead counted from `overhead_start` (perf_counter)."""
    overhead_s = time.perf_counter() - overhead_start
    return SampleResult(repeat, "failed", reason, None, [], overhead_s=overhead_s), Window()
