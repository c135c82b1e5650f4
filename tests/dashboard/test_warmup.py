"""The server renders every page once as it starts, and reports healthy only after that; it sends without
waiting for the browser's ACKs."""

from __future__ import annotations

import asyncio
import socket
import subprocess
import threading
import time
import urllib.error
import urllib.request
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import pytest

from bench.host.processes import free_port
from dashboard import serve, warmup
from runners.commands.dashboard import streamlit_argv, streamlit_env
from tests.fixtures.dashboard import grid_copy, stop_server, wait_healthy

pytestmark = pytest.mark.slow


def test_server_address_follows_the_command_line() -> None:
    argv = ["run", "app.py", "--server.port", "8600", "--server.address", "0.0.0.0"]
    assert warmup.server_address(argv) == ("127.0.0.1", 8600, "")
    assert warmup.server_address(["run", "app.py", "--server.baseUrlPath", "/sb/"]) == (
        "127.0.0.1",
        8501,
        "/sb",
    )
    assert warmup.server_address(["--server.address", "10.0.0.5", "--server.port", "9"])[:2] == (
        "10.0.0.5",
        9,
    )


def _health(port: int) -> tuple[int, str]:
    try:
        with urllib.request.urlopen(f"http://127.0.0.1:{port}/_stcore/health", timeout=5) as r:
            return r.status, r.read().decode()
    except urllib.error.HTTPError as e:
        return e.code, e.read().decode()
    except OSError:
        return 0, ""


def _start(url: str, port: int, log: Path, **env: str) -> subprocess.Popen[bytes]:
    cmd = streamlit_argv(port, "127.0.0.1", True)
    with log.open("wb") as out:
        return subprocess.Popen(cmd, env={**streamlit_env(url), **env}, stdout=out, stderr=subprocess.STDOUT)


def test_health_answers_after_every_page_rendered(tmp_path: Path) -> None:
    url = grid_copy(tmp_path, "grid.db")  # runs, pairs, intervals: every page has something to compute
    port = free_port()
    log = tmp_path / "server.log"
    proc = _start(url, port, log, PYTHONUNBUFFERED="1")  # the log in the order things happened
    seen: list[tuple[int, str]] = []
    try:
        deadline = time.monotonic() + 120
        while time.monotonic() < deadline and proc.poll() is None:
            status = _health(port)
            if not seen or seen[-1] != status:
                seen.append(status)
            if status[0] == 200:
                break
            time.sleep(0.05)
    finally:
        stop_server(proc)
    assert seen[-1] == (200, "ok"), seen
    assert (503, "warming up") in seen, seen  # listening, but not ready while the pages render
    # A page that failed or hung is logged; none did before the stop. On a loaded host the gate (GATE_S) can open
    # before the last page is warm, and stopping the server then cuts that warm-up short: not a page's failure.
    before_stop = log.read_text().partition("Stopping...")[0]
    assert "warm-up" not in before_stop, before_stop


def test_render_runs_one_page_like_a_browser(tmp_path: Path) -> None:
    url = grid_copy(tmp_path, "grid.db")
    port = free_port()
    proc = _start(url, port, tmp_path / "server.log", **{warmup.ENV: "0"})
    try:
        wait_healthy(port, proc)  # warm-up off: ready as soon as Streamlit is
        ws = f"ws://127.0.0.1:{port}/_stcore/stream"
        assert asyncio.run(warmup.render(ws, "sweep")) == "FINISHED_SUCCESSFULLY"
    finally:
        stop_server(proc)


def _health_of(state: str) -> tuple[bool, str]:
    from streamlit.runtime.runtime import Runtime, RuntimeState

    check = Runtime.__dict__["is_ready_for_browser_connection"].fget
    return asyncio.run(check(SimpleNamespace(_state=RuntimeState[state])))


def test_the_health_gate_waits_for_the_warm_up_not_forever(monkeypatch: pytest.MonkeyPatch) -> None:
    from streamlit.runtime.runtime import Runtime

    # Restored after the test: the gate patches Streamlit's class.
    monkeypatch.setattr(
        Runtime, "is_ready_for_browser_connection", Runtime.__dict__["is_ready_for_browser_connection"]
    )
    ready = threading.Event()
    warmup.gate_health(ready)
    assert _health_of("NO_SESSIONS_CONNECTED") == (False, "warming up")
    assert _health_of("STOPPING")[0] is False  # Streamlit's own answers pass through
    ready.set()
    assert _health_of("NO_SESSIONS_CONNECTED") == (True, "ok")
    warmup.gate_health(threading.Event(), gate_s=0.0)  # a warm-up that never ends: the gate opens anyway
    assert _health_of("NO_SESSIONS_CONNECTED") == (True, "ok")


def test_warm_up_can_be_turned_off(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv(warmup.ENV, "0")
    assert warmup.start(["run", "app.py", "--server.port", str(free_port())]).is_set()  # nothing to wait for
    monkeypatch.setenv(warmup.ENV, "1")
    assert warmup.enabled()


def test_connections_send_without_waiting_for_acks(monkeypatch: pytest.MonkeyPatch) -> None:
    """Each accepted connection has TCP_NODELAY (dashboard.serve.tcp_nodelay): without it a response's body
    waited ~40 ms for the browser's delayed ACK of its headers."""
    from streamlit.web.server.starlette import starlette_server as server

    monkeypatch.setattr(server, "_bind_socket", server._bind_socket)  # restored after the test
    serve.tcp_nodelay()
    sock = server._bind_socket("127.0.0.1", 0, 8)

    async def accepted_nodelay() -> int:
        loop = asyncio.get_running_loop()
        got: asyncio.Future[int] = loop.create_future()

        class Accepted(asyncio.Protocol):
            def connection_made(self, transport: asyncio.BaseTransport) -> None:
                conn = transport.get_extra_info("socket")
                got.set_result(conn.getsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY))

        srv = await loop.create_server(Accepted, sock=sock)
        _, writer = await asyncio.open_connection(*sock.getsockname()[:2])
        try:
            return await asyncio.wait_for(got, 10)
        finally:
            writer.close()
            srv.close()

    assert asyncio.run(accepted_nodelay())


def test_pages_name_the_server_base_in_their_html() -> None:
    """dashboard.serve.with_base_hint: Streamlit's HTML, asked for by a browser at a page's address, carries the
    hint that spares the frontend a 404 and a back-off (its guess /trends/_stcore/health); other responses and
    requests pass unchanged."""
    seen: list[dict[str, object]] = []

    async def app(scope: dict[str, Any], receive: Any, send: Any) -> None:
        seen.append(scope)
        html = scope["path"] != "/static/x.js"
        kind = b"text/html; charset=utf-8" if html else b"text/javascript"
        await send(
            {
                "type": "http.response.start",
                "status": 200,
                "headers": [(b"content-type", kind), (b"content-length", b"24")],
            }
        )
        await send({"type": "http.response.body", "body": b"<html><script>x", "more_body": True})
        await send({"type": "http.response.body", "body": b"</script>"})

    def get(path: str, accept: bytes) -> list[dict[str, Any]]:
        sent: list[dict[str, Any]] = []

        async def send(msg: dict[str, Any]) -> None:
            sent.append(msg)

        headers = [(b"accept", accept), (b"accept-encoding", b"gzip")]
        hinted = serve.with_base_hint(app, ["trends"])
        asyncio.run(hinted({"type": "http", "method": "GET", "path": path, "headers": headers}, None, send))
        return sent

    start, body = get("/trends", b"text/html,application/xhtml+xml")
    page = body["body"]
    assert page.startswith(b'<html><script>(() => { const pages = ["trends"]') and page.endswith(
        b"<script>x</script>"
    )
    assert dict(start["headers"])[b"content-length"] == str(len(page)).encode()
    assert b"accept-encoding" not in dict(seen[-1]["headers"])  # asked for uncompressed, to be edited
    chunks = get("/static/x.js", b"*/*")
    assert [m.get("body") for m in chunks[1:]] == [b"<html><script>x", b"</script>"]
    assert b"accept-encoding" in dict(seen[-1]["headers"])


def test_bundles_are_served_from_memory(tmp_path: Path) -> None:
    """dashboard.serve.with_static_cache: a file of the bundle folder is answered in one message with the
    headers Streamlit gives it; any other path (a page, a file outside the folder) goes to the app."""
    (tmp_path / "js").mkdir()
    (tmp_path / "js" / "a.js").write_text("export {}")
    passed: list[str] = []

    async def app(scope: dict[str, Any], receive: Any, send: Any) -> None:
        passed.append(scope["path"])

    def get(path: str) -> list[dict[str, Any]]:
        sent: list[dict[str, Any]] = []

        async def send(msg: dict[str, Any]) -> None:
            sent.append(msg)

        cached = serve.with_static_cache(app, tmp_path, "/static/")
        asyncio.run(cached({"type": "http", "method": "GET", "path": path, "headers": []}, None, send))
        return sent

    start, body = get("/static/js/a.js")
    headers = dict(start["headers"])
    assert body["body"] == b"export {}" and headers[b"content-length"] == b"9"
    assert b"javascript" in headers[b"content-type"] and b"immutable" in headers[b"cache-control"]
    assert get("/static/js/../a.js") == get("/trends") == [] and passed == ["/static/js/../a.js", "/trends"]
