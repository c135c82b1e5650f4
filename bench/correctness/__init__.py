"""The correctness check (docs/reference/correctness-gate.md): speed counts only when the tokens are right.

One module per job: `prompts` (the seeded prompt set; when a launch cannot be checked), `collect` (sending it
to a server), `outputs` (what a launch answered, what the reference expects), `judge` (the verdict).
"""

from bench.correctness.collect import collect, sampling_params
from bench.correctness.judge import (
    VERDICTS,
    Verdict,
    VerdictWord,
    divergences,
    judge_launch,
    not_checked,
    unusable,
)
from bench.correctness.outputs import (
    CheckPass,
    LaunchOutputs,
    ReferenceOutputs,
    RequestOutput,
    prompts_digest,
)
from bench.correctness.prompts import check_prompts, model_vocab, why_not_checked

__all__ = [
    "VERDICTS",
    "CheckPass",
    "LaunchOutputs",
    "ReferenceOutputs",
    "RequestOutput",
    "Verdict",
    "VerdictWord",
    "check_prompts",
    "collect",
    "divergences",
    "judge_launch",
    "model_vocab",
    "not_checked",
    "prompts_digest",
    "sampling_params",
    "unusable",
    "why_not_checked",
]
