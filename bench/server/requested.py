"""What differs between the server config asked for and what `/server_info` says runs: the server's
mismatches, which keep it from being measured. The spec mode is resolved by bench.server.spec_modes (contract
§1.5)."""

from typing import Any

from bench.server.spec_modes import ResolvedMode, known_fallback
from bench.sweep import ServerConfig


def _norm_algorithm(name: Any) -> str | None:
    if not name or str(name).upper() == "NONE":
        return None
    upper = str(name).upper()
    return "EAGLE" if upper == "NEXTN" else upper  # SGLang resolves the NEXTN alias to EAGLE


def compare_requested(
    config: ServerConfig, info: dict[str, Any], resolved: ResolvedMode, version: str
) -> list[str]:
    """What differs between the config asked for and `/server_info`; SGLang's aliases are no mismatch."""
    out: list[str] = []
    reported = info.get("version")
    if reported and str(reported) != version:
        out.append(f"version: expected SGLang {version}, the server reports {reported}")
    if resolved.contradiction:
        out.append(f"spec mode evidence disagrees: {resolved.contradiction}")
    if config.spec_mode != resolved.mode:
        line = (
            f"spec mode: requested {config.spec_mode or 'none (baseline)'}, "
            f"server runs {resolved.mode or 'none'} ({resolved.detail})"
        )
        why = known_fallback(resolved.version, config.spec_mode, config.algorithm, config.topk)
        out.append(f"{line}; {why}" if why else line)

    def check(key: str, expected: Any, what: str) -> None:
        if key not in info:
            out.append(f"{what}: cannot verify, /server_info has no {key!r}")
        elif info[key] != expected:
            out.append(f"{what}: requested {expected!r}, server runs {info[key]!r}")

    expected_alg = _norm_algorithm(config.algorithm)
    actual_alg = _norm_algorithm(info.get("speculative_algorithm"))
    if "speculative_algorithm" not in info and expected_alg is not None:
        out.append("speculative algorithm: cannot verify, /server_info has no 'speculative_algorithm'")
    elif actual_alg != expected_alg:
        out.append(
            f"speculative algorithm: requested {expected_alg or 'none'}, server runs {actual_alg or 'none'}"
        )
    check("model_path", config.model, "model")
    check("attention_backend", config.attention_backend, "attention backend")
    check("tp_size", config.tp, "tp size")
    if expected_alg is None:
        return out
    check("speculative_num_steps", config.steps, "speculative steps")
    check("speculative_eagle_topk", config.topk, "eagle topk")
    # With topk 1 SGLang overwrites draft tokens with steps+1 (contract §1.2).
    drafts = config.steps + 1 if config.topk == 1 and config.steps is not None else config.draft_tokens
    check("speculative_num_draft_tokens", drafts, "draft tokens")
    if config.draft_model and info.get("speculative_draft_model_path") not in (None, config.draft_model):
        out.append(
            f"draft model: requested {config.draft_model!r}, "
            f"server runs {info['speculative_draft_model_path']!r}"
        )
    return out
