"""What a job requires of a worker (`--requires gpu=H100,count=8,labels=a+b`), as bench.host.gpus judges."""

import re
from collections.abc import Mapping
from typing import Any

from bench.host.gpus import Gpu, matches, unmet

__all__ = ["REQUIREMENT_KEYS", "Gpu", "matches", "parse_requires", "requirements_for", "unmet"]

REQUIREMENT_KEYS = frozenset({"gpu", "count", "labels"})
# More GPUs than any one host holds: `count=10**30` is a typo, and was stored as a job nothing could claim.
MAX_GPU_COUNT = 1024
_COUNT = re.compile(r"^[0-9]{1,4}$")


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
            if not _COUNT.match(value) or not 1 <= int(value) <= MAX_GPU_COUNT:
                raise ValueError(
                    f"--requires: count={value[:40]!r} must be a whole number from 1 to {MAX_GPU_COUNT:,}"
                )
            out[key] = int(value)
        elif key == "labels":
            out[key] = sorted({v for v in value.split("+") if v})
        else:
            out[key] = value
    return out


def requires_text(req: Any) -> str:
    """Requirements as `--requires` takes them (`gpu=H100,count=8,labels=a+b`); a hand-edited row as it is."""
    if not isinstance(req, dict):
        return "" if req is None else str(req)
    return ",".join(f"{k}={'+'.join(map(str, v)) if isinstance(v, list) else v}" for k, v in req.items())


def requirements_for(
    sweep_backend: str,
    tp: int,
    explicit: Mapping[str, Any],
    *,
    python: str | None = None,
    external: str | None = None,
) -> dict[str, Any]:
    """What a job needs: at least `tp` GPUs for a real server, and any interpreter or external server."""
    req = dict(explicit)
    if sweep_backend == "sglang":
        req["count"] = max(int(req.get("count", 0)), tp)
    if python is not None and sweep_backend != "external":
        req["python"] = python
    if external is not None and sweep_backend == "external":
        req["external"] = external
    return req
