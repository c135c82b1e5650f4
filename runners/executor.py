"""One run in progress: launch a sweep's servers, record them, measure their points, store repeats.

`sweep_runner`, `pair_runner`, `pair_target` and `run_checks` compose its steps. Each write is a transaction
retried through an outage (`dbretry`), so a measured repeat waits in memory until stored.
"""

import asyncio
import functools
import threading
import time
from collections.abc import Callable, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path
from typing import Any, TypeVar

from sqlalchemy import Engine
from sqlalchemy.orm import Session

from bench import floor
from bench.client import LoadClient
from bench.host import cpu_affinity
from bench.host.policy import HostPolicy
from bench.host.telemetry import TelemetrySource
from bench.measure import Window, WindowSettings, measure_windows
from bench.model_config import DEFAULT_VOCAB_SIZE, read_model_config, vocab_size
from bench.pairing import WindowLink
from bench.provenance import collect_provenance
from bench.results import SampleResult
from bench.server.launcher import LaunchedServer, LaunchError, launch
from bench.sweep import PointPlan, ServerConfig, ServerGroup, SweepSpec, expand
from bench.workload import build_prompts
from db.models import Run, ServerInstance
from db.types import utcnow
from runners import dbretry, profiling, store
from runners.correctness import CorrectnessCheck
from runners.drift import DriftCheck
from runners.parts import PartState
from runners.progress import RunProgress
from runners.recovery import OutagePolicy

T = TypeVar("T")


class Stopped(Exception):
    """The deadline passed or a stop was requested; finish cleanly."""

    def __init__(self, message: str, *, deadline: bool = False) -> None:
        super().__init__(message)
        self.deadline = deadline  # True: the time budget ran out (not a stop request)


@dataclass(eq=False)
class SweepExecutor:
    """The state of one run in progress and the steps the schedulers compose."""

    spec: SweepSpec
    engine: Engine
    run_id: int
    done: dict[str, set[int]]
    gpus: list[int] | None
    deadline: float | None
    stop: threading.Event | None
    log_dir: Path
    outage: OutagePolicy
    policy: HostPolicy | None  # None: the author's (bench.server.launcher.launch)
    parts: PartState

    def __post_init__(self) -> None:
        self.progress = RunProgress(order_index=self.parts.invocation, invocation=self.parts.invocation)
        self.plans = [p for g in expand(self.spec) for p in g.points]  # what a drift check may re-measure
        self.drift = DriftCheck()
        self.correctness = CorrectnessCheck(self.spec, self.run_id, self.write)
        self.warmed_servers: set[int] = set()  # server rows past their first warmup (warmup.after_start_s)
        self.colocate_failed = False  # a pair's 2nd server did not start beside the 1st: later pairs restart
        self.telemetry = TelemetrySource(self.gpus, enabled=self.spec.server.backend != "external")
        # Random prompt ids stay below the model's vocabulary (16,160 on the TP-8 shard).
        self.model_config = read_model_config(self.spec.model)
        self.vocab_size = vocab_size(self.model_config) or DEFAULT_VOCAB_SIZE
        self.floor_note: str | None = None  # why points have no floor (no config, unknown GPU), for the run

    def check_stop(self) -> None:
        """Raise Stopped on a stop request (SIGTERM) or a passed deadline; called between windows."""
        if self.stop is not None and self.stop.is_set():
            raise Stopped("stop requested (SIGTERM); finished the current point")
        if self.deadline is not None and time.monotonic() >= self.deadline:
            raise Stopped("deadline reached; finished the current point", deadline=True)

    def pending_repeats(self, plan: PointPlan) -> list[int]:
        """The planned repeats of `plan` not stored yet (a resumed run skips the stored ones)."""
        have = self.done.get(plan.key(), set())
        return [r for r in range(plan.repeats) if r not in have]

    def launch(self, group: ServerGroup) -> LaunchedServer | LaunchError:
        """Start one server config alone (a pair's side, a restart block), counted as a launch."""
        self.progress.describe(f"launching {group.server.label()}")
        self.progress.launches += 1
        return self.start_server(group.server)

    def run_batch(self, groups: list[ServerGroup]) -> None:
        """Start `groups`' servers together (overlapping JIT and graph capture), then measure each in turn."""
        pending: list[tuple[ServerGroup, list[PointPlan]]] = []
        for group in groups:
            todo = [p for p in group.points if self.pending_repeats(p)]
            self.progress.advance(len(group.points) - len(todo))
            if todo:
                pending.append((group, todo))
        if not pending:
            return
        self.check_stop()
        self.progress.describe(f"launching {', '.join(g.server.label() for g, _ in pending)}")
        self.progress.launches += len(pending)
        with ThreadPoolExecutor(max_workers=len(pending)) as pool:
            started = list(pool.map(self.start_server, [g.server for g, _ in pending]))
        try:
            for i, ((group, todo), server) in enumerate(zip(pending, started, strict=True)):
                if isinstance(server, LaunchError):
                    self.record_launch_failure(group, todo, server)
                    continue
                try:
                    self.measure_on(group, todo, server, co_resident=len(pending) - 1 - i)
                finally:
                    server.stop()
        finally:
            for server in started:  # a stop or Ctrl-C mid-batch must not leave idle servers behind
                if isinstance(server, LaunchedServer):
                    server.stop()

    def start_server(self, cfg: ServerConfig) -> LaunchedServer | LaunchError:
        """Start `cfg` (not counted as a launch: the drift check's restart, or `launch`'s own start)."""
        try:
            return launch(self.spec.server, cfg, log_dir=self.log_dir, gpus=self.gpus, policy=self.policy)
        except LaunchError as e:
            return e

    def write(self, fn: Callable[[Session], T], what: str) -> T:
        """One transaction, retried through a database outage (a measured repeat waits in memory)."""
        return dbretry.in_session(self.engine, fn, what=what, policy=self.outage)

    def record_launch_failure(self, group: ServerGroup, todo: list[PointPlan], err: LaunchError) -> None:
        """A server row saying why `group`'s server did not start, and each of `todo` failed with it."""
        first_line = (str(err).strip().splitlines() or [str(err)])[0]

        def write(s: Session) -> None:
            run = s.get_one(Run, self.run_id)
            log_path = str(err.log_path) if err.log_path else None
            row = store.record_server(
                s, run, group.server, status="failed", error=str(err), log_path=log_path
            )
            row.exit_code, row.log_tail = err.exit_code, err.log_tail or None
            row.known_bug = err.known_bug  # a known SGLang bug: the correctness gate's finding, not a mishap
            for plan in todo:
                store.fail_point(s, run, plan, row.id, f"server failed to start: {first_line}")

        self.write(write, "recording a failed launch")
        self.progress.advance(len(todo))

    def measure_on(
        self, group: ServerGroup, todo: list[PointPlan], server: LaunchedServer, co_resident: int
    ) -> None:
        """Record `server`, check it, measure `todo`'s pending repeats and close its row (caller stops it)."""
        server_row_id = self.record_server(group.server, server, co_resident)
        try:
            self.check_correctness(group.server, server, server_row_id)
            asyncio.run(self._measure_group(todo, server, server_row_id, group.server.label()))
        finally:
            self.server_ended(server_row_id, server)

    def server_ended(self, server_row_id: int, server: LaunchedServer) -> None:
        """Close the server's row: `stopped`, or `crashed` with its exit code and log tail."""
        # Read before stop(): an exit code now means the server died under us, not by our teardown.
        exit_code = server.exit_code

        def close(s: Session) -> None:
            row = s.get(ServerInstance, server_row_id)
            if row is None or row.status != "ok":
                return
            row.stopped_at = utcnow()
            if exit_code is None:
                row.status = "stopped"
                return
            # The log file stays on this host; the database keeps what a reader elsewhere needs.
            row.status, row.exit_code, row.log_tail = "crashed", exit_code, server.log_tail()
            row.error = f"server exited with code {exit_code} while it was measured"

        self.write(close, "recording the server's end")

    def check_correctness(self, cfg: ServerConfig, server: LaunchedServer, server_row_id: int) -> None:
        """Store a fresh server's greedy answers (runners/correctness.py), then any pending drift check."""
        self.progress.describe(f"correctness check: {cfg.label()}")
        self.correctness.check_server(cfg, server, server_row_id)
        if self.parts.check_pending:
            self.progress.describe(f"drift check against part {self.parts.number - 1}: {cfg.label()}")
            self.parts.check(
                cfg, self.plans, lambda plan: self.measure_once(plan, server, server_row_id), self.write
            )

    def measure_once(
        self, plan: PointPlan, server: LaunchedServer, server_row_id: int
    ) -> SampleResult | None:
        """One unstored window of `plan` after a warmup (the drift check against the part before)."""
        after_start = server_row_id not in self.warmed_servers
        self.warmed_servers.add(server_row_id)
        return asyncio.run(self.measure_window(plan, server.base_url, after_start, server.pid))[0]

    async def measure_window(
        self, plan: PointPlan, base_url: str, after_start: bool, server_pid: int | None
    ) -> tuple[SampleResult | None, Window | None]:
        """One unstored window of `plan` at `base_url`, after a warmup, with its telemetry."""
        prompts = build_prompts(plan.workload, plan.num_prompts, self.vocab_size)
        settings = self.window_settings(plan, warmup=True, after_start=after_start, server_pid=server_pid)
        async with LoadClient(base_url) as client:
            async for result, window in measure_windows(client, prompts, [0], settings):
                return result, window
        return None, None

    def record_server(
        self,
        cfg: ServerConfig,
        server: LaunchedServer,
        co_resident: int,
        extra_env: dict[str, str] | None = None,
    ) -> int:
        """Store the server's row and return its id; `co_resident`: idle servers sharing the GPU."""

        def write(s: Session) -> int:
            run = s.get_one(Run, self.run_id)
            if run.provenance.get("server_version") is None:
                # The server may run another sglang than the local one (external, or another interpreter).
                prov = run_provenance(self.spec, server.server_info, self.gpus)
                prov["server_version"] = server.version
                if server.sglang_patch is not None:  # bench/server/sglang_patch.py: "none" or the patch
                    prov["sglang_patch"] = server.sglang_patch
                store.apply_provenance(run, prov)
            # The part records its SGLang, refusing one the run's earlier parts did not run (PartRefused).
            self.parts.server_sglang(s, server.version, server.sglang_patch)
            row = store.record_server(
                s,
                run,
                cfg,
                argv=list(server.argv),
                env=dict(server.env_delta),
                resolved=server.server_info,
                spec_mode_resolved=server.spec_mode_resolved,
                spec_mode_detail=server.resolved.detail if server.resolved else None,
                mismatches=list(server.mismatches),
                version=server.version,
                log_path=str(server.log_path) if server.log_path else None,
                startup_s=server.startup_s,
            )
            if server.expert_routing is not None:
                # What the run's dummy-weight MoE servers routed like: every number of the run says it.
                seen = run.provenance.get("expert_routing")
                routing = server.expert_routing if seen in (None, server.expert_routing) else "mixed"
                run.provenance = {**run.provenance, "expert_routing": routing}
            row.env = {**row.env, "specbench.co_resident_idle_servers": str(co_resident), **(extra_env or {})}
            if server.cpu_affinity is not None:  # the CPUs its threads were pinned to and read back on
                row.env = {**row.env, "specbench.cpu_affinity": list(server.cpu_affinity)}
            return int(row.id)

        server_row_id = int(self.write(write, "recording the server"))
        if server.expert_routing == "collapsed":  # a dummy-weight MoE server's: said loudly, once per run
            warning = next((n for n in server.notes if "routing" in n), "expert routing collapsed")
            self.progress.warn_once("routing", warning)
        return server_row_id

    async def _measure_group(
        self, todo: list[PointPlan], server: LaunchedServer, server_row_id: int, label: str
    ) -> None:
        async with LoadClient(server.base_url) as client:
            for plan in todo:
                self.check_stop()
                self.progress.describe(f"{label} bs={plan.batch_size}")
                await self.measure_plan(
                    client, plan, server, server_row_id, self.pending_repeats(plan), warmup=True
                )
                await self.profile(plan, client, server_row_id)
                self.progress.point_done()

    async def profile(self, plan: PointPlan, client: LoadClient, server_row_id: int) -> None:
        await profiling.profile_point(self.engine, self.spec, plan, client, self.run_id, server_row_id)

    def window_settings(
        self,
        plan: PointPlan,
        *,
        warmup: bool,
        after_start: bool = False,
        launch_mismatches: Sequence[str] = (),
        server_pid: int | None = None,
    ) -> WindowSettings:
        """How `plan`'s windows run; `after_start`: a fresh server's first warmup (`warmup.after_start_s`)."""
        return WindowSettings(
            batch_size=plan.batch_size,
            warmup_waves=self.spec.warmup.waves if warmup else 0,
            warmup_min_s=self.spec.warmup_after_start_s if warmup and after_start else 0.0,
            request_timeout_s=self.spec.request_timeout_s,
            expect_spec=not plan.server.is_baseline,
            temperature=plan.workload.temperature,
            min_window_s=self.spec.min_window_s,
            expected_accept_length=plan.server.expected_accept_length(),
            accept_tolerance=self.spec.measure.accept_length_tolerance,
            # measure.cpu_probe: server moves the host-speed probe onto the server's busiest CPU per window
            telemetry=functools.partial(
                self.telemetry.window, server_pid, cpu_probe=self.spec.measure.cpu_probe
            ),
            launch_mismatches=launch_mismatches,
        )

    async def measure_plan(
        self,
        client: LoadClient,
        plan: PointPlan,
        server: LaunchedServer,
        server_row_id: int,
        repeats: list[int],
        *,
        warmup: bool,
        link: WindowLink | None = None,
    ) -> None:
        """Measure and store `repeats` of `plan`; `link`: the comparison they serve (bench.pairing)."""
        if not repeats:
            return
        prompts = build_prompts(plan.workload, plan.num_prompts, self.vocab_size)
        after_start = warmup and server_row_id not in self.warmed_servers
        if after_start:
            self.warmed_servers.add(server_row_id)
        settings = self.window_settings(
            plan,
            warmup=warmup,
            after_start=after_start,
            launch_mismatches=server.mismatches,
            server_pid=server.pid,
        )
        t_point = time.perf_counter()
        window = 0.0
        async for sample, win in measure_windows(client, prompts, repeats, settings):
            self._store(plan, sample, server_row_id, server, win, link)
            if sample.metrics is not None:
                window += sample.metrics.duration_s
                self.drift.measured(plan, server_row_id)
        if warmup:
            self.progress.points_measured += 1
        self.progress.overhead_s += max(time.perf_counter() - t_point - window, 0.0)

    def point_floor(self, plan: PointPlan, server: LaunchedServer, run_gpu: str | None) -> float | None:
        """The floor of `plan` on `server` (bench/floor.py), or None; why none goes to the run once."""
        cfg = plan.server
        gpu = floor.gpu_for_floor(server.server_info, run_gpu)
        result, why = floor.point_floor(
            self.model_config,
            gpu,
            tp=cfg.tp,
            batch=plan.batch_size,
            input_len=plan.workload.input_len,
            output_len=plan.workload.output_len,
            steps=cfg.steps,
            draft_tokens=cfg.draft_tokens,
            kv_bytes=floor.kv_cache_bytes(dict(cfg.args)),
            # Balanced routing touches the experts in expectation; any other routing at least top-k of them.
            routing="balanced" if server.expert_routing == "balanced" else "minimum",
        )
        if why is not None:
            self.floor_note = why
        return None if result is None else result.ms

    def _store(
        self,
        plan: PointPlan,
        sample: SampleResult,
        server_row_id: int,
        server: LaunchedServer,
        window: Window,
        link: WindowLink | None = None,
    ) -> None:
        """One repeat as one transaction, idempotent on (point, repeat) for retries after a lost commit."""
        order = self.progress.next_order()

        def write(s: Session) -> None:
            run = s.get_one(Run, self.run_id)
            point = store.get_or_create_point(
                s,
                run,
                plan,
                server_row_id,
                expert_routing=server.expert_routing,
                # This part's GPU: a run may grow across hosts.
                step_floor_ms=self.point_floor(plan, server, self.parts.host.gpu_name),
                gpu=(self.parts.host.gpu_name, self.parts.host.gpu_count),
            )
            if self.floor_note is not None and run.provenance.get("floor_note") != self.floor_note:
                run.provenance = {**run.provenance, "floor_note": self.floor_note}
            store.store_sample(
                s,
                point,
                sample,
                spec_mode_resolved=server.spec_mode_resolved,
                window=window,
                order_index=order,
                invocation=self.progress.invocation,
                server_instance_id=server_row_id,
                link=link,
            )

        self.write(write, f"storing {plan.key()} repeat {sample.repeat}")
        if sample.status != "failed":
            self.done.setdefault(plan.key(), set()).add(sample.repeat)


def run_provenance(
    spec: SweepSpec, server_info: dict[str, Any] | None = None, gpus: list[int] | None = None
) -> dict[str, Any]:
    prov = collect_provenance(model_path=spec.model, server_info=server_info, gpus=gpus)
    if spec.server.backend == "sim":
        prov["simulated"] = True
    pin = cpu_affinity.runner_pin()
    if pin is not None:  # `--client-cpus`: where the client ran, to compare runs pinned and not ("8-15")
        prov["client_cpus"] = cpu_affinity.format_cpu_list(pin.cpus)
    return prov
