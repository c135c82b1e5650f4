"""`/start_profile` and `/stop_profile`: a torch.profiler trace drawn from the cost model.

Request bodies, replies, the stop rule and file names are SGLang 0.5.13's (ProfileReqInput, its scheduler's
profiler manager): `num_steps = n` stops when the n-th step begins (n - 1 whole steps recorded), otherwise
`/stop_profile` does; every TP rank gets the same `[<prefix>-]<profile_id>-TP-<rank>.trace.json.gz` in
`output_dir`, else $SGLANG_TORCH_PROFILER_DIR, else /tmp. Categories are SGLang's: `kernel` (one correlation
id per CUDA-graph replay) and, with CPU activity, `user_annotation`, `gpu_user_annotation` and `cpu_op`.
Without overlap CPU and GPU work alternate; with it the CPU prepares step k+1 while the GPU runs step k. At
TP > 1 the verify's `tp_comm_ms x (tp - 1)` is drawn as all-reduce kernels named as 0.5.13.post1 on an H200.
"""

from __future__ import annotations

import gzip
import itertools
import json
import os
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from aiohttp import web

from bench.profile.trace import STAND_IN_DEVICE
from synthetic.server import logs
from synthetic.server.server import SimServer

CPU_PROFILING_SLOWDOWN = 1.5
GPU_PID = 0
KERNEL_STREAM = 7
# Kernel mix per phase: (name, share of the phase's GPU time).
KERNELS = {
    "draft": [("flash_fwd_splitkv_mla_kernel", 0.4), ("sm90_xmma_gemm_bf16bf16_bf16f32", 0.6)],
    "target_verify": [
        ("flash_fwd_splitkv_mla_kernel", 0.3),
        ("fused_moe_kernel", 0.5),
        ("sm90_xmma_gemm_bf16bf16_bf16f32", 0.2),
    ],
    # The tree verification (sgl-kernel verify_tree_greedy) reads the verify's logits; it runs eagerly after
    # the verify graph in SGLang and names the verify on a GPU-only trace (bench/profile/summary.py).
    "draft_extend": [
        ("void VerifyTreeGreedy<int, long>(int*, int*, long*, long*, int, int, int)", 0.02),
        ("flash_fwd_splitkv_mla_kernel", 0.48),
        ("sm90_xmma_gemm_bf16bf16_bf16f32", 0.5),
    ],
    "prefill": [("flash_fwd_mla_prefill_kernel", 0.6), ("fused_moe_kernel", 0.4)],
}
# Kernels per graph replay: the target model's layers, the draft's steps (see _kernels).
GRAPH_REPEAT = {"target_verify": 8, "draft": 3}
# SGLang 0.5.13.post1's all-reduce for DeepSeek-V3 at TP > 1 on SM90: FlashInfer's TensorRT-LLM fusion
# (all-reduce + residual add + RMSNorm), enabled by server_args.py (bench.profile.collectives).
ALL_REDUCE_KERNEL = (
    "void flashinfer::trtllm_allreduce_fusion::allreduce_fusion_kernel_oneshot_lamport<"
    "(flashinfer::trtllm_allreduce_fusion::AllReduceFusionPattern)1, __nv_bfloat16, 8, true, true>"
    "(flashinfer::trtllm_allreduce_fusion::AllReduceFusionParams<__nv_bfloat16>)"
)
ALL_REDUCES_PER_LAYER = 2
# Where a step's CPU time goes: scheduling, then the annotated forwards, then result processing.
CPU_SHARES = (("Scheduler.get_next_batch_to_run", 0.45), ("forward", 0.45), ("process_batch_result", 0.1))


@dataclass
class _Session:
    output_dir: Path
    activities: list[str]
    profile_id: str
    prefix: str
    target_ct: int | None
    steps: list[tuple[str, int, int]] = field(default_factory=list)  # (kind, batch, uncached tokens)
    started_wall_us: float = field(default_factory=lambda: time.time() * 1e6)


class SimProfiler:
    def __init__(self, server: SimServer) -> None:
        self.s = server
        self.forward_ct = 0
        self.session: _Session | None = None

    # The engine calls this at the top of every scheduler step, like Scheduler.run_batch.
    def on_step(self, kind: str, batch: int, tokens: int) -> None:
        self.forward_ct += 1
        sess = self.session
        if sess is None:
            return
        if sess.target_ct is not None and sess.target_ct <= self.forward_ct:
            self.stop()
            return
        sess.steps.append((kind, batch, tokens))

    def start(self, body: dict[str, Any]) -> str | None:
        """Start a session; the error message SGLang would raise, or None."""
        if self.session is not None:
            return "Profiling is already in progress. Call /stop_profile first."
        output_dir = body.get("output_dir") or os.environ.get("SGLANG_TORCH_PROFILER_DIR", "/tmp")
        activities = body.get("activities") or ["CPU", "GPU"]
        num_steps = body.get("num_steps")
        self.session = _Session(
            output_dir=Path(str(output_dir)).expanduser(),
            activities=[str(a) for a in activities],
            profile_id=str(time.time()),
            prefix=str(body.get("profile_prefix") or ""),
            target_ct=self.forward_ct + int(num_steps) if num_steps else None,
        )
        logs.scheduler.info(
            f"Profiling starts. Traces will be saved to: {self.session.output_dir} "
            f"(with profile id: {self.session.profile_id})"
        )
        return None

    def stop(self) -> str | None:
        sess = self.session
        if sess is None:
            return "Profiling is not in progress. Call /start_profile first."
        self.session = None
        sess.output_dir.mkdir(parents=True, exist_ok=True)
        trace = build_trace(self.s, sess)
        stage = f"{sess.prefix}-" if sess.prefix else ""
        blob = gzip.compress(json.dumps(trace).encode(), compresslevel=6)
        for rank in range(self.s.args.tp_size):
            path = sess.output_dir / f"{stage}{sess.profile_id}-TP-{rank}.trace.json.gz"
            tmp = path.with_name(path.name + ".part")
            tmp.write_bytes(blob)
            tmp.replace(path)  # a poller never sees half a file
        logs.scheduler.info(f"Profiling done. Traces are saved to: {sess.output_dir}")
        return None


def build_trace(server: SimServer, sess: _Session) -> dict[str, Any]:
    """Chrome trace events for the recorded steps, laid out on the modelled time axis (microseconds)."""
    perf = server.perf
    overlap = server.resolved.mode.overlap
    scale = perf.scale or 1.0  # instant mode has no time axis of its own; draw the unscaled model
    cpu_on = "CPU" in sess.activities
    gpu_on = "GPU" in sess.activities
    cpu_slow = CPU_PROFILING_SLOWDOWN if cpu_on else 1.0
    sync = perf.params.overlap_sync_ms if overlap else 0.0
    events: list[dict[str, Any]] = []
    pid, tid = os.getpid(), 1
    origin = sess.started_wall_us
    cpu_free = gpu_free = origin
    prev_gpu_start = origin
    corr = itertools.count(1)
    # Verify and the multi-step draft replay CUDA graphs; 0.5.12-0.5.15 have no FlashMLA draft-extend graph.
    graphed = {"target_verify", "draft"} | (set() if perf.draft_extend_without_graph else {"draft_extend"})
    for kind, batch, tokens in sess.steps:
        gpu_phases: list[tuple[str, str | None, float]]
        comm_ms = 0.0
        if kind == "decode":
            split = perf.decode_split(batch)
            gpu_phases = [
                ("draft", None, split.draft_ms),
                ("target_verify", f"step[TARGET_VERIFY bs={batch}]", split.target_ms),
                ("draft_extend", f"step[DRAFT_EXTEND_V2 bs={batch}]", split.draft_extend_ms),
            ]
            cpu_ms = split.cpu_ms
            comm_ms = split.comm_ms
        else:
            p = perf.params
            gpu = p.prefill_base_ms + p.prefill_per_token_ms * tokens / perf.tp_size
            draft = gpu * p.prefill_draft_factor if perf.steps > 0 else 0.0
            step = f"step[EXTEND bs={batch} toks={tokens}]"
            gpu_phases = [("prefill", step, gpu)]
            if draft:
                gpu_phases.append(("prefill", step, draft))
            cpu_ms = p.cpu_base_ms + p.cpu_per_req_ms * batch
        cpu_us = cpu_ms * cpu_slow * scale * 1000.0
        gpu_us = sum(ms for _, _, ms in gpu_phases) * scale * 1000.0
        # Without overlap the CPU waits for the previous step's results; with it, only for its launch.
        cpu_start = max(cpu_free, prev_gpu_start) if overlap else max(cpu_free, gpu_free)
        cpu_end = cpu_start + cpu_us
        gpu_start = max(gpu_free, cpu_end) + sync * scale * 1000.0
        if cpu_on:
            events += _cpu_events(cpu_start, cpu_us, [n for _, n, _ in gpu_phases if n], pid, tid)
        t = gpu_start
        for phase, name, ms in gpu_phases:
            dur = ms * scale * 1000.0
            if gpu_on:
                graph = phase in graphed
                comm_us = comm_ms * scale * 1000.0 if phase == "target_verify" else 0.0
                events += _kernels(phase, t, dur, corr, graph, comm_us)
                # Kineto projects a record_function range onto the GPU only when CPU activity is on.
                if name and cpu_on:
                    events.append(_x("gpu_user_annotation", name, t, dur, GPU_PID, KERNEL_STREAM))
            t += dur
        prev_gpu_start, gpu_free, cpu_free = gpu_start, gpu_start + gpu_us, cpu_end
    return {
        "schemaVersion": 1,
        "deviceProperties": [{"id": 0, "name": STAND_IN_DEVICE}],
        "traceEvents": events,
        "traceName": f"{sess.profile_id}",
        "displayTimeUnit": "ms",
        "baseTimeNanoseconds": int(origin * 1000),
    }


def _x(cat: str, name: str, ts: float, dur: float, pid: int, tid: int, **args: Any) -> dict[str, Any]:
    return {"ph": "X", "cat": cat, "name": name, "pid": pid, "tid": tid, "ts": ts, "dur": dur, "args": args}


def _kernels(
    phase: str, start: float, dur: float, corr: itertools.count[int], graph: bool, comm: float
) -> list[dict[str, Any]]:
    """The phase's kernels back to back, one correlation id per CUDA-graph replay or per eager kernel; `comm`
    (us, part of `dur`) is drawn as all-reduces after each repeat's (layer's) first kernel and its last."""
    graph_id, repeat = (next(corr), GRAPH_REPEAT.get(phase, 1)) if graph else (None, 1)
    compute = max(dur - comm, 0.0)
    mix = KERNELS[phase]
    closing = [0, len(mix) - 1] if comm > 0 else []
    kernels: list[tuple[str, float]] = []
    for _ in range(repeat):
        for i, (name, share) in enumerate(mix):
            kernels.append((name, compute * share / repeat))
            kernels += [(ALL_REDUCE_KERNEL, comm / (ALL_REDUCES_PER_LAYER * repeat))] * closing.count(i)
    # Each kernel ends where the next starts and the last exactly at start + dur, whatever the rounding of
    # large absolute times: the phases tile the time axis as the cost model says.
    out, t, done = [], start, 0.0
    for n, (name, d) in enumerate(kernels):
        done += d
        end = start + dur if n == len(kernels) - 1 else start + done
        c = graph_id if graph_id is not None else next(corr)
        args = {"stream": KERNEL_STREAM, "device": 0, "correlation": c}
        out.append(_x("kernel", name, t, end - t, GPU_PID, KERNEL_STREAM, **args))
        t = end
    return out


def _cpu_events(start: float, dur: float, steps: list[str], pid: int, tid: int) -> list[dict[str, Any]]:
    out, t = [], start
    for name, share in CPU_SHARES:
        d = dur * share
        if name == "forward":
            for step in steps:  # the annotated forwards split the launch share evenly
                out.append(_x("user_annotation", step, t, d / len(steps), pid, tid))
                t += d / len(steps)
            continue
        out.append(_x("cpu_op", name, t, d, pid, tid))
        t += d
    return out


def register(app: web.Application, server: SimServer) -> SimProfiler:
    """Mount the two routes (GET and POST, as SGLang does) and attach the step hook to the engine."""
    prof = SimProfiler(server)
    server.engine.step_observer = prof.on_step

    async def start_profile(request: web.Request) -> web.Response:
        body: Any = {}
        if request.can_read_body:
            try:
                body = await request.json()
            except ValueError:
                return web.Response(status=400, text="Invalid JSON body\n")
        if not isinstance(body, dict):
            return web.Response(status=422, text="Body must be a JSON object\n")
        num_steps = body.get("num_steps")
        if num_steps is not None and (not isinstance(num_steps, int) or isinstance(num_steps, bool)):
            return web.Response(status=422, text="num_steps must be an integer\n")
        err = prof.start(body)
        if err:  # SGLang raises RuntimeError in the tokenizer manager: a 500
            return web.Response(status=500, text=f"Internal Server Error: {err}\n")
        return web.Response(status=200, text="Start profiling.\n")

    async def stop_profile(request: web.Request) -> web.Response:
        err = prof.stop()
        if err:
            return web.Response(status=500, text=f"Internal Server Error: {err}\n")
        return web.Response(status=200, text="Stop profiling. This will take some time.\n")

    for method in ("GET", "POST"):
        app.router.add_route(method, "/start_profile", start_profile)
        app.router.add_route(method, "/stop_profile", stop_profile)
    return prof
