"""One generation request as the scheduler and its HTTP handler share it."""

import asyncio
import random
import time
from dataclasses import dataclass, field
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
        waiter, self._waiter = self._waiter, None
        if waiter is not None and not waiter.done():
            waiter.set_result(None)

    async def wait(self) -> None:
        if not self._dirty:
            self._waiter = self._loop.create_future()
            await self._waiter
        self._dirty = False


@dataclass(slots=True, eq=False)
class Req:
    rid: str
    prompt: list[int]
    max_new_tokens: int
    # Where an EOS ends the request; None when it ignores EOS.
    natural_len: int | None
    stream_interval: int
    rng: random.Random | None
    tape: TokenTape
    sink: Sink
    internal: bool = False
    faults: frozenset[str] = frozenset()
    hist: list[int] = field(default_factory=list)
    cached_tokens: int = 0
    n_out: int = 0
    # Cumulative completion_tokens at each point the scheduler streamed an output.
    bounds: list[int] = field(default_factory=list)
    sent: int = 0
    decode_steps: int = 0
    verify_ct: int = 0
    correct_drafts: int = 0
    finished: bool = False
    aborted: bool = False
    finish_reason: dict[str, Any] | None = None
    t_created: float = field(default_factory=time.perf_counter)
    t_finished: float = 0.0
    # The request ends at max_new_tokens, or at an earlier EOS it does not ignore.
    limit: int = field(init=False)

    def __post_init__(self) -> None:
        natural = self.natural_len
        self.limit = self.max_new_tokens if natural is None else min(self.max_new_tokens, natural)

    def finish(self, now: float) -> None:
        self.finished = True
        self.t_finished = now
        if self.n_out < self.max_new_tokens:
            self.finish_reason = {"type": "stop", "matched": self.tape.eos_id}
        else:
            self.finish_reason = {"type": "length", "length": self.max_new_tokens}
