"""Known wrong paths per SGLang release, read from each release's source (contract §1.8, §1.10). Pure: the dry
run warns, the stand-in reproduces the symptom, and the correctness gate (docs/reference/correctness-gate.md)
shows whether a real server took it. Symptoms: `crash` (a log signature names a failed launch,
`identify_failure`, and the gate counts it a finding) and `acceptance` (right tokens, fewer drafts accepted,
`acceptance_suspect`, with a control sweep without the bug). A bug is `fixed_in` a release or open in every
release of `bench.server.spec_modes.RELEASES`."""

import re
from dataclasses import dataclass
from typing import Literal

from bench.server.spec_modes import NEWEST_RELEASE, OLDEST_RELEASE, SpecMode, release3

# How a launch taking the path shows it: it dies (`crash`), or serves right tokens with fewer drafts accepted.
Symptom = Literal["crash", "acceptance"]


@dataclass(frozen=True)
class KnownBug:
    key: str
    attention_backends: frozenset[str]
    spec_modes: frozenset[SpecMode]
    summary: str  # one sentence: what the path does wrong and where (the dry run's warning, the gate's note)
    symptom: Symptom
    # The first release with the fix (0.5.12 on have the bug before it); None: open in every known release.
    fixed_in: tuple[int, int, int] | None = None
    fixed_by: str = ""  # the change that fixed it, as the failure line names it ("PR #24640")
    min_steps: int = 1  # the fewest `--speculative-num-steps` whose launch takes the path
    gist: str = ""  # what it is in one short clause, for the gate's failure line
    # A sweep running the same check on a path without the bug (the gate's failure line points to it).
    control: str | None = None
    # What crashed, and a regex over the log whose group `evidence` is the exception line; None: no crash.
    crash: str | None = None
    log_signature: re.Pattern[str] | None = None
    # The specbench patch that fixes it (scripts/offline-bundle/patches) and the page reporting it.
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
        """Where it stands: "fixed in 0.5.13 by PR #24640" or "open in every release specbench knows, ..."."""
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
        """Whether a server of this release, backend, mode, steps (None: unknown) and patch takes the path;
        ValueError for an unreadable version."""
        release = release3(version)  # read even for an open bug: a bad version is the caller's to hear
        if self.fixed_in is not None and release >= self.fixed_in:
            return False
        if self.fix_patch is not None and carries(patch, self.fix_patch):
            return False
        if attention_backend not in self.attention_backends or spec_mode not in self.spec_modes:
            return False
        return steps is None or steps >= self.min_steps


# SGLang PR #24640 (first in 0.5.13): 0.5.12 runs DRAFT_EXTEND_V2 through FlashMLA's decode kernel with
# prefill metadata, and v2 is its default; the scheduler dies in its start-up warm-up (contract §1.8,
# docs/results/2026-12-05-flashmla-v2-on-sglang-0.5.12.md). The signature needs the v2 draft-extend frame,
# FlashMLA's forward_extend frame and the exception line, in that order (tests/fixtures/logs).
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

# Open in 0.5.12 to 0.5.23 (contract §1.10, correctness-gate.md): FlashMLA's draft decode attends with the
# committed `seq_lens`, which the draft loop never advances, so step i sees neither this cycle's earlier
# drafts nor its own KV; triton gives step i the prefix and i + 1 draft slots. Verify is unaffected: right
# tokens, lower acceptance. min_steps 2 (one step runs no draft decode); mirror shows it from 3 steps
# (docs/results/2026-12-05-h100-correctness-gate.md: 3.05 tokens per verify against the reference's 4.00).
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
    """Whether a server's patch state (bench/server/sglang_patch.py) is patch `name`, unchanged."""
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
    """The known wrong paths a server of this release, backend, mode, steps (if known) and patch takes."""
    return [bug for bug in KNOWN_BUGS if bug.applies(version, attention_backend, spec_mode, steps, patch)]


def fixed_by_patch(patch: str | None) -> list[KnownBug]:
    """The known bugs a server carrying this patch state does not have."""
    return [bug for bug in KNOWN_BUGS if bug.fix_patch is not None and carries(patch, bug.fix_patch)]


def identify_failure(
    version: str, attention_backend: str, spec_mode: SpecMode | None, log_text: str, steps: int | None = None
) -> KnownFailure | None:
    """The known bug a failed launch's log shows among those it can have; None: unknown stays unknown."""
    try:
        bugs = bugs_for(version, attention_backend, spec_mode, steps)
    except ValueError:  # a version string no rule reads
        return None
    for bug in bugs:
        if bug.log_signature is not None and (m := bug.log_signature.search(log_text)) is not None:
            return KnownFailure(bug, m.group("evidence").strip())
    return None


def acceptance_suspect(
    version: str,
    attention_backend: str,
    spec_mode: SpecMode | None,
    steps: int | None,
    patch: str | None = None,
) -> KnownBug | None:
    """The known bug explaining right tokens with fewer drafts accepted, or None (also for a bad version)."""
    try:
        bugs = bugs_for(version, attention_backend, spec_mode, steps, patch)
    except ValueError:
        return None
    return next((bug for bug in bugs if bug.symptom == "acceptance"), None)


def suspect_line(bug: KnownBug) -> str:
    """The gate's line after a failed acceptance `bug` explains: bug, clause, status and control."""
    control = f"; control: specbench run {bug.control}" if bug.control else ""
    report = f"; fix and report: {bug.report}" if bug.report else ""
    return f"matches known SGLang issue {bug.key} ({bug.gist}; {bug.status()}){control}{report}"


def flashmla_routes_draft_extend_v2(version: str) -> bool:
    """Whether this release sends DRAFT_EXTEND_V2 to FlashMLA's prefill path (the fix of PR #24640)."""
    return not FLASHMLA_DRAFT_EXTEND_V2.applies(version, "flashmla", "v2")
