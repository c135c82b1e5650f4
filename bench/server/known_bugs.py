"""Known wrong paths per SGLang release, read from each release's source (contract §1.8), beside spec_modes.

Pure. The dry run warns when a sweep asks for one of them; the stand-in reproduces its symptom; the
correctness gate (docs/reference/correctness-gate.md) is what shows whether a real server took it.
"""

from __future__ import annotations

from dataclasses import dataclass

from bench.server.spec_modes import SpecMode, parse_version


@dataclass(frozen=True)
class KnownBug:
    key: str
    # The first release whose source has the fix (releases before it, from 0.5.12 on, have the bug).
    fixed_in: tuple[int, int, int]
    attention_backends: frozenset[str]
    spec_modes: frozenset[SpecMode]
    summary: str


# SGLang PR #24640 (merged 2026-05-20, first released in 0.5.13). In 0.5.12 `FlashMLABackend.forward_extend`
# sends only EXTEND and DRAFT_EXTEND to the prefill path, so DRAFT_EXTEND_V2 (the v2 worker's draft extend after
# each verify) runs FlashMLA's decode/verify kernel with metadata built for a prefill; and
# `DeepseekV2AttentionMLA.dispatch_attn_forward_method` calls `is_draft_extend()` without `include_v2=True`.
# `SGLANG_ENABLE_SPEC_V2` defaults to true there, so 0.5.12's defaults take this path. 0.5.13 and 0.5.13.post1
# route DRAFT_EXTEND_V2 like DRAFT_EXTEND.
FLASHMLA_DRAFT_EXTEND_V2 = KnownBug(
    key="flashmla-draft-extend-v2",
    fixed_in=(0, 5, 13),
    attention_backends=frozenset({"flashmla"}),
    spec_modes=frozenset({"v2"}),
    summary=(
        "FlashMLA runs spec v2's draft extend (DRAFT_EXTEND_V2) down its decode/verify path with metadata never "
        "built for it (fixed by SGLang PR #24640, first released in 0.5.13)"
    ),
)

KNOWN_BUGS: tuple[KnownBug, ...] = (FLASHMLA_DRAFT_EXTEND_V2,)


def bugs_for(version: str, attention_backend: str, spec_mode: SpecMode | None) -> list[KnownBug]:
    """The known wrong paths a server of this release, backend and spec mode takes."""
    release = (*parse_version(version), 0, 0, 0)[:3]
    return [
        bug
        for bug in KNOWN_BUGS
        if release < bug.fixed_in
        and attention_backend in bug.attention_backends
        and spec_mode in bug.spec_modes
    ]


def flashmla_routes_draft_extend_v2(version: str) -> bool:
    """Whether this release sends DRAFT_EXTEND_V2 to FlashMLA's prefill path (the fix of PR #24640)."""
    return not bugs_for(version, "flashmla", "v2")
