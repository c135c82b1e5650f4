"""Whether a worker's GPUs meet a job's requirements (detection itself is `bench.host.gpus`)."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from bench.host.gpus import Gpu

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


def unmet(requires: Mapping[str, Any], gpus: Sequence[Gpu], labels: Sequence[str] = ()) -> str | None:
    """Why these GPUs and labels do not meet the requirements, or None when they do."""
    want_count = int(requires.get("count", 0) or 0)
    want_name = str(requires.get("gpu") or "").lower()
    if want_name:
        fitting = [g for g in gpus if want_name in g.name.lower()]
        if not fitting:
            return f"needs a {requires['gpu']} GPU"
        if len(fitting) < max(want_count, 1):
            return f"needs {max(want_count, 1)} x {requires['gpu']}, has {len(fitting)}"
    elif len(gpus) < want_count:
        return f"needs {want_count} GPU(s), has {len(gpus)}"
    missing = sorted(set(requires.get("labels") or ()) - set(labels))
    if missing:
        return f"needs worker label(s) {', '.join(missing)}"
    return None


def matches(requires: Mapping[str, Any], gpus: Sequence[Gpu], labels: Sequence[str] = ()) -> bool:
    return unmet(requires, gpus, labels) is None
