"""The continuous-batching scheduler: one asyncio task that plays SGLang's event loop.

Each iteration (a prefill or a decode batch) waits out its modelled cost on a deadline clock, then commits
tokens. Acceptance is tallied as in contract §3.4: a window folded into the totals every decode log interval.
"""

import asyncio
import contextlib
import time
from collections import deque
from collections.abc import Callable
from dataclasses import dataclass, field

from synthetic.server import logs
from synthetic.server.acceptance import AcceptanceModel
from synthetic.server.args import Resolved
from synthetic.server.config import HICCUP_S
from synthetic.server.metrics import Metrics
from synthetic.server.perf import PerfModel
from synthetic.server.radix import RadixCache
from synthetic.server.request import Req

# Instant mode yields to the loop every few iterations, so a handler sends several events in one write.
INSTANT_BURST_ITERATIONS = 16
# How far the deadline clock may fall behind before it forgives the debt (e.g. after idling).
MAX_CLOCK_DEBT_S = 0.05
# Waits at least this long go to the event loop's timer; shorter ones block in the OS (see `_advance`).
SLEEP_GRANULARITY_S = 0.001


@dataclass(slots=True)
class SpecCounters:
    """The decode log's window and the lifetime totals behind `avg_spec_accept_length`."""

    decode_iters: int = 0
    win_drafts: int = 0
    win_steps: int = 0
    win_tokens: int = 0
    win_start: float = field(default_factory=time.perf_counter)
    total_drafts: int = 0
    total_steps: int = 0
    last_gen_throughput: float = 0.0
    last_accept_len: float = 0.0
    last_accept_rate: float = 0.0

    def avg_accept_length(self) -> float | None:
        return 1.0 + self.total_drafts / self.total_steps if self.total_steps else None


class Engine:
    def __init__(
        self,
        *,
        resolved: Resolved,
        perf: PerfModel,
        acceptance: AcceptanceModel | None,
        radix: RadixCache,
        metrics: Metrics | None,
        instant: bool,
    ) -> None:
        args = resolved.args
        self.resolved, self.perf, self.acceptance = resolved, perf, acceptance
        self.radix, self.metrics, self.instant = radix, metrics, instant
        self.max_running = resolved.effective_max_running_requests
        self.prefill_budget = args.chunked_prefill_size
        self.log_interval = args.decode_log_interval
        self.draft_tokens = args.speculative_num_draft_tokens or 1
        # 0.5.12's v1 verify recounts a request that finishes mid-step; the V2 paths do not (§3.4).
        self.count_truncated = resolved.mode.worker == "v1"
        self.waiting: deque[Req] = deque()
        self.running: list[Req] = []
        self.counters = SpecCounters()
        self.last_batch_graph = False
        self._work = asyncio.Event()
        self._idle = asyncio.Event()
        self._idle.set()
        self._clock = time.perf_counter()
        # The fault `hiccup_after`: until then the queue admits nothing (running requests keep decoding).
        self._held_until = 0.0
        self._iters_since_yield = 0
        self._sample = acceptance.sampler() if acceptance is not None else None
        # Called at the top of each scheduler step (kind, batch size, uncached tokens): the profiler's clock.
        self.step_observer: Callable[[str, int, int], None] | None = None

    def submit(self, req: Req) -> None:
        if "hiccup" in req.faults:
            self._held_until = time.perf_counter() + HICCUP_S
        self.waiting.append(req)
        self._idle.clear()
        self._work.set()

    def abort(self, req: Req) -> None:
        if req.finished:
            return
        req.finished = True
        req.aborted = True
        # A running request is dropped at the next iteration.
        with contextlib.suppress(ValueError):
            self.waiting.remove(req)

    @property
    def idle(self) -> bool:
        return not self.waiting and not self.running

    async def wait_idle(self, timeout: float) -> bool:
        if self.idle or timeout <= 0:
            return self.idle
        with contextlib.suppress(TimeoutError):
            await asyncio.wait_for(self._idle.wait(), timeout)
        return self.idle

    def flush(self) -> None:
        self.radix.reset()
        self.counters = SpecCounters()

    async def run(self) -> None:
        while True:
            self.running = [r for r in self.running if not r.finished]
            if not self.waiting and not self.running:
                self._idle.set()
                self._work.clear()
                await self._work.wait()
                self._clock = time.perf_counter()  # idle time is not debt to catch up on
                continue
            held = self._held_until - time.perf_counter()
            if self.waiting and len(self.running) < self.max_running and held <= 0:
                await self._prefill()
            elif self.running:
                await self._decode()
            else:
                # The server's own wait: awaited, so the stall probe does not read it as the host's.
                await asyncio.sleep(held)
                self._clock = time.perf_counter()

    async def _advance(self, cost_ms: float) -> None:
        if self.instant:
            self._iters_since_yield += 1
            if self._iters_since_yield >= INSTANT_BURST_ITERATIONS:
                self._iters_since_yield = 0
                await asyncio.sleep(0)
            return
        now = time.perf_counter()
        self._clock = max(self._clock, now - MAX_CLOCK_DEBT_S) + cost_ms / 1000.0
        delay = self._clock - now
        if delay >= SLEEP_GRANULARITY_S:
            await asyncio.sleep(delay)
            return
        # The loop cannot sleep under ~1 ms, and banking shorter steps made bursts (ITL p50 = 0): yield once
        # so handlers stream, then sleep the rest in the OS, like a scheduler blocked on the GPU.
        await asyncio.sleep(0)
        remaining = self._clock - time.perf_counter()
        if remaining > 0:
            time.sleep(remaining)

    async def _prefill(self) -> None:
        room = self.max_running - len(self.running)
        batch: list[Req] = []
        uncached = 0
        while self.waiting and len(batch) < room:
            req = self.waiting[0]
            cached = self.radix.match(req.prompt)
            need = len(req.prompt) - cached
            if batch and 0 < self.prefill_budget < uncached + need:
                break
            self.waiting.popleft()
            req.cached_tokens = cached
            batch.append(req)
            uncached += need
        if self.step_observer is not None:
            self.step_observer("prefill", len(batch), uncached)
        await self._advance(self.perf.prefill_ms(len(batch), uncached))
        now = time.perf_counter()
        for req in batch:
            if req.finished:
                continue
            self.radix.insert(req.prompt)
            req.n_out = 1 if req.limit > 0 else 0
            if req.n_out >= req.limit or "stall" in req.faults:
                self._finish(req, now)
            else:
                self.running.append(req)
            req.bounds.append(req.n_out)
            req.sink.wake()

    async def _decode(self) -> None:
        running = self.running
        batch = len(running)
        self.last_batch_graph = batch <= self.perf.graph_max_bs
        if self.step_observer is not None:
            self.step_observer("decode", batch, 0)
        cost = self.perf.decode_ms(batch)
        await self._advance(cost)
        now = time.perf_counter()
        sample = self._sample
        count_truncated = self.count_truncated
        drafts = tokens = steps = 0
        for req in running:
            if req.finished:
                continue  # aborted while this iteration ran
            accepted = 0
            if sample is not None:
                accepted = sample(req.rng)  # type: ignore[arg-type]  # set whenever spec is on
                req.verify_ct += 1
                req.correct_drafts += accepted
                req.hist[accepted] += 1
            new = accepted + 1
            room = req.limit - req.n_out
            done = new >= room
            committed = room if done else new
            drafts += committed - 1 if count_truncated else accepted
            steps += 1
            tokens += committed
            req.n_out += committed
            if done:
                self._finish(req, now)
            elif req.stream_interval > 1:
                req.decode_steps += 1
                if req.decode_steps % req.stream_interval:
                    continue
            req.bounds.append(req.n_out)
            req.sink.wake()
        c = self.counters
        c.decode_iters += 1
        c.win_drafts += drafts
        c.win_steps += steps
        c.win_tokens += tokens
        if c.decode_iters % self.log_interval == 0:
            self._close_window(now)

    def _finish(self, req: Req, now: float) -> None:
        req.finish(now)
        if "stall" in req.faults:
            req.aborted = True  # its handler never streams again; nothing is counted
            return
        req.tape.extend_to(req.n_out)
        self.radix.insert(req.prompt + req.tape.ids[: req.n_out])
        metrics = self.metrics
        if metrics is not None and not req.internal:
            metrics.prompt_tokens += len(req.prompt)
            metrics.generation_tokens += req.n_out
            metrics.num_requests += 1

    def _close_window(self, now: float) -> None:
        c = self.counters
        elapsed = now - c.win_start
        c.last_gen_throughput = c.win_tokens / elapsed if elapsed > 0 else 0.0
        spec = self.acceptance is not None
        if spec and c.win_steps:
            c.total_drafts += c.win_drafts
            c.total_steps += c.win_steps
            c.last_accept_len = 1.0 + c.win_drafts / c.win_steps
            c.last_accept_rate = c.win_drafts / (c.win_steps * max(1, self.draft_tokens - 1))
        c.win_drafts = c.win_steps = c.win_tokens = 0
        c.win_start = now
        used = sum(len(r.prompt) + r.n_out for r in self.running if not r.finished)
        parts = [
            f"Decode batch, #running-req: {len(self.running)}",
            f"#token: {used}",
            f"token usage: {used / self.resolved.max_total_num_tokens:.2f}",
        ]
        if spec:
            parts += [f"accept len: {c.last_accept_len:.2f}", f"accept rate: {c.last_accept_rate:.2f}"]
        parts += [
            f"cuda graph: {self.last_batch_graph}",
            f"gen throughput (token/s): {c.last_gen_throughput:.2f}",
            f"#queue-req: {len(self.waiting)}",
        ]
        logs.scheduler.info(", ".join(parts))
