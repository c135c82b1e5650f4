"""The check's prompt set, and when a launch's tokens can say nothing (so it is not checked at all)."""

from bench.sweep import SIMULATE_ACC_ENV, CorrectnessSpec, ServerConfig, SweepSpec, WorkloadSpec
from bench.workload import build_prompts

SIMULATED_WHY = (
    "acceptance simulated ({env}={value}): SGLang overwrites every token a verify step commits with id 100 and "
    "draws the accept length at random (speculative/spec_utils.py, generate_simulated_accept_index), so neither "
    "the tokens nor the acceptance depend on the draft"
)
DUMMY_WHY = (
    "dummy weights (server.load_format: dummy): random weights give near-tied logits, so greedy tokens say "
    "nothing about the model"
)
OFF_WHY = "switched off (measure.correctness.enabled: false)"


def check_prompts(settings: CorrectnessSpec, vocab: int) -> list[list[int]]:
    """`settings.prompts` seeded prompts below `vocab`, each opening differently (contract §6.6)."""
    workload = WorkloadSpec(
        dataset="random", input_len=settings.input_len, output_len=settings.output_len, seed=settings.seed
    )
    prompts = build_prompts(workload, settings.prompts, vocab_size=vocab)
    return [list(p.input_ids or []) for p in prompts]


def why_not_checked(spec: SweepSpec, cfg: ServerConfig) -> str | None:
    """Why the check would be meaningless for a launch of `cfg` (so it is not sent), or None."""
    if not spec.measure.correctness.enabled:
        return OFF_WHY
    if spec.server.load_format == "dummy":
        return DUMMY_WHY
    env = dict(cfg.env)
    if not cfg.is_baseline and SIMULATE_ACC_ENV in env:
        return SIMULATED_WHY.format(env=SIMULATE_ACC_ENV, value=env[SIMULATE_ACC_ENV])
    return None
