"""Known wrong paths per SGLang release, read from each release's source (contract §1.8, §1.10).

Pure. The dry run warns when a sweep asks for one of them; the stand-in reproduces its symptom; the
correctness gate (docs/reference/correctness-gate.md) is what shows whether a real server took it. Two symptoms:

* `crash`: the bug carries a log signature; a failed launch whose log matches it is named as that bug
  (`identify_failure`), and the gate counts it as a finding rather than a launch that merely failed.
* `acceptance`: the server serves, its tokens are right (verify is unaffected), but its drafts are computed from
  the wrong inputs, so fewer are accepted; the gate names the bug on a launch that fails acceptance with its
  tokens right (`acceptance_suspect`), and points to a control sweep that runs the same check without the bug.

A bug is fixed in a release (`fixed_in`) or open: present in every release specbench knows
(`bench.server.spec_modes.RELEASES`, the one list).
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Literal

from bench.server.spec_modes import NEWEST_RELEASE, OLDEST_RELEASE, SpecMode, release3

# How a launch that takes the path shows it: it dies (`crash`), or it serves right tokens with fewer drafts
# accepted than a right draft path would (`acceptance`).
Symptom = Literal["crash", "acceptance"]


@dataclass(frozen=True)
class KnownBug:
    key: str
    attention_backends: frozenset[str]
    spec_modes: frozenset[SpecMode]
    # One sentence: what the path does wrong and where (the dry run's warning, the gate's note).
    summary: str
    symptom: Symptom
    # The first release whose source has the fix (releases before it, from 0.5.12 on, have the bug); None: open,
    # in every release specbench knows (spec_modes.RELEASES).
    fixed_in: tuple[int, int, int] | None = None
    # The change that fixed it, as the failure line names it ("PR #24640").
    fixed_by: str = ""
    # The fewest `--speculative-num-steps` whose launch takes the path.
    min_steps: int = 1
    # What it is in one short clause, for the gate's failure line.
    gist: str = ""
    # A sweep that runs the same check on a path without the bug, so a failure can be told apart from a wrong
    # checkpoint or reference (the gate's failure line points to it).
    control: str | None = None
    # How a launch that takes the path fails, when that was measured: what crashed (one phrase, the start of the
    # launch failure's line), and a regex over the failed launch's log whose group `evidence` is the exception
    # line quoted after it. None: the symptom is not a crash, or not measured yet.
    crash: str | None = None
    log_signature: re.Pattern[str] | None = None
    # The specbench patch that fixes it (scripts/offline-bundle/patches): a server whose SGLang carries it does not
    # take the path; and the page that reports it (the fix, the proof, what it costs).
    fix_patch: str | None = None
    report: str | None = None

    @property
    def is_open(self) -> bool:
        return self.fixed_in is None

    @property
    def fixed_release(self) -> str:
        """The first release with the fix ("0.5.13"), or "" while the bug is open."""
        return ".".join(map(str, self.fixed_in)) if self.fixed_in is not None else ""

    def status(self) -> str:
        """Where it stands, as the lines that name it say it: "fixed in 0.5.13 by PR #24640", or "open in every
        release specbench knows, 0.5.12 to 0.5.23"."""
        if self.fixed_in is None:
            return f"open in every release specbench knows, {OLDEST_RELEASE} to {NEWEST_RELEASE}"
        return f"fixed in {self.fixed_release}" + (f" by {self.fixed_by}" if self.fixed_by else "")

    def applies(
        self,
        version: str,
        attention_backend: str,
        spec_mode: SpecMode | None,
        steps: int | None = None,
        patch: str | None = None,
    ) -> bool:
        """Whether a server of this release, backend, spec mode and step count takes the path; `steps` None:
        not known to the caller, so not a reason to rule it out; `patch`: the specbench patch its SGLang carries
        (bench/server/sglang_patch.py). Raises ValueError for a version no rule reads."""
        release = release3(
            version
        )  # read even for an open bug: an unreadable version is the caller's to hear
        if self.fixed_in is not None and release >= self.fixed_in:
            return False
        if self.fix_patch is not None and carries(patch, self.fix_patch):
            return False
        if attention_backend not in self.attention_backends or spec_mode not in self.spec_modes:
            return False
        return steps is None or steps >= self.min_steps


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
    symptom="crash",
    gist="FlashMLA runs spec v2's draft extend down its decode path",
    fixed_by="PR #24640",
    crash="server crashed in spec v2's draft extend",
    log_signature=re.compile(
        r"in _draft_extend_for_decode\b.*?"
        r"flashmla_backend\.py\", line \d+, in forward_extend\b.*?"
        r"^(?P<evidence>AttributeError: 'PrefillMetadata' object has no attribute 'block_kv_indices')\s*$",
        re.DOTALL | re.MULTILINE,
    ),
)

# Open in every release read, 0.5.12 to 0.5.23 (contract §1.10). The draft worker runs `steps - 1` draft decode
# forwards per cycle (`draft_forward`: speculative/eagle_worker.py in 0.5.12's v1, eagle_worker_v2.py otherwise),
# the i-th at position seq_lens + i writing its KV at req_to_token[seq_lens + i] (`assign_draft_cache_locs*`),
# advancing `positions` but never `seq_lens`. `FlashMLABackend.forward_decode` attends with
# `cache_seqlens=forward_batch.seq_lens`, and `FlashMLAMultiStepDraftBackend` builds every step's page table and
# tile metadata from the same `seq_lens` (eager and CUDA-graph paths alike), so draft decode step i sees only the
# committed prefix [0, seq_lens): neither this cycle's earlier draft tokens (seq_lens .. seq_lens + i - 1) nor its
# own (seq_lens + i). The triton backend's multi-step draft gives step i `draft_kv_indices_used_len(..., i + 1)`
# indices, i.e. the prefix and i + 1 draft slots. Verify is unaffected, so tokens stay right; acceptance falls.
#
# min_steps 2: with one step no draft decode runs (the one draft comes from the draft extend, on the FlashInfer
# MLA path); from 2 steps on, step 0 already loses its own token's KV, which a trained MTP layer attends to. The
# mirror checkpoint shows it from 3 steps: its draft reads only the previous position, which step 0 still sees
# and step 1 does not. Measured on an H100 (docs/results/2026-12-05-h100-correctness-gate.md): mirror, NEXTN
# steps 3 topk 1, 0.5.13.post1 v1 and v2 and 0.5.12 v1 accept 3.05 tokens per verify against the reference's 4.00,
# tokens 16/16 right; the same release and checkpoint on triton accept 4.00.
FLASHMLA_DRAFT_DECODE_CONTEXT = KnownBug(
    key="flashmla-draft-decode-context",
    attention_backends=frozenset({"flashmla"}),
    spec_modes=frozenset({"v1", "v2"}),
    summary=(
        "FlashMLA's draft decode steps attend only to the committed prefix (forward_decode's "
        "cache_seqlens=seq_lens, which the draft loop never advances), not to this cycle's draft tokens: fewer "
        "drafts are accepted, tokens stay right"
    ),
    symptom="acceptance",
    min_steps=2,
    gist="FlashMLA's draft decode steps attend only to the committed prefix, not to this cycle's draft tokens",
    control="sweeps/correctness-triton-control.yaml",
    fix_patch="flashmla-draft-decode-context",
    report="docs/results/2026-12-06-flashmla-draft-decode-context.md",
)

KNOWN_BUGS: tuple[KnownBug, ...] = (FLASHMLA_DRAFT_EXTEND_V2, FLASHMLA_DRAFT_DECODE_CONTEXT)


@dataclass(frozen=True)
class KnownFailure:
    """A failed launch identified as a known bug by its log."""

    bug: KnownBug
    evidence: str  # the log's exception line

    def line(self) -> str:
        """The launch failure in one line: what crashed, which bug, where it is fixed, the exception."""
        bug = self.bug
        return f"{bug.crash}: known SGLang bug {bug.key}, {bug.status()}: {self.evidence}"


def carries(patch: str | None, name: str) -> bool:
    """Whether a server's patch state (bench/server/sglang_patch.py) says it carries patch `name`, unchanged."""
    return (
        patch is not None
        and (patch == name or patch.startswith(f"{name} ("))
        and ", then changed" not in patch
    )


def bugs_for(
    version: str,
    attention_backend: str,
    spec_mode: SpecMode | None,
    steps: int | None = None,
    patch: str | None = None,
) -> list[KnownBug]:
    """The known wrong paths a server of this release, backend, spec mode (and step count, when known) takes;
    `patch`: the specbench patch its SGLang carries, which may fix one."""
    return [bug for bug in KNOWN_BUGS if bug.applies(version, attention_backend, spec_mode, steps, patch)]


def fixed_by_patch(patch: str | None) -> list[KnownBug]:
    """The known bugs a server carrying this patch state does not have."""
    return [bug for bug in KNOWN_BUGS if bug.fix_patch is not None and carries(patch, bug.fix_patch)]


def identify_failure(
    version: str, attention_backend: str, spec_mode: SpecMode | None, log_text: str, steps: int | None = None
) -> KnownFailure | None:
    """The known bug a failed launch of this release, backend and spec mode hit, judged by its log; None when
    its log matches none of the bugs that launch can have (an unknown failure stays unknown)."""
    try:
        bugs = bugs_for(version, attention_backend, spec_mode, steps)
    except ValueError:  # a version string no rule reads
        return None
    for bug in bugs:
        if bug.log_signature is None:
            continue
        m = bug.log_signature.search(log_text)
        if m is not None:
            return KnownFailure(bug, m.group("evidence").strip())
    return None


def acceptance_suspect(
    version: str,
    attention_backend: str,
    spec_mode: SpecMode | None,
    steps: int | None,
    patch: str | None = None,
) -> KnownBug | None:
    """The known bug that explains a launch of this release, backend, mode and steps accepting fewer drafts than
    it should while its tokens are right; None when none applies (or the version is unreadable)."""
    try:
        bugs = bugs_for(version, attention_backend, spec_mode, steps, patch)
    except ValueError:
        return None
    return next((bug for bug in bugs if bug.symptom == "acceptance"), None)


def suspect_line(bug: KnownBug) -> str:
    """What the gate says after a failed acceptance comparison that `bug` explains: the bug, what it is in one
    clause, where it stands, and the control run that tells it apart from a wrong checkpoint or reference."""
    control = f"; control: specbench run {bug.control}" if bug.control else ""
    report = f"; fix and report: {bug.report}" if bug.report else ""
    return f"matches known SGLang issue {bug.key} ({bug.gist}; {bug.status()}){control}{report}"


def flashmla_routes_draft_extend_v2(version: str) -> bool:
    """Whether this release sends DRAFT_EXTEND_V2 to FlashMLA's prefill path (the fix of PR #24640)."""
    return not FLASHMLA_DRAFT_EXTEND_V2.applies(version, "flashmla", "v2")
