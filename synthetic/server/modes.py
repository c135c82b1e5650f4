"""Spec v1 / v2 resolution per release (contract §1.4), including the log lines of §1.5.

Only the EAGLE family (EAGLE, EAGLE3, STANDALONE; NEXTN is already aliased to EAGLE) reaches
`resolve_spec_mode`; the stand-in rejects the other algorithms before this point.
"""

from __future__ import annotations

from dataclasses import dataclass

from bench.server.spec_modes import SpecMode
from synthetic.server.config import env_flag
from synthetic.server.versions import VersionTraits

SPEC_V2_REMOVED = (
    "SGLANG_ENABLE_SPEC_V2 has been removed: speculative decoding always runs the V2 worker. "
    "Use --disable-overlap-schedule to select the non-overlap (synchronous) path."
)
NON_OVERLAP_V2 = "Non-overlap (synchronous) spec v2 is used for eagle/eagle3/standalone speculative decoding."


@dataclass(frozen=True)
class ModeDecision:
    disable_overlap_schedule: bool
    # Which worker generation runs: "v1" exists only in 0.5.12; None without speculative decoding.
    worker: SpecMode | None
    warnings: tuple[str, ...]

    @property
    def overlap(self) -> bool:
        return not self.disable_overlap_schedule


def env_removal_warning(traits: VersionTraits, env_value: str | None) -> str | None:
    """0.5.14-0.5.15 warn whenever the variable is set at all, with or without speculative decoding."""
    if traits.spec_v2_env == "removed_warn" and env_value is not None:
        return SPEC_V2_REMOVED
    return None


def resolve_spec_mode(
    traits: VersionTraits,
    *,
    speculative: bool,
    explicit_topk: int | None,
    disable_overlap_flag: bool,
    env_value: str | None,
) -> ModeDecision:
    """`explicit_topk` is the flag as given: 0.5.12 tests it before the automatic (steps, topk, draft)."""
    if not speculative:
        return ModeDecision(disable_overlap_flag, None, ())
    spec_v2_env_on = env_flag(env_value, default=True)
    if traits.spec_v2_env == "v1_fallback":
        disable = disable_overlap_flag
        reason = None
        if explicit_topk is not None and explicit_topk > 1 and not disable:
            disable, reason = True, "spec v2 currently only supports topk = 1"
        elif not spec_v2_env_on and not disable:
            disable, reason = True, "SGLANG_ENABLE_SPEC_V2=False"
        if disable:
            line = (
                "Spec v1 is used for eagle/eagle3/standalone speculative decoding because "
                f"{reason or 'overlap schedule is disabled'}."
            )
            return ModeDecision(True, "v1", (line,))
        return ModeDecision(
            False, "v2", ("Spec v2 is enabled by default for eagle/eagle3/standalone speculative decoding.",)
        )
    if traits.spec_v2_env == "sync_v2":
        disable = disable_overlap_flag or not spec_v2_env_on
        if disable:
            return ModeDecision(True, "v2", (NON_OVERLAP_V2,))
        return ModeDecision(
            False,
            "v2",
            ("Overlap spec v2 is enabled by default for eagle/eagle3/standalone speculative decoding.",),
        )
    # 0.5.14 and later: the flag is the only switch and overlap is silent.
    if disable_overlap_flag:
        return ModeDecision(True, "v2", (NON_OVERLAP_V2,))
    return ModeDecision(False, "v2", ())
