"""Stand-in streaming fidelity: does each scheduler step reach the client as its own event, on time?

Starts the stand-in (`python -m synthetic.server`) at a given time scale and measures closed-loop windows with
specbench's client at a few batch sizes. Per batch size it prints TPOT p50, ITL p50/mean/p95, the events
per request against the decode steps the server ran, and the share of ITL values under 50 us (events that
arrived in one burst). On SGLang, ITL p50 is about one step divided by the tokens it committed; a burst
share near 0 and ITL p50 near TPOT p50 mean the stand-in streams like that.

    .venv/bin/python -m benchmarks.sim_itl                       # time scale 0.25 (sub-millisecond steps)
    .venv/bin/python -m benchmarks.sim_itl --time-scale 1 --batch-sizes 1,4,16

The client shares the host's CPUs with the stand-in: on a loaded host, both get descheduled and events
merge into bursts whatever the server does, which this prints as a high burst share. On a 2-core host at
load average 10-15, time scale 0.25: the old engine (sub-ms steps banked, then run back to back) gave ITL
p50 0.000 ms at batch 1, 4 and 16 (77-87% bursts); the current one gave ITL p50 0.09-0.53 ms at batch 1
(TPOT p50 0.53) and 0-0.52 ms at batch 4-16, run to run, with 3-80% bursts: load dominates.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import socket
import subprocess
import sys
import time

import numpy as np

from bench.client import LoadClient
from bench.metrics import compute_metrics
from bench.sweep import WorkloadSpec
from bench.workload import build_prompts

BURST_S = 50e-6


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


async def _measure(url: str, batch_sizes: list[int], output_len: int, waves: int) -> None:
    async with LoadClient(url) as client:
        print(
            f"{'bs':>3} {'TPOT p50':>9} {'ITL p50':>8} {'ITL mean':>9} {'ITL p95':>8} {'events/req':>11} {'burst':>6}"
        )
        for bs in batch_sizes:
            prompts = build_prompts(WorkloadSpec(input_len=128, output_len=output_len), bs * waves)
            await client.run_closed_loop(prompts[:bs], bs, 120)
            records, duration = await client.run_closed_loop(prompts, bs, 120)
            m = compute_metrics(records, duration)
            gaps = np.concatenate(
                [np.diff(np.asarray(r.chunk_times)) for r in records if len(r.chunk_times) > 1]
            )
            events = np.mean([len(r.chunk_times) for r in records])
            burst = float(np.mean(gaps < BURST_S)) if gaps.size else 0.0
            print(
                f"{bs:>3} {m.tpot_p50_ms or 0:>9.3f} {m.itl_p50_ms or 0:>8.3f} {m.itl_mean_ms or 0:>9.3f} "
                f"{m.itl_p95_ms or 0:>8.3f} {events:>11.1f} {burst:>6.1%}"
            )


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--time-scale", type=float, default=0.25)
    ap.add_argument("--batch-sizes", default="1,4,16")
    ap.add_argument("--output-len", type=int, default=128)
    ap.add_argument("--waves", type=int, default=4)
    ap.add_argument("--spec", action="store_true", help="EAGLE/NextN on FlashMLA (several tokens per step)")
    args = ap.parse_args()
    port = _free_port()
    flags = ["--model-path", "bench-sim", "--port", str(port)]
    if args.spec:
        flags += ["--attention-backend", "flashmla", "--speculative-algorithm", "NEXTN"]
    env = {**os.environ, "SPECBENCH_SIM_TIME_SCALE": str(args.time_scale), "SPECBENCH_SIM_STARTUP_S": "0"}
    proc = subprocess.Popen(
        [sys.executable, "-m", "synthetic.server", *flags],
        env=env,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    try:
        url = f"http://127.0.0.1:{port}"
        deadline = time.monotonic() + 30
        while True:
            try:
                with socket.create_connection(("127.0.0.1", port), timeout=1):
                    break
            except OSError:
                if time.monotonic() > deadline:
                    print("the stand-in did not start", file=sys.stderr)
                    return 1
                time.sleep(0.2)
        time.sleep(0.5)  # its warmup generation
        print(
            f"stand-in time scale {args.time_scale}, {'EAGLE' if args.spec else 'no spec'}, host load {os.getloadavg()[0]:.1f}"
        )
        asyncio.run(_measure(url, [int(x) for x in args.batch_sizes.split(",")], args.output_len, args.waves))
    finally:
        proc.terminate()
        proc.wait(10)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
