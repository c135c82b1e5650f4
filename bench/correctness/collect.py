"""Sending the check's prompts to one server: greedy, the same sampling parameters on every launch."""

import asyncio
import uuid
from typing import Any

from bench.client import LoadClient, ServerUnavailableError
from bench.correctness.outputs import (
    CHECK_RID_PREFIX,
    CheckPass,
    LaunchOutputs,
    RequestOutput,
    prompts_digest,
)
from bench.sweep import CorrectnessSpec, ServerConfig


def sampling_params(settings: CorrectnessSpec) -> dict[str, Any]:
    """Greedy (temperature 0), exactly `output_len` tokens, nothing else: every release reads them alike."""
    return {"max_new_tokens": settings.output_len, "temperature": 0.0, "ignore_eos": True}


async def collect(
    client: LoadClient,
    cfg: ServerConfig,
    prompts: list[list[int]],
    settings: CorrectnessSpec,
    *,
    timeout_s: float,
) -> LaunchOutputs:
    """The prompt set, all at once; for the baseline with `self_check` a second time, one prompt at a time.
    The cache is flushed before each pass, so no answer reads another's prefix (contract §6.1)."""
    concurrencies = [len(prompts)]
    if cfg.is_baseline and settings.self_check and len(prompts) > 1:
        concurrencies.append(1)
    passes: list[CheckPass] = []
    error: str | None = None
    try:
        for concurrency in concurrencies:
            await client.flush_cache()
            passes.append(await _one_pass(client, prompts, settings, concurrency, timeout_s))
            if passes[-1].errors:
                break  # a second pass would only repeat the failure
    except (ServerUnavailableError, RuntimeError) as e:  # flush refused, or the server is gone
        error = f"{type(e).__name__}: {e}"
    return LaunchOutputs(
        config_key=cfg.key(),
        spec_mode=cfg.spec_mode,
        pair_key=None if cfg.is_baseline else cfg.pair_key(),
        steps=cfg.steps,
        topk=cfg.topk,
        prompts_digest=prompts_digest(prompts, settings.output_len),
        output_len=settings.output_len,
        passes=passes,
        error=error,
    )


async def _one_pass(
    client: LoadClient,
    prompts: list[list[int]],
    settings: CorrectnessSpec,
    concurrency: int,
    timeout_s: float,
) -> CheckPass:
    params = sampling_params(settings)
    slots = asyncio.Semaphore(concurrency)
    tag = uuid.uuid4().hex[:12]

    async def one(i: int, ids: list[int]) -> RequestOutput:
        payload = {"input_ids": ids, "sampling_params": params, "rid": f"{CHECK_RID_PREFIX}{tag}-{i}"}
        async with slots:
            try:
                out = await client.generate_once(payload, timeout_s=timeout_s)
            except (ServerUnavailableError, RuntimeError) as e:
                return RequestOutput(output_ids=[], error=str(e))
        return _answer(out)

    return CheckPass(concurrency, list(await asyncio.gather(*(one(i, p) for i, p in enumerate(prompts)))))


def _answer(out: Any) -> RequestOutput:
    try:
        meta = out["meta_info"]
        ids = [int(t) for t in out["output_ids"]]
    except (KeyError, TypeError, ValueError):
        return RequestOutput(
            output_ids=[], error=f"malformed answer (no output_ids or meta_info): {str(out)[:200]}"
        )
    fr = meta.get("finish_reason")
    return RequestOutput(
        output_ids=ids,
        completion_tokens=meta.get("completion_tokens"),
        spec_verify_ct=meta.get("spec_verify_ct"),
        finish_reason=fr.get("type") if isinstance(fr, dict) else fr,
    )
