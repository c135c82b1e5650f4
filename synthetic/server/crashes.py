"""SGLang crashes the stand-in reproduces as they were measured on a GPU, log lines and exit included.

`draft_extend_v2`: sglang 0.5.12 with FlashMLA and spec v2 (bench.server.known_bugs, FLASHMLA_DRAFT_EXTEND_V2).
On an H100 (docs/results/2026-12-05-flashmla-v2-on-sglang-0.5.12.md) the server came up, answered /health 503
while SGLang's own start-up warm-up ran, and its scheduler died at the warm-up's first decode step: the v2
worker's draft extend after the verify reached FlashMLA's decode branch, which reads `block_kv_indices` from the
FlashInfer MLA parent's PrefillMetadata. The scheduler logged the traceback, the launcher process logged the
SIGQUIT that a dead child sends and killed its own process tree with SIGKILL. The stand-in prints the same
traceback (SGLang's frames, torch's left out) and ends the same way, so the launcher sees what it saw there.
"""

from __future__ import annotations

import os
import signal
import sys

from synthetic.server import logs

# (file under sglang/, line in 0.5.12, function, the frame's source line), outermost first: the frames of the
# measured traceback (tests/fixtures/logs/sglang-0.5.12-flashmla-nextn-v2-crash.log).
_FRAMES_0_5_12 = (
    ("srt/managers/scheduler.py", 4041, "run_scheduler_process", "scheduler.run_event_loop()"),
    ("srt/managers/scheduler.py", 1534, "run_event_loop", "dispatch_event_loop(self)"),
    ("srt/managers/scheduler.py", 3910, "dispatch_event_loop", "scheduler.event_loop_overlap()"),
    ("srt/managers/scheduler.py", 1594, "event_loop_overlap", "batch_result = self.run_batch(batch)"),
    (
        "srt/managers/scheduler.py",
        3039,
        "run_batch",
        "batch_result = self.model_worker.forward_batch_generation(",
    ),
    (
        "srt/speculative/eagle_worker_v2.py",
        824,
        "forward_batch_generation",
        "self.draft_worker._draft_extend_for_decode(",
    ),
    (
        "srt/speculative/eagle_worker_v2.py",
        614,
        "_draft_extend_for_decode",
        "draft_logits_output = self.draft_runner.forward(",
    ),
    ("srt/model_executor/model_runner.py", 3323, "forward", "output = self._forward_raw("),
    ("srt/model_executor/model_runner.py", 3451, "_forward_raw", "ret, can_run_graph = self.forward_extend("),
    ("srt/model_executor/model_runner.py", 3233, "forward_extend", "ret = self.model.forward("),
    (
        "srt/models/deepseek_nextn.py",
        308,
        "forward",
        "hidden_states = self.model(input_ids, positions, forward_batch)",
    ),
    ("srt/models/deepseek_nextn.py", 204, "forward", "hidden_states, residual, topk_indices = self.decoder("),
    ("srt/models/deepseek_v2.py", 1941, "forward", "hidden_states = self.self_attn("),
    ("srt/models/deepseek_v2.py", 1607, "forward", "return self.forward_core(s)"),
    ("srt/models/deepseek_v2.py", 1718, "forward_core", "return self.forward_absorb_core(*inner_state)"),
    (
        "srt/models/deepseek_common/attention_forward_methods/forward_mla.py",
        537,
        "forward_absorb_core",
        "attn_output = self.attn_mqa(",
    ),
    ("srt/layers/radix_attention.py", 138, "forward", "return forward_batch.attn_backend.forward("),
    ("srt/layers/attention/base_attn_backend.py", 124, "forward", "return self.forward_extend("),
    (
        "srt/layers/attention/flashmla_backend.py",
        535,
        "forward_extend",
        "block_table=self.forward_metadata.block_kv_indices[:bs],",
    ),
)
_EXCEPTION_0_5_12 = "AttributeError: 'PrefillMetadata' object has no attribute 'block_kv_indices'"


def traceback_lines() -> list[str]:
    """The scheduler's traceback of the crash, as SGLang 0.5.12 logs it."""
    lines = ["Traceback (most recent call last):"]
    for path, line, func, source in _FRAMES_0_5_12:
        lines.append(f'  File "sglang/{path}", line {line}, in {func}')
        lines.append(f"    {source}")
    lines.append(_EXCEPTION_0_5_12)
    return lines


def draft_extend_v2() -> None:
    """Die as sglang 0.5.12's scheduler does at its first spec v2 draft extend on FlashMLA: the traceback, the
    launcher's SIGQUIT line, then SIGKILL to the whole server (exit status -9, as SGLang's kill_process_tree)."""
    head, *rest = traceback_lines()
    logs.scheduler.error("Scheduler hit an exception: " + head + "\n" + "\n".join(rest) + "\n")
    logs.launch.error("SIGQUIT received. signum=None, frame=None. It usually means one child failed.")
    sys.stderr.flush()
    os.kill(os.getpid(), signal.SIGKILL)
