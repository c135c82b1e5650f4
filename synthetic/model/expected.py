"""What a specbench synthetic checkpoint should answer to the correctness check (pure-torch reference)."""

import importlib.util
import time
from collections.abc import Iterable
from pathlib import Path

from bench.correctness.outputs import ReferenceOutputs, prompts_digest
from synthetic.model.build import is_synthetic_checkpoint, read_manifest

# Modes with clear logit margins, so bf16 and float32 pick the same tokens (`random` has near-ties).
JUDGED_MODES = ("agree", "mirror")


def reference_note(model: str, backend: str) -> str | None:
    """Why the reference cannot judge launches of `model` on `backend`; None when it can."""
    if backend == "sim":
        return "not applicable: the stand-in does not run the model's weights"
    if not is_synthetic_checkpoint(model):
        return "not applicable: not a specbench synthetic checkpoint"
    mode = read_manifest(model).get("mode")
    if mode not in JUDGED_MODES:
        return f"not checked: a {mode}-mode checkpoint has no clear logit margins, near-ties pick tokens"
    if importlib.util.find_spec("torch") is None or importlib.util.find_spec("safetensors") is None:
        return "not checked: torch missing (the pure-torch reference runs where torch and safetensors import)"
    return None


def reference_outputs(
    model_dir: str | Path,
    prompts: list[list[int]],
    output_len: int,
    steps: Iterable[int],
    *,
    device: str | None = None,
) -> ReferenceOutputs:
    """Greedy tokens of every prompt and, per step count, each request's accept length; on a GPU if any."""
    import torch

    from synthetic.model.reference import ReferenceModel

    chosen = device or ("cuda" if torch.cuda.is_available() else "cpu")
    started = time.perf_counter()
    model = ReferenceModel.from_dir(model_dir, device=chosen)
    tokens = model.greedy(prompts, output_len)
    accepts: dict[int, list[float]] = {}
    for n in sorted(set(steps)):
        accepts[n] = []
        for prompt in prompts:
            res = model.speculative_generate(prompt, steps=n, max_new_tokens=output_len)
            accepts[n].append(len(res.output_ids) / len(res.accept_lengths) if res.accept_lengths else 1.0)
    return ReferenceOutputs(
        prompts_digest=prompts_digest(prompts, output_len),
        tokens=tokens,
        accept_lengths=accepts,
        device=chosen,
        seconds=round(time.perf_counter() - started, 2),
    )
