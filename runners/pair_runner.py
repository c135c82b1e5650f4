"""Runs a v1/v2 pair interleaved (bench.pairing): both servers alive and ABBA windows, or alternating
restarts.

The pair's servers start one after the other, never together: the first cold start compiles the JIT caches
(Triton, FlashInfer, torch) that the second then reuses. Each server warms up at each batch size before its
first window there. If the second server cannot start while the first is up (GPU memory), that failure is
recorded on a server row and the pair falls back to alternating restarts in the same ABBA order; a failure
identified as a known SGLang bug (the launch error's `known_bug`) is that side's failed launch instead, and
the other side is measured alone.
"""

from __future__ import annotations

import asyncio

from sqlalchemy.orm import Session

from bench.client import LoadClient
from bench.pairing import Pair, Side, abba_order, abba_sides, restart_blocks
from bench.server.launcher import LaunchedServer, LaunchError
from bench.sweep import PointPlan, ServerGroup
from db.models import Run
from runners import pair_target, profiling, run_checks, store
from runners.executor import Stopped, SweepExecutor

SIDES: tuple[Side, Side] = ("A", "B")
PAIR_ENV = "specbench.pair"  # on a server row: "colocated" when it shared the GPU with its v1/v2 partner


def record_note(
    executor: SweepExecutor, group: ServerGroup, status: str, error: str, log_path: str | None = None
) -> None:
    """A server row that says what happened to a pair (e.g. the second server could not start next to it)."""

    def write(s: Session) -> None:
        run = s.get(Run, executor.run_id)
        assert run is not None
        store.record_server(s, run, group.server, status=status, error=error, log_path=log_path)

    executor.write(write, "recording the pair's fallback")


def _measured(executor: SweepExecutor, plan_a: PointPlan, plan_b: PointPlan) -> int:
    """Repeats the pair holds so far: the planned ones, or more where an extension was stored."""
    stored = [r for plan in (plan_a, plan_b) for r in executor.done.get(plan.key(), set())]
    return pair_target.measured_repeats(max(plan_a.repeats, plan_b.repeats), stored)


def _wants_more(executor: SweepExecutor, plan_a: PointPlan, plan_b: PointPlan) -> bool:
    """All planned repeats stored, but (measure.ratio_target) the v2/v1 interval still wider than asked and
    max_repeats not reached: a run cut by its deadline inside the extension resumes there. Only a pair that
    will be interleaved extends (`_interleave`); alternating restarts measure the planned repeats alone, so
    no server is started for an extension they would not make."""
    if (
        executor.pending_repeats(plan_a)
        or executor.pending_repeats(plan_b)
        or not executor.spec.repeats_may_grow(plan_a)
        or executor.colocate_failed
    ):
        return False
    return pair_target.next_repeat(executor, plan_a, plan_b, _measured(executor, plan_a, plan_b)) is not None


def run_pair(executor: SweepExecutor, pair: Pair, *, drift_here: bool = False) -> None:
    """Measure `pair`; `drift_here`: the run's last step, which re-measures the reference point on its still
    running server when it holds it."""
    todo: dict[Side, list[PointPlan]] = {"A": [], "B": []}
    extend: set[str] = set()  # keys of A-side points with only an extension left (read once, here)
    for plan_a, plan_b in zip(pair.a.points, pair.b.points, strict=True):
        if _wants_more(executor, plan_a, plan_b):
            extend.add(plan_a.key())
        for side in SIDES:
            plan = plan_a if side == "A" else plan_b
            if executor.pending_repeats(plan) or plan_a.key() in extend:
                todo[side].append(plan)
    for side in SIDES:
        for _ in range(len(pair.side(side).points) - len(todo[side])):
            executor.progress.advance()
    if not todo["A"] and not todo["B"]:
        return
    executor.check_stop()
    first: Side = "A" if todo["A"] else "B"
    other: Side = "B" if first == "A" else "A"
    a = executor.launch(pair.side(first))
    if isinstance(a, LaunchError):
        executor.record_launch_failure(pair.side(first), todo[first], a)
        _alternate(executor, pair, {first: [], other: todo[other]}, None)
        return
    if not executor.spec.server.pair_colocate or executor.colocate_failed or not todo[other]:
        _alternate(executor, pair, todo, (first, a))
        return
    b = executor.launch(pair.side(other))
    if isinstance(b, LaunchError) and b.known_bug is not None:
        # A known SGLang bug (bench.server.known_bugs), not the GPU memory: alone it would crash the same way,
        # so it is recorded as this side's launch failure, and the other side is measured on its server.
        executor.record_launch_failure(pair.side(other), todo[other], b)
        try:
            executor.measure_on(pair.side(first), todo[first], a, co_resident=0)
        finally:
            a.stop()
        return
    if isinstance(b, LaunchError):
        executor.colocate_failed = True  # the next pairs have the same footprint: go straight to restarts
        record_note(
            executor,
            pair.side(other),
            "failed",
            "could not start next to the other server of its v1/v2 pair (GPU memory?); measured with "
            f"alternating restarts instead (and for the run's later pairs). Launch error: {str(b).strip()[-2000:]}",
            log_path=str(b.log_path) if b.log_path else None,
        )
        _alternate(executor, pair, todo, (first, a))
        return
    servers: dict[Side, LaunchedServer] = {first: a, other: b}
    try:
        # The idle neighbour is the pair's other server, by design (the Sweep page says so, not warns).
        server_rows = {
            side: executor.record_server(pair.side(side).server, servers[side], 1, {PAIR_ENV: "colocated"})
            for side in SIDES
        }
        executor.drift.new_pair()
        try:
            for side in SIDES:
                executor.check_correctness(pair.side(side).server, servers[side], server_rows[side])
            try:
                asyncio.run(_interleave(executor, pair, servers, server_rows, extend))
            except Stopped as stop:
                # A deadline cut the run inside this pair: while the reference point's server is still up,
                # re-measure it anyway (one window), so a cut run still says how far it drifted. A stop
                # request (SIGTERM) means leave now, and skips it.
                if stop.deadline and executor.spec.drift_check and executor.drift.result is None:
                    _drift_on_live(executor, pair, servers, after_deadline=True)
                raise
            if drift_here:
                _drift_on_live(executor, pair, servers)
        finally:
            for side in SIDES:
                executor.server_ended(server_rows[side], servers[side])
    finally:
        for srv in servers.values():
            srv.stop()


def _drift_on_live(
    executor: SweepExecutor, pair: Pair, servers: dict[Side, LaunchedServer], *, after_deadline: bool = False
) -> None:
    """The drift check on the reference point's server, when this pair holds it and it is still up.

    After a deadline inside a pair that does not hold it (a long sweep run in parts: the reference is the
    first point of this invocation, whose server went down pairs ago), the pair's own first point stands in,
    re-measured on its live server: a run cut every night still reports how far it drifted each time."""
    ref = executor.drift.reference
    if ref is None:
        return
    holder = [side for side in SIDES if pair.side(side).server == ref.server]
    if not holder and after_deadline and executor.drift.pair_reference is not None:
        ref = executor.drift.pair_reference
        holder = [side for side in SIDES if pair.side(side).server == ref.server]
    if holder and servers[holder[0]].exit_code is None:  # still up (or attached)
        run_checks.drift_check(executor, live=servers[holder[0]], after_deadline=after_deadline, plan=ref)


async def _interleave(
    executor: SweepExecutor,
    pair: Pair,
    servers: dict[Side, LaunchedServer],
    server_rows: dict[Side, int],
    extend: set[str],
) -> None:
    """The pair's points in ABBA order on both live servers; `extend`: A-side keys of points whose planned
    repeats are stored and whose interval still wants more (a resumed run), measured by extension alone."""
    async with LoadClient(servers["A"].base_url) as ca, LoadClient(servers["B"].base_url) as cb:
        clients: dict[Side, LoadClient] = {"A": ca, "B": cb}
        dead: set[Side] = set()
        for plan_a, plan_b in zip(pair.a.points, pair.b.points, strict=True):
            plans: dict[Side, PointPlan] = {"A": plan_a, "B": plan_b}
            pending = {side: set(executor.pending_repeats(plans[side])) for side in SIDES}
            # Only an extension left (a resumed run): counted here, since the pair's start did not count it.
            extension_only = not pending["A"] and not pending["B"]
            if extension_only and plan_a.key() not in extend:
                continue  # counted when the pair started
            warmed: set[Side] = set()
            executor.progress.describe(f"pair {plan_a.server.label()} bs={plan_a.batch_size}")
            for r, side in abba_order(plan_a.repeats):
                if r not in pending[side] or side in dead:
                    continue
                executor.check_stop()
                await executor.measure_plan(
                    clients[side],
                    plans[side],
                    servers[side],
                    server_rows[side],
                    [r],
                    warmup=side not in warmed,
                )
                warmed.add(side)
                if clients[side].server_down:
                    dead.add(side)
            # measure.ratio_target: more ABBA repeats while the v2/v1 interval is wider than asked.
            # (past what is stored: an extension that a resumed run finds is counted, never measured twice)
            measured = _measured(executor, plan_a, plan_b)
            while (
                not dead
                and (extra := pair_target.next_repeat(executor, plan_a, plan_b, measured)) is not None
            ):
                for side in abba_sides(extra):
                    executor.check_stop()
                    # warm up a side whose first window here is an extension (a resumed run's fresh server)
                    await executor.measure_plan(
                        clients[side],
                        plans[side],
                        servers[side],
                        server_rows[side],
                        [extra],
                        warmup=side not in warmed,
                    )
                    warmed.add(side)
                    if clients[side].server_down:
                        dead.add(side)
                        break
                measured += 1
            for side in SIDES:  # after both sides' windows, never between them
                if pending[side] and side not in dead:
                    await profiling.profile_point(
                        executor.engine,
                        executor.spec,
                        plans[side],
                        clients[side],
                        executor.run_id,
                        server_rows[side],
                    )
            for side in SIDES:
                if pending[side] or extension_only:
                    executor.progress.point_done()


def _alternate(
    executor: SweepExecutor,
    pair: Pair,
    todo: dict[Side, list[PointPlan]],
    running: tuple[Side, LaunchedServer] | None,
) -> None:
    """Alternating restarts in ABBA blocks; `running` is a server already up (used for its side's block)."""
    repeats = max(p.repeats for p in pair.a.points)
    left = {p.key(): p for side in SIDES for p in todo[side]}  # points whose progress tick is still due
    try:
        for side, reps in restart_blocks(repeats):
            group = pair.side(side)
            plans = [p for p in todo[side] if set(executor.pending_repeats(p)) & set(reps)]
            if not plans:
                continue
            executor.check_stop()
            if running is not None and running[0] == side:
                server: LaunchedServer | LaunchError = running[1]
                running = None
            else:
                if running is not None:
                    running[1].stop()
                    running = None
                server = executor.launch(group)
            if isinstance(server, LaunchError):
                executor.record_launch_failure(group, plans, server)  # ticks each plan
                for plan in plans:
                    left.pop(plan.key(), None)
                todo[side] = []
                continue
            try:
                server_row_id = executor.record_server(group.server, server, 0)
                try:
                    executor.check_correctness(group.server, server, server_row_id)
                    asyncio.run(_block(executor, plans, server, server_row_id, reps))
                finally:
                    executor.server_ended(server_row_id, server)
            finally:
                server.stop()
            for plan in plans:
                if not executor.pending_repeats(plan) and left.pop(plan.key(), None) is not None:
                    executor.progress.point_done()
    finally:
        if running is not None:
            running[1].stop()
    for _ in left:  # points left unfinished (a server died) still move the progress bar
        executor.progress.advance()


async def _block(
    executor: SweepExecutor,
    plans: list[PointPlan],
    server: LaunchedServer,
    server_row_id: int,
    reps: list[int],
) -> None:
    async with LoadClient(server.base_url) as client:
        for plan in plans:
            executor.check_stop()
            pending = set(executor.pending_repeats(plan))
            await executor.measure_plan(
                client, plan, server, server_row_id, [r for r in reps if r in pending], warmup=True
            )
            if client.server_down:
                return
            if not executor.pending_repeats(plan):  # the point's last block: profile it once
                await profiling.profile_point(
                    executor.engine, executor.spec, plan, client, executor.run_id, server_row_id
                )
