"""The stand-in computing wrongly on purpose, so the correctness gate can be seen to catch it.

Three faults (`server.sim.fault`, `SPECBENCH_SIM_FAULT`). Two on overlap (v2) speculative launches only:

* `v2_draft`: v2's drafts are computed wrongly. Each draft token is accepted with a quarter of the sweep's
  `acceptance_rate`, so acceptance falls; verification still picks the target's tokens, so the output is the
  baseline's.
* `v2_verify`: v2's verification is wrong. Each request's tokens leave the baseline's at a position that
  depends on its prompt (1 to 32: never the first token, which the prefill computes).

One that emulates a known SGLang bug, on every launch that bug applies to (FLASHMLA_DRAFT_DECODE_CONTEXT in
bench.server.known_bugs: FlashMLA, v1 and v2, open in every emulated release):

* `flashmla_draft_decode_context`: FlashMLA's draft decode steps attend only to the committed prefix. As the
  mirror checkpoint measured on an H100 (3.05 tokens per verify step for the reference's 4.00 at 3 steps), the
  draft extend's draft and draft decode step 0's are right and every later draft is rejected: a verify step
  accepts at most DRAFT_DECODE_CONTEXT_ACCEPTED drafts, so launches with 3 or more steps accept fewer than the
  reference (the gate fails them and names the bug); tokens are unchanged. Asked for, not automatic: every
  stand-in sweep runs FlashMLA with 3 steps by default (the demo, the README's flows), and the bug's size on
  real weights is unknown, so it stays out of the stand-in's numbers unless a sweep wants to see the gate
  catch it. A launch on another backend (the triton control) is untouched.

And one known bug, on by itself: emulating sglang 0.5.12 with FlashMLA and spec v2 (every algorithm the
stand-in emulates is of the EAGLE family, whose v2 worker runs the draft extend) reproduces what the GPU measured
for FLASHMLA_DRAFT_EXTEND_V2 (bench.server.known_bugs): the server comes up, answers /health 503 while its
start-up warm-up runs, and its scheduler dies at the warm-up's first draft extend with SGLang's traceback
(synthetic/server/crashes.py). No v2 speed exists on that release. `/server_info` says so under
`specbench_sim.wrong` while the warm-up runs, and the log says it before anything else.
"""

from __future__ import annotations

from dataclasses import dataclass

from bench.server.known_bugs import FLASHMLA_DRAFT_DECODE_CONTEXT, FLASHMLA_DRAFT_EXTEND_V2
from bench.server.spec_modes import SpecMode
from synthetic.server.config import Faults

# v2_draft: the per-draft acceptance probability is multiplied by this.
DRAFT_FAULT_FACTOR = 0.25
# v2_verify: the first wrong token lies in 1..DIVERGE_SPAN.
DIVERGE_SPAN = 32
# flashmla_draft_decode_context: the drafts a verify step can still accept, the draft extend's and draft decode
# step 0's (on the mirror checkpoint step 0 needs only the committed last token; step 1 needs step 0's KV).
DRAFT_DECODE_CONTEXT_ACCEPTED = 2

CRASH_0_5_12 = (
    f"auto: sglang 0.5.12 with FlashMLA and spec v2 ({FLASHMLA_DRAFT_EXTEND_V2.key}: "
    f"{FLASHMLA_DRAFT_EXTEND_V2.summary}); as measured on an H100, the scheduler dies at the start-up warm-up's "
    "first draft extend and the server exits before it is ready"
)


@dataclass(frozen=True)
class Wrong:
    draft: bool = False
    verify: bool = False
    # sglang 0.5.12's FlashMLA draft-extend crash (synthetic/server/crashes.py).
    draft_extend_crash: bool = False
    # FlashMLA's draft decode attending to the committed prefix only (asked for).
    draft_decode_context: bool = False

    @property
    def max_accepted(self) -> int | None:
        """The most drafts a verify step can accept on this launch's draft path; None: every one it drafts."""
        return DRAFT_DECODE_CONTEXT_ACCEPTED if self.draft_decode_context else None

    def describe(self) -> dict[str, str]:
        out: dict[str, str] = {}
        if self.draft_extend_crash:
            out["draft_extend_crash"] = CRASH_0_5_12
        if self.draft_decode_context:
            bug = FLASHMLA_DRAFT_DECODE_CONTEXT
            out["flashmla_draft_decode_context"] = (
                f"asked for (server.sim.fault): known SGLang issue {bug.key} ({bug.gist}); as measured on the "
                f"mirror checkpoint, a verify step accepts at most {DRAFT_DECODE_CONTEXT_ACCEPTED} drafts; tokens "
                "unchanged"
            )
        if self.draft:
            out["v2_draft"] = (
                f"asked for (server.sim.fault): each draft accepted with {DRAFT_FAULT_FACTOR:g} x acceptance_rate; "
                "tokens unchanged"
            )
        if self.verify:
            out["v2_verify"] = (
                f"asked for (server.sim.fault): each request's tokens leave the baseline's at a position in "
                f"1..{DIVERGE_SPAN} set by its prompt"
            )
        return out


def for_launch(
    faults: Faults,
    *,
    version: str,
    spec_mode: SpecMode | None,
    steps: int,
    flashmla: bool,
    draft_extend_v2_routed: bool,
) -> Wrong:
    """What this launch computes wrongly: nothing unless it is a speculative server (`spec_mode` v1 or v2)."""
    context = (
        faults.flashmla_draft_decode_context
        and flashmla
        and FLASHMLA_DRAFT_DECODE_CONTEXT.applies(version, "flashmla", spec_mode, steps)
    )
    if spec_mode != "v2":
        return Wrong(draft_decode_context=context)
    return Wrong(
        draft=faults.v2_draft,
        verify=faults.v2_verify,
        draft_extend_crash=flashmla and not draft_extend_v2_routed,
        draft_decode_context=context,
    )


def diverge_at(prompt_key: int) -> int:
    """The output position where a `v2_verify` request's tokens first differ from the baseline's."""
    return 1 + (prompt_key >> 7) % DIVERGE_SPAN
