"""Known wrong paths per SGLang release, read from each release's source (contract §1.8), beside spec_modes.

Pure. The dry run warns when a sweep asks for one of them; the stand-in reproduces its symptom; the
correctness gate (docs/reference/correctness-gate.md) is what shows whether a real server took it. A bug whose
symptom was measured as a crash carries a log signature: a failed launch whose log matches it is named as that
bug (`identify_failure`), and the gate counts it as a finding rather than a launch that merely failed.
"""

from __future__ import annotations

import re
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
    # The change that fixed it, as the failure line names it ("PR #24640").
    fixed_by: str = ""
    # How a launch that takes the path fails, when that was measured: what crashed (one phrase, the start of the
    # launch failure's line), and a regex over the failed launch's log whose group `evidence` is the exception
    # line quoted after it. None: the symptom is not a crash, or not measured yet.
    crash: str | None = None
    log_signature: re.Pattern[str] | None = None

    @property
    def fixed_release(self) -> str:
        return ".".join(map(str, self.fixed_in))


# SGLang PR #24640 (merged 2026-05-20, first released in 0.5.13). In 0.5.12 `FlashMLABackend.forward_extend`
# sends only EXTEND and DRAFT_EXTEND to the prefill path, so DRAFT_EXTEND_V2 (the v2 worker's draft extend after
# each verify) runs FlashMLA's decode/verify kernel with metadata built for a prefill; and
# `DeepseekV2AttentionMLA.dispatch_attn_forward_method` calls `is_draft_extend()` without `include_v2=True`.
# `SGLANG_ENABLE_SPEC_V2` defaults to true there, so 0.5.12's defaults take this path. 0.5.13 and 0.5.13.post1
# route DRAFT_EXTEND_V2 like DRAFT_EXTEND.
#
# Measured (H100, NEXTN steps 3 topk 1, docs/results/2026-12-05-flashmla-v2-on-sglang-0.5.12.md): the path never
# computes anything. The decode branch reads `forward_metadata.block_kv_indices` from the FlashInfer MLA parent's
# PrefillMetadata, and the scheduler dies at the first draft extend of SGLang's own start-up warm-up: the
# server answers /health 503, then exits. The signature needs the v2 draft-extend frame, FlashMLA's
# forward_extend frame and the exception line, in that order (tests/fixtures/logs holds the real traceback).
FLASHMLA_DRAFT_EXTEND_V2 = KnownBug(
    key="flashmla-draft-extend-v2",
    fixed_in=(0, 5, 13),
    attention_backends=frozenset({"flashmla"}),
    spec_modes=frozenset({"v2"}),
    summary=(
        "FlashMLA runs spec v2's draft extend (DRAFT_EXTEND_V2) down its decode/verify path with metadata never "
        "built for it (fixed by SGLang PR #24640, first released in 0.5.13)"
    ),
    fixed_by="PR #24640",
    crash="server crashed in spec v2's draft extend",
    log_signature=re.compile(
        r"in _draft_extend_for_decode\b.*?"
        r"flashmla_backend\.py\", line \d+, in forward_extend\b.*?"
        r"^(?P<evidence>AttributeError: 'PrefillMetadata' object has no attribute 'block_kv_indices')\s*$",
        re.DOTALL | re.MULTILINE,
    ),
)

KNOWN_BUGS: tuple[KnownBug, ...] = (FLASHMLA_DRAFT_EXTEND_V2,)
BY_KEY = {bug.key: bug for bug in KNOWN_BUGS}


@dataclass(frozen=True)
class KnownFailure:
    """A failed launch identified as a known bug by its log."""

    bug: KnownBug
    evidence: str  # the log's exception line

    def line(self) -> str:
        """The launch failure in one line: what crashed, which bug, where it is fixed, the exception."""
        bug = self.bug
        return (
            f"{bug.crash}: known SGLang bug {bug.key}, fixed in {bug.fixed_release} by {bug.fixed_by}: "
            f"{self.evidence}"
        )


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


def identify_failure(
    version: str, attention_backend: str, spec_mode: SpecMode | None, log_text: str
) -> KnownFailure | None:
    """The known bug a failed launch of this release, backend and spec mode hit, judged by its log; None when
    its log matches none of the bugs that launch can have (an unknown failure stays unknown)."""
    try:
        bugs = bugs_for(version, attention_backend, spec_mode)
    except ValueError:  # a version string no rule reads
        return None
    for bug in bugs:
        if bug.log_signature is None:
            continue
        m = bug.log_signature.search(log_text)
        if m is not None:
            return KnownFailure(bug, m.group("evidence").strip())
    return None


def flashmla_routes_draft_extend_v2(version: str) -> bool:
    """Whether this release sends DRAFT_EXTEND_V2 to FlashMLA's prefill path (the fix of PR #24640)."""
    return not bugs_for(version, "flashmla", "v2")
