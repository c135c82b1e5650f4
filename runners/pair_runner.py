"""Runs a pair of server configs (bench.pairing): both up with ABBA windows, else alternating restarts.

The second server starts after the first to reuse its JIT caches. In a chain (measure.baseline_pairs) a pair
takes the server left up before it (`held`) and leaves up what the next shares (`keep`). Repeats here are the
link's; its side's `Slot` maps them onto the point's.
"""

import asyncio
from dataclasses import dataclass

from sqlalchemy.orm import Session

from bench.client import LoadClient
from bench.pairing import Pair, Side, abba_order, abba_sides, restart_blocks
from bench.server.launcher import LaunchedServer, LaunchError
from bench.sweep import PointPlan, ServerConfig
from db.models import Run
from runners import pair_target, run_checks, store
from runners.executor import Stopped, SweepExecutor

SIDES: tuple[Side, Side] = ("A", "B")
PAIR_ENV = "specbench.pair"  # on a server row: "colocated" when it shared the GPU with its pair's partner


@dataclass(frozen=True)
class Live:
    """A server a pair left up for the next pair of the chain."""

    config: ServerConfig
    server: LaunchedServer
    row_id: int


def release(executor: SweepExecutor, server: LaunchedServer, row_id: int | None) -> None:
    """Close the row (once recorded) of a server no pair needs any more and stop it."""
    try:
        if row_id is not None:
            executor.server_ended(row_id, server)
    finally:
        server.stop()


def pending(executor: SweepExecutor, pair: Pair, side: Side, plan: PointPlan) -> list[int]:
    """The link repeats of `plan` (a point of `side`) planned and not stored yet."""
    slot, have = pair.slot(side), executor.done.get(plan.key(), set())
    return [r for r in range(pair.repeats) if slot.index(r) not in have]


def _indices(pair: Pair, side: Side, repeats: list[int]) -> list[int]:
    """Link repeats as the point's repeat indices."""
    return [pair.slot(side).index(r) for r in repeats]


def _tick(executor: SweepExecutor, pair: Pair, side: Side) -> None:
    """A point of `side` is done in this pair: counted as stored after its last link of the chain."""
    if pair.slot(side).last:
        executor.progress.point_done()
    else:
        executor.progress.advance()


def _measured(executor: SweepExecutor, pair: Pair, plan_a: PointPlan, plan_b: PointPlan) -> int:
    """Link repeats the pair holds so far: the planned ones, or more where an extension was stored."""
    sides: tuple[tuple[Side, PointPlan], ...] = (("A", plan_a), ("B", plan_b))
    stored = [
        r
        for side, plan in sides
        for index in executor.done.get(plan.key(), set())
        if (r := pair.slot(side).link_repeat(index)) is not None
    ]
    return pair_target.measured_repeats(pair.repeats, stored)


def _wants_more(executor: SweepExecutor, pair: Pair, plan_a: PointPlan, plan_b: PointPlan) -> bool:
    """Planned repeats stored, the interval wider than ratio_target asks; only interleaved pairs extend."""
    if (
        pending(executor, pair, "A", plan_a)
        or pending(executor, pair, "B", plan_b)
        or not executor.spec.repeats_may_grow(plan_a)
        or executor.colocate_failed
    ):
        return False
    measured = _measured(executor, pair, plan_a, plan_b)
    return pair_target.next_repeat(executor, pair, plan_a, plan_b, measured) is not None


def run_pair(
    executor: SweepExecutor,
    pair: Pair,
    *,
    drift_here: bool = False,
    held: Live | None = None,
    keep: ServerConfig | None = None,
) -> Live | None:
    """Measure `pair` (`drift_here`: with the drift check), on `held` if given, leaving `keep`'s server up."""
    todo: dict[Side, list[PointPlan]] = {"A": [], "B": []}
    extend: set[str] = set()  # keys of A-side points with only an extension left (read once, here)
    for plan_a, plan_b in zip(pair.a.points, pair.b.points, strict=True):
        if _wants_more(executor, pair, plan_a, plan_b):
            extend.add(plan_a.key())
        for side in SIDES:
            plan = plan_a if side == "A" else plan_b
            if pending(executor, pair, side, plan) or plan_a.key() in extend:
                todo[side].append(plan)
    for side in SIDES:
        executor.progress.advance(len(pair.side(side).points) - len(todo[side]))
    if not todo["A"] and not todo["B"]:  # the held server passes on if the next pair shares it, else stops
        if held is None or held.config == keep:
            return held
        release(executor, held.server, held.row_id)
        return None
    executor.check_stop()
    first: Side = pair.holds(held.config) or "A" if held is not None else "A" if todo["A"] else "B"
    other: Side = "B" if first == "A" else "A"
    a = held.server if held is not None else executor.launch(pair.side(first))
    if isinstance(a, LaunchError):
        executor.record_launch_failure(pair.side(first), todo[first], a)
        return _alternate(executor, pair, {first: [], other: todo[other]}, None, keep)
    up = (first, a, held.row_id if held is not None else None)
    if not executor.spec.server.pair_colocate or executor.colocate_failed or not todo[other]:
        return _alternate(executor, pair, todo, up, keep)
    b = executor.launch(pair.side(other))
    if isinstance(b, LaunchError) and b.known_bug is not None:
        # A known SGLang bug, not memory: alone it would crash the same way.
        executor.record_launch_failure(pair.side(other), todo[other], b)
        return _alternate(executor, pair, {first: todo[first], other: []}, up, keep)
    if isinstance(b, LaunchError):
        executor.colocate_failed = True  # the next pairs have the same footprint: go straight to restarts
        error = (
            "could not start next to the other server of its pair (GPU memory?); measured with alternating "
            f"restarts instead (and for the run's later pairs). Launch error: {str(b).strip()[-2000:]}"
        )
        log_path = str(b.log_path) if b.log_path else None

        def note(s: Session) -> None:
            run = s.get_one(Run, executor.run_id)
            store.record_server(
                s, run, pair.side(other).server, status="failed", error=error, log_path=log_path
            )

        executor.write(note, "recording the pair's fallback")
        return _alternate(executor, pair, todo, up, keep)
    servers: dict[Side, LaunchedServer] = {first: a, other: b}
    kept: Live | None = None
    try:
        # The idle neighbour is the pair's other server, by design (the Sweep page says so, not warns).
        server_rows = {
            side: held.row_id
            if held is not None and side == first
            else executor.record_server(pair.side(side).server, servers[side], 1, {PAIR_ENV: "colocated"})
            for side in SIDES
        }
        executor.drift.new_pair()
        try:
            for side in SIDES:
                if held is None or side != first:  # the held server was checked when it started
                    executor.check_correctness(pair.side(side).server, servers[side], server_rows[side])
            try:
                asyncio.run(_interleave(executor, pair, servers, server_rows, extend))
            except Stopped as stop:
                # A run cut by its deadline still says how far it drifted; SIGTERM leaves at once.
                if stop.deadline and executor.spec.drift_check and executor.drift.result is None:
                    _drift_on_live(executor, pair, servers, server_rows, after_deadline=True)
                raise
            if drift_here:
                _drift_on_live(executor, pair, servers, server_rows)
            side_kept = pair.holds(keep) if keep is not None else None
            if side_kept is not None and servers[side_kept].exit_code is None:
                kept = Live(pair.side(side_kept).server, servers[side_kept], server_rows[side_kept])
        finally:
            for side in SIDES:
                if kept is None or servers[side] is not kept.server:
                    executor.server_ended(server_rows[side], servers[side])
    finally:
        for srv in servers.values():
            if kept is None or srv is not kept.server:
                srv.stop()
    return kept


def _drift_on_live(
    executor: SweepExecutor,
    pair: Pair,
    servers: dict[Side, LaunchedServer],
    rows: dict[Side, int],
    *,
    after_deadline: bool = False,
) -> None:
    """The drift check on a live server of this pair; after a deadline its first point stands in."""
    ref = executor.drift.reference
    if ref is None:
        return
    holder = [side for side in SIDES if pair.side(side).server == ref.server]
    if not holder and after_deadline and executor.drift.pair_reference is not None:
        ref = executor.drift.pair_reference
        holder = [side for side in SIDES if pair.side(side).server == ref.server]
    if holder and servers[holder[0]].exit_code is None:  # still up (or attached)
        restarted = executor.drift.row_of(ref) not in (None, rows[holder[0]])
        run_checks.drift_check(
            executor, live=servers[holder[0]], after_deadline=after_deadline, plan=ref, restarted=restarted
        )


async def _interleave(
    executor: SweepExecutor,
    pair: Pair,
    servers: dict[Side, LaunchedServer],
    server_rows: dict[Side, int],
    extend: set[str],
) -> None:
    """The pair's points in ABBA order on both live servers; `extend`: A-side keys wanting only more."""
    async with LoadClient(servers["A"].base_url) as ca, LoadClient(servers["B"].base_url) as cb:
        clients: dict[Side, LoadClient] = {"A": ca, "B": cb}
        dead: set[Side] = set()

        async def measure(plan: PointPlan, side: Side, r: int, warmed: set[Side]) -> None:
            """Link repeat `r` of `plan` on `side`'s server, warming up on the side's first window here."""
            executor.check_stop()
            await executor.measure_plan(
                clients[side],
                plan,
                servers[side],
                server_rows[side],
                _indices(pair, side, [r]),
                warmup=side not in warmed,
                link=pair.window_link(side, "abba"),
            )
            warmed.add(side)
            if clients[side].server_down:
                dead.add(side)

        for plan_a, plan_b in zip(pair.a.points, pair.b.points, strict=True):
            plans: dict[Side, PointPlan] = {"A": plan_a, "B": plan_b}
            todo = {side: set(pending(executor, pair, side, plans[side])) for side in SIDES}
            extension_only = not todo["A"] and not todo["B"]
            if extension_only and plan_a.key() not in extend:
                continue  # counted when the pair started
            warmed: set[Side] = set()
            executor.progress.describe(f"pair {plan_a.server.label()} bs={plan_a.batch_size}")
            for r, side in abba_order(pair.repeats):
                if r in todo[side] and side not in dead:
                    await measure(plans[side], side, r, warmed)
            # measure.ratio_target: more ABBA repeats while the interval is wider than asked.
            measured = _measured(executor, pair, plan_a, plan_b)
            while (
                not dead
                and (extra := pair_target.next_repeat(executor, pair, plan_a, plan_b, measured)) is not None
            ):
                for side in abba_sides(extra):
                    await measure(plans[side], side, extra, warmed)
                    if side in dead:
                        break
                measured += 1
            for side in SIDES:  # after both sides' windows, never between them; once per point
                if todo[side] and side not in dead and pair.slot(side).last:
                    await executor.profile(plans[side], clients[side], server_rows[side])
            for side in SIDES:
                if todo[side] or extension_only:
                    _tick(executor, pair, side)


Up = tuple[Side, LaunchedServer, int | None]  # a server up for a side, and its row once recorded


def _alternate(
    executor: SweepExecutor,
    pair: Pair,
    todo: dict[Side, list[PointPlan]],
    running: Up | None,
    keep: ServerConfig | None = None,
) -> Live | None:
    """ABBA blocks of restarts, one server up at a time (`running`: already up); returns `keep`'s server."""
    left = {(side, p.key()): side for side in SIDES for p in todo[side]}  # progress ticks still due
    up: Up | None = None
    kept: Live | None = None
    try:
        for side, reps in restart_blocks(pair.repeats):
            plans = [p for p in todo[side] if set(pending(executor, pair, side, p)) & set(reps)]
            if not plans:
                continue
            executor.check_stop()
            if up is not None and up[0] != side:
                release(executor, up[1], up[2])
                up = None
            if up is None:
                up, running = _block_server(executor, pair, side, running)
                if up is None:  # its launch failed: recorded with its points
                    for plan in todo[side]:
                        left.pop((side, plan.key()), None)
                    todo[side] = []
                    continue
            server, row = up[1], up[2]
            assert row is not None
            asyncio.run(_block(executor, pair, side, plans, server, row, reps))
            for plan in plans:
                if not pending(executor, pair, side, plan) and left.pop((side, plan.key()), None) is not None:
                    _tick(executor, pair, side)
            if server.exit_code is not None:
                release(executor, up[1], up[2])
                up = None
        if up is not None and keep is not None and pair.side(up[0]).server == keep and up[2] is not None:
            kept = Live(keep, up[1], up[2])
    finally:
        if up is not None and kept is None:
            release(executor, up[1], up[2])
        if running is not None:
            release(executor, running[1], running[2])
    executor.progress.advance(len(left))  # points left unfinished (a server died) still move the bar
    return kept


def _block_server(
    executor: SweepExecutor, pair: Pair, side: Side, running: Up | None
) -> tuple[Up | None, Up | None]:
    """The server for a block of `side` (`running` or a new start), and what is left of `running`."""
    group = pair.side(side)
    if running is not None and running[0] == side:
        server, row, running = running[1], running[2], None
    else:
        if running is not None:
            release(executor, running[1], running[2])
            running = None
        launched = executor.launch(group)
        if isinstance(launched, LaunchError):
            plans = [p for p in group.points if pending(executor, pair, side, p)]
            executor.record_launch_failure(group, plans, launched)
            return None, running
        server, row = launched, None
    if row is None:
        try:
            row = executor.record_server(group.server, server, 0)
            executor.check_correctness(group.server, server, row)
        except BaseException:
            if row is not None:
                executor.server_ended(row, server)
            server.stop()
            raise
    return (side, server, row), running


async def _block(
    executor: SweepExecutor,
    pair: Pair,
    side: Side,
    plans: list[PointPlan],
    server: LaunchedServer,
    server_row_id: int,
    reps: list[int],
) -> None:
    link = pair.window_link(side, "blocks")
    async with LoadClient(server.base_url) as client:
        for plan in plans:
            executor.check_stop()
            todo = set(pending(executor, pair, side, plan))
            await executor.measure_plan(
                client,
                plan,
                server,
                server_row_id,
                _indices(pair, side, [r for r in reps if r in todo]),
                warmup=True,
                link=link,
            )
            if client.server_down:
                return
            if not pending(executor, pair, side, plan) and pair.slot(side).last:
                await executor.profile(plan, client, server_row_id)
