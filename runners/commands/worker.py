"""`specbench worker`: claim jobs this host's GPUs can run and execute them, until SIGTERM (or --once).

Its operator, not a job, decides what a job may use on this host (bench/host/policy.py)."""

from dataclasses import replace
from pathlib import Path
from typing import Annotated

import typer

from bench.host.gpus import detect_gpus, parse_gpu_list, select_gpus
from bench.host.policy import HostPolicy, PolicyError
from runners.common import (
    MAX_WAIT_S,
    ClientCpusOption,
    DbOption,
    HubDownloadsOption,
    OutageOption,
    TrustRemoteCodeOption,
    client_cpus,
    fail,
    failing,
    open_db,
    pinned_client,
)
from runners.recovery import Backoff, OutagePolicy, RecoveryPolicy
from runners.terminal import log_to_stderr
from runners.worker import QueueWorker, WorkerOptions, install_signal_handlers


def worker(
    db: DbOption = None,
    gpus: Annotated[
        str | None,
        typer.Option(
            help="GPU indices this worker uses, e.g. 0,1 (its servers' CUDA_VISIBLE_DEVICES). Default: all."
        ),
    ] = None,
    labels: Annotated[
        str | None,
        typer.Option(help="Comma-separated labels jobs can require (submit --requires labels=a+b)."),
    ] = None,
    once: Annotated[
        bool, typer.Option("--once", help="Exit when no job this worker can run is queued.")
    ] = False,
    poll_interval: Annotated[
        float,
        typer.Option(
            "--poll-interval", min=0.01, max=3600.0, help="Seconds between looks at an empty queue."
        ),
    ] = 5.0,
    lease_s: Annotated[
        float,
        typer.Option(
            "--lease-s",
            min=0.3,
            max=86_400.0,
            help="Lease length; heartbeats renew it three times per lease.",
        ),
    ] = 60.0,
    retry_backoff_s: Annotated[
        float,
        typer.Option(
            "--retry-backoff-s",
            min=0.0,
            max=MAX_WAIT_S,
            help="First retry of a failed attempt; doubles per attempt.",
        ),
    ] = 30.0,
    retry_backoff_cap_s: Annotated[
        float, typer.Option("--retry-backoff-cap-s", min=0.0, max=MAX_WAIT_S, help="Longest retry delay.")
    ] = 3600.0,
    requeue_backoff_s: Annotated[
        float,
        typer.Option(
            "--requeue-backoff-s",
            min=0.0,
            max=MAX_WAIT_S,
            help="Delay before a job whose worker died is claimable again; doubles per expiry, up to 60 s.",
        ),
    ] = 1.0,
    db_outage_limit_s: OutageOption = None,
    log_dir: Annotated[Path, typer.Option(help="Where server logs go.")] = Path("logs"),
    progress: Annotated[bool, typer.Option("--progress/--no-progress")] = False,
    client_cpu_list: ClientCpusOption = None,
    python: Annotated[
        list[str] | None,
        typer.Option(
            "--python",
            help="An interpreter jobs may run servers with, as NAME=PATH (repeatable); a sweep names it with "
            "server.python: NAME. Without server.python a server runs on this worker's own interpreter.",
            show_default=False,
        ),
    ] = None,
    models_dir: Annotated[
        list[Path] | None,
        typer.Option(
            "--models-dir",
            help="A directory model, draft and tokenizer paths may resolve under (repeatable). Model ids that "
            "are not paths (org/name) pass to SGLang as hub ids.",
            show_default=False,
        ),
    ] = None,
    data_dir: Annotated[
        list[Path] | None,
        typer.Option(
            "--data-dir",
            help="A directory workload files (workload.path) may resolve under (repeatable).",
            show_default=False,
        ),
    ] = None,
    allow_external: Annotated[
        list[str] | None,
        typer.Option(
            "--allow-external",
            help="HOST:PORT of an external server jobs may measure (backend: external; repeatable). "
            "Without it this worker claims no external job.",
            show_default=False,
        ),
    ] = None,
    trust_remote_code: TrustRemoteCodeOption = False,
    allow_hub_downloads: HubDownloadsOption = False,
) -> None:
    """Run queued sweeps on this host."""
    log_to_stderr()
    with failing(ValueError):
        indices = parse_gpu_list(gpus)
    pin = client_cpus(client_cpu_list)
    chosen = select_gpus(detect_gpus(), indices)
    label_list = [x.strip() for x in (labels or "").split(",") if x.strip()]
    policy = _host_policy(python or [], models_dir or [], data_dir or [], allow_external or [])
    policy = replace(policy, trust_remote_code=trust_remote_code, hub_downloads=allow_hub_downloads)
    engine = open_db(db, ride_out_outage=OutagePolicy.from_env(db_outage_limit_s))
    options = WorkerOptions(
        gpus=chosen,
        labels=label_list,
        lease_s=lease_s,
        poll_s=poll_interval,
        once=once,
        backoff=Backoff(base_s=retry_backoff_s, cap_s=retry_backoff_cap_s),
        recovery=RecoveryPolicy(
            requeue=Backoff(base_s=requeue_backoff_s, cap_s=max(60.0, requeue_backoff_s)),
            outage=OutagePolicy.from_env(db_outage_limit_s),
        ),
        log_dir=log_dir,
        show_progress=progress,
        policy=policy,
    )
    runner = QueueWorker(engine, options)
    install_signal_handlers(runner)
    try:
        # Pinned for the worker's life, like --gpus: every job's client runs there (its servers do not).
        with pinned_client(pin):
            code = runner.run()
    finally:
        engine.dispose()
    raise typer.Exit(code)


def _host_policy(pythons: list[str], models: list[Path], data: list[Path], external: list[str]) -> HostPolicy:
    """The worker's host policy from its options, or every problem with them and exit 2."""
    named: dict[str, str] = {}
    problems: list[str] = []
    for item in pythons:
        name, sep, path = item.partition("=")
        if not sep or not name or not path:
            problems.append(
                f"--python {item[:80]!r}: expected NAME=PATH, e.g. sglang-0.5.12=/opt/sg12/bin/python"
            )
        elif name in named:
            problems.append(f"--python {name}: given twice")
        else:
            named[name] = path
    try:
        policy = HostPolicy.worker(
            pythons=named, models_dirs=map(str, models), data_dirs=map(str, data), external=external
        )
    except PolicyError as e:
        problems += e.problems
    if problems:
        fail("; ".join(problems))
    return policy
