"""The stand-in computing wrongly on purpose, so that the correctness gate can be seen to catch it.

`server.sim.fault` picks one (docs/reference/stand-in.md): `v2_draft`, `v2_verify` (v2 launches) or
`flashmla_draft_decode_context` (FlashMLA launches). On by itself: sglang 0.5.12 with FlashMLA and spec v2
dies at the warm-up (docs/results/2026-12-05-flashmla-v2-on-sglang-0.5.12.md).
"""

import os
import signal
import sys
from dataclasses import dataclass

from bench.server.known_bugs import FLASHMLA_DRAFT_DECODE_CONTEXT, FLASHMLA_DRAFT_EXTEND_V2
from bench.server.spec_modes import SpecMode
from synthetic.server import logs
from synthetic.server.config import Faults

# v2_draft: the per-draft acceptance probability is multiplied by this.
DRAFT_FAULT_FACTOR = 0.25
# v2_verify: the first wrong token lies in 1..DIVERGE_SPAN.
DIVERGE_SPAN = 32
# flashmla_draft_decode_context: the drafts a verify step can still accept (the draft extend's and step 0's).
DRAFT_DECODE_CONTEXT_ACCEPTED = 2

CRASH_0_5_12 = (
    f"auto: sglang 0.5.12 with FlashMLA and spec v2 ({FLASHMLA_DRAFT_EXTEND_V2.key}: "
    f"{FLASHMLA_DRAFT_EXTEND_V2.summary}); as measured on an H100, the scheduler dies at the start-up warm-up's "
    "first draft extend and the server exits before it is ready"
)
# The measured traceback's SGLang frames (tests/fixtures/logs/sglang-0.5.12-flashmla-nextn-v2-crash.log).
TRACEBACK_0_5_12 = """Traceback (most recent call last):
  File "sglang/srt/managers/scheduler.py", line 4041, in run_scheduler_process
    scheduler.run_event_loop()
  File "sglang/srt/managers/scheduler.py", line 1534, in run_event_loop
    dispatch_event_loop(self)
  File "sglang/srt/managers/scheduler.py", line 3910, in dispatch_event_loop
    scheduler.event_loop_overlap()
  File "sglang/srt/managers/scheduler.py", line 1594, in event_loop_overlap
    batch_result = self.run_batch(batch)
  File "sglang/srt/managers/scheduler.py", line 3039, in run_batch
    batch_result = self.model_worker.forward_batch_generation(
  File "sglang/srt/speculative/eagle_worker_v2.py", line 824, in forward_batch_generation
    self.draft_worker._draft_extend_for_decode(
  File "sglang/srt/speculative/eagle_worker_v2.py", line 614, in _draft_extend_for_decode
    draft_logits_output = self.draft_runner.forward(
  File "sglang/srt/model_executor/model_runner.py", line 3323, in forward
    output = self._forward_raw(
  File "sglang/srt/model_executor/model_runner.py", line 3451, in _forward_raw
    ret, can_run_graph = self.forward_extend(
  File "sglang/srt/model_executor/model_runner.py", line 3233, in forward_extend
    ret = self.model.forward(
  File "sglang/srt/models/deepseek_nextn.py", line 308, in forward
    hidden_states = self.model(input_ids, positions, forward_batch)
  File "sglang/srt/models/deepseek_nextn.py", line 204, in forward
    hidden_states, residual, topk_indices = self.decoder(
  File "sglang/srt/models/deepseek_v2.py", line 1941, in forward
    hidden_states = self.self_attn(
  File "sglang/srt/models/deepseek_v2.py", line 1607, in forward
    return self.forward_core(s)
  File "sglang/srt/models/deepseek_v2.py", line 1718, in forward_core
    return self.forward_absorb_core(*inner_state)
  File "sglang/srt/models/deepseek_common/attention_forward_methods/forward_mla.py", line 537, in forward_absorb_core
    attn_output = self.attn_mqa(
  File "sglang/srt/layers/radix_attention.py", line 138, in forward
    return forward_batch.attn_backend.forward(
  File "sglang/srt/layers/attention/base_attn_backend.py", line 124, in forward
    return self.forward_extend(
  File "sglang/srt/layers/attention/flashmla_backend.py", line 535, in forward_extend
    block_table=self.forward_metadata.block_kv_indices[:bs],
AttributeError: 'PrefillMetadata' object has no attribute 'block_kv_indices'
"""


@dataclass(frozen=True)
class Wrong:
    draft: bool = False
    verify: bool = False
    draft_extend_crash: bool = False
    draft_decode_context: bool = False

    @property
    def max_accepted(self) -> int | None:
        """The most drafts a verify step can accept on this launch's draft path; None: every one it drafts."""
        return DRAFT_DECODE_CONTEXT_ACCEPTED if self.draft_decode_context else None

    def describe(self) -> dict[str, str]:
        out: dict[str, str] = {}
        asked = "asked for (server.sim.fault)"
        if self.draft_extend_crash:
            out["draft_extend_crash"] = CRASH_0_5_12
        if self.draft_decode_context:
            bug = FLASHMLA_DRAFT_DECODE_CONTEXT
            out["flashmla_draft_decode_context"] = (
                f"{asked}: known SGLang issue {bug.key} ({bug.gist}); as measured on the mirror checkpoint, a "
                f"verify step accepts at most {DRAFT_DECODE_CONTEXT_ACCEPTED} drafts; tokens unchanged"
            )
        if self.draft:
            out["v2_draft"] = (
                f"{asked}: each draft accepted with {DRAFT_FAULT_FACTOR:g} x acceptance_rate; tokens unchanged"
            )
        if self.verify:
            out["v2_verify"] = (
                f"{asked}: each request's tokens leave the baseline's at a position in 1..{DIVERGE_SPAN} set by "
                "its prompt"
            )
        return out


def for_launch(
    faults: Faults, *, version: str, spec_mode: SpecMode | None, steps: int, flashmla: bool, routed: bool
) -> Wrong:
    """What this launch computes wrongly; `routed`: the release routes v2's draft extend right on FlashMLA."""
    context = (
        faults.flashmla_draft_decode_context
        and flashmla
        and FLASHMLA_DRAFT_DECODE_CONTEXT.applies(version, "flashmla", spec_mode, steps)
    )
    if spec_mode != "v2":
        return Wrong(draft_decode_context=context)
    return Wrong(faults.v2_draft, faults.v2_verify, flashmla and not routed, context)


def diverge_at(prompt_key: int) -> int:
    """The output position where a `v2_verify` request's tokens first differ from the baseline's."""
    return 1 + (prompt_key >> 7) % DIVERGE_SPAN


def die_of_draft_extend_v2() -> None:
    """Die as sglang 0.5.12's scheduler did: traceback, SIGQUIT line, then SIGKILL to the whole server."""
    logs.scheduler.error("Scheduler hit an exception: " + TRACEBACK_0_5_12)
    logs.launch.error("SIGQUIT received. signum=None, frame=None. It usually means one child failed.")
    sys.stderr.flush()
    os.kill(os.getpid(), signal.SIGKILL)
