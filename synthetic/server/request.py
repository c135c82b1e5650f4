"""One generation request as the scheduler and its HTTP handler share it."""

from __future__ import annotations

import asyncio
import random
import time
from typing import Any

from synthetic.server.tokens import TokenTape


class Sink:
    """Wakes the handler that streams one or more requests; wakes coalesce until it runs."""

    __slots__ = ("_dirty", "_loop", "_waiter")

    def __init__(self) -> None:
        self._loop = asyncio.get_running_loop()
        self._dirty = False
        self._waiter: asyncio.Future[None] | None = None

    def wake(self) -> None:
        self._dirty = True
        waiter = self._waiter
        if waiter is not None:
            self._waiter = None
            if not waiter.done():
                waiter.set_result(None)

    async def wait(self) -> None:
        if not self._dirty:
            waiter = self._loop.create_future()
            self._waiter = waiter
            await waiter
        self._dirty = False


class Req:
    __slots__ = (
        "aborted",
        "bounds",
        "cached_tokens",
        "correct_drafts",
        "decode_steps",
        "faults",
        "finish_reason",
        "finished",
        "hist",
        "internal",
        "limit",
        "max_new_tokens",
        "n_out",
        "prompt",
        "received_ts",
        "rid",
        "rng",
        "sent",
        "sink",
        "stream_interval",
        "t_created",
        "t_finished",
        "t_first",
        "t_last",
        "tape",
        "verify_ct",
    )

    def __init__(
        self,
        *,
        rid: str,
        prompt: list[int],
        max_new_tokens: int,
        natural_len: int | None,
        stream_interval: int,
        rng: random.Random | None,
        tape: TokenTape,
        sink: Sink,
        internal: bool = False,
        faults: frozenset[str] = frozenset(),
        hist_len: int = 0,
    ) -> None:
        self.rid = rid
        self.prompt = prompt
        self.max_new_tokens = max_new_tokens
        # The request ends at `limit` tokens: max_new_tokens, or an earlier EOS when not ignored.
        self.limit = max_new_tokens if natural_len is None else min(max_new_tokens, natural_len)
        self.stream_interval = stream_interval
        self.rng = rng
        self.tape = tape
        self.sink = sink
        self.internal = internal
        self.faults = faults
        self.cached_tokens = 0
        self.n_out = 0
        # Cumulative completion_tokens at each point the scheduler streamed an output.
        self.bounds: list[int] = []
        self.sent = 0
        self.decode_steps = 0
        self.verify_ct = 0
        self.correct_drafts = 0
        self.hist = [0] * hist_len
        self.finished = False
        self.aborted = False
        self.finish_reason: dict[str, Any] | None = None
        self.received_ts = time.time()
        self.t_created = time.perf_counter()
        self.t_first = 0.0
        self.t_last = 0.0
        self.t_finished = 0.0

    def finish(self, now: float) -> None:
        self.finished = True
        self.t_finished = now
        if self.n_out < self.max_new_tokens:
            self.finish_reason = {"type": "stop", "matched": self.tape.eos_id}
        else:
            self.finish_reason = {"type": "length", "length": self.max_new_tokens}
