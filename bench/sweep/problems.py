"""The cross-field checks of a well-typed sweep: every reason it cannot run, so the user fixes them in one go."""

from __future__ import annotations

import re
from typing import Protocol

from bench.server.flags import PATH_FLAGS, check_passthrough_flag, path_value_problem
from bench.server.spec_modes import ENV_ROUND_ROBIN_EXPERTS, ENV_UNIFORM_EXPERTS
from bench.sweep.fields import MAX_POINTS, MAX_SERVER_CONFIGS, SIMULATE_ACC_ENV, TOPK1_ONLY_BACKENDS
from bench.sweep.sections import GridSpec, MeasureSpec, ProfileSpec, ServerSpec, WorkloadSpec

# SGLang's routing switches: specbench sets them from server.balanced_routing (bench/server/routing.py).
ROUTING_ENV = frozenset({ENV_UNIFORM_EXPERTS, ENV_ROUND_ROBIN_EXPERTS})


class CheckedSweep(Protocol):
    """What the checks read of a sweep: bench.sweep.spec.SweepSpec, which runs them on validation and so
    imports this module."""

    @property
    def server(self) -> ServerSpec: ...
    @property
    def grid(self) -> GridSpec: ...
    @property
    def workload(self) -> WorkloadSpec | list[WorkloadSpec]: ...
    @property
    def workloads(self) -> list[WorkloadSpec]: ...
    @property
    def repeats(self) -> int: ...
    @property
    def measure(self) -> MeasureSpec: ...
    @property
    def profile(self) -> ProfileSpec | None: ...
    @property
    def paired(self) -> bool: ...


def find_problems(spec: CheckedSweep) -> list[str]:
    """Every reason a well-typed sweep cannot run (the cross-field checks), so the user fixes them in one go."""
    p: list[str] = []
    g, s = spec.grid, spec.server
    if len(set(g.batch_sizes)) != len(g.batch_sizes):
        p.append("grid.batch_sizes: duplicate values")
    for k in g.topk:
        if k > 1 and s.attention_backend in TOPK1_ONLY_BACKENDS:
            p.append(
                f"grid.topk: {k} is not supported by attention backend {s.attention_backend!r} "
                "(FlashMLA speculative decoding supports topk = 1 only; its page size is 64)"
            )
    drafts = len(g.draft_tokens) if isinstance(g.draft_tokens, list) else 1
    accepts = sum(len(g.accepts_for(st)) for st in g.steps)  # (steps, acceptance) combinations
    combos = len(g.steps) * len(g.topk) * drafts
    servers = int(g.baseline) + len(g.spec_modes) * len(g.topk) * drafts * accepts
    points = servers * len(g.batch_sizes) * len(spec.workloads)
    # The size first: a grid past the caps is refused as a whole, before any check walks its combinations.
    too_big = servers > MAX_SERVER_CONFIGS or points > MAX_POINTS
    if isinstance(g.draft_tokens, list) and not too_big and combos <= MAX_SERVER_CONFIGS:
        for st in g.steps:
            for k in g.topk:
                for d in g.draft_tokens:
                    if st * k + 1 < d:
                        p.append(
                            f"grid: steps={st} topk={k} draft_tokens={d}: steps*topk+1 = {st * k + 1} < "
                            "draft_tokens (the draft tree cannot hold that many tokens)"
                        )
                    elif k == 1 and d != st + 1:
                        p.append(
                            f"grid: steps={st} topk=1 draft_tokens={d}: with topk 1 SGLang overwrites "
                            f"draft_tokens to steps+1 = {st + 1}; use `draft_tokens: auto`"
                        )
    m = spec.measure
    c = m.correctness
    if c.max_diverging_prompts >= c.prompts:
        p.append(
            f"measure.correctness.max_diverging_prompts: {c.max_diverging_prompts} lets every one of the "
            f"{c.prompts} prompts differ, so the check could never fail; keep it below measure.correctness.prompts"
        )
    if m.max_repeats is not None and m.ratio_target is None:
        p.append("measure.max_repeats: only used with measure.ratio_target (set both, or neither)")
    if m.ratio_target_min_batch != 1:
        if m.ratio_target is None:
            p.append("measure.ratio_target_min_batch: only used with measure.ratio_target")
        elif g.batch_sizes and m.ratio_target_min_batch > max(g.batch_sizes):
            p.append(
                f"measure.ratio_target_min_batch: {m.ratio_target_min_batch} is above every batch size "
                f"(largest {max(g.batch_sizes)}), so measure.ratio_target would apply nowhere"
            )
    if m.ratio_target is not None:
        if not spec.paired:
            p.append(
                "measure.ratio_target: needs v1/v2 pairs (grid.spec_modes with v1 and v2, measure.paired)"
            )
        if spec.repeats < 2:
            p.append("measure.ratio_target: needs repeats >= 2 (a paired interval needs two pairs)")
        if m.max_repeats is not None and m.max_repeats < spec.repeats:
            p.append(f"measure.max_repeats: {m.max_repeats} is below repeats ({spec.repeats})")
    pinned = g.accept_lengths.values() if isinstance(g.accept_lengths, dict) else [g.accept_lengths]
    if any(len(set(lengths)) != len(lengths) for lengths in pinned):
        p.append("grid.accept_lengths: duplicate values")
    if isinstance(g.accept_lengths, dict):
        for st in sorted(set(g.accept_lengths) - set(g.steps)):
            p.append(f"grid.accept_lengths: steps {st} is not in grid.steps {g.steps}")
        for st in sorted(set(g.steps) - set(g.accept_lengths)):
            p.append(f"grid.accept_lengths: no entry for steps {st} (a mapping pins each steps value)")
    if g.accept_lengths and SIMULATE_ACC_ENV in s.env:
        p.append(f"server.env.{SIMULATE_ACC_ENV}: set by grid.accept_lengths; remove one of the two")
    for name in sorted(set(s.env) & ROUTING_ENV):
        p.append(f"server.env.{name}: set by specbench itself (server.balanced_routing: auto | off)")
    if s.load_format != "auto" and "load-format" in s.args:
        p.append("server.args.load-format: set by server.load_format; remove one of the two")
    if not g.spec_modes and not g.baseline:
        p.append("grid: no spec_modes and no baseline, nothing to measure")
    if len(set(g.spec_modes)) != len(g.spec_modes):
        p.append("grid.spec_modes: duplicate values")
    for name, value in s.args.items():
        msg = check_passthrough_flag(name)
        if msg:
            p.append(f"server.args: {msg}")
        elif name in PATH_FLAGS and (msg := path_value_problem(f"server.args.{name}", value)):
            p.append(msg)
    if s.backend == "external":
        if not s.base_url:
            p.append("server.base_url: required with backend: external (the server someone else launched)")
        elif "@" in s.base_url:
            # Not echoed: a sweep's text is stored with the job and the run, and shown in errors and reasons.
            p.append(
                "server.base_url: holds a user name or password (user:password@host), not shown; a sweep is "
                "stored and shown in full, so it carries no secret, and specbench sends no credentials"
            )
        elif not re.match(r"^https?://[^\s/]+(:\d+)?/?$", s.base_url):
            p.append(f"server.base_url: {s.base_url!r} is not http(s)://host[:port]")
        multi = [
            n for n, v in (("spec_modes", g.spec_modes), ("steps", g.steps), ("topk", g.topk)) if len(v) > 1
        ]
        if isinstance(g.draft_tokens, list) and len(g.draft_tokens) > 1:
            multi.append("draft_tokens")
        if g.baseline and g.spec_modes:
            multi.append("baseline")

        if multi:
            p.append(
                "backend external: nothing is launched, so server-config dimensions cannot sweep "
                f"({', '.join(multi)} have several values); only batch_sizes and workloads sweep"
            )
        if g.accept_lengths:
            p.append(
                "backend external: grid.accept_lengths sets the server's environment; launch it yourself"
            )
        if s.load_format != "auto":
            p.append(
                "backend external: server.load_format cannot apply to a server specbench does not launch"
            )
        if s.args or s.env:
            p.append("backend external: server.args/env cannot apply to a server specbench does not launch")
        if s.cpu_affinity is not None:
            p.append(
                "backend external: server.cpu_affinity cannot apply to a server specbench does not launch "
                "(pin it where it is started, e.g. with taskset)"
            )
        if m.cpu_probe == "server":
            p.append(
                "backend external: measure.cpu_probe: server needs the server's processes on this host to find "
                "its busiest CPU, and specbench does not launch this one (use cpu_probe: runner)"
            )
    elif s.base_url:
        p.append(f"server.base_url is only for backend: external (backend is {s.backend!r})")
    if spec.profile is not None and spec.profile.at is not None:
        for b in spec.profile.at:
            if b not in g.batch_sizes:
                p.append(f"profile.at: batch size {b} is not in grid.batch_sizes {g.batch_sizes}")
    for i, w in enumerate(spec.workloads):
        where = f"workload[{i}]" if isinstance(spec.workload, list) else "workload"
        if w.dataset == "jsonl" and not w.path:
            p.append(f"{where}.path: required for dataset: jsonl")
        if w.dataset == "random" and w.path:
            p.append(f"{where}.path: only for dataset: jsonl")
    if too_big:
        p.insert(
            0,
            f"grid: {servers:,} server configs and {points:,} points; at most {MAX_SERVER_CONFIGS:,} and "
            f"{MAX_POINTS:,} (split the sweep)",
        )
    return p
