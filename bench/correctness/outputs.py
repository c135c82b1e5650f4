"""What a launch answered to the check's prompts and what the reference expects: plain JSON-able data, so a
stored check can be judged again (`specbench gate RUN`)."""

from __future__ import annotations

import hashlib
import json
from dataclasses import asdict, dataclass, field
from typing import Any

# The check's request ids (SGLang's `rid`): the stand-in's faults count measurement requests only.
CHECK_RID_PREFIX = "specbench-check-"


@dataclass(frozen=True)
class RequestOutput:
    """One greedy request's answer: its tokens and the per-request speculative counters of `meta_info`."""

    output_ids: list[int]
    completion_tokens: int | None = None
    spec_verify_ct: int | None = None
    finish_reason: str | None = None
    error: str | None = None

    @property
    def accept_length(self) -> float | None:
        """SGLang's per-request `spec_accept_length`: completion_tokens / spec_verify_ct (contract §3.3)."""
        if not self.completion_tokens or not self.spec_verify_ct:
            return None
        return self.completion_tokens / self.spec_verify_ct


@dataclass(frozen=True)
class CheckPass:
    """The prompt set answered once, with `concurrency` requests in flight (the prompts' order is kept)."""

    concurrency: int
    requests: list[RequestOutput]

    @property
    def errors(self) -> list[str]:
        return [r.error for r in self.requests if r.error]


@dataclass(frozen=True)
class LaunchOutputs:
    """Everything one launch answered: `passes[0]` (all prompts at once) is compared across launches; the
    baseline's `passes[1]` (one at a time) shows how often greedy decoding disagrees with itself."""

    config_key: str
    spec_mode: str | None  # None: the baseline (no speculative decoding)
    pair_key: str | None
    steps: int | None
    topk: int | None
    prompts_digest: str
    output_len: int
    passes: list[CheckPass] = field(default_factory=list)
    error: str | None = None  # the check could not run at all (the server refused the first request...)

    @property
    def first(self) -> CheckPass | None:
        return self.passes[0] if self.passes else None

    def to_json(self) -> dict[str, Any]:
        return asdict(self)

    @classmethod
    def from_json(cls, data: dict[str, Any]) -> LaunchOutputs:
        passes = [
            CheckPass(p["concurrency"], [RequestOutput(**r) for r in p["requests"]])
            for p in data.get("passes", [])
        ]
        return cls(**{**data, "passes": passes})


@dataclass(frozen=True)
class ReferenceOutputs:
    """The pure-torch reference: greedy tokens and, per step count, chain drafting's accept lengths."""

    prompts_digest: str
    tokens: list[list[int]]
    accept_lengths: dict[int, list[float]]
    device: str = "cpu"
    seconds: float = 0.0

    def to_json(self) -> dict[str, Any]:
        out = asdict(self)
        out["accept_lengths"] = {str(k): v for k, v in self.accept_lengths.items()}
        return out

    @classmethod
    def from_json(cls, data: dict[str, Any]) -> ReferenceOutputs:
        return cls(**{**data, "accept_lengths": {int(k): v for k, v in data["accept_lengths"].items()}})


def prompts_digest(prompts: list[list[int]], output_len: int) -> str:
    """Names a prompt set: launches and the reference are compared only when they answered the same one."""
    blob = json.dumps({"prompts": prompts, "output_len": output_len}, separators=(",", ":"))
    return hashlib.sha256(blob.encode()).hexdigest()[:16]
