"""`specbench run SWEEP.yaml`: validate, launch each server config once, measure, store every repeat."""

import shlex
import signal
import time
from pathlib import Path
from typing import Annotated, Any

import typer
from rich.markup import escape
from sqlalchemy import Engine, select

from analysis.labels import KIND_TAG, MEASURED, run_kind
from bench.correctness.prompts import why_not_checked
from bench.host.cpu_affinity import format_cpu_list
from bench.host.gpus import describe as describe_gpus
from bench.host.gpus import find_gpus, parse_gpu_list, select_gpus, visible_indices
from bench.host.policy import HostPolicy
from bench.pairing import Pair
from bench.server.known_bugs import KNOWN_BUGS, KnownBug, bugs_for, fixed_by_patch
from bench.server.launcher import LaunchError, plan_launch
from bench.sweep import SIMULATE_ACC_ENV, ServerGroup, SweepError, SweepSpec, expand, load_sweep
from bench.sweep.sections import SIM_WRONG_FAULTS
from bench.workload import WorkloadError
from db.engine import resolve_url, session_scope
from db.migrate import open_database_readonly
from db.models import Point, Run
from runners import estimate, host_history, preflight, readiness
from runners.common import (
    MAX_WAIT_S,
    RUN_REF_HELP,
    ClientCpusOption,
    DbOption,
    HubDownloadsOption,
    OutageOption,
    TrustRemoteCodeOption,
    check_label,
    client_cpus,
    console,
    err_console,
    fail,
    failing,
    open_db,
    open_db_readonly,
    pinned_client,
    resolve_run_ref,
)
from runners.correctness import CHECK_MARK, print_correctness
from runners.dbretry import DatabaseUnavailable
from runners.drift import Drift, DriftWindow
from runners.exit_codes import ExitCode
from runners.parts import Sglang, sglang_conflict
from runners.recovery import OutagePolicy
from runners.resume_guard import ResumeRefused, check_resume
from runners.steps import schedule
from runners.sweep_runner import RunOutcome, Terminated, execute_sweep
from runners.tables import Column, print_table

# --fail-on statuses exit as exit_codes.py says: noisy (unstable) points are a finding, no full answer 2.
STATUS_EXIT = {"unstable": ExitCode.FINDING, "partial": ExitCode.ERROR, "failed": ExitCode.ERROR}
RUN_STATUSES = ("done", "unstable", "partial", "failed")
DEFAULT_FAIL_ON = "failed,partial"


def run(
    sweep: Annotated[Path, typer.Argument(help="Sweep YAML file (see sweeps/).")],
    db: DbOption = None,
    resume: Annotated[
        bool, typer.Option("--resume", help="Continue the latest run of this sweep, skipping stored repeats.")
    ] = False,
    resume_run: Annotated[
        str | None, typer.Option("--resume-run", help=f"Continue this run: {RUN_REF_HELP}.")
    ] = None,
    deadline_s: Annotated[
        float | None,
        typer.Option(
            "--deadline-s",
            min=0.0,
            max=MAX_WAIT_S,
            help="Stop cleanly after the current point once this many seconds passed.",
        ),
    ] = None,
    label: Annotated[str | None, typer.Option(help="Free-form label, e.g. pr-24640.")] = None,
    trigger: Annotated[str, typer.Option(help="manual | schedule | pr")] = "manual",
    gpus: Annotated[str | None, typer.Option(help="GPU indices for CUDA_VISIBLE_DEVICES, e.g. 0,1.")] = None,
    log_dir: Annotated[Path, typer.Option(help="Where server logs go.")] = Path("logs"),
    dry_run: Annotated[
        bool, typer.Option("--dry-run", help="Validate and list the launches, run nothing.")
    ] = False,
    progress: Annotated[bool, typer.Option("--progress/--no-progress")] = True,
    fail_on: Annotated[
        str,
        typer.Option(
            "--fail-on",
            help="Run statuses that exit non-zero (comma-separated, of done, unstable, partial, failed): "
            "failed and partial exit 2 (no full answer), unstable exits 1 (a finding: noisy points). CI that "
            "also rejects noisy points: --fail-on failed,partial,unstable.",
        ),
    ] = DEFAULT_FAIL_ON,
    db_outage_limit_s: OutageOption = None,
    client_cpu_list: ClientCpusOption = None,
    trust_remote_code: TrustRemoteCodeOption = False,
    allow_hub_downloads: HubDownloadsOption = False,
) -> None:
    """Run a sweep against a live SGLang server (or the stand-in) and store every point.

    Exit codes (runners/exit_codes.py): 0 the run is done (or its status is not in --fail-on), 1 unstable
    points (with --fail-on unstable), 2 a failed or partial run, bad input, or SGLang missing (checked once,
    before any server starts).
    """
    fail_statuses = _parse_fail_on(fail_on)
    with failing(SweepError):
        spec = load_sweep(sweep)
    check_label(label)
    if trigger not in {"manual", "schedule", "pr"}:
        fail(f"--trigger must be manual, schedule or pr, not {trigger!r}")
    with failing(ValueError):
        gpu_list = parse_gpu_list(gpus)
    pin = client_cpus(client_cpu_list)
    policy = HostPolicy.author(trust_remote_code=trust_remote_code, hub_downloads=allow_hub_downloads)
    groups = expand(spec)
    n_points = sum(len(g.points) for g in groups)
    console.print(
        f"[bold]{spec.name}[/]: {len(groups)} server launch(es), {n_points} points x {spec.repeats} repeats "
        f"on backend [cyan]{spec.server.backend}[/]"
    )
    if dry_run:
        if pin is not None:
            console.print(
                f"--client-cpus {format_cpu_list(pin)}: a run pins itself there (a dry run does not)"
            )
        resumed = _dry_run_resume(spec, groups, db, resume, resume_run)
        part_s = deadline_s if deadline_s is not None else estimate.DEFAULT_PART_S
        _dry_run(spec, groups, gpu_list, db, resumed, policy, log_dir=log_dir, part_s=part_s)
        return
    with failing(preflight.PreflightError):
        preflight.check(spec, policy)
    engine = open_db(db)
    resume_id = resolve_run_ref(engine, resume_run) if resume_run is not None else None
    if resume and resume_id is None:
        resume_id, why_new = _run_to_resume(engine, spec)
        if resume_id is None:
            err_console.print(f"{why_new}; starting a new one")
    deadline = time.monotonic() + deadline_s if deadline_s is not None else None
    # SIGTERM (`timeout`, a container stop) ends the run like Ctrl-C, as terminated (Python's default skips
    # all cleanup): stored repeats stay, the servers are torn down, the run is partial.
    signal.signal(signal.SIGTERM, _interrupt)
    started = time.monotonic()
    try:
        # Pinned for the run only: the previous CPUs come back however it ends (bench/host/cpu_affinity.py).
        with pinned_client(pin):
            outcome = execute_sweep(
                spec,
                sweep.read_text(),
                engine,
                trigger=trigger,
                label=label,
                resume_run_id=resume_id,
                gpus=gpu_list,
                deadline=deadline,
                log_dir=log_dir,
                show_progress=progress,
                console=err_console,
                outage=OutagePolicy.from_env(db_outage_limit_s),
                policy=policy,
            )
    except ResumeRefused as e:
        fail(str(e))
    except WorkloadError as e:  # a workload file changed after the check before the first server started
        fail(f"{' '.join(str(e).split())}; the run is marked failed")
    except DatabaseUnavailable as e:
        fail(f"{e}; every repeat measured before it is stored; continue with: specbench run {sweep} --resume")
    _summary(engine, outcome, time.monotonic() - started)
    wrong = print_correctness(outcome.correctness, console, err_console)
    if outcome.status in ("partial", "failed") and outcome.error:
        colour = "red" if outcome.status == "failed" else "yellow"
        err_console.print(
            f"[{colour}]run {outcome.run_id} is {outcome.status} ({outcome.error}); "
            f"measure what is missing with: specbench run {sweep} --resume-run {outcome.run_id}[/]"
        )
    if wrong:
        # A wrong path is a finding about the code under test, even in a run cut short: it outranks status.
        raise typer.Exit(ExitCode.FINDING)
    if outcome.status in fail_statuses and outcome.status in STATUS_EXIT:
        raise typer.Exit(STATUS_EXIT[outcome.status])


def _parse_fail_on(text: str) -> set[str]:
    chosen = {x.strip() for x in text.split(",") if x.strip()}
    unknown = sorted(chosen - set(RUN_STATUSES))
    if unknown:
        fail(f"--fail-on: unknown status(es) {', '.join(unknown)}; choose from {', '.join(RUN_STATUSES)}")
    return chosen


# Shown in place of the free port the launcher picks at start time.
DRY_RUN_PORT = 30000


def _dry_run_resume(
    spec: SweepSpec, groups: list[ServerGroup], db: str | None, resume: bool, resume_run: str | None
) -> estimate.ResumeState | None:
    """What a `--resume` / `--resume-run` run already holds; None: a new run (--resume-run's must exist)."""
    run_id: int | None = None
    why_new = f"no earlier run of {spec.name!r} to resume"  # no database yet
    if resume_run is not None:
        engine = open_db_readonly(db)
        run_id = resolve_run_ref(engine, resume_run)
    elif not resume:
        return None
    else:
        try:
            engine, _ = open_database_readonly(resolve_url(db))
        except Exception:  # no database yet: the run would be a new one
            pass
        else:
            run_id, why_new = _run_to_resume(engine, spec)
    if run_id is None:
        err_console.print(f"{why_new}; the estimate is for a new run")
        return None
    _check_resume(engine, run_id, spec)
    return estimate.resume_state(engine, run_id, spec, groups)


def _check_resume(engine: Engine, run_id: int, spec: SweepSpec) -> None:
    """The runner's own check (runners/resume_guard.py), so a dry run refuses what the run would refuse."""
    from db import queries as q  # pandas: only for a dry run, not for every `specbench run` at start-up

    run = q.run_info(engine, run_id)
    with failing(ResumeRefused):
        check = check_resume(run_id, run["sweep_name"], run["sweep_yaml"], spec)
    # Another SGLang release or patch state than the run's parts ran: refused, as the run refuses it.
    version, source = preflight.launch_version(spec)
    known = source.startswith(("installed", "emulated"))  # not a guess (the pinned or newest release)
    here = Sglang(version if known else None, preflight.installed_patch_state(spec))
    problem = sglang_conflict(run_id, q.run_parts(engine, [run_id])[run_id], here)
    if problem is not None:
        fail(problem)
    for note in check.lines(run_id):
        err_console.print(escape(note))


def _dry_run(
    spec: SweepSpec,
    groups: list[ServerGroup],
    gpus: list[int] | None,
    db: str | None,
    resume: estimate.ResumeState | None = None,
    policy: HostPolicy | None = None,
    log_dir: Path = Path("logs"),
    part_s: float = estimate.DEFAULT_PART_S,
) -> None:
    """Each launch's real argv and env (the launcher's own builder), a time estimate (what is missing, for a
    resume; host_history.py) in parts of `part_s`, and whether the sweep would run here (readiness.py).
    Runs nothing (SGLang's release is read from files). Exits 2, every reason listed, where the run would."""
    policy = policy or HostPolicy.author()
    version, version_from = preflight.launch_version(spec)
    patch = preflight.installed_patch_state(spec)
    _warn_known_bugs(spec, groups, version, f" ({version_from})", patch)
    if spec.server.backend == "external":
        console.print(f"backend external: nothing is launched; points are measured on {spec.server.base_url}")
    else:
        _plain(
            f"SGLang {version}: {version_from}; argv and env below are built for it. --port {DRY_RUN_PORT} "
            "stands for the free port picked at launch; env lists what specbench and the sweep set (the server "
            "also gets the host's PATH, HOME, caches)"
        )
        if (patch := preflight.launch_patch(spec)) is not None:
            _plain(f"SGLang patch: {patch}")
        if spec.measure.cpu_probe == "server":
            _plain("cpu probe: on the server's busiest CPU in every window (takes ~1-3% of that core)")
    for line in preflight.describe(spec):
        _plain(line)
    check = spec.measure.correctness
    if check.enabled:
        _plain(
            f"correctness check (measure.correctness): {check.prompts} greedy prompts of {check.input_len} tokens "
            f"-> {check.output_len} new tokens per launch, before its windows; tolerance "
            f"{check.max_diverging_prompts} diverging prompt(s), acceptance ratio >= {check.min_acceptance_ratio:g}"
        )
    collapsed = 0
    refused: dict[str, None] = {}  # what the launcher's own builder refuses, once each
    for i, g in enumerate(groups, 1):
        console.print(
            f"\n[bold]launch {i}/{len(groups)}[/]: {g.server.label()} - {len(g.points)} point(s), batch sizes "
            f"{sorted({p.batch_size for p in g.points})}",
            highlight=False,
        )
        if check.enabled and (why := why_not_checked(spec, g.server)) is not None:
            _plain(f"  correctness: not checked: {why}")
        if resume is not None and resume.complete(spec, g):
            console.print(f"  complete in run {resume.run_id}: not started again", highlight=False)
            continue
        if (acc_note := g.server.accept_length_note()) is not None:
            _plain(f"  note: {acc_note}")
        if spec.server.backend == "external":
            continue
        try:
            plan = plan_launch(
                spec.server, g.server, version=version, port=DRY_RUN_PORT, gpus=gpus, policy=policy
            )
        except LaunchError as e:
            refused[str(e)] = None
            _plain(f"  cannot launch: {e}")
            continue
        built, env = plan.argv, plan.env_delta
        _plain(f"  argv: {shlex.join(built.argv)}", soft_wrap=True)
        for k, v in sorted(env.items()):
            _plain(f"  env:  {k}={v}", soft_wrap=True)
        if plan.cpus is not None:
            _plain(f"  cpus: {format_cpu_list(plan.cpus)}")
        for note in (*built.notes, *plan.cpu_notes):
            _plain(f"  note: {note}")
        if plan.routing.routing == "balanced":
            _plain("  routing: balanced (dummy weights on a MoE model: SGLang's uniform expert routing)")
        if plan.routing.warning:
            collapsed += 1
            console.print(f"  [bold yellow]WARNING[/]: {escape(plan.routing.warning)}", highlight=False)
    if collapsed:
        console.print(
            f"\n[bold yellow]WARNING[/]: expert routing stays collapsed on {collapsed} launch(es); their points "
            "are labelled 'routing collapsed' (docs/reference/synthetic-models.md)",
            highlight=False,
        )
    detected = find_gpus(torch=False)
    findings = readiness.check(
        spec, groups, policy=policy, gpus=gpus, log_dir=log_dir, db=db, detected=detected
    )
    findings += [readiness.Finding("blocker", "launch", why) for why in refused]
    gpu_name = describe_gpus(select_gpus(detected[0], gpus if gpus is not None else visible_indices()))[0]
    past = _history(spec, gpu_name, db)
    est = estimate.estimate(
        spec,
        groups,
        past_startup_s=past.startup_s if past else None,
        past_window_s=past.window_s if past else None,
        past_overhead_s=past.overhead_s if past else None,
        measured_where=past.source if past else "",
        resume=resume,
    )
    console.print(
        f"\n[bold]estimated time: about {estimate.human(est.total_s)}[/] "
        f"({est.launches} start(s) {estimate.human(est.startup_s)}, "
        f"{est.windows} measured window(s) with warmup {estimate.human(est.measure_s)})"
    )
    if past is None:
        console.print(
            "  nothing measured on this host or another tells more: the figures below are assumptions"
        )
    for note in est.assumptions:
        _plain(f"  assuming {note}")
    if resume is None:
        _print_parts(
            spec, groups, est.total_s, part_s, past.startup_s if past else None, past.window_s if past else {}
        )
    blockers = [f for f in findings if f.level == "blocker"]
    console.print("\n[bold]would this run here?[/] " + ("no" if blockers else "yes"), highlight=False)
    for finding in findings:
        _plain(finding.line())
    if blockers:
        err_console.print(
            f"[red]{len(blockers)} reason(s) above stop the real run here: it would exit "
            f"{int(ExitCode.ERROR)}, and so does this dry run[/]",
            highlight=False,
        )
        raise typer.Exit(ExitCode.ERROR)


def _print_parts(
    spec: SweepSpec,
    groups: list[ServerGroup],
    total_s: float,
    part_s: float,
    past_startup: float | None,
    past_windows: dict[int, float],
) -> None:
    """Parts of `part_s` (a `--deadline-s` each, then --resume-run), pairs side by side or in blocks."""
    steps = schedule(groups, spec)
    startup = past_startup if past_startup is not None else estimate.startup_s(spec)
    pairs = spec.server.pair_colocate and any(isinstance(s, Pair) for s in steps)
    plans = {
        blocks: estimate.timeline(spec, steps, startup=startup, past_window_s=past_windows, blocks=blocks)
        for blocks in ([False, True] if pairs else [False])
    }
    if max(total_s, *(sum(w.seconds for w in work) for work in plans.values())) <= part_s:
        return  # one part holds it, whichever GPU comes
    _plain(
        f"\nin parts of about {estimate.human(part_s)} of GPU time (--deadline-s {part_s:g} each, continued with "
        "--resume-run, the database and JIT caches carried: docs/guide/gpu-hosts.md), at the planned repeats"
    )
    for blocks, work in plans.items():
        restart = startup * (1 if blocks else 2) + max((w.seconds for w in work if not w.starts), default=0.0)
        parts = estimate.split(work, part_s, restart)
        starts = sum(w.starts for w in work)
        how = (
            "one server at a time, in blocks (a GPU that holds one, e.g. an H100 80 GB)"
            if blocks
            else "both servers of a pair up side by side (a GPU that holds two)"
        )
        total = sum(p.seconds for p in parts)
        _plain(f"  {how}: about {estimate.human(total)}, {starts} start(s), {len(parts)} part(s)")
        for n, part in enumerate(parts, 1):
            _plain(f"    {part.line(n)}")


def _warn_known_bugs(
    spec: SweepSpec, groups: list[ServerGroup], version: str, version_note: str, patch: str | None
) -> None:
    """A loud line per known wrong path the sweep takes on this release, and per bug its patch fixes."""
    if spec.server.backend == "external" or version == "?":
        return
    for bug in fixed_by_patch(patch):
        _plain(f"SGLang carries specbench patch {patch}: known issue {bug.key} is fixed on it ({bug.report})")
    seen: dict[str, list[str]] = {}
    pinned: dict[str, int] = {}
    for g in groups:
        for bug in bugs_for(
            version, spec.server.attention_backend, g.server.spec_mode, g.server.steps, patch
        ):
            seen.setdefault(bug.key, []).append(g.server.label())
            pinned[bug.key] = pinned.get(bug.key, 0) + (SIMULATE_ACC_ENV in dict(g.server.env))
    for bug in KNOWN_BUGS:
        if bug.key not in seen:
            continue
        launches = f"{len(seen[bug.key])} launch(es) take that path ({', '.join(seen[bug.key])})"
        if bug.is_open:
            # No release has the fix: what the path costs and how the gate shows it, not a release to use.
            outcome = _open_bug_outcome(bug, spec, pinned=pinned[bug.key], total=len(seen[bug.key]))
            line = (
                f"SGLang {version}{version_note} has known issue {bug.key} ({bug.status()}): {bug.summary}. "
                f"{launches}: {outcome} (docs/reference/correctness-gate.md)."
            )
        else:
            # A bug measured as a crash: the launch fails, named, and the gate fails it (no speed exists).
            outcome = (
                f"measured on a GPU, such a server dies at its start-up warm-up ({bug.crash}): the launch fails, "
                "named as this bug, and the correctness gate fails it"
                if bug.crash is not None
                else "their speed is a wrong path's unless the correctness gate passes them"
            )
            line = (
                f"SGLang {version}{version_note} predates the fix of {bug.key}: {bug.summary}. {launches}; "
                f"{outcome} (docs/reference/correctness-gate.md). Use sglang >= {bug.fixed_release} to measure "
                "the fixed path."
            )
        err_console.print(f"[bold yellow]warning:[/] {escape(line)}", highlight=False)


def _open_bug_outcome(bug: KnownBug, spec: SweepSpec, *, pinned: int, total: int) -> str:
    """What an open bug does to the `total` launches taking it, `pinned` of them with acceptance pinned."""
    if bug.symptom != "acceptance":
        return "their speed is a wrong path's unless the correctness gate passes them"
    # SGLang draws a pinned acceptance without looking at the drafts (contract §1.8): it does not show there.
    why_pinned = f"pin acceptance ({SIMULATE_ACC_ENV}), which SGLang draws without the drafts"
    if pinned == total:
        return f"they {why_pinned}, so their numbers do not show it"
    said = (
        "their speed is that path's; on a mirror checkpoint the correctness gate fails those with 3 or more steps "
        "and names it"
    )
    fault = bug.key.replace("-", "_")
    if spec.server.backend == "sim" and fault in SIM_WRONG_FAULTS:
        # The stand-in reproduces it only when asked (synthetic/server/wrong.py): say which it does.
        asked = fault in (spec.server.sim.fault or "").split(",")
        said = (
            f"the stand-in reproduces it (server.sim.fault: {fault}), and the correctness gate fails those with 3 "
            "or more steps"
            if asked
            else f"the stand-in reproduces it only with server.sim.fault: {fault}"
        )
    if pinned:
        said += f"; {pinned} of them {why_pinned}, so their numbers do not show it"
    return f"{said}; control: {bug.control}" if bug.control else said


def _history(spec: SweepSpec, gpu_name: str, db: str | None) -> host_history.Measured | None:
    """What earlier runs measured (host_history.py), read-only (a dry run creates or migrates no database)."""
    try:
        engine, _ = open_database_readonly(resolve_url(db))
        return host_history.measured(engine, spec, gpu_name)
    except Exception:  # the estimate falls back to its assumptions; the dry run is not about the database
        return None


def _plain(text: str, **options: Any) -> None:
    """A line of plain text: sweep values, paths and argv are never read as markup or highlighted."""
    console.print(text, markup=False, highlight=False, **options)


def _interrupt(signum: int, _frame: object) -> None:
    raise Terminated(signal.Signals(signum).name)


def _run_to_resume(engine: Engine, spec: SweepSpec) -> tuple[int | None, str]:
    """The latest run of this sweep, unless `done` from another version of it (a new run, not a refusal)."""
    with session_scope(engine) as s:
        run = s.scalars(
            select(Run).where(Run.sweep_name == spec.name).order_by(Run.id.desc()).limit(1)
        ).first()
        if run is None:
            return None, f"no earlier run of {spec.name!r} to resume"
        run_id, status, sweep_yaml = run.id, run.status, run.sweep_yaml
    if status == "done":
        try:
            check_resume(run_id, spec.name, sweep_yaml, spec)
        except ResumeRefused:
            return (
                None,
                f"the latest run of {spec.name!r} (#{run_id}) is done, from another version of the sweep",
            )
    return run_id, ""


def _fmt(v: float | None, digits: int = 1) -> str:
    return "-" if v is None else f"{v:,.{digits}f}"


def _summary(engine: Engine, outcome: RunOutcome, elapsed_s: float) -> None:
    with session_scope(engine) as s:
        points = list(s.scalars(select(Point).where(Point.run_id == outcome.run_id).order_by(Point.id)))
        run = s.get(Run, outcome.run_id)
        kind = KIND_TAG[run_kind(run.simulated, run.trigger)] if run is not None else MEASURED
    columns = [
        Column("config"),
        Column("bs", "right"),
        Column("status", markup=True),
        Column("out tok/s", "right", markup=True),
        Column("95% CI", "right", drop=3),
        Column("accept", "right"),
        Column("TTFT p50", "right", drop=2),
        Column("TPOT p50", "right"),
        Column("ITL p50", "right", drop=1),
        Column("check", markup=True),
    ]
    rows = []
    for p in points:
        acc = f" acc{p.accept_length_pinned:g}" if p.accept_length_pinned is not None else ""
        cfg = "baseline" if p.algorithm is None else f"{p.algorithm} s{p.steps} k{p.topk}{acc} {p.spec_mode}"
        style = {"ok": "green", "unstable": "yellow"}.get(p.status, "red")
        ci = (
            f"{_fmt(p.output_throughput_ci_low, 0)}-{_fmt(p.output_throughput_ci_high, 0)}"
            if p.output_throughput_ci_low is not None
            else "-"
        )
        rows.append(
            [
                cfg,
                str(p.batch_size),
                f"[{style}]{p.status}[/]",
                # A wrong path's speed is struck through and labelled: it is not a number to quote.
                f"[strike]{_fmt(p.output_throughput)}[/] [bold red]wrong[/]"
                if p.correctness == "fail"
                else _fmt(p.output_throughput),
                ci,
                _fmt(p.accept_length, 2),
                _fmt(p.ttft_p50_ms),
                _fmt(p.tpot_p50_ms, 2),
                _fmt(p.itl_p50_ms, 2),
                CHECK_MARK.get(p.correctness or "", "-"),
            ]
        )
    # What the numbers are: the stand-in's are simulated, and say so above them (a measured run says nothing).
    made_up = f" ({kind})" if kind != MEASURED else ""
    print_table(console, columns, rows, title=f"run {outcome.run_id}{made_up}: {outcome.status}")
    for p in [p for p in points if p.status != "ok"][:20]:
        console.print(f"[red]{p.status}[/] point {p.id} (bs={p.batch_size}): {p.reason}")
    overhead = "-" if outcome.overhead_s_per_point is None else f"{outcome.overhead_s_per_point:.2f} s"
    console.print(
        f"{outcome.points_stored}/{outcome.points_total} points measured this session, "
        f"{outcome.launches} launch(es), {elapsed_s:.1f} s, per-point overhead outside the window {overhead}"
    )
    _print_drift(outcome.drift)


def _print_drift(drift: Drift | None) -> None:
    if drift is None:
        return
    where = escape(f"{drift.label} bs={drift.batch_size}")
    if drift.error:
        console.print(f"[yellow]drift check ({where}): {escape(drift.error)}[/]")
        return
    first, last = (w or DriftWindow(None, None) for w in (drift.first, drift.last))

    def pct(x: float | None) -> str:
        return "-" if x is None else f"{x:+.1%}"

    console.print(
        f"drift check ({where}, re-measured at the end; {drift.note}): output throughput "
        f"{_fmt(first.output_throughput)} -> {_fmt(last.output_throughput)} tok/s "
        f"({pct(drift.output_throughput_change)}), TPOT {_fmt(first.tpot_mean_ms, 2)} -> "
        f"{_fmt(last.tpot_mean_ms, 2)} ms ({pct(drift.tpot_change)})"
    )
