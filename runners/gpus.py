"""Whether a worker meets a job's requirements: its GPUs and labels, and what its operator lets jobs use
(an interpreter by name, an external server; bench/host/policy.py). GPU detection is `bench.host.gpus`."""

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


def requirements_for(
    sweep_backend: str,
    tp: int,
    explicit: Mapping[str, Any],
    *,
    python: str | None = None,
    external: str | None = None,
) -> dict[str, Any]:
    """What a job needs. A real SGLang server needs at least `tp` GPUs even when the user said nothing,
    so a GPU-less worker never claims a job it can only fail; a named interpreter (`server.python`) and an
    external server's `host:port` need a worker whose operator offers them."""
    req = dict(explicit)
    if sweep_backend == "sglang":
        req["count"] = max(int(req.get("count", 0)), tp)
    if python is not None and sweep_backend != "external":
        req["python"] = python
    if external is not None and sweep_backend == "external":
        req["external"] = external
    return req


def unmet(
    requires: Mapping[str, Any],
    gpus: Sequence[Gpu],
    labels: Sequence[str] = (),
    offers: Mapping[str, Sequence[str]] | None = None,
) -> str | None:
    """Why these GPUs, labels and offers (HostPolicy.offered) do not meet the requirements, or None."""
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
    offers = offers or {}
    python = requires.get("python")
    if python is not None and python not in (offers.get("python") or ()):
        return f"needs a worker that offers interpreter {python!r} (worker --python {python}=PATH)"
    external = requires.get("external")
    if external is not None and external not in (offers.get("external") or ()):
        return f"needs a worker allowed to measure {external} (worker --allow-external {external})"
    return None


def matches(
    requires: Mapping[str, Any],
    gpus: Sequence[Gpu],
    labels: Sequence[str] = (),
    offers: Mapping[str, Sequence[str]] | None = None,
) -> bool:
    return unmet(requires, gpus, labels, offers) is None
