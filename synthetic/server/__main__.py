"""`python -m synthetic.server <SGLang launch flags>`: flags (exit 2), arguments (a refusal exits 1), HTTP up
answering 503, then after SPECBENCH_SIM_STARTUP_S and a warm-up "The server is fired up and ready to roll!".
"""

import asyncio
import gc
import os
import signal
import sys
from collections.abc import Sequence

from aiohttp import web

from synthetic.server import gpu_ledger, logs, wrong
from synthetic.server.args import MODEL_ARCHITECTURE, ServerArgsError, parse_flags, resolve
from synthetic.server.config import SimConfig, SimConfigError
from synthetic.server.release import release
from synthetic.server.routes import build_app, warmup
from synthetic.server.server import SimServer
from synthetic.server.text import TokenizerLoadError

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
    rel = release(cfg.version)
    if rel.routing_switches and cfg.simulate_uniform_experts and cfg.simulate_round_robin_experts:
        # SGLang raises this in select_experts at the first MoE forward (the warm-up), and the server dies.
        names = "SGLANG_SIMULATE_UNIFORM_EXPERTS and SGLANG_SIMULATE_ROUND_ROBIN_EXPERTS"
        print(f"ValueError: {names} are mutually exclusive", file=sys.stderr)
        return 1
    ns = parse_flags(rel, flags)
    logs.setup(ns.log_level)
    warnings: list[str] = []
    try:
        resolved = resolve(ns, cfg, rel, warnings)
    except ServerArgsError as exc:
        for line in warnings:
            logs.launch.warning(line)
        _traceback("server_args.py", "__post_init__", exc)
        return 1
    for line in warnings:
        logs.launch.warning(line)
    logs.launch.info(f"server_args={resolved.args.dump(rel)}")
    try:
        server = SimServer(resolved, cfg, rel)
    except TokenizerLoadError as exc:
        _traceback("utils/hf_transformers_utils.py", "get_tokenizer", exc)
        return 1
    try:
        return asyncio.run(_serve(server))
    except KeyboardInterrupt:
        return 0


def _traceback(path: str, function: str, exc: Exception) -> None:
    logs.plain("Traceback (most recent call last):")
    logs.plain(f'  File "sglang/srt/{path}", in {function}')
    logs.plain(str(exc))


async def _serve(server: SimServer) -> int:
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
    host, port = server.args.host, server.args.port
    try:
        await web.TCPSite(runner, host, port, reuse_address=True).start()
    except OSError as exc:
        where = f"({host!r}, {port})"
        logs.plain(
            f"ERROR:    [Errno {exc.errno}] error while attempting to bind on address {where}: {exc.strerror}"
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
    logs.plain(f"INFO:     Uvicorn running on http://{host}:{port} (Press CTRL+C to quit)")
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
    logs.scheduler.error(f"{what} hit an exception: {task.exception()!r}")
    return True


async def _start_up(server: SimServer) -> None:
    resolved, args, cfg = server.resolved, server.args, server.cfg
    log = logs.scheduler.info
    if ledger := os.environ.get(gpu_ledger.LEDGER_ENV):  # several stand-ins share one GPU (sim.shared_gpu)
        gpu_ledger.claim(ledger, args.mem_fraction_static * cfg.gpu_memory_gb, cfg.gpu_memory_gb)
    weights = cfg.weights_gb / args.tp_size
    log(f"Load weight begin. avail mem={cfg.gpu_memory_gb:.2f} GB")
    log(
        f"Load weight end. type={MODEL_ARCHITECTURE}, dtype=torch.bfloat16, "
        f"avail mem={cfg.gpu_memory_gb - weights:.2f} GB, mem usage={weights:.2f} GB."
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
        # 0.5.12's warm-up prefill works (its draft extend is routed right); the first decode step's kills it.
        await warmup(server, max_new_tokens=1)
        wrong.die_of_draft_extend_v2()
    await warmup(server)
    # Full collections over start-up's ~36k objects held the loop 15-60 ms; frozen, they are never scanned.
    gc.collect()
    gc.freeze()
    server.ready = True
    logs.launch.info("The server is fired up and ready to roll!")


if __name__ == "__main__":
    sys.exit(main())
