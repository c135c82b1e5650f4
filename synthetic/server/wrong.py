"""The stand-in computing wrongly on purpose, so the correctness gate can be seen to catch it.

Two faults (`server.sim.fault`, `SPECBENCH_SIM_FAULT`), each on overlap (v2) speculative launches only:

* `v2_draft`: v2's drafts are computed wrongly. Each draft token is accepted with a quarter of the sweep's
  `acceptance_rate`, so acceptance falls; verification still picks the target's tokens, so the output is the
  baseline's.
* `v2_verify`: v2's verification is wrong. Each request's tokens leave the baseline's at a position that
  depends on its prompt (1 to 32: never the first token, which the prefill computes).

And one known bug, on by itself: emulating sglang 0.5.12 with FlashMLA and spec v2 (every algorithm the
stand-in emulates is of the EAGLE family, whose v2 worker runs the draft extend) reproduces what the GPU measured
for FLASHMLA_DRAFT_EXTEND_V2 (bench.server.known_bugs): the server comes up, answers /health 503 while its
start-up warm-up runs, and its scheduler dies at the warm-up's first draft extend with SGLang's traceback
(synthetic/server/crashes.py). No v2 speed exists on that release. `/server_info` says so under
`specbench_sim.wrong` while the warm-up runs, and the log says it before anything else.
"""

from __future__ import annotations

from dataclasses import dataclass

from bench.server.known_bugs import FLASHMLA_DRAFT_EXTEND_V2
from synthetic.server.config import Faults

# v2_draft: the per-draft acceptance probability is multiplied by this.
DRAFT_FAULT_FACTOR = 0.25
# v2_verify: the first wrong token lies in 1..DIVERGE_SPAN.
DIVERGE_SPAN = 32

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

    def describe(self) -> dict[str, str]:
        out: dict[str, str] = {}
        if self.draft_extend_crash:
            out["draft_extend_crash"] = CRASH_0_5_12
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


def for_launch(faults: Faults, *, overlap_spec: bool, flashmla: bool, draft_extend_v2_routed: bool) -> Wrong:
    """What this launch computes wrongly: nothing unless it is an overlap (v2) speculative server."""
    if not overlap_spec:
        return Wrong()
    return Wrong(
        draft=faults.v2_draft,
        verify=faults.v2_verify,
        draft_extend_crash=flashmla and not draft_extend_v2_routed,
    )


def diverge_at(prompt_key: int) -> int:
    """The output position where a `v2_verify` request's tokens first differ from the baseline's."""
    return 1 + (prompt_key >> 7) % DIVERGE_SPAN
