"""The correctness check's pure parts: the prompt set, when a launch cannot be checked, and the verdict."""

from __future__ import annotations

import json

import pytest

from bench.correctness.outputs import (
    CheckPass,
    LaunchOutputs,
    ReferenceOutputs,
    RequestOutput,
    prompts_digest,
)
from bench.correctness.prompts import check_prompts, why_not_checked
from bench.correctness.verdict import divergences, judge_launch, unusable
from bench.sweep import CorrectnessSpec, SweepError, expand, parse_sweep

N, OUT = 8, 12
SETTINGS = CorrectnessSpec(prompts=N, output_len=OUT)
DIGEST = "d1"


def tokens(i: int) -> list[int]:
    return [1000 + 37 * i + j for j in range(OUT)]


def launch(
    mode: str | None,
    *,
    ids: list[list[int]] | None = None,
    verify: list[int] | None = None,
    second: list[list[int]] | None = None,
    errors: dict[int, str] | None = None,
) -> LaunchOutputs:
    ids = ids or [tokens(i) for i in range(N)]
    verify = verify or ([4] * N if mode else [None] * N)  # type: ignore[list-item]
    reqs = [
        RequestOutput(
            output_ids=[] if errors and i in errors else ids[i],
            completion_tokens=OUT,
            spec_verify_ct=verify[i],
            error=(errors or {}).get(i),
        )
        for i in range(N)
    ]
    passes = [CheckPass(N, reqs)]
    if second is not None:
        passes.append(CheckPass(1, [RequestOutput(output_ids=t, completion_tokens=OUT) for t in second]))
    return LaunchOutputs(
        config_key=mode or "base",
        spec_mode=mode,
        pair_key=None if mode is None else "pair",
        steps=None if mode is None else 3,
        topk=None if mode is None else 1,
        prompts_digest=DIGEST,
        output_len=OUT,
        passes=passes,
    )


def judge(l: LaunchOutputs, **kw: object) -> object:  # noqa: E741
    args: dict[str, object] = {"baseline": None, "partner": None, "reference": None, "reference_note": None}
    args.update(kw)
    return judge_launch(l, settings=SETTINGS, **args)  # type: ignore[arg-type]


def with_token(i: int, at: int) -> list[list[int]]:
    out = [tokens(k) for k in range(N)]
    out[i] = [*out[i][:at], 7, *out[i][at + 1 :]]
    return out


# ---- (a) tokens against the baseline --------------------------------------------------------------------


def test_the_same_tokens_pass_and_a_diverging_prompt_fails_with_its_first_position() -> None:
    base = launch(None, second=[tokens(i) for i in range(N)])
    v = judge(launch("v1"), baseline=base)
    assert v.verdict == "pass" and "tokens = the baseline's (8/8 prompts)" in v.why
    bad = judge(launch("v2", ids=with_token(5, 3)), baseline=base)
    assert bad.verdict == "fail"
    assert (bad.diverge_request, bad.diverge_token) == (5, 3)
    assert "differ from the baseline's in 1/8 prompts, first at request 5, token 3" in bad.why


def test_max_diverging_prompts_lets_near_ties_through() -> None:
    base = launch(None, second=[tokens(i) for i in range(N)])
    lenient = CorrectnessSpec(prompts=N, output_len=OUT, max_diverging_prompts=1)
    v = judge_launch(
        launch("v1", ids=with_token(2, 9)),
        settings=lenient,
        baseline=base,
        partner=None,
        reference=None,
        reference_note=None,
    )
    assert v.verdict == "pass" and (v.diverge_request, v.diverge_token) == (2, 9)
    assert "within max_diverging_prompts=1" in v.why


def test_a_baseline_that_disagrees_with_itself_is_not_compared_against() -> None:
    base = launch(None, second=with_token(0, 4))
    own = judge(base)
    assert (
        own.verdict == "not checked"
        and "set measure.correctness.max_diverging_prompts to at least 1" in own.why
    )
    v = judge(launch("v1", ids=with_token(3, 1)), baseline=base)
    assert v.verdict == "not checked" and "not reproducible" in v.why


def test_divergences() -> None:
    assert divergences([[1, 2, 3], [1, 2], [4]], [[1, 2, 3], [1, 2, 5], [5]]) == [None, 2, 0]


# ---- (b) acceptance v2 against v1 -----------------------------------------------------------------------


def test_v2_accepting_fewer_drafts_fails_v2_not_v1() -> None:
    v1, v2 = launch("v1", verify=[3] * N), launch("v2", verify=[6] * N)  # v2: twice the verify steps
    f2, f1 = judge(v2, partner=v1), judge(v1, partner=v2)
    assert f2.verdict == "fail" and f2.acceptance_v2_v1 == pytest.approx(0.5)
    assert "v2 accepts fewer drafts than v1" in f2.why
    assert f1.verdict == "pass" and f1.acceptance_v2_v1 == pytest.approx(0.5)


def test_v1_accepting_fewer_drafts_fails_v1() -> None:
    v1, v2 = launch("v1", verify=[6] * N), launch("v2", verify=[3] * N)
    assert judge(v1, partner=v2).verdict == "fail" and judge(v2, partner=v1).verdict == "pass"


def test_acceptance_within_the_ratio_passes_and_only_agreeing_prompts_count() -> None:
    v1 = launch("v1", verify=[4] * N)
    # One prompt with other tokens and a terrible acceptance: left out of the ratio.
    v2 = launch("v2", ids=with_token(0, 2), verify=[64, *[4] * (N - 1)])
    v = judge(v2, partner=v1)
    assert v.acceptance_v2_v1 == pytest.approx(1.0) and "over 7 prompts" in v.why


# ---- (c) the reference ----------------------------------------------------------------------------------


def test_reference_tokens_and_acceptance() -> None:
    ref = ReferenceOutputs(DIGEST, [tokens(i) for i in range(N)], {3: [OUT / 3] * N})
    ok = judge(launch("v2", verify=[3] * N), reference=ref)
    assert ok.verdict == "pass" and "acceptance 4.00 vs the reference's 4.00" in ok.why
    slow = judge(launch("v2", verify=[6] * N), reference=ref)
    assert slow.verdict == "fail" and "outside [0.95" in slow.why
    wrong = judge(launch(None, ids=with_token(1, 0), second=with_token(1, 0)), reference=ref)
    assert wrong.verdict == "fail" and "differ from the reference's" in wrong.why
    other = ReferenceOutputs("another", ref.tokens, ref.accept_lengths)
    assert "another prompt set" in judge(launch("v1"), reference=other).why


def test_reference_note_is_said() -> None:
    v = judge(launch("v1"), reference_note="not checked: torch missing")
    assert v.verdict == "not checked" and "reference: not checked: torch missing" in v.why
    assert "no baseline launch" in v.why and "no v2 launch" in v.why


# ---- failures of the check itself -----------------------------------------------------------------------


def test_failed_or_short_requests_fail_the_launch() -> None:
    crashed = launch("v2", errors={2: "connection lost: ServerDisconnectedError"})
    v = judge(crashed)
    assert v.verdict == "fail" and "1/8 check requests failed (connection lost" in v.why
    short = launch("v1", ids=[tokens(i)[: OUT - 1 if i == 4 else OUT] for i in range(N)])
    assert "another length than the 12 tokens asked for (request 4: 11)" in (unusable(short) or "")
    # ... and a launch compared against a failed one is not judged by it.
    assert "the v2 launch's check failed" in judge(launch("v1"), partner=crashed).why


def test_outputs_round_trip_through_json() -> None:
    l = launch("v2", errors={1: "HTTP 500: boom"})  # noqa: E741
    again = LaunchOutputs.from_json(json.loads(json.dumps(l.to_json())))
    assert again == l and again.passes[0].requests[0].accept_length == 3.0
    ref = ReferenceOutputs(DIGEST, [[1, 2]], {3: [2.0]})
    assert ReferenceOutputs.from_json(json.loads(json.dumps(ref.to_json()))) == ref


# ---- the prompt set and when a launch is not checked ----------------------------------------------------


def test_prompts_are_seeded_distinct_and_below_the_vocabulary() -> None:
    a = check_prompts(CorrectnessSpec(), 500)
    assert a == check_prompts(CorrectnessSpec(), 500) != check_prompts(CorrectnessSpec(seed=1), 500)
    assert len(a) == 16 and all(len(p) == 32 and all(2 <= t < 500 for t in p) for p in a)
    assert len({p[0] for p in a}) == 16  # no prompt shares another's opening (prefix cache)
    assert prompts_digest(a, 64) != prompts_digest(a, 65)


SWEEP = """
name: x
model: m
server: {{backend: sim, load_format: {fmt}}}
grid: {{batch_sizes: [1], spec_modes: [v1, v2], steps: [3], accept_lengths: {acc}}}
measure: {{correctness: {{enabled: {on}}}}}
"""


def test_why_not_checked() -> None:
    def reasons(fmt: str = "auto", acc: str = "[]", on: str = "true") -> list[str | None]:
        spec = parse_sweep(SWEEP.format(fmt=fmt, acc=acc, on=on))
        return [why_not_checked(spec, g.server) for g in expand(spec)]

    assert reasons() == [None, None, None]
    assert all("dummy weights" in (r or "") for r in reasons(fmt="dummy"))
    baseline, *spec = reasons(acc="[2.5]")
    assert baseline is None  # the baseline's tokens are real even when the drafts' acceptance is pinned
    assert all("SGLANG_SIMULATE_ACC_LEN=2.5" in (r or "") and "id 100" in (r or "") for r in spec)
    assert all("switched off" in (r or "") for r in reasons(on="false"))


def test_a_tolerance_that_can_never_fail_is_refused() -> None:
    with pytest.raises(SweepError, match="max_diverging_prompts"):
        parse_sweep(
            SWEEP.format(fmt="auto", acc="[]", on="true").replace(
                "enabled: true", "prompts: 4, max_diverging_prompts: 4"
            )
        )


# ---- a known issue whose symptom is acceptance ----------------------------------------------------------

SUSPECT = "matches known SGLang issue some-draft-bug (its drafts read the wrong context)"


def test_a_known_acceptance_issue_is_said_after_the_failure_it_explains() -> None:
    """Acceptance below the reference's, tokens compared and right, v1 = v2: the symptom such an issue has. Its
    line follows the failed comparison, before what passed; the verdict stays `fail`."""
    ref = ReferenceOutputs(DIGEST, [tokens(i) for i in range(N)], {3: [OUT / 3] * N})
    base = launch(None, second=[tokens(i) for i in range(N)])
    v1, v2 = launch("v1", verify=[4] * N), launch("v2", verify=[4] * N)
    v = judge(v2, baseline=base, partner=v1, reference=ref, acceptance_suspect=SUSPECT)
    assert v.verdict == "fail"
    assert v.why.startswith(
        f"acceptance 3.00 vs the reference's 4.00 (0.750), outside [0.95, 1.05]: {SUSPECT}; "
    )
    assert "tokens = the baseline's" in v.why and v.why.count(SUSPECT) == 1


@pytest.mark.parametrize(
    ("case", "kw"),
    [
        # The tokens differ: a wrong verify, which the issue does not explain.
        ("tokens wrong", {"ids": with_token(4, 2), "verify": [4] * N}),
        # More accepted than the reference: not the symptom of a draft that reads too little.
        ("above", {"verify": [2] * N}),
        # Within the tolerance: nothing failed.
        ("right", {"verify": [3] * N}),
    ],
)
def test_the_known_issue_is_not_said_where_its_symptom_is_not_shown(case: str, kw: dict[str, object]) -> None:
    ref = ReferenceOutputs(DIGEST, [tokens(i) for i in range(N)], {3: [OUT / 3] * N})
    v = judge(launch("v1", **kw), reference=ref, acceptance_suspect=SUSPECT)  # type: ignore[arg-type]
    assert SUSPECT not in v.why, case


def test_the_known_issue_needs_the_tokens_compared_and_v1_v2_alike() -> None:
    ref = ReferenceOutputs(DIGEST, [tokens(i) for i in range(N)], {3: [OUT / 3] * N})
    # No token comparison made at all (no baseline, the reference answered another prompt set): not said.
    assert SUSPECT not in judge(launch("v1", verify=[4] * N), acceptance_suspect=SUSPECT).why
    # v2 also accepts fewer drafts than v1: a v2-only fault the issue (both modes alike) does not explain.
    v1, v2 = launch("v1", verify=[4] * N), launch("v2", verify=[8] * N)
    v = judge(v2, partner=v1, reference=ref, acceptance_suspect=SUSPECT)
    assert v.verdict == "fail" and SUSPECT not in v.why
