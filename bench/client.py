"""The streaming load client for SGLang's native `/generate`, built so it is never the bottleneck: one aiohttp
session and one unlimited pool per `LoadClient` (bench_serving opens a connection per request; aiohttp caps
pools at 100), and per event only a token count and two appends (`_read_stream`). What a request records, and
why TTFT counts tokens, is in `bench.metrics`."""

from __future__ import annotations

import asyncio
import re
import time
from collections import Counter
from collections.abc import Callable, Sequence
from typing import Any

import aiohttp
import orjson

from bench.results import RequestRecord
from bench.workload import Prompt

_DONE = b"data: [DONE]"
_CT_KEY = b'"completion_tokens":'
_CT_VALUE = re.compile(rb'"completion_tokens":\s*(\d+)')
_DATA = b"data:"
_SEP = b"\n\n"
_JSON_HEADERS = {"Content-Type": "application/json"}
# Errors after which sending more requests only repeats the failure (slowly, for a hung server).
_STOP_DISPATCH_ON = ("stalled", "connect timeout", "connection refused")
_ERROR_BODY_CHARS = 300  # error body kept in a record: enough for SGLang's one-line messages


class RedirectRefused(aiohttp.ClientResponseError):
    """A redirect is never followed (issue 35 §4): requests go only to the address the sweep names."""


async def _refuse_redirects(
    request: aiohttp.ClientRequest, handler: aiohttp.ClientHandlerType
) -> aiohttp.ClientResponse:
    """Session middleware: raises on a 3xx before aiohttp's redirect loop could follow it."""
    resp = await handler(request)
    if 300 <= resp.status < 400:
        resp.release()
        raise RedirectRefused(
            resp.request_info, (), status=resp.status, message="redirect not followed (the reply is not kept)"
        )
    return resp


class ServerUnavailableError(ConnectionError):
    """The server refuses connections: it is not (or no longer) running."""


class FlushError(RuntimeError):
    """`/flush_cache` never returned 200 within the allowed attempts."""


class LoadClient:
    """Async client for one SGLang server. Use as `async with LoadClient(url) as client: ...`."""

    def __init__(self, base_url: str, *, connect_timeout_s: float = 10.0, read_bufsize: int = 1 << 20):
        self.base_url = base_url.rstrip("/")
        self._connect_timeout_s = connect_timeout_s
        # A large read buffer keeps aiohttp from pausing the socket when many streams are hot at once.
        self._read_bufsize = read_bufsize
        self._session: aiohttp.ClientSession | None = None
        self._info_path = "/server_info"
        self._stop_dispatch: str | None = None
        self.server_down = False

    async def __aenter__(self) -> LoadClient:
        await self.open()
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.close()

    async def open(self) -> None:
        if self._session is None:
            connector = aiohttp.TCPConnector(limit=0, limit_per_host=0, ttl_dns_cache=None)
            self._session = aiohttp.ClientSession(
                connector=connector,
                timeout=aiohttp.ClientTimeout(total=None, sock_connect=self._connect_timeout_s),
                read_bufsize=self._read_bufsize,
                auto_decompress=False,
                middlewares=(_refuse_redirects,),
            )

    async def close(self) -> None:
        if self._session is not None:
            session, self._session = self._session, None
            await session.close()

    @property
    def session(self) -> aiohttp.ClientSession:
        if self._session is None:
            raise RuntimeError("LoadClient is not open; use `async with LoadClient(...)`")
        return self._session

    async def server_info(self, timeout_s: float = 30.0) -> dict[str, Any]:
        """GET /server_info, falling back to the deprecated /get_server_info where the first is a 404."""
        timeout = aiohttp.ClientTimeout(total=timeout_s)
        for path in dict.fromkeys((self._info_path, "/get_server_info")):
            try:
                async with self.session.get(self.base_url + path, timeout=timeout) as resp:
                    if resp.status == 404:
                        continue
                    body = await resp.read()
                    if resp.status != 200:  # the body is not SGLang's: never kept (bench/server/http.py)
                        raise RuntimeError(f"GET {path}: HTTP {resp.status} (the reply is not kept)")
                    self._info_path = path
                    return orjson.loads(body)
            except RedirectRefused as e:
                raise RuntimeError(f"GET {path}: HTTP {e.status}, {e.message}") from None
            except aiohttp.ClientConnectorError as e:
                self.server_down = True
                raise ServerUnavailableError(f"GET {path}: {e}") from None
            except (aiohttp.ClientConnectionError, TimeoutError) as e:
                raise ServerUnavailableError(f"GET {path}: {type(e).__name__}: {e}") from None
        raise RuntimeError("neither /server_info nor /get_server_info exists on this server")

    async def flush_cache(self, timeout_s: float = 60.0, retries: int = 5, backoff_s: float = 0.5) -> int:
        """POST /flush_cache until 200 (a busy 400 backs off, doubling to 8 s, `retries` times); attempts."""
        url = f"{self.base_url}/flush_cache"
        http_timeout = aiohttp.ClientTimeout(total=timeout_s + 30.0)
        delay = backoff_s
        last = ""
        for attempt in range(1, retries + 2):
            try:
                async with self.session.post(
                    url, params={"timeout": f"{timeout_s:g}"}, timeout=http_timeout
                ) as resp:
                    body = await resp.read()
                    if resp.status == 200:
                        return attempt
                    last = f"HTTP {resp.status}: {_snippet(body)}"
                    if resp.status != 400:
                        break  # not "busy": retrying will not help
            except RedirectRefused as e:
                last = f"HTTP {e.status}: {e.message}"
                break
            except aiohttp.ClientConnectorError as e:
                self.server_down = True
                raise ServerUnavailableError(f"POST /flush_cache: {e}") from None
            except (aiohttp.ClientConnectionError, TimeoutError) as e:
                last = f"{type(e).__name__}: {e}"
            if attempt <= retries:
                await asyncio.sleep(delay)
                delay = min(delay * 2.0, 8.0)
        raise FlushError(f"/flush_cache not accepted after {attempt} attempt(s); last answer: {last}")

    async def _generate(
        self,
        prompt: Prompt,
        temperature: float,
        timeout: aiohttp.ClientTimeout,
        request_timeout_s: float,
        index: int,
        t0: float | None,
    ) -> RequestRecord:
        rec = RequestRecord(index=index, prompt_len=prompt.prompt_len, max_new_tokens=prompt.output_len)
        params = {"max_new_tokens": prompt.output_len, "temperature": temperature, "ignore_eos": True}
        key, v = ("input_ids", prompt.input_ids) if prompt.input_ids is not None else ("text", prompt.text)
        body = orjson.dumps({"sampling_params": params, "stream": True, key: v})
        perf = time.perf_counter
        t_send = perf()
        rec.start = t_send - (t_send if t0 is None else t0)
        try:
            async with self.session.post(
                self.base_url + "/generate", data=body, headers=_JSON_HEADERS, timeout=timeout
            ) as resp:
                if resp.status != 200:
                    rec.error = f"HTTP {resp.status}: {_snippet(await resp.read())}"
                    return rec
                await _read_stream(resp.content, rec, t_send)
        except RedirectRefused as e:
            rec.error = f"HTTP {e.status}: {e.message}"
        except aiohttp.ConnectionTimeoutError as e:
            rec.error = f"connect timeout: {e}"
        except TimeoutError:
            rec.error = f"stalled: no event for {request_timeout_s:g} s"
        except aiohttp.ClientConnectorError as e:
            self.server_down = True
            rec.error = f"connection refused: {e}"
        except (aiohttp.ClientConnectionError, aiohttp.ClientPayloadError) as e:
            rec.error = f"connection lost: {type(e).__name__}: {e}"
        except aiohttp.ClientError as e:
            rec.error = f"client error: {type(e).__name__}: {e}"
        return rec

    async def generate_once(self, payload: dict[str, Any], *, timeout_s: float = 600.0) -> Any:
        """One non-streaming `/generate` (contract §3.2), parsed; RuntimeError on HTTP errors."""
        try:
            async with self.session.post(
                self.base_url + "/generate",
                data=orjson.dumps({**payload, "stream": False}),
                headers=_JSON_HEADERS,
                timeout=aiohttp.ClientTimeout(total=timeout_s, sock_connect=self._connect_timeout_s),
            ) as resp:
                body = await resp.read()
                if resp.status != 200:
                    raise RuntimeError(f"HTTP {resp.status}: {_snippet(body)}")
                return orjson.loads(body)
        except RedirectRefused as e:
            raise RuntimeError(f"HTTP {e.status}: {e.message}") from None
        except aiohttp.ClientConnectorError as e:
            self.server_down = True
            raise ServerUnavailableError(f"connection refused: {e}") from None
        except (aiohttp.ClientConnectionError, aiohttp.ClientPayloadError) as e:
            raise RuntimeError(f"connection lost: {type(e).__name__}: {e}") from None
        except TimeoutError:
            raise RuntimeError(f"stalled: no answer in {timeout_s:g} s") from None
        except orjson.JSONDecodeError as e:
            raise RuntimeError(f"malformed JSON answer: {e}") from None

    async def run_closed_loop(
        self,
        prompts: Sequence[Prompt],
        concurrency: int,
        request_timeout_s: float,
        *,
        temperature: float = 0.0,
        min_duration_s: float = 0.0,
        more: Callable[[int], Prompt] | None = None,
    ) -> tuple[list[RequestRecord], float]:
        """Send every prompt with exactly `concurrency` requests in flight (each worker takes the next index
        as its request ends); with `min_duration_s` and `more`, go on past the prompts (prompt `i` =
        `more(i)`) until that long has passed, then drain. Dispatch stops when the server refuses, a connect
        times out or a request stalls; unsent prompts get records with neither error nor end ("incomplete").
        Returns the records in prompt order and the window duration (first send to last end)."""
        if concurrency < 1:
            raise ValueError(f"concurrency must be >= 1, got {concurrency}")
        n = len(prompts)
        records: dict[int, RequestRecord] = {}
        timeout = aiohttp.ClientTimeout(
            total=None, sock_connect=self._connect_timeout_s, sock_read=request_timeout_s
        )
        self._stop_dispatch = None
        self.server_down = False
        next_index = 0
        t0 = time.perf_counter()

        async def worker() -> None:
            nonlocal next_index
            # Single-threaded event loop: reading and bumping the shared index cannot interleave.
            while self._stop_dispatch is None:
                i = next_index
                if i >= n and (more is None or time.perf_counter() - t0 >= min_duration_s):
                    break
                next_index += 1
                prompt = prompts[i] if i < n else more(i)  # type: ignore[misc]  # more is set past n
                rec = await self._generate(prompt, temperature, timeout, request_timeout_s, i, t0)
                records[i] = rec
                if rec.error is not None and rec.error.startswith(_STOP_DISPATCH_ON):
                    self._stop_dispatch = rec.error

        tasks = [asyncio.create_task(worker()) for _ in range(concurrency if more else min(concurrency, n))]
        try:
            await asyncio.gather(*tasks)
        except BaseException:
            # A bug (or a cancelled caller) must not leave the other workers streaming in the background.
            for t in tasks:
                t.cancel()
            await asyncio.gather(*tasks, return_exceptions=True)
            raise
        duration = time.perf_counter() - t0
        out = []
        for i in range(max(n, next_index)):
            rec = records.get(i)
            if rec is None and i >= n:  # a round-two request cut off by a cancelled worker
                continue
            if rec is None:  # never sent
                p = prompts[i]
                rec = RequestRecord(index=i, prompt_len=p.prompt_len, max_new_tokens=p.output_len)
            out.append(rec)
        return out, duration


async def _read_stream(content: aiohttp.StreamReader, rec: RequestRecord, t_send: float) -> None:
    """Consume one SSE stream into `rec`; the hot loop. SGLang's events are cumulative (bytes grow with the
    square of the output), so no event is copied: each chunk is walked with `find`, an event checked in place
    (`data:`, closing brace) and its count read from `"completion_tokens":` searched backwards (in JSON only a
    key matches). Only the last event, or one the scan cannot read, is parsed with orjson."""
    perf = time.perf_counter
    key = _CT_KEY
    match_ct = _CT_VALUE.match
    times = rec.chunk_times
    tokens = rec.chunk_tokens
    prev = 0
    last: tuple[bytes, int, int] | None = None  # (buffer, start, end) of the latest data event
    tail = b""  # an event cut by a chunk boundary
    while True:
        chunk = await content.readany()
        if not chunk:
            break
        now = perf()
        if tail:
            # Complete the cut event with the head of this chunk; copy that one event, not the chunk.
            if tail[-1:] == b"\n" and chunk[:1] == b"\n":
                segments = [(tail[:-1] + _SEP, 0), (chunk, 1)]
            else:
                j = chunk.find(_SEP)
                if j < 0:
                    tail += chunk
                    continue
                segments = [(tail + chunk[: j + 2], 0), (chunk, j + 2)]
            tail = b""
        else:
            segments = [(chunk, 0)]
        for buf, pos in segments:
            end = len(buf) - 1
            scan = pos
            # One-byte find is memchr (10x a two-byte needle); events hold no raw newline, so one separates.
            while 0 <= (j := buf.find(10, scan)) < end:  # 10: "\n"
                if buf[j + 1] != 10:
                    scan = j + 1
                    continue
                scan = j + 2
                if buf[j - 1] == 125 and buf.startswith(_DATA, pos):  # 125: "}"
                    k = buf.rfind(key, pos, j)
                    m = match_ct(buf, k, j) if k >= 0 else None
                    if m is None:  # no count: an error event, or not SGLang's shape
                        rec.error = _bad_event(buf[pos:j])
                        return
                    ct = int(m[1])
                    if ct > prev:
                        times.append(now - t_send)
                        tokens.append(ct)
                        prev = ct
                    last = (buf, pos, j)
                elif buf.startswith(_DONE, pos):
                    if rec.e2e is None:
                        final = None if last is None else last[0][last[1] : last[2]]
                        rec.error = _finish(rec, final, now - t_send)
                        if rec.error:
                            return
                elif buf[pos:j].strip():
                    rec.error = _bad_event(buf[pos:j])
                    return
                pos = scan
            if pos < len(buf):
                tail = buf[pos:]
    if rec.e2e is None and rec.error is None:
        rec.error = "stream ended before [DONE]"


def _finish(rec: RequestRecord, last: bytes | None, e2e: float) -> str | None:
    """Fill `rec` from the final event at `[DONE]`; the error message if that event is unusable."""
    if last is None:
        return "[DONE] without any generation event"
    try:
        meta = orjson.loads(last[5:])["meta_info"]
        rec.completion_tokens = meta["completion_tokens"]
    except (orjson.JSONDecodeError, KeyError, TypeError):
        return _bad_event(last)
    rec.e2e = e2e
    if rec.chunk_times:
        rec.ttft = rec.chunk_times[0]
    rec.prompt_tokens = meta.get("prompt_tokens")
    rec.cached_tokens = meta.get("cached_tokens")
    rec.spec_verify_ct = meta.get("spec_verify_ct")
    rec.spec_accept_length = meta.get("spec_accept_length")
    fr = meta.get("finish_reason")
    rec.finish_reason = fr.get("type") if isinstance(fr, dict) else fr
    return None


def _bad_event(ev: bytes) -> str:
    """Name what went wrong with an event: SGLang's own error event, or something unparseable."""
    try:
        obj = orjson.loads(ev[5:])
    except orjson.JSONDecodeError:
        return f"malformed JSON event: {_snippet(ev)}"
    if isinstance(obj, dict) and "error" in obj:
        err = obj["error"]
        msg = err.get("message", err) if isinstance(err, dict) else err
        return f"server error: {msg}"
    return f"malformed event (no meta_info.completion_tokens): {_snippet(ev)}"


def _snippet(body: bytes) -> str:
    text = body.decode("utf-8", "replace").strip()
    return text if len(text) <= _ERROR_BODY_CHARS else text[:_ERROR_BODY_CHARS] + "..."


def error_summary(errors: Sequence[str]) -> str:
    """'stalled x2, HTTP 500 x1': error kinds (text before the first colon), most frequent first."""
    kinds = Counter(e.split(":", 1)[0] for e in errors)
    if not kinds:
        return "no error recorded"
    if len(kinds) == 1:
        return next(iter(kinds))
    return ", ".join(f"{k} x{c}" for k, c in kinds.most_common())
