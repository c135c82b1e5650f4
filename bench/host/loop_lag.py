"""How late the client's event loop ran during a window: this host's stalls, as felt by the process that
timestamps every token. A ticker records how much later than `period_s` it woke: well under a millisecond on a
quiet host, tens to hundreds on an oversubscribed one, added to every request in flight; `judge` excuses a
TTFT tail no longer than such stalls (docs/reference/point-status.md)."""

import asyncio
import contextlib
import time

PERIOD_S = 0.005


class LoopLag:
    """Start it on the client's loop before a window, stop it after; `max_ms` is the longest stall seen."""

    def __init__(self, period_s: float = PERIOD_S) -> None:
        self.period_s = period_s
        self.late_ms: list[float] = []
        self._task: asyncio.Task[None] | None = None

    async def _tick(self) -> None:
        while True:
            t0 = time.perf_counter()
            await asyncio.sleep(self.period_s)
            self.late_ms.append(max(0.0, (time.perf_counter() - t0 - self.period_s) * 1000.0))

    def start(self) -> None:
        self._task = asyncio.get_running_loop().create_task(self._tick())

    async def stop(self) -> None:
        if self._task is None:
            return
        self._task.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await self._task
        self._task = None

    @property
    def max_ms(self) -> float | None:
        return round(max(self.late_ms), 3) if self.late_ms else None

    def summary(self) -> dict[str, float | int | None]:
        ordered = sorted(self.late_ms)
        p99 = ordered[min(len(ordered) - 1, int(0.99 * len(ordered)))] if ordered else None
        return {
            "client_loop_lag_max_ms": self.max_ms,
            "client_loop_lag_p99_ms": None if p99 is None else round(p99, 3),
            "client_loop_ticks": len(ordered),
        }
