"""What a job requires of a worker (`--requires gpu=H100,count=8,labels=a+b`); whether a worker's GPUs meet
it is `bench.host.gpus.unmet`, beside the detector, so the dashboard can say why a job waits."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from bench.host.gpus import Gpu, matches, unmet

__all__ = ["REQUIREMENT_KEYS", "Gpu", "matches", "parse_requires", "requirements_for", "unmet"]

REQUIREMENT_KEYS = frozenset({"gpu", "count", "labels"})


def parse_requires(text: str | None) -> dict[str, Any]:
    """`gpu=H100,count=8,labels=a+b` into a dict; unknown keys are an error, not silently ignored."""
    if text is None or not text.strip():
        return {}
    out: dict[str, Any] = {}
    for part in text.split(","):
        key, sep, value = part.partition("=")
        key, value = key.strip(), value.strip()
        if not sep or not value:
            raise ValueError(f"--requires: {part!r} is not key=value")
        if key not in REQUIREMENT_KEYS:
            raise ValueError(
                f"--requires: unknown key {key!r} (known: {', '.join(sorted(REQUIREMENT_KEYS))})"
            )
        if key == "count":
            if not value.isdigit() or int(value) < 1:
                raise ValueError(f"--requires: count={value!r} must be a positive integer")
            out[key] = int(value)
        elif key == "labels":
            out[key] = sorted({v for v in value.split("+") if v})
        else:
            out[key] = value
    return out


def requirements_for(sweep_backend: str, tp: int, explicit: Mapping[str, Any]) -> dict[str, Any]:
    """What a job needs. A real SGLang server needs at least `tp` GPUs even when the user said nothing,
    so a GPU-less worker never claims a job it can only fail."""
    req = dict(explicit)
    if sweep_backend == "sglang":
        req["count"] = max(int(req.get("count", 0)), tp)
    return req
