"""Series identity: points comparable over time share a fingerprint; version, commit and time are x-axes."""

import hashlib
import json

FINGERPRINT_FIELDS: tuple[str, ...] = (
    *("model", "draft_model", "attention_backend", "tp", "algorithm", "steps", "topk", "draft_tokens"),
    *("spec_mode", "batch_size", "workload_key", "gpu_name", "gpu_count"),
)


def point_fingerprint(
    *,
    model: str,
    draft_model: str | None,
    attention_backend: str,
    tp: int,
    algorithm: str | None,
    steps: int | None,
    topk: int | None,
    draft_tokens: int | None,
    spec_mode: str | None,
    batch_size: int,
    workload_key: str,
    gpu_name: str,
    gpu_count: int,
    accept_length: float | None = None,
    expert_routing: str | None = None,
) -> str:
    """A stable 16-hex-digit hash of the series key, the same on every host and Python. `accept_length` joins
    only when pinned and `expert_routing` only when "balanced", so older series keep their fingerprints."""
    spec = (model, draft_model, attention_backend, tp, algorithm, steps, topk, draft_tokens, spec_mode)
    values = (*spec, batch_size, workload_key, gpu_name, gpu_count)  # in FINGERPRINT_FIELDS order
    key: dict[str, object] = dict(zip(FINGERPRINT_FIELDS, values, strict=True))
    if accept_length is not None:
        key["accept_length"] = accept_length
    if expert_routing == "balanced":
        key["expert_routing"] = expert_routing
    blob = json.dumps(key, sort_keys=True, separators=(",", ":"))
    return hashlib.sha256(blob.encode()).hexdigest()[:16]
