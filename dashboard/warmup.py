"""Every page rendered once as the server starts, before its health check says it is ready: otherwise a
page's first visitor pays for its reads, its analysis and the first-use costs of pandas, Altair and Streamlit.
A client of the server's own opens one websocket session per page, sends a rerun naming it, and waits for the
script to finish; the reads stay in `dashboard.services.data`'s caches until the data changes.

The health check (`/_stcore/health`) answers 503 "warming up" until this is done, `GATE_S` at most; past that
the warm-up goes on behind a ready server. A page that fails or hangs is logged and skipped.
`SPECBENCH_DASHBOARD_WARMUP=0` turns it off."""

import asyncio
import itertools
import logging
import os
import threading
import time
from collections.abc import Sequence

from dashboard.navigation import PAGES

ENV = "SPECBENCH_DASHBOARD_WARMUP"
GATE_S = 30.0  # the longest the health check waits for the warm-up
WARM_TIMEOUT_S = 300.0  # all pages; past it the rest computes on first visit
PAGE_TIMEOUT_S = 60.0
CONNECT_TIMEOUT_S = 60.0  # for the server to start listening

log = logging.getLogger("specbench.dashboard.warmup")


def enabled() -> bool:
    return os.environ.get(ENV, "1").strip().lower() not in ("0", "false", "no", "off")


def server_address(argv: Sequence[str]) -> tuple[str, int, str]:
    """(host, port, base path) a client of the server started with this `streamlit run` argv connects to."""
    opts = {k: v for k, v in itertools.pairwise(argv) if k.startswith("--server.")}
    address = opts.get("--server.address") or "127.0.0.1"
    host = "127.0.0.1" if address in ("0.0.0.0", "localhost") else "::1" if address == "::" else address
    base = opts.get("--server.baseUrlPath", "").strip("/")
    return host, int(opts.get("--server.port", "8501")), f"/{base}" if base else ""


async def render(ws_url: str, page: str) -> str:
    """Run one page in a new session of the server at `ws_url`; how its script finished."""
    import aiohttp
    from streamlit.proto.BackMsg_pb2 import BackMsg
    from streamlit.proto.ClientState_pb2 import ClientState
    from streamlit.proto.ForwardMsg_pb2 import ForwardMsg

    timeout = aiohttp.ClientTimeout(total=PAGE_TIMEOUT_S)
    async with (
        aiohttp.ClientSession(timeout=timeout) as http,
        http.ws_connect(ws_url, protocols=("streamlit",), max_msg_size=0) as ws,
    ):
        rerun = BackMsg(rerun_script=ClientState(query_string="", page_name=page))
        await ws.send_bytes(rerun.SerializeToString())
        async for frame in ws:
            if frame.type != aiohttp.WSMsgType.BINARY:
                continue
            msg = ForwardMsg()
            msg.ParseFromString(frame.data)
            if msg.WhichOneof("type") != "script_finished":
                continue
            status = ForwardMsg.ScriptFinishedStatus.Name(msg.script_finished)
            if status != "FINISHED_EARLY_FOR_RERUN":  # a page that reruns itself finishes on the next run
                return status
    return "connection closed"


async def _wait_listening(host: str, port: int) -> None:
    deadline = time.monotonic() + CONNECT_TIMEOUT_S
    while True:
        try:
            _, writer = await asyncio.open_connection(host, port)
            writer.close()
            return
        except OSError:
            if time.monotonic() > deadline:
                raise
            await asyncio.sleep(0.1)


async def warm(host: str, port: int, base: str, pages: Sequence[str]) -> None:
    await _wait_listening(host, port)
    netloc = f"[{host}]" if ":" in host else host
    ws_url = f"ws://{netloc}:{port}{base}/_stcore/stream"
    t0 = time.perf_counter()
    for page in pages:
        try:
            status = await render(ws_url, page)
        except Exception as e:  # a page that cannot render here renders (and fails) for its visitor instead
            status = f"{type(e).__name__}: {e}"
        if status != "FINISHED_SUCCESSFULLY":
            log.warning("warm-up of page %r: %s", page or "overview", status)
    log.info("warmed %d pages in %.1f s", len(pages), time.perf_counter() - t0)


def start(argv: Sequence[str]) -> threading.Event:
    """Warm every page in the background once the server listens (unless turned off); the event is set when
    that is done, failed or timed out (`gate_health` waits for it, `GATE_S` at most)."""
    done = threading.Event()
    if not enabled():
        done.set()
        return done
    host, port, base = server_address(argv)
    pages = [p.url_path for p in PAGES]

    def run() -> None:
        try:
            asyncio.run(asyncio.wait_for(warm(host, port, base, pages), WARM_TIMEOUT_S))
        except Exception as e:  # never keep the server from reporting ready
            log.warning("warm-up stopped: %s: %s", type(e).__name__, e)
        finally:
            done.set()

    threading.Thread(target=run, name="specbench-warmup", daemon=True).start()
    return done


def gate_health(ready: threading.Event, gate_s: float = GATE_S) -> None:
    """Streamlit's health check answers 503 "warming up" until `ready` is set, `gate_s` at most. It patches an
    internal property: if a Streamlit release renames it, the server reports ready at once."""
    try:
        from streamlit.runtime.runtime import Runtime
    except ImportError:  # pragma: no cover - depends on the Streamlit release
        return
    prop = Runtime.__dict__.get("is_ready_for_browser_connection")
    if not isinstance(prop, property) or prop.fget is None:
        return
    original = prop.fget
    deadline = time.monotonic() + gate_s

    async def gated(self: Runtime) -> tuple[bool, str]:
        ok, message = await original(self)
        warming = not ready.is_set() and time.monotonic() < deadline
        return (False, "warming up") if ok and warming else (ok, message)

    Runtime.is_ready_for_browser_connection = property(gated)  # type: ignore[method-assign,assignment]
