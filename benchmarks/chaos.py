"""Chaos bench: a fleet of real `specbench worker` processes and a scheduler on a real PostgreSQL, under fire.

Phases, in one run, on a fresh schema of the throwaway PostgreSQL the tests use (scripts/pg_test_server.sh):

1. kills: jobs on the stand-in server; busy workers are killed with SIGKILL (each replaced by a new one), and
   stand-in servers are killed mid-point (a server crash);
2. outage: the database is stopped for `--outage-s` seconds while workers are busy, then started again;
3. drain: every job must end `done`; workers are stopped with SIGTERM;
4. flood: mutated sweep files (tests/sweep_mutations.py) are submitted through the real CLI code path.

Then it prints the figures: jobs done, points lost or duplicated, double claims, orphaned servers, tracebacks,
processes alive after the outage. Exit status 0 only when all of them are as they must be.

    export SPECBENCH_TEST_PG_URL=$(bash scripts/pg_test_server.sh)
    .venv/bin/python -m benchmarks.chaos            # the full bench: >= 20 kills, a 60-s outage, 200+ files
    .venv/bin/python -m benchmarks.chaos --quick    # the CI version (tests/test_chaos.py)

It stops and starts the PostgreSQL cluster in SPECBENCH_PG_DATA (the script's default otherwise), and only
when that cluster is the one SPECBENCH_TEST_PG_URL points at.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import random
import signal
import sys
import tempfile
import time
from collections import Counter
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from sqlalchemy import Engine, select
from typer.testing import CliRunner

from benchmarks.chaos_audit import audit, double_claims, fresh_schema, tracebacks
from benchmarks.chaos_fleet import (
    Fleet,
    busy_workers,
    busy_workers_safe,
    dead,
    orphan_servers,
    our_servers,
    say,
    wait_for,
)
from db.migrate import open_database
from db.models import Job
from runners import queue
from runners.cli import app
from tests.pg_control import PgControl, controllable
from tests.sweep_mutations import mutated_sweeps


@dataclass(frozen=True)
class Plan:
    workers: int
    jobs: int
    kills: int
    server_crashes: int
    outage_s: float
    outage_jobs: int
    mutants: int
    lease_s: float = 2.0


FULL = Plan(workers=4, jobs=30, kills=24, server_crashes=3, outage_s=60.0, outage_jobs=8, mutants=220)
QUICK = Plan(workers=2, jobs=4, kills=3, server_crashes=1, outage_s=10.0, outage_jobs=2, mutants=40)

# Each job: 2 points x 2 repeats on the stand-in, a few seconds long, so kills land mid-point.
JOB_SWEEP = """name: chaos-{n}
model: sim-tiny
server: {{backend: sim, sim: {{time_scale: 1.0, startup_s: 0.2, seed: {n}}}}}
grid: {{batch_sizes: [1, 2], spec_modes: [], baseline: true}}
workload: {{dataset: random, input_len: 8, output_len: 24, num_prompts: 4}}
repeats: 2
warmup: {{waves: 1}}
"""
REPEATS_PER_JOB = 2 * 2


def all_done(engine: Engine, job_ids: list[int]) -> bool:
    with engine.connect() as conn:
        statuses = set(conn.execute(select(Job.status).where(Job.id.in_(job_ids))).scalars())
    return statuses == {"done"}


def phase_kills(
    engine: Engine, fleet: Fleet, plan: Plan, rng: random.Random, jobs: list[int]
) -> tuple[int, int]:
    kills = crashes = 0
    deadline = time.monotonic() + 60 + plan.kills * 15
    while (kills < plan.kills or crashes < plan.server_crashes) and time.monotonic() < deadline:
        busy = busy_workers(engine, fleet)
        if not busy and all_done(engine, jobs):  # the fleet outran the kills: give it more to do
            jobs += [queue.submit(engine, JOB_SWEEP.format(n=len(jobs) + i)) for i in range(plan.workers)]
        if crashes < plan.server_crashes and busy and (kills >= plan.kills or rng.random() < 0.3):
            servers = our_servers(fleet.workdir)
            if servers:
                os.kill(rng.choice(servers), signal.SIGKILL)  # a server crash mid-point
                crashes += 1
                say(f"server crash {crashes}/{plan.server_crashes}")
                time.sleep(1.0)
                continue
        if kills < plan.kills and busy:
            victim = rng.choice(busy)
            victim.kill()  # SIGKILL: the worker gets no say
            victim.wait(timeout=10)
            kills += 1
            fleet.add_worker()
            say(f"kill -9 of busy worker {victim.pid}: {kills}/{plan.kills}")
            time.sleep(rng.uniform(0.5, 1.5))
            continue
        time.sleep(0.3)
    return kills, crashes


def phase_outage(engine: Engine, fleet: Fleet, pg: PgControl, plan: Plan, jobs: list[int]) -> tuple[int, int]:
    wait_for(lambda: bool(busy_workers(engine, fleet)), 60)
    engine.dispose()
    say(f"stopping PostgreSQL for {plan.outage_s:.0f} s ({len(busy_workers_safe(engine, fleet))} busy)")
    pg.stop()
    time.sleep(plan.outage_s)
    pg.start()
    time.sleep(2.0)
    alive = len(fleet.alive())
    say(f"PostgreSQL back; {alive}/{len(fleet.alive()) + len(dead(fleet))} processes alive")
    return alive, len(dead(fleet))


def phase_flood(url: str, workdir: Path, n: int, seed: int) -> dict[str, int]:
    """Submit `n` mutated sweeps through the CLI's code path; count outcomes and tracebacks."""
    runner = CliRunner()
    counts: Counter[str] = Counter()
    folder = workdir / "flood"
    folder.mkdir()
    examples: list[str] = []
    for i, (label, raw) in enumerate(mutated_sweeps(n=n, seed=seed)):
        path = folder / f"m{i:04d}.yaml"
        path.write_bytes(raw)
        result = runner.invoke(app, ["submit", str(path), "--db", url])
        if result.exception is not None and not isinstance(result.exception, SystemExit):
            counts["tracebacks"] += 1
            if len(examples) < 5:
                examples.append(f"{label}: {type(result.exception).__name__}: {result.exception}")
        elif result.exit_code == 0:
            counts["accepted"] += 1
        elif result.exit_code == 2:
            counts["rejected"] += 1
        else:
            counts[f"exit {result.exit_code}"] += 1
        if "Traceback" in (result.output or ""):
            counts["tracebacks in output"] += 1
    for line in examples:
        say(f"  traceback: {line}")
    counts["files"] = n
    return dict(counts)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--quick", action="store_true", help="The short CI version.")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--outage-s", type=float, help="Override the database outage length.")
    parser.add_argument("--keep", action="store_true", help="Keep the schema and the work folder.")
    args = parser.parse_args(argv)
    plan = QUICK if args.quick else FULL
    if args.outage_s is not None:
        plan = Plan(**{**plan.__dict__, "outage_s": args.outage_s})
    base = os.environ.get("SPECBENCH_TEST_PG_URL")
    pg = controllable(base)
    if base is None or pg is None:
        print(
            "chaos: needs the throwaway PostgreSQL: export SPECBENCH_TEST_PG_URL=$(bash scripts/pg_test_server.sh)"
            " (with SPECBENCH_PG_DATA/SPECBENCH_PG_PORT if you chose others)",
            file=sys.stderr,
        )
        return 2
    rng = random.Random(args.seed)
    url, drop = fresh_schema(base)
    workdir = Path(tempfile.mkdtemp(prefix="specbench-chaos-"))
    engine = open_database(url)
    fleet = Fleet(url, workdir, plan.lease_s)
    started = time.monotonic()
    figures: dict[str, Any] = {}
    try:
        jobs = [queue.submit(engine, JOB_SWEEP.format(n=i)) for i in range(plan.jobs)]
        say(f"{plan.jobs} jobs queued; starting {plan.workers} workers and the scheduler")
        for _ in range(plan.workers):
            fleet.add_worker()
        fleet.start_scheduler()

        kills, crashes = phase_kills(engine, fleet, plan, rng, jobs)
        figures["kill -9 of busy workers"] = kills
        figures["servers killed mid-point"] = crashes
        # Killed workers leave the fleet; a server outliving its worker past the watchdog's grace is an orphan.
        killed = {pid for pid, p in fleet.procs.items() if p.poll() is not None and p.returncode == -9}
        for pid in killed:
            fleet.procs.pop(pid)
        wait_for(lambda: not orphan_servers(fleet), 20)
        figures["orphaned servers after the kills"] = len(orphan_servers(fleet))

        jobs += [queue.submit(engine, JOB_SWEEP.format(n=1000 + i)) for i in range(plan.outage_jobs)]
        alive, died = phase_outage(engine, fleet, pg, plan, jobs)
        figures[f"processes alive after a {plan.outage_s:.0f}-s database outage"] = f"{alive}/{alive + died}"

        say("draining the queue")
        drained = wait_for(lambda: all_done(engine, jobs), 600 if not args.quick else 120)
        figures["queue drained"] = drained
        figures["processes died by themselves"] = len(dead(fleet))
        codes = fleet.stop_all()
        figures["processes not exiting 0 on SIGTERM"] = sum(1 for c in codes.values() if c != 0)
        wait_for(lambda: not our_servers(workdir), 20)
        figures["orphaned servers at the end"] = len(our_servers(workdir))
        figures.update(audit(engine, jobs, REPEATS_PER_JOB))
        claims, doubles = double_claims(fleet.logs)
        figures["claims"] = claims
        figures["double claims"] = doubles
        figures["tracebacks in worker/scheduler logs"] = tracebacks(fleet.logs)

        say(f"flooding the queue with {plan.mutants} mutated sweep files")
        flood = phase_flood(url, workdir, plan.mutants, args.seed)
        figures["mutated sweep files"] = flood.get("files", 0)
        figures["  accepted"] = flood.get("accepted", 0)
        figures["  rejected (exit 2)"] = flood.get("rejected", 0)
        figures["  tracebacks"] = flood.get("tracebacks", 0) + flood.get("tracebacks in output", 0)
        figures["wall time s"] = round(time.monotonic() - started, 1)
    finally:
        fleet.stop_all(timeout=30)
        pg.start()
        engine.dispose()
        if not args.keep:
            with contextlib.suppress(Exception):
                drop()
    print("\nchaos figures (PostgreSQL, stand-in servers):")
    for key, value in figures.items():
        print(f"  {key:<48} {value}")
    ok = (
        figures.get("queue drained") is True
        and figures["jobs done"] == figures["jobs"]
        and figures["points lost"] == 0
        and figures["points duplicated"] == 0
        and figures["double claims"] == 0
        and figures["orphaned servers after the kills"] == 0
        and figures["orphaned servers at the end"] == 0
        and figures["tracebacks in worker/scheduler logs"] == 0
        and figures["  tracebacks"] == 0
        and figures["processes died by themselves"] == 0
        and figures["kill -9 of busy workers"] >= plan.kills
    )
    print(f"\nchaos: {'PASS' if ok else 'FAIL'} (work folder {workdir})")
    (workdir / "figures.json").write_text(json.dumps(figures, default=str, indent=1))
    return 0 if ok else 1


if __name__ == "__main__":
    raise SystemExit(main())
