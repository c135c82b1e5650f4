"""The cross-field checks of a well-typed sweep: every reason it cannot run, to fix them in one go."""

from __future__ import annotations

import itertools
import re
from collections.abc import Callable, Iterator
from typing import TYPE_CHECKING

from bench.server.flags import PATH_FLAGS, check_passthrough_flag, path_value_problem
from bench.server.spec_modes import ENV_ROUND_ROBIN_EXPERTS, ENV_UNIFORM_EXPERTS
from bench.sweep.fields import MAX_POINTS, MAX_SERVER_CONFIGS, SIMULATE_ACC_ENV, TOPK1_ONLY_BACKENDS

if TYPE_CHECKING:  # SweepSpec imports this module to run the checks on validation
    from bench.sweep.spec import SweepSpec

# SGLang's routing switches: specbench sets them from server.balanced_routing (bench/server/routing.py).
ROUTING_ENV = frozenset({ENV_UNIFORM_EXPERTS, ENV_ROUND_ROBIN_EXPERTS})


def find_problems(spec: SweepSpec) -> list[str]:
    """Every reason a well-typed sweep cannot run, fixed in one go; a grid past the caps first."""
    size = _Size(spec)
    return ([size.problem] if size.problem else []) + [msg for rule in RULES for msg in rule(spec)]


class _Size:
    """How many server configs and points the grid expands to; `problem` when past the caps."""

    def __init__(self, spec: SweepSpec) -> None:
        g = spec.grid
        self.drafts = len(g.draft_tokens) if isinstance(g.draft_tokens, list) else 1
        accepts = sum(len(g.accepts_for(st)) for st in g.steps)  # (steps, acceptance) combinations
        self.combos = len(g.steps) * len(g.topk) * self.drafts
        servers = int(g.baseline) + len(g.spec_modes) * len(g.topk) * self.drafts * accepts
        points = servers * len(g.batch_sizes) * len(spec.workloads)
        self.too_big = servers > MAX_SERVER_CONFIGS or points > MAX_POINTS
        self.problem = (
            f"grid: {servers:,} server configs and {points:,} points; at most {MAX_SERVER_CONFIGS:,} and "
            f"{MAX_POINTS:,} (split the sweep)"
            if self.too_big
            else None
        )


def _batch_sizes(spec: SweepSpec) -> Iterator[str]:
    if len(set(spec.grid.batch_sizes)) != len(spec.grid.batch_sizes):
        yield "grid.batch_sizes: duplicate values"


def _topk_backend(spec: SweepSpec) -> Iterator[str]:
    backend = spec.server.attention_backend
    for k in spec.grid.topk:
        if k > 1 and backend in TOPK1_ONLY_BACKENDS:
            yield (
                f"grid.topk: {k} is not supported by attention backend {backend!r} "
                "(FlashMLA speculative decoding supports topk = 1 only; its page size is 64)"
            )


def _draft_tokens(spec: SweepSpec) -> Iterator[str]:
    """Explicit draft tokens against each (steps, topk); not walked for a grid past the caps."""
    g, size = spec.grid, _Size(spec)
    if not isinstance(g.draft_tokens, list) or size.too_big or size.combos > MAX_SERVER_CONFIGS:
        return
    for st, k, d in itertools.product(g.steps, g.topk, g.draft_tokens):
        if st * k + 1 < d:
            yield (
                f"grid: steps={st} topk={k} draft_tokens={d}: steps*topk+1 = {st * k + 1} < "
                "draft_tokens (the draft tree cannot hold that many tokens)"
            )
        elif k == 1 and d != st + 1:
            yield (
                f"grid: steps={st} topk=1 draft_tokens={d}: with topk 1 SGLang overwrites "
                f"draft_tokens to steps+1 = {st + 1}; use `draft_tokens: auto`"
            )


def _correctness(spec: SweepSpec) -> Iterator[str]:
    c = spec.measure.correctness
    if c.max_diverging_prompts >= c.prompts:
        yield (
            f"measure.correctness.max_diverging_prompts: {c.max_diverging_prompts} lets every one of the "
            f"{c.prompts} prompts differ, so the check could never fail; keep it below measure.correctness.prompts"
        )


def _ratio_target(spec: SweepSpec) -> Iterator[str]:
    m, sizes = spec.measure, spec.grid.batch_sizes
    if m.max_repeats is not None and m.ratio_target is None:
        yield "measure.max_repeats: only used with measure.ratio_target (set both, or neither)"
    if m.ratio_target_min_batch != 1:
        if m.ratio_target is None:
            yield "measure.ratio_target_min_batch: only used with measure.ratio_target"
        elif sizes and m.ratio_target_min_batch > max(sizes):
            yield (
                f"measure.ratio_target_min_batch: {m.ratio_target_min_batch} is above every batch size "
                f"(largest {max(sizes)}), so measure.ratio_target would apply nowhere"
            )
    if m.ratio_target is None:
        return
    if not spec.paired and not m.baseline_pairs:
        yield (
            "measure.ratio_target: needs pairs (grid.spec_modes with v1 and v2 and measure.paired, or "
            "measure.baseline_pairs)"
        )
    if spec.repeats < 2:
        yield "measure.ratio_target: needs repeats >= 2 (a paired interval needs two pairs)"
    if m.max_repeats is not None and m.max_repeats < spec.repeats:
        yield f"measure.max_repeats: {m.max_repeats} is below repeats ({spec.repeats})"


def _baseline_pairs(spec: SweepSpec) -> Iterator[str]:
    modes, g = spec.measure.baseline_pairs, spec.grid
    if not modes:
        return
    if len(set(modes)) != len(modes):
        yield "measure.baseline_pairs: duplicate values"
    if not g.baseline:
        yield "measure.baseline_pairs: needs grid.baseline: true (the baseline is what the modes are paired with)"
    for mode in sorted(set(modes) - set(g.spec_modes)):
        yield f"measure.baseline_pairs: {mode} is not in grid.spec_modes {g.spec_modes}"
    if spec.server.backend == "external":
        yield "measure.baseline_pairs: backend external measures one server; there is no baseline to start beside it"


def _accept_lengths(spec: SweepSpec) -> Iterator[str]:
    g = spec.grid
    pinned = g.accept_lengths.values() if isinstance(g.accept_lengths, dict) else [g.accept_lengths]
    if any(len(set(lengths)) != len(lengths) for lengths in pinned):
        yield "grid.accept_lengths: duplicate values"
    if isinstance(g.accept_lengths, dict):
        for st in sorted(set(g.accept_lengths) - set(g.steps)):
            yield f"grid.accept_lengths: steps {st} is not in grid.steps {g.steps}"
        for st in sorted(set(g.steps) - set(g.accept_lengths)):
            yield f"grid.accept_lengths: no entry for steps {st} (a mapping pins each steps value)"
    if g.accept_lengths and SIMULATE_ACC_ENV in spec.server.env:
        yield f"server.env.{SIMULATE_ACC_ENV}: set by grid.accept_lengths; remove one of the two"


def _set_by_specbench(spec: SweepSpec) -> Iterator[str]:
    s = spec.server
    for name in sorted(set(s.env) & ROUTING_ENV):
        yield f"server.env.{name}: set by specbench itself (server.balanced_routing: auto | off)"
    if s.load_format != "auto" and "load-format" in s.args:
        yield "server.args.load-format: set by server.load_format; remove one of the two"


def _spec_modes(spec: SweepSpec) -> Iterator[str]:
    g = spec.grid
    if not g.spec_modes and not g.baseline:
        yield "grid: no spec_modes and no baseline, nothing to measure"
    if len(set(g.spec_modes)) != len(g.spec_modes):
        yield "grid.spec_modes: duplicate values"


def _passthrough_args(spec: SweepSpec) -> Iterator[str]:
    for name, value in spec.server.args.items():
        if msg := check_passthrough_flag(name):
            yield f"server.args: {msg}"
        elif name in PATH_FLAGS and (msg := path_value_problem(f"server.args.{name}", value)):
            yield msg


def _external(spec: SweepSpec) -> Iterator[str]:
    """A server someone else launched: only batch sizes and workloads sweep, nothing of the launch applies."""
    g, s = spec.grid, spec.server
    if s.backend != "external":
        if s.base_url:
            yield f"server.base_url is only for backend: external (backend is {s.backend!r})"
        return
    if not s.base_url:
        yield "server.base_url: required with backend: external (the server someone else launched)"
    elif "@" in s.base_url:
        # Not echoed: a sweep's text is stored with the job and the run, and shown in errors and reasons.
        yield (
            "server.base_url: holds a user name or password (user:password@host), not shown; a sweep is "
            "stored and shown in full, so it carries no secret, and specbench sends no credentials"
        )
    elif not re.match(r"^https?://[^\s/]+(:\d+)?/?$", s.base_url):
        yield f"server.base_url: {s.base_url!r} is not http(s)://host[:port]"
    multi = [n for n, v in (("spec_modes", g.spec_modes), ("steps", g.steps), ("topk", g.topk)) if len(v) > 1]
    if isinstance(g.draft_tokens, list) and len(g.draft_tokens) > 1:
        multi.append("draft_tokens")
    if g.baseline and g.spec_modes:
        multi.append("baseline")
    if multi:
        yield (
            "backend external: nothing is launched, so server-config dimensions cannot sweep "
            f"({', '.join(multi)} have several values); only batch_sizes and workloads sweep"
        )
    if g.accept_lengths:
        yield "backend external: grid.accept_lengths sets the server's environment; launch it yourself"
    not_launched = "cannot apply to a server specbench does not launch"
    if s.load_format != "auto":
        yield f"backend external: server.load_format {not_launched}"
    if s.args or s.env:
        yield f"backend external: server.args/env {not_launched}"
    if s.cpu_affinity is not None:
        yield f"backend external: server.cpu_affinity {not_launched} (pin it where it is started, e.g. with taskset)"
    if spec.measure.cpu_probe == "server":
        yield (
            "backend external: measure.cpu_probe: server needs the server's processes on this host to find "
            "its busiest CPU, and specbench does not launch this one (use cpu_probe: runner)"
        )


def _profile_at(spec: SweepSpec) -> Iterator[str]:
    sizes = spec.grid.batch_sizes
    at = spec.profile.at if spec.profile is not None else None
    for b in at or []:
        if b not in sizes:
            yield f"profile.at: batch size {b} is not in grid.batch_sizes {sizes}"


def _workload_paths(spec: SweepSpec) -> Iterator[str]:
    for i, w in enumerate(spec.workloads):
        where = f"workload[{i}]" if isinstance(spec.workload, list) else "workload"
        if w.dataset == "jsonl" and not w.path:
            yield f"{where}.path: required for dataset: jsonl"
        if w.dataset == "random" and w.path:
            yield f"{where}.path: only for dataset: jsonl"


# The rules in the order their messages are listed.
RULES: tuple[Callable[[SweepSpec], Iterator[str]], ...] = (
    _batch_sizes,
    _topk_backend,
    _draft_tokens,
    _correctness,
    _ratio_target,
    _baseline_pairs,
    _accept_lengths,
    _set_by_specbench,
    _spec_modes,
    _passthrough_args,
    _external,
    _profile_at,
    _workload_paths,
)
