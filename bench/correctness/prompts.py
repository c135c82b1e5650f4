"""The check's prompt set, and when a launch's tokens can say nothing (so it is not checked at all)."""

from __future__ import annotations

import json
from pathlib import Path

from bench.sweep import SIMULATE_ACC_ENV, CorrectnessSpec, ServerConfig, SweepSpec, WorkloadSpec
from bench.workload import build_prompts

# The vocabulary the workload's random prompts assume when the model's config.json is not readable here.
DEFAULT_VOCAB = 32000

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


def model_vocab(model: str) -> int | None:
    """The model's `vocab_size` from its config.json when the path is a readable directory here."""
    try:
        cfg = json.loads((Path(model) / "config.json").read_text())
    except (OSError, ValueError):
        return None
    vocab = cfg.get("vocab_size") if isinstance(cfg, dict) else None
    return vocab if isinstance(vocab, int) and not isinstance(vocab, bool) and vocab > 2 else None


def check_prompts(settings: CorrectnessSpec, vocab: int | None) -> list[list[int]]:
    """`settings.prompts` seeded random prompts of token ids below the vocabulary, each opening differently
    (no prefix shared with another, contract §6.6): the same set on every launch and every host."""
    workload = WorkloadSpec(
        dataset="random", input_len=settings.input_len, output_len=settings.output_len, seed=settings.seed
    )
    prompts = build_prompts(workload, settings.prompts, vocab_size=vocab or DEFAULT_VOCAB)
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
