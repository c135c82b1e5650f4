"""The stand-in computing wrongly on purpose, so the correctness gate can be seen to catch it.

Two faults (`server.sim.fault`, `SPECBENCH_SIM_FAULT`), each on overlap (v2) speculative launches only:

* `v2_draft`: v2's drafts are computed wrongly. Each draft token is accepted with a quarter of the sweep's
  `acceptance_rate`, so acceptance falls; verification still picks the target's tokens, so the output is the
  baseline's.
* `v2_verify`: v2's verification is wrong. Each request's tokens leave the baseline's at a position that
  depends on its prompt (1 to 32: never the first token, which the prefill computes).

Emulating sglang 0.5.12 with FlashMLA and v2 turns `v2_draft` on by itself: 0.5.12 runs v2's draft extend
down FlashMLA's decode path (bench.server.known_bugs). Which symptom that has on a GPU (wrong drafts, or a
crash) is what the GPU run of the correctness sweep measures; until then the stand-in shows the drafts
going wrong, and `/server_info` says so under `specbench_sim.wrong`.
"""

from __future__ import annotations

from dataclasses import dataclass

from bench.server.known_bugs import FLASHMLA_DRAFT_EXTEND_V2
from synthetic.server.config import Faults

# v2_draft: the per-draft acceptance probability is multiplied by this.
DRAFT_FAULT_FACTOR = 0.25
# v2_verify: the first wrong token lies in 1..DIVERGE_SPAN.
DIVERGE_SPAN = 32

AUTO_0_5_12 = (
    "auto: sglang 0.5.12 with FlashMLA and spec v2 (" + FLASHMLA_DRAFT_EXTEND_V2.summary + "); the stand-in "
    "shows it as the v2_draft fault until a GPU run of sweeps/correctness-flashmla.yaml measures the real symptom"
)


@dataclass(frozen=True)
class Wrong:
    draft: bool = False
    verify: bool = False
    draft_why: str | None = None

    def describe(self) -> dict[str, str]:
        out: dict[str, str] = {}
        if self.draft:
            out["v2_draft"] = self.draft_why or (
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
    auto = flashmla and not draft_extend_v2_routed
    return Wrong(
        draft=faults.v2_draft or auto,
        verify=faults.v2_verify,
        draft_why=AUTO_0_5_12 if auto and not faults.v2_draft else None,
    )


def diverge_at(prompt_key: int) -> int:
    """The output position where a `v2_verify` request's tokens first differ from the baseline's."""
    return 1 + (prompt_key >> 7) % DIVERGE_SPAN
