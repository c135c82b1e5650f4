"""`python -m synthetic.server <SGLang launch flags>`: start the stand-in server.

Launch order mirrors SGLang's: flags are parsed (argparse errors exit 2), server arguments are
post-processed (warnings logged; a refused combination exits 1 with the error in the log), the
resolved `server_args=ServerArgs(...)` is printed, the HTTP server comes up answering 503, and after
SPECBENCH_SIM_STARTUP_S plus a self-sent warmup generation the server logs
"The server is fired up and ready to roll!". SIGTERM or SIGINT shut it down within about a second.
Emulating sglang 0.5.12 with FlashMLA and spec v2, the warm-up dies instead, as SGLang's did on a GPU
(synthetic/server/crashes.py).
"""

from __future__ import annotations

import asyncio
import gc
import os
import signal
import sys
from collections.abc import Sequence

from aiohttp import web

from synthetic.server import crashes, gpu_ledger, logs
from synthetic.server.app import build_app
from synthetic.server.args import MODEL_ARCHITECTURE, Resolved, ServerArgsError, parse_flags, resolve
from synthetic.server.config import SimConfig, SimConfigError
from synthetic.server.generate import warmup
from synthetic.server.server import SimServer
from synthetic.server.text import TokenizerLoadError
from synthetic.server.versions import VersionTraits, traits_for

SHUTDOWN_GRACE_S = 0.3
# If cleanup ever hangs (a stuck client), exit anyway: the launcher expects a prompt exit.
HARD_EXIT_S = 1.0


def main(argv: Sequence[str] | None = None) -> int:
    flags = list(sys.argv[1:] if argv is None else argv)
    try:
        cfg = SimConfig.from_env(os.environ)
    except SimConfigError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    traits = traits_for(cfg.version)
    if traits.routing_switches and cfg.simulate_uniform_experts and cfg.simulate_round_robin_experts:
        # SGLang raises this in select_experts at the first MoE forward (the warmup), and the server dies.
        print(
            "ValueError: SGLANG_SIMULATE_UNIFORM_EXPERTS and SGLANG_SIMULATE_ROUND_ROBIN_EXPERTS are mutually "
            "exclusive",
            file=sys.stderr,
        )
        return 1
    ns = parse_flags(traits, flags)
    logs.setup(ns.log_level)
    warnings: list[str] = []
    try:
        resolved = resolve(ns, cfg, traits, warnings)
    except ServerArgsError as exc:
        for line in warnings:
            logs.launch.warning(line)
        logs.plain("Traceback (most recent call last):")
        logs.plain('  File "sglang/srt/server_args.py", in __post_init__')
        logs.plain(str(exc))
        return 1
    for line in warnings:
        logs.launch.warning(line)
    logs.launch.info(f"server_args={resolved.args.dump(traits)}")
    try:
        return asyncio.run(_serve(resolved, cfg, traits, flags))
    except KeyboardInterrupt:
        return 0


async def _serve(resolved: Resolved, cfg: SimConfig, traits: VersionTraits, flags: list[str]) -> int:
    try:
        server = SimServer(resolved, cfg, traits, flags)
    except TokenizerLoadError as exc:
        logs.plain("Traceback (most recent call last):")
        logs.plain('  File "sglang/srt/utils/hf_transformers_utils.py", in get_tokenizer')
        logs.plain(str(exc))
        return 1
    for fault, why in server.wrong.describe().items():  # never silently wrong: the log says it too
        what = {
            "draft_extend_crash": "reproduces a known SGLang crash",
            "flashmla_draft_decode_context": "emulates a known SGLang issue on purpose",
        }.get(fault, "computes wrongly on purpose")
        logs.launch.warning(f"specbench stand-in {what} ({fault}): {why}")
    runner = web.AppRunner(
        build_app(server), access_log=None, handler_cancellation=True, shutdown_timeout=SHUTDOWN_GRACE_S
    )
    await runner.setup()
    args = resolved.args
    try:
        await web.TCPSite(runner, args.host, args.port, reuse_address=True).start()
    except OSError as exc:
        logs.plain(
            f"ERROR:    [Errno {exc.errno}] error while attempting to bind on address ({args.host!r}, {args.port}): {exc.strerror}"
        )
        await runner.cleanup()
        return 1
    loop = asyncio.get_running_loop()
    stop = asyncio.Event()
    for sig in (signal.SIGTERM, signal.SIGINT):
        loop.add_signal_handler(sig, stop.set)
    engine_task = asyncio.create_task(server.engine.run(), name="scheduler")
    startup_task = asyncio.create_task(_start_up(server), name="startup")
    stall_task = asyncio.create_task(server.stalls.run(), name="stall probe")
    logs.plain(f"INFO:     Started server process [{os.getpid()}]")
    logs.plain("INFO:     Waiting for application startup.")
    logs.plain("INFO:     Application startup complete.")
    logs.plain(f"INFO:     Uvicorn running on http://{args.host}:{args.port} (Press CTRL+C to quit)")
    stopped = asyncio.create_task(stop.wait())
    await asyncio.wait({stopped, engine_task, startup_task}, return_when=asyncio.FIRST_COMPLETED)
    if startup_task.done() and not stopped.done() and startup_task.exception() is None:
        # A clean start-up: keep serving until a signal or a scheduler failure.
        await asyncio.wait({stopped, engine_task}, return_when=asyncio.FIRST_COMPLETED)
    failed = _failed(engine_task, "Scheduler") or _failed(startup_task, "Startup")
    server.shutting_down = True
    exit_code = 1 if failed else 0
    loop.call_later(HARD_EXIT_S, os._exit, exit_code)
    logs.plain("INFO:     Shutting down")
    for task in (startup_task, engine_task, stall_task, stopped):
        task.cancel()
    await runner.cleanup()
    logs.plain("INFO:     Finished server process")
    return exit_code


def _failed(task: asyncio.Task[None], what: str) -> bool:
    if not task.done() or task.cancelled() or task.exception() is None:
        return False
    exc = task.exception()
    logs.scheduler.error(f"{what} hit an exception: {exc!r}")
    return True


async def _start_up(server: SimServer) -> None:
    resolved, args, cfg = server.resolved, server.args, server.cfg
    log = logs.scheduler.info
    ledger = os.environ.get(gpu_ledger.LEDGER_ENV)
    if ledger:  # several stand-in servers share one GPU (sim.shared_gpu)
        gpu_ledger.claim(ledger, args.mem_fraction_static * cfg.gpu_memory_gb, cfg.gpu_memory_gb)
    log(f"Load weight begin. avail mem={cfg.gpu_memory_gb:.2f} GB")
    log(
        f"Load weight end. type={MODEL_ARCHITECTURE}, dtype=torch.bfloat16, "
        f"avail mem={cfg.gpu_memory_gb - cfg.weights_gb / args.tp_size:.2f} GB, "
        f"mem usage={cfg.weights_gb / args.tp_size:.2f} GB."
    )
    for note in resolved.runtime_notes:
        logs.scheduler.warning(note)
    log(
        f"KV Cache is allocated. #tokens: {resolved.max_total_num_tokens}, KV size: {resolved.kv_cache_gb:.2f} GB"
    )
    if resolved.graph_max_bs:
        log(f"Capture cuda graph begin. This can take up to several minutes. max_bs={resolved.graph_max_bs}")
        log("Capture cuda graph end. Time elapsed: 0.00 s. mem usage=0.80 GB.")
    log(
        f"max_total_num_tokens={resolved.max_total_num_tokens}, chunked_prefill_size={args.chunked_prefill_size}, "
        f"max_prefill_tokens=16384, max_running_requests={resolved.effective_max_running_requests}, "
        f"context_len={resolved.context_len}"
    )
    if cfg.startup_s > 0:
        await asyncio.sleep(cfg.startup_s)
    if server.wrong.draft_extend_crash:
        # SGLang's warm-up as 0.5.12 runs it on FlashMLA with spec v2: the prefill works (its draft extend is
        # DRAFT_EXTEND, routed right); the first decode step's draft extend (DRAFT_EXTEND_V2) kills the server.
        await warmup(server, max_new_tokens=1)
        crashes.draft_extend_v2()
    await warmup(server)
    # The ~36k objects of start-up (aiohttp, the tokenizer, the resolved launch) live as long as the server: a
    # full collection that walks them held this loop 15-60 ms on a loaded 2-core box, mid-window, which is 10x
    # a stand-in's TTFT. Frozen, they are never scanned again; what requests allocate is still collected.
    gc.collect()
    gc.freeze()
    server.ready = True
    logs.launch.info("The server is fired up and ready to roll!")


if __name__ == "__main__":
    sys.exit(main())
