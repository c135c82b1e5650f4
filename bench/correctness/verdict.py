"""A launch's correctness verdict from the launches' answers to the same greedy prompts. Pure. Greedy
speculative decoding must reproduce plain greedy decoding, and the same draft computation accept the same
drafts, so a launch is compared with (a) the baseline's tokens (the baseline with its own one-at-a-time pass:
near-ties), (b) its v1/v2 partner's token-weighted acceptance on agreeing prompts (below
`min_acceptance_ratio` x fails), (c) the pure-torch reference, for a synthetic checkpoint. `fail` if any
comparison fails, else `pass` if any was made, else `not checked`; errored or short answers fail. Failing
(c)'s acceptance alone with right tokens is a known draft-path bug's look: the caller's `acceptance_suspect`
line follows that failure."""

import dataclasses
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Literal

from bench.correctness.outputs import CheckPass, LaunchOutputs, ReferenceOutputs
from bench.sweep import CorrectnessSpec

VerdictWord = Literal["pass", "fail", "not checked"]


@dataclass(frozen=True)
class CheckVerdict:
    verdict: VerdictWord
    why: str
    # The first diverging position of the token comparison that decided (lowest request index), if any.
    diverge_request: int | None = None
    diverge_token: int | None = None
    # Token-weighted acceptance of v2 over v1's on the prompts whose tokens agree (both sides of a pair).
    acceptance_v2_v1: float | None = None


def not_checked(why: str) -> CheckVerdict:
    return CheckVerdict("not checked", why)


# What a comparison compared: tokens, acceptance vs the partner or reference (`reference_low`), other.
Kind = Literal["tokens", "partner", "reference", "reference_low", "other"]


@dataclass(frozen=True)
class _Part:
    status: Literal["pass", "fail", "skip"]
    text: str
    diverge: tuple[int, int] | None = None
    kind: Kind = "other"


def divergences(ours: Sequence[Sequence[int]], theirs: Sequence[Sequence[int]]) -> list[int | None]:
    """Per prompt, the first token index where two answers differ (a shorter one: where it ends), or None."""
    out: list[int | None] = []
    for a, b in zip(ours, theirs, strict=True):
        at = next((j for j, (x, y) in enumerate(zip(a, b, strict=False)) if x != y), None)
        if at is None and len(a) != len(b):
            at = min(len(a), len(b))
        out.append(at)
    return out


def unusable(launch: LaunchOutputs) -> str | None:
    """Why a launch's first pass cannot be compared (it failed), or None."""
    if launch.error:
        return f"the check could not run: {launch.error}"
    first = launch.first
    if first is None or not first.requests:
        return "the check sent no request"
    if errors := first.errors:
        kinds = sorted({e.split(":", 1)[0] for e in errors})
        return f"{len(errors)}/{len(first.requests)} check requests failed ({', '.join(kinds)}: {errors[0][:200]})"
    if short := [i for i, r in enumerate(first.requests) if len(r.output_ids) != launch.output_len]:
        i = short[0]
        return (
            f"{len(short)}/{len(first.requests)} check requests returned another length than the "
            f"{launch.output_len} tokens asked for (request {i}: {len(first.requests[i].output_ids)})"
        )
    return None


def self_divergence(baseline: LaunchOutputs) -> tuple[int, tuple[int, int] | None] | None:
    """(prompts differing between the baseline's two passes, the first such position), or None."""
    if len(baseline.passes) < 2 or baseline.passes[1].errors:
        return None
    return _count(divergences(_tokens(baseline.passes[0]), _tokens(baseline.passes[1])))


def judge_launch(
    launch: LaunchOutputs,
    *,
    settings: CorrectnessSpec,
    baseline: LaunchOutputs | None,
    partner: LaunchOutputs | None,
    reference: ReferenceOutputs | None,
    reference_note: str | None,
    acceptance_suspect: str | None = None,
) -> CheckVerdict:
    """The verdict of `launch` against `baseline` (no spec), `partner` (the other mode), `reference` (or None
    with `reference_note`); `acceptance_suspect`: a known bug's line for a failure on acceptance alone."""
    if (bad := unusable(launch)) is not None:
        return CheckVerdict("fail", bad)
    ours = launch.first
    assert ours is not None
    tol = settings.max_diverging_prompts
    parts: list[_Part] = []
    ratio: float | None = None
    if launch.spec_mode is None:
        parts.append(_reproducible(launch, tol))
    else:
        parts.append(_against_baseline(launch, ours, baseline, tol))
        part, ratio = _against_partner(launch, ours, partner, settings.min_acceptance_ratio)
        parts.append(part)
    parts += _against_reference(launch, ours, reference, reference_note, settings)
    if acceptance_suspect is not None and _acceptance_alone(parts):
        parts = [
            dataclasses.replace(p, text=f"{p.text}: {acceptance_suspect}") if p.kind == "reference_low" else p
            for p in parts
        ]
    return _verdict(parts, ratio)


def _acceptance_alone(parts: list[_Part]) -> bool:
    """Whether the only failure is fewer drafts accepted than the reference, with right tokens."""
    failed = [p for p in parts if p.status == "fail"]
    tokens_right = any(p.kind == "tokens" and p.status == "pass" for p in parts)
    return tokens_right and bool(failed) and all(p.kind == "reference_low" for p in failed)


def _reproducible(baseline: LaunchOutputs, tol: int) -> _Part:
    n_prompts = len(baseline.passes[0].requests)
    found = self_divergence(baseline)
    if found is None:
        return _Part("skip", "no one-at-a-time pass to measure the baseline's own spread (self_check off)")
    n, first = found
    where = _where(first)
    if n <= tol:
        extra = f"; {n} differ{where}, within max_diverging_prompts={tol}" if n else ""
        return _Part(
            "pass",
            f"reproducible: the batched and one-at-a-time passes agree in {n_prompts - n}/{n_prompts} prompts{extra}",
        )
    return _Part(
        "skip",
        f"not reproducible at max_diverging_prompts={tol}: the batched and one-at-a-time passes differ in "
        f"{n}/{n_prompts} prompts{where} (near-ties); token comparisons against it are not made; set "
        f"measure.correctness.max_diverging_prompts to at least {n}",
    )


def _against_baseline(
    launch: LaunchOutputs, ours: CheckPass, baseline: LaunchOutputs | None, tol: int
) -> _Part:
    if baseline is None:
        return _Part("skip", "tokens not compared: no baseline launch in this run")
    if unusable(baseline) is not None:
        return _Part("skip", "tokens not compared: the baseline's own check failed")
    if baseline.prompts_digest != launch.prompts_digest:
        return _Part("skip", "tokens not compared: the baseline answered another prompt set")
    spread = self_divergence(baseline)
    if spread is not None and spread[0] > tol:
        return _Part(
            "skip",
            "tokens not compared: the baseline is not reproducible at this tolerance (its verdict says how far)",
        )
    assert baseline.first is not None
    return _tokens_part(ours, _tokens(baseline.first), "the baseline's", tol)


def _against_partner(
    launch: LaunchOutputs, ours: CheckPass, partner: LaunchOutputs | None, min_ratio: float
) -> tuple[_Part, float | None]:
    other = "v1" if launch.spec_mode == "v2" else "v2"
    if partner is None:
        return _Part("skip", f"acceptance not compared: no {other} launch of this configuration"), None
    if unusable(partner) is not None:
        return _Part("skip", f"acceptance not compared: the {other} launch's check failed"), None
    if partner.prompts_digest != launch.prompts_digest:
        return _Part("skip", f"acceptance not compared: the {other} launch answered another prompt set"), None
    assert partner.first is not None
    theirs = partner.first
    same = [i for i, d in enumerate(divergences(_tokens(ours), _tokens(theirs))) if d is None]
    n = len(ours.requests)
    if 2 * len(same) < n:
        return _Part(
            "skip", f"acceptance not compared: v1 and v2 share the tokens of only {len(same)}/{n} prompts"
        ), None
    mine, its = _accept(ours, same), _accept(theirs, same)
    if mine is None or its is None:
        return _Part("skip", "acceptance not compared: no per-request spec_verify_ct"), None
    v2, v1 = (mine, its) if launch.spec_mode == "v2" else (its, mine)
    ratio = v2 / v1
    figures = f"acceptance v2/v1 {ratio:.3f} (v2 {v2:.2f}, v1 {v1:.2f} tokens per verify step over {len(same)} prompts)"
    if ratio < min_ratio if launch.spec_mode == "v2" else launch.spec_mode == "v1" and ratio > 1 / min_ratio:
        bound = f"< {min_ratio:g}" if launch.spec_mode == "v2" else f"> {1 / min_ratio:.3g}"
        text = (
            f"{figures} {bound}: {launch.spec_mode} accepts fewer drafts than {other} (its drafts are wrong)"
        )
        return _Part("fail", text, kind="partner"), ratio
    return _Part("pass", figures, kind="partner"), ratio


def _against_reference(
    launch: LaunchOutputs,
    ours: CheckPass,
    reference: ReferenceOutputs | None,
    note: str | None,
    settings: CorrectnessSpec,
) -> list[_Part]:
    if reference is None:
        return [_Part("skip", f"reference: {note}")] if note else []
    if reference.prompts_digest != launch.prompts_digest:
        return [_Part("skip", "reference: computed for another prompt set")]
    parts = [_tokens_part(ours, reference.tokens, "the reference's", settings.max_diverging_prompts)]
    if launch.spec_mode is None:
        return parts
    expected = reference.accept_lengths.get(launch.steps or -1)
    if expected is None or launch.topk not in (None, 1):
        parts.append(_Part("skip", "reference acceptance: only chain drafts (topk 1) are modelled"))
        return parts
    same = [i for i, d in enumerate(divergences(_tokens(ours), reference.tokens)) if d is None]
    mine = _accept(ours, same)
    if not same or mine is None:
        parts.append(_Part("skip", "reference acceptance: no prompt with the reference's tokens"))
        return parts
    n_out = launch.output_len
    want = sum(n_out for _ in same) / sum(n_out / expected[i] for i in same)
    ratio = mine / want
    text = f"acceptance {mine:.2f} vs the reference's {want:.2f} ({ratio:.3f})"
    lo = settings.min_acceptance_ratio
    if ratio < lo or ratio > 1 / lo:
        kind: Kind = "reference_low" if ratio < lo else "reference"
        parts.append(_Part("fail", f"{text}, outside [{lo:g}, {1 / lo:.3g}]", kind=kind))
    else:
        parts.append(_Part("pass", text, kind="reference"))
    return parts


def _tokens_part(ours: CheckPass, theirs: list[list[int]], whose: str, tol: int) -> _Part:
    n_prompts = len(ours.requests)
    n, first = _count(divergences(_tokens(ours), theirs))
    where = _where(first)
    if n == 0:
        return _Part("pass", f"tokens = {whose} ({n_prompts}/{n_prompts} prompts)", kind="tokens")
    if n <= tol:
        return _Part(
            "pass",
            f"tokens = {whose} in {n_prompts - n}/{n_prompts} prompts ({n} differ{where}, within "
            f"max_diverging_prompts={tol})",
            first,
            kind="tokens",
        )
    return _Part(
        "fail",
        f"tokens differ from {whose} in {n}/{n_prompts} prompts{where} (max_diverging_prompts={tol})",
        first,
        kind="tokens",
    )


def _verdict(parts: list[_Part], ratio: float | None) -> CheckVerdict:
    order = {"fail": 0, "pass": 1, "skip": 2}
    ranked = sorted(parts, key=lambda p: order[p.status])  # stable: the failing parts lead the text
    why = "; ".join(p.text for p in ranked)
    request, token = next((p.diverge for p in ranked if p.diverge is not None), (None, None))
    statuses = {p.status for p in parts}
    word: VerdictWord = "fail" if "fail" in statuses else "pass" if "pass" in statuses else "not checked"
    return CheckVerdict(word, why, diverge_request=request, diverge_token=token, acceptance_v2_v1=ratio)


def _tokens(p: CheckPass) -> list[list[int]]:
    return [r.output_ids for r in p.requests]


def _count(divs: list[int | None]) -> tuple[int, tuple[int, int] | None]:
    hits = [(i, d) for i, d in enumerate(divs) if d is not None]
    return len(hits), (hits[0] if hits else None)


def _where(first: tuple[int, int] | None) -> str:
    return f", first at request {first[0]}, token {first[1]}" if first else ""


def _accept(p: CheckPass, rows: Sequence[int]) -> float | None:
    """Token-weighted acceptance (sum of completion tokens over sum of verify steps) of the given requests."""
    done = sum(p.requests[i].completion_tokens or 0 for i in rows)
    steps = [p.requests[i].spec_verify_ct for i in rows]
    if not rows or any(s is None or s <= 0 for s in steps):
        return None
    return done / sum(s for s in steps if s is not None)
