"""The correctness gate: each launched server answers greedy prompts, stored as they come; `gate` judges
every point from what is stored (docs/reference/correctness-gate.md).
"""

import asyncio
import dataclasses
import functools
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any, TypeVar

from rich.console import Console
from rich.markup import escape
from sqlalchemy import select
from sqlalchemy.orm import Session

from bench.client import LoadClient
from bench.correctness.collect import collect
from bench.correctness.outputs import LaunchOutputs, ReferenceOutputs
from bench.correctness.prompts import check_prompts, why_not_checked
from bench.correctness.verdict import (
    CheckVerdict,
    divergences,
    judge_launch,
    not_checked,
    self_divergence,
    unusable,
)
from bench.model_config import prompt_vocab
from bench.server.known_bugs import KnownBug, acceptance_suspect, bugs_for, suspect_line
from bench.server.launcher import LaunchedServer
from bench.sweep import CorrectnessSpec, ServerConfig, SweepSpec, expand
from db.models import CorrectnessOutput, Point, Run, ServerInstance

T = TypeVar("T")
Write = Callable[[Callable[[Session], T], str], T]
REFERENCE_KEY = "reference"  # correctness_outputs.config_key of the reference's expectation
NO_ANSWERS = "no answers stored: the server did not start, or the run stopped before it"


class CorrectnessCheck:
    """The check of one run in progress: one prompt set, each config's server asked once per invocation."""

    def __init__(self, spec: SweepSpec, run_id: int, write: Write[Any]) -> None:
        self.spec, self.run_id, self.write = spec, run_id, write
        self.settings = spec.measure.correctness
        self._asked: set[str] = set()

    @functools.cached_property
    def prompts(self) -> list[list[int]]:
        return check_prompts(self.settings, prompt_vocab(self.spec.model))

    def check_server(
        self, cfg: ServerConfig, server: LaunchedServer, server_row_id: int
    ) -> LaunchOutputs | None:
        """Store a fresh `server`'s answers; None when the check does not apply or was asked already."""
        if why_not_checked(self.spec, cfg) is not None or cfg.key() in self._asked:
            return None
        self._asked.add(cfg.key())
        outputs = asyncio.run(self._collect(server.base_url, cfg))
        row = {"config_key": cfg.key(), "spec_mode": cfg.spec_mode, "outputs": outputs.to_json()}

        def store(s: Session) -> None:
            s.add(CorrectnessOutput(run_id=self.run_id, server_instance_id=server_row_id, **row))

        self.write(store, f"storing the correctness check of {cfg.label()}")
        return outputs

    async def _collect(self, base_url: str, cfg: ServerConfig) -> LaunchOutputs:
        async with LoadClient(base_url) as client:
            return await collect(
                client, cfg, self.prompts, self.settings, timeout_s=self.spec.request_timeout_s
            )


@dataclass
class LaunchVerdict:
    config_key: str
    label: str
    spec_mode: str | None
    verdict: CheckVerdict
    known_bug: str | None = None


@dataclass
class GateSummary:
    """A run's verdicts, one per server config, with what the reader needs to trust them."""

    launches: list[LaunchVerdict] = field(default_factory=list)
    # (prompts whose tokens differ, prompts) between the baseline's batched and one-at-a-time passes.
    baseline_spread: tuple[int, int] | None = None
    # The same between this run's baseline launches (a resumed run starts a new one).
    baseline_launches: list[tuple[int, int]] = field(default_factory=list)
    reference_note: str | None = None

    @property
    def failed(self) -> list[LaunchVerdict]:
        return [v for v in self.launches if v.verdict.verdict == "fail"]

    def counts(self) -> dict[str, int]:
        counts = Counter(v.verdict.verdict for v in self.launches)
        return {verdict: counts[verdict] for verdict in ("pass", "fail", "not checked")}


ReferenceFn = Callable[[list[list[int]], int, list[int]], ReferenceOutputs]


def gate(
    spec: SweepSpec,
    run_id: int,
    write: Write[Any],
    *,
    settings: CorrectnessSpec | None = None,
    store: bool = True,
    reference: ReferenceFn | None = None,
    say: Callable[[str], None] | None = None,
) -> GateSummary:
    """Judge every server config from its stored answers and write the verdicts onto its points.

    `settings` overrides the sweep's tolerances; `store=False` only judges; `reference` computes it (tests).
    """
    settings = settings or spec.measure.correctness
    configs = {g.server.key(): g.server for g in expand(spec)}
    rows = write(lambda s: _stored(s, run_id), "reading the correctness checks")
    servers = write(lambda s: _servers(s, run_id), "reading the run's servers")
    patch = write(lambda s: _run_patch(s, run_id), "reading the run's provenance")
    launches = {k: LaunchOutputs.from_json(v) for k, v in rows.items() if k != REFERENCE_KEY}
    summary = GateSummary()
    ref, summary.reference_note = _reference(
        spec, run_id, write, launches, rows.get(REFERENCE_KEY), reference, say, store=store
    )
    baseline = next((o for o in launches.values() if o.spec_mode is None), None)
    if baseline is not None and (spread := self_divergence(baseline)) is not None:
        summary.baseline_spread = (spread[0], len(baseline.passes[0].requests))
    if baseline is not None:
        earlier = write(lambda s: _baselines(s, run_id), "reading the run's baseline launches")[:-1]
        summary.baseline_launches = [d for o in earlier if (d := baseline_agreement(o, baseline)) is not None]
    for key, cfg in configs.items():
        why = why_not_checked(spec, cfg)
        mine = launches.get(key)
        known = _known_bug_failure(servers.get(key))
        if known is not None and settings.enabled:
            # Died of a known SGLang bug: the release cannot run this configuration.
            bug = servers[key][3]
            summary.launches.append(
                LaunchVerdict(key, cfg.label(), cfg.spec_mode, CheckVerdict("fail", known), bug)
            )
            continue
        if why is not None:
            verdict = not_checked(why)
        elif mine is None:
            verdict = not_checked(_no_answers(servers.get(key)))
        else:
            others = (None, mine.spec_mode)
            partner = next(
                (o for o in launches.values() if o.pair_key == mine.pair_key and o.spec_mode not in others),
                None,
            )
            suspect = _acceptance_suspect(cfg, spec, servers.get(key), patch)
            verdict = judge_launch(
                mine,
                settings=settings,
                baseline=baseline,
                partner=partner,
                reference=ref,
                reference_note=None if ref is not None else summary.reference_note,
                acceptance_suspect=suspect_line(suspect) if suspect is not None else None,
            )
        verdict = _with_known_bugs(verdict, cfg, spec, servers.get(key), patch)
        summary.launches.append(LaunchVerdict(key, cfg.label(), cfg.spec_mode, verdict))
    if store:
        by_key = {v.config_key: v.verdict for v in summary.launches}
        write(lambda s: _write_verdicts(s, run_id, by_key), "storing the correctness verdicts")
    return summary


ServerRow = tuple[str, str | None, str | None, str | None]


def _servers(s: Session, run_id: int) -> dict[str, ServerRow]:
    """config_key -> (status, error, sglang version, known bug) of its latest server row."""
    rows = s.execute(
        select(
            ServerInstance.config_key,
            ServerInstance.status,
            ServerInstance.error,
            ServerInstance.sglang_version,
            ServerInstance.known_bug,
        )
        .where(ServerInstance.run_id == run_id)
        .order_by(ServerInstance.id)
    )
    return {key: (status, error, version, bug) for key, status, error, version, bug in rows}


def _known_bug_failure(server: ServerRow | None) -> str | None:
    """Why the config fails when its latest launch died of a known SGLang bug, else None."""
    if server is None or server[0] != "failed" or server[3] is None:
        return None
    error = server[1] or ""
    first = next(
        (line.strip() for line in error.splitlines() if line.strip()), f"known SGLang bug {server[3]}"
    )
    return f"{first}; the server never served, so this configuration has no speed on this release"


def _no_answers(server: ServerRow | None) -> str:
    if server is not None and server[0] == "failed" and server[1]:
        first = next((line for line in server[1].splitlines() if line.strip()), server[1])
        return f"the server failed before it answered the check: {first.strip()[:300]}"
    return NO_ANSWERS


def _launch_version(spec: SweepSpec, server: ServerRow | None) -> str | None:
    """The SGLang release the launch ran (or the stand-in emulated), or None."""
    if spec.server.backend == "sim":
        return spec.server.sim.version
    return server[2] if server is not None else None


def _run_patch(s: Session, run_id: int) -> str | None:
    """The specbench patch the run's SGLang carried (bench/server/sglang_patch.py)."""
    run = s.get(Run, run_id)
    value = (run.provenance or {}).get("sglang_patch") if run is not None else None
    return str(value) if value is not None else None


def _acceptance_suspect(
    cfg: ServerConfig, spec: SweepSpec, server: ServerRow | None, patch: str | None
) -> KnownBug | None:
    """The unpatched known bug whose symptom (fewer drafts accepted) this launch would show, if any."""
    version = _launch_version(spec, server)
    if not version:
        return None
    return acceptance_suspect(version, spec.server.attention_backend, cfg.spec_mode, cfg.steps, patch)


def _with_known_bugs(
    verdict: CheckVerdict, cfg: ServerConfig, spec: SweepSpec, server: ServerRow | None, patch: str | None
) -> CheckVerdict:
    """The verdict noting known crashes of the launch's release here that it did not die of."""
    version = _launch_version(spec, server)
    if not version:
        return verdict
    try:
        bugs = bugs_for(version, spec.server.attention_backend, cfg.spec_mode, cfg.steps, patch)
    except ValueError:  # a version string no rule reads
        return verdict
    notes = "; ".join(
        f"sglang {version} has a known wrong path here: {b.summary}" for b in bugs if b.symptom == "crash"
    )
    return dataclasses.replace(verdict, why=f"{verdict.why}; {notes}") if notes else verdict


def baseline_agreement(a: LaunchOutputs, b: LaunchOutputs) -> tuple[int, int] | None:
    """(prompts whose tokens differ, prompts) between two baseline launches' first passes, or None."""
    if unusable(a) or unusable(b) or a.prompts_digest != b.prompts_digest:
        return None
    assert a.first is not None and b.first is not None
    divs = divergences([r.output_ids for r in a.first.requests], [r.output_ids for r in b.first.requests])
    return sum(d is not None for d in divs), len(divs)


def _baselines(s: Session, run_id: int) -> list[LaunchOutputs]:
    rows = s.scalars(
        select(CorrectnessOutput)
        .where(
            CorrectnessOutput.run_id == run_id,
            CorrectnessOutput.spec_mode.is_(None),
            CorrectnessOutput.config_key != REFERENCE_KEY,
        )
        .order_by(CorrectnessOutput.id)
    )
    return [LaunchOutputs.from_json(dict(r.outputs)) for r in rows]


def run_baseline(write: Write[Any], run_id: int) -> LaunchOutputs | None:
    """The latest baseline launch's answers of a run (for `specbench gate --against`)."""
    found = write(lambda s: _baselines(s, run_id), "reading a run's baseline")
    return found[-1] if found else None


def _stored(s: Session, run_id: int) -> dict[str, dict[str, Any]]:
    """config_key -> the latest stored answers (a resumed run asks its new servers again)."""
    rows = s.scalars(
        select(CorrectnessOutput).where(CorrectnessOutput.run_id == run_id).order_by(CorrectnessOutput.id)
    )
    return {r.config_key: dict(r.outputs) for r in rows}


def _reference(
    spec: SweepSpec,
    run_id: int,
    write: Write[Any],
    launches: dict[str, LaunchOutputs],
    stored: dict[str, Any] | None,
    compute: ReferenceFn | None,
    say: Callable[[str], None] | None,
    *,
    store: bool,
) -> tuple[ReferenceOutputs | None, str | None]:
    from synthetic.model.expected import reference_note, reference_outputs

    if not launches:
        return None, reference_note(spec.model, spec.server.backend)
    first = next(iter(launches.values()))
    steps = sorted({o.steps for o in launches.values() if o.steps is not None})
    # Stored, so a shipped GPU run is re-judged on hosts without its checkpoint or torch.
    if stored is not None:
        ref = ReferenceOutputs.from_json(stored)
        if ref.prompts_digest == first.prompts_digest and set(steps) <= set(ref.accept_lengths):
            return ref, None
    standin = spec.server.backend == "sim" and compute is None
    note = reference_note(spec.model, spec.server.backend)
    if note is not None and compute is None and not standin:
        return None, note
    settings = spec.measure.correctness
    prompts = check_prompts(settings, prompt_vocab(spec.model))
    if standin:
        # Known by construction and cheap, so computed at every judgement rather than stored.
        from synthetic.server.reference import reference_outputs as standin_reference

        ref = standin_reference(spec.server.sim, prompts, settings.output_len, steps)
        if ref.prompts_digest != first.prompts_digest:
            return (
                None,
                "not checked: the stand-in's reference answered another prompt set (model vocabulary?)",
            )
        return ref, None
    if say is not None:
        say(f"correctness: computing the reference's answers ({len(prompts)} prompts, steps {steps or '-'})")
    try:
        ref = (compute or functools.partial(reference_outputs, spec.model))(
            prompts, settings.output_len, steps
        )
    except Exception as e:  # the reference is a check on the check: it never takes the run down
        return None, f"not checked: the reference failed ({type(e).__name__}: {e})"
    if ref.prompts_digest != first.prompts_digest:
        return None, "not checked: the reference's prompt set differs from the launches' (model vocabulary?)"
    if store:
        row = {"config_key": REFERENCE_KEY, "spec_mode": None, "outputs": ref.to_json()}
        write(
            lambda s: s.add(CorrectnessOutput(run_id=run_id, server_instance_id=None, **row)),
            "storing the reference",
        )
    return ref, None


def _write_verdicts(s: Session, run_id: int, verdicts: dict[str, CheckVerdict]) -> None:
    for point in s.scalars(select(Point).where(Point.run_id == run_id)):
        v = verdicts.get(point.point_key.split("/", 1)[0])  # PointPlan.key() starts with its server's key
        if v is None:
            continue
        point.correctness = v.verdict
        point.correctness_reason = v.why
        point.correctness_diverge_request = v.diverge_request
        point.correctness_diverge_token = v.diverge_token
        point.acceptance_v2_v1 = v.acceptance_v2_v1


CHECK_MARK = {"pass": "[green]pass[/]", "fail": "[bold red]FAIL[/]", "not checked": "[dim]not checked[/]"}


def print_correctness(summary: GateSummary | None, console: Console, err_console: Console) -> bool:
    """The gate's verdict per launch on `console`, a failure loudly on `err_console`; True when one failed."""
    if summary is None or not summary.launches:
        return False
    counts = summary.counts()
    spread = summary.baseline_spread
    same = (
        f"; baseline batched vs one at a time: {spread[1] - spread[0]}/{spread[1]} prompts agree"
        if spread
        else ""
    )
    for n, total in summary.baseline_launches:
        same += f"; an earlier baseline launch of this run: {total - n}/{total} prompts agree"
    console.print(
        f"correctness: {counts['pass']} pass, {counts['fail']} fail, {counts['not checked']} not checked{same}",
        highlight=False,
    )
    for v in summary.launches:
        mark = CHECK_MARK[v.verdict.verdict]
        console.print(f"  {mark} {escape(v.label)}: {escape(v.verdict.why)}", highlight=False)
    wrong = [v.label for v in summary.failed if v.known_bug is None]
    crashed = [v.label for v in summary.failed if v.known_bug is not None]
    if wrong:
        err_console.print(
            f"[bold red]WRONG: {escape(', '.join(wrong))} computed wrong tokens or acceptance; their speed was "
            "measured on a wrong path (struck through above, `wrong` in exports and the dashboard)[/]"
        )
    if crashed:
        err_console.print(
            f"[bold red]WRONG: {escape(', '.join(crashed))} cannot run on this release: the server died of a known "
            "SGLang bug (named above), so no speed exists for it[/]"
        )
    return bool(summary.failed)
