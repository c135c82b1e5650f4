"""How fast can the load client consume streams, and is it ever the bottleneck?

Starts the stand-in server in instant mode (no simulated step time, so the server emits events as fast as
its Python can) on a free loopback port, then for each concurrency runs three readers over the same kind of
requests (short prompts, long outputs):

- `specbench`: `bench.client.LoadClient.run_closed_loop`, the client the harness measures with;
- `bytes-only`: one shared session that only counts SSE separators: the most any client could read from
  this server, i.e. the server's ceiling on this machine;
- `bench_serving-like`: a new `aiohttp.ClientSession` per request, line iteration, `json.loads` per event,
  a semaphore over N tasks: what `sglang.bench_serving`'s `sglang` backend does.

Client and server share the machine's cores, so wall-clock events/s is capped by whichever side is slower.
The CPU each process used tells them apart: client µs/event gives the client's own ceiling (events/s per
core, if the server were infinitely fast); server CPU near 100 % of a core with the byte counter no faster
than the client means the server is the limit.

Run from the repository root: `.venv/bin/python -m benchmarks.client_ceiling [--concurrency 16 64 256]`.
Prints one figure per line.
"""

from __future__ import annotations

import argparse
import asyncio
import itertools
import json
import os
import subprocess
import sys
import time
from collections.abc import Callable, Coroutine, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import aiohttp

from bench.client import LoadClient
from bench.host.processes import free_port
from bench.sweep import WorkloadSpec
from bench.workload import Prompt, build_prompts

SIM_FLAGS = [
    "--speculative-algorithm",
    "EAGLE",
    "--speculative-num-steps",
    "3",
    "--speculative-eagle-topk",
    "1",
    "--speculative-num-draft-tokens",
    "4",
    "--max-running-requests",
    "1024",
]
_CLK_TCK = os.sysconf("SC_CLK_TCK")


@dataclass
class Run:
    events: int
    tokens: int
    wall_s: float
    client_cpu_s: float
    server_cpu_s: float


Reader = Callable[[str, Sequence[Prompt], int], Coroutine[Any, Any, tuple[int, int]]]


async def specbench_reader(url: str, prompts: Sequence[Prompt], concurrency: int) -> tuple[int, int]:
    async with LoadClient(url) as client:
        records, _ = await client.run_closed_loop(prompts, concurrency, request_timeout_s=60.0)
    bad = [r.error for r in records if not r.ok]
    if bad:
        raise RuntimeError(f"{len(bad)} requests failed, first: {bad[0]}")
    # +1 per request: the final event with finish_reason usually carries tokens too, but count [DONE]
    # consistently with the byte counter, which sees every separator.
    return sum(len(r.chunk_times) + 1 for r in records), sum(r.completion_tokens for r in records)


async def bytes_only_reader(url: str, prompts: Sequence[Prompt], concurrency: int) -> tuple[int, int]:
    """Counts newlines (two per SSE event) without looking inside events: an upper bound for any client."""
    connector = aiohttp.TCPConnector(limit=0)
    newlines = 0
    nxt = 0
    async with aiohttp.ClientSession(connector=connector, read_bufsize=1 << 20) as session:

        async def worker() -> None:
            nonlocal newlines, nxt
            while nxt < len(prompts):
                p = prompts[nxt]
                nxt += 1
                body = {"input_ids": p.input_ids, "sampling_params": _sampling(p), "stream": True}
                async with session.post(url + "/generate", json=body) as resp:
                    while chunk := await resp.content.readany():
                        newlines += chunk.count(b"\n")

        await asyncio.gather(*(worker() for _ in range(concurrency)))
    return newlines // 2, sum(p.output_len for p in prompts)


async def bench_serving_reader(url: str, prompts: Sequence[Prompt], concurrency: int) -> tuple[int, int]:
    """sglang.bench_serving's `sglang` backend, reduced to its reading path."""
    sem = asyncio.Semaphore(concurrency)
    counts = [0, 0]

    async def one(p: Prompt) -> None:
        async with sem, aiohttp.ClientSession(timeout=aiohttp.ClientTimeout(total=6 * 3600)) as session:
            body = {"input_ids": p.input_ids, "sampling_params": _sampling(p), "stream": True}
            st = time.perf_counter()
            most_recent, last_len, ttft, itl = st, 0, 0.0, []
            async with session.post(url + "/generate", json=body) as resp:
                async for chunk_bytes in resp.content:
                    chunk_bytes = chunk_bytes.strip()
                    if not chunk_bytes:
                        continue
                    chunk = chunk_bytes.decode("utf-8").removeprefix("data: ")
                    counts[0] += 1
                    if chunk == "[DONE]":
                        continue
                    data = json.loads(chunk)
                    if data.get("text"):
                        ts = time.perf_counter()
                        out_len = data["meta_info"]["completion_tokens"]
                        if ttft == 0.0:
                            ttft = ts - st
                        else:
                            k = out_len - last_len
                            if k == 0:
                                continue
                            itl.extend([(ts - most_recent) / k] * k)
                        most_recent, last_len = ts, out_len
            counts[1] += last_len

    await asyncio.gather(*(one(p) for p in prompts))
    return counts[0], counts[1]


def _sampling(p: Prompt) -> dict[str, object]:
    return {"max_new_tokens": p.output_len, "temperature": 0.0, "ignore_eos": True}


def _cpu_s(pid: int) -> float:
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / _CLK_TCK  # utime + stime


def measure(reader: Reader, url: str, prompts: Sequence[Prompt], concurrency: int, server_pid: int) -> Run:
    s0, c0, t0 = _cpu_s(server_pid), time.process_time(), time.perf_counter()
    events, tokens = asyncio.run(reader(url, prompts, concurrency))
    wall = time.perf_counter() - t0
    return Run(events, tokens, wall, time.process_time() - c0, _cpu_s(server_pid) - s0)


def _wait_ready(url: str, proc: subprocess.Popen[bytes], timeout_s: float = 60.0) -> None:
    async def poll() -> None:
        deadline = time.monotonic() + timeout_s
        async with aiohttp.ClientSession() as session:
            while time.monotonic() < deadline:
                if proc.poll() is not None:
                    raise RuntimeError(f"the stand-in exited with code {proc.returncode}")
                try:
                    async with session.get(url + "/health", timeout=aiohttp.ClientTimeout(total=2)) as r:
                        if r.status == 200:
                            return
                except aiohttp.ClientError:
                    pass
                await asyncio.sleep(0.1)
        raise RuntimeError(f"the stand-in was not ready within {timeout_s:g} s")

    asyncio.run(poll())


def main(argv: Sequence[str] | None = None) -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0] if __doc__ else None)
    ap.add_argument("--concurrency", type=int, nargs="+", default=[16, 64, 256])
    ap.add_argument("--input-len", type=int, default=16)
    ap.add_argument("--output-len", type=int, nargs="+", default=[1024, 256])
    ap.add_argument("--waves", type=int, default=2, help="requests per concurrency slot")
    ap.add_argument("--skip-naive", action="store_true", help="skip the bench_serving-like baseline")
    ap.add_argument("--best-of", type=int, default=3, help="runs per reader; the fastest is reported")
    ap.add_argument(
        "--no-pin", action="store_true", help="do not pin the stand-in and the client to a core each"
    )
    args = ap.parse_args(argv)
    # One core each makes "CPU busy" readable: a side at ~100 % is the one holding the other back.
    pin = not args.no_pin and len(os.sched_getaffinity(0)) >= 2
    cores = sorted(os.sched_getaffinity(0))

    port = free_port()
    url = f"http://127.0.0.1:{port}"
    env = {**os.environ, "SPECBENCH_SIM_INSTANT": "1", "SPECBENCH_SIM_STARTUP_S": "0"}
    cmd = [
        sys.executable,
        "-m",
        "synthetic.server",
        "--model-path",
        "sim-tiny",
        "--port",
        str(port),
        *SIM_FLAGS,
    ]
    proc = subprocess.Popen(cmd, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        if pin:
            os.sched_setaffinity(proc.pid, {cores[0]})
            os.sched_setaffinity(0, {cores[1]})
        _wait_ready(url, proc)
        where = f"stand-in on core {cores[0]}, client on core {cores[1]}" if pin else "unpinned"
        print(f"machine: {os.cpu_count()} cores ({where}); other load shares them, so best of {args.best_of}")
        print(f"stand-in: instant mode, {' '.join(SIM_FLAGS)}")
        print(f"workload: input {args.input_len} ids, {args.waves} requests per concurrency slot")
        readers: list[tuple[str, Reader]] = [
            ("specbench", specbench_reader),
            ("bytes-only", bytes_only_reader),
        ]
        if not args.skip_naive:
            readers.append(("bench_serving-like", bench_serving_reader))
        for out, c in itertools.product(args.output_len, args.concurrency):
            w = WorkloadSpec.model_validate({"input_len": args.input_len, "output_len": out, "seed": c})
            prompts = build_prompts(w, c * args.waves)
            for name, reader in readers:
                runs = [measure(reader, url, prompts, c, proc.pid) for _ in range(args.best_of)]
                r = max(runs, key=lambda x: x.events / x.wall_s)
                tag = f"out={out} c={c} {name}"
                print(f"{tag}: events/s {r.events / r.wall_s:,.0f}")
                print(f"{tag}: tokens/s {r.tokens / r.wall_s:,.0f}")
                print(f"{tag}: client CPU us/event {r.client_cpu_s / r.events * 1e6:.2f}")
                print(f"{tag}: client-only ceiling events/s/core {r.events / max(r.client_cpu_s, 1e-9):,.0f}")
                print(f"{tag}: client CPU busy {100 * r.client_cpu_s / r.wall_s:.0f}%")
                print(f"{tag}: server CPU busy {100 * r.server_cpu_s / r.wall_s:.0f}%")
    finally:
        proc.terminate()
        try:
            proc.wait(10)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()


if __name__ == "__main__":
    main()
