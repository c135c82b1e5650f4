"""How late the stand-in's event loop ran since the last `/flush_cache`: this host's stalls, felt by the
process that emits every token. Reported under `specbench_sim`, so `bench.measure.judge` does not call a tail
they explain unstable. Modelled time is awaited and never shows here; it ticks only while there is work.
"""

import asyncio
import time
from collections.abc import Callable

PERIOD_S = 0.005
LINGER_S = 2.0


class LoopStalls:
    """Start `run` as a task on the server's loop; `poke` on activity, `reset` at each flush."""

    def __init__(
        self, busy: Callable[[], bool], period_s: float = PERIOD_S, linger_s: float = LINGER_S
    ) -> None:
        self.busy, self.period_s, self.linger_s = busy, period_s, linger_s
        self.max_ms = 0.0
        self.ticks = 0
        self._until = 0.0
        self._wake = asyncio.Event()

    def poke(self) -> None:
        """Activity: keep ticking for at least `linger_s` from now."""
        self._until = time.perf_counter() + self.linger_s
        self._wake.set()

    def reset(self) -> None:
        """A new window starts (`/flush_cache`): forget the stalls seen so far."""
        self.max_ms = 0.0
        self.ticks = 0
        self.poke()

    async def run(self) -> None:
        while True:
            if not self.busy() and time.perf_counter() >= self._until:
                self._wake.clear()
                await self._wake.wait()
            t0 = time.perf_counter()
            await asyncio.sleep(self.period_s)
            late_ms = (time.perf_counter() - t0 - self.period_s) * 1000.0
            self.ticks += 1
            if late_ms > self.max_ms:
                self.max_ms = late_ms

    def view(self) -> dict[str, float | int]:
        """What `/server_info` reports under `specbench_sim` (since the last flush)."""
        return {"loop_stall_max_ms": round(self.max_ms, 3), "loop_stall_ticks": self.ticks}
