"""Known SGLang bugs: which launches have them, and the log signature that names a failed launch's crash, read
against the real sglang 0.5.12 log measured on an H100 (tests/fixtures/logs); the open issue whose symptom is
acceptance (flashmla-draft-decode-context), in every release specbench knows, and its control sweep."""

from __future__ import annotations

import pytest

from bench.server.known_bugs import (
    FLASHMLA_DRAFT_DECODE_CONTEXT,
    FLASHMLA_DRAFT_EXTEND_V2,
    KNOWN_BUGS,
    KnownFailure,
    acceptance_suspect,
    bugs_for,
    fixed_by_patch,
    flashmla_routes_draft_extend_v2,
    identify_failure,
    suspect_line,
)
from bench.server.spec_modes import RELEASES, VersionError
from bench.sweep import expand, load_sweep
from tests.paths import REPO_ROOT

LOGS = REPO_ROOT / "tests" / "fixtures" / "logs"
CRASH = (LOGS / "sglang-0.5.12-flashmla-nextn-v2-crash.log").read_text()
EXCEPTION = "AttributeError: 'PrefillMetadata' object has no attribute 'block_kv_indices'"
LINE = (
    "server crashed in spec v2's draft extend: known SGLang bug flashmla-draft-extend-v2, fixed in 0.5.13 by "
    f"PR #24640: {EXCEPTION}"
)


def test_the_real_0_5_12_crash_is_named_in_one_line() -> None:
    found = identify_failure("0.5.12", "flashmla", "v2", CRASH)
    assert found is not None
    assert found.bug is FLASHMLA_DRAFT_EXTEND_V2 and found.evidence == EXCEPTION
    assert found.line() == LINE and "\n" not in found.line()


@pytest.mark.parametrize(
    ("version", "backend", "mode"),
    [
        ("0.5.13", "flashmla", "v2"),  # the fix is in: the same text would be another bug
        ("0.5.13.post1", "flashmla", "v2"),
        ("0.5.12", "flashmla", "v1"),  # v1 never runs DRAFT_EXTEND_V2
        ("0.5.12", "flashmla", None),
        ("0.5.12", "fa3", "v2"),
        ("not-a-version", "flashmla", "v2"),
    ],
)
def test_only_the_release_backend_and_mode_with_the_bug_are_named(
    version: str, backend: str, mode: str | None
) -> None:
    assert identify_failure(version, backend, mode, CRASH) is None  # type: ignore[arg-type]


def test_the_signature_needs_the_draft_extend_frame_flashmla_and_the_exception() -> None:
    # The same exception reached another way (no v2 draft extend on the stack) is not this bug.
    lines = CRASH.splitlines()
    i = next(n for n, line in enumerate(lines) if "in _draft_extend_for_decode" in line)
    without_frame = "\n".join(lines[:i] + lines[i + 2 :])
    assert identify_failure("0.5.12", "flashmla", "v2", without_frame) is None
    other_backend = CRASH.replace("flashmla_backend.py", "flashinfer_mla_backend.py")
    assert identify_failure("0.5.12", "flashmla", "v2", other_backend) is None
    other_error = CRASH.replace("'block_kv_indices'", "'kv_indptr'")
    assert identify_failure("0.5.12", "flashmla", "v2", other_error) is None
    # A log that names the exception only in passing (not a traceback's last line) is not it either.
    said = "[x] the stand-in reproduces " + EXCEPTION + " in _draft_extend_for_decode"
    assert identify_failure("0.5.12", "flashmla", "v2", said) is None


def test_unrelated_failures_stay_unknown() -> None:
    served = (
        REPO_ROOT
        / "examples"
        / "h100-sglang-0.5.12-vs-0.5.13.post1-flashmla-v2"
        / "0.5.13.post1-flashmla-nextn-v2-server.log"
    ).read_text()
    oom = 'Traceback (most recent call last):\n  File "x.py", line 1, in f\ntorch.OutOfMemoryError: CUDA out of memory\n'
    for text in (served, oom, ""):
        assert identify_failure("0.5.12", "flashmla", "v2", text) is None


def test_bugs_for_and_routing() -> None:
    crashes = [b for b in KNOWN_BUGS if b.symptom == "crash"]
    assert [b for b in bugs_for("0.5.12", "flashmla", "v2") if b in crashes] == [FLASHMLA_DRAFT_EXTEND_V2]
    assert FLASHMLA_DRAFT_EXTEND_V2 in bugs_for("0.5.12.post1", "flashmla", "v2")
    assert FLASHMLA_DRAFT_EXTEND_V2 not in bugs_for("0.5.13.post1", "flashmla", "v2")
    # The routing fact is the crash bug's alone: the open issue on the same backend and mode does not flip it.
    assert not flashmla_routes_draft_extend_v2("0.5.12") and flashmla_routes_draft_extend_v2("0.5.13")
    assert all(flashmla_routes_draft_extend_v2(v) for v in RELEASES if v != "0.5.12")
    assert KnownFailure(FLASHMLA_DRAFT_EXTEND_V2, EXCEPTION).line() == LINE
    assert FLASHMLA_DRAFT_EXTEND_V2.status() == "fixed in 0.5.13 by PR #24640"


@pytest.mark.parametrize("version", RELEASES)
@pytest.mark.parametrize("mode", ["v1", "v2"])
def test_the_open_issue_is_in_every_known_release_for_both_modes_from_two_steps(
    version: str, mode: str
) -> None:
    bug = FLASHMLA_DRAFT_DECODE_CONTEXT
    assert bug in bugs_for(version, "flashmla", mode, 3)  # type: ignore[arg-type]
    assert bug in bugs_for(version, "flashmla", mode, 2)  # type: ignore[arg-type]  # step 0 loses its own KV
    assert bug not in bugs_for(version, "flashmla", mode, 1)  # type: ignore[arg-type]  # no draft decode step
    assert bug not in bugs_for(version, "triton", mode, 3)  # type: ignore[arg-type]  # the control's backend
    assert bug not in bugs_for(version, "flashmla", None, None)  # the baseline drafts nothing
    assert acceptance_suspect(version, "flashmla", mode, 3) is bug  # type: ignore[arg-type]


def test_the_open_issue_says_where_it_stands_from_the_one_list_of_releases() -> None:
    bug = FLASHMLA_DRAFT_DECODE_CONTEXT
    assert bug.is_open and bug.fixed_release == "" and bug.symptom == "acceptance"
    first, last = RELEASES[0], RELEASES[-1]
    assert bug.status() == f"open in every release specbench knows, {first} to {last}"
    # A release past the newest read is held to the newest's rules: still open.
    assert bug.applies("0.5.30", "flashmla", "v1", 3)
    line = suspect_line(bug)
    assert line.startswith(f"matches known SGLang issue {bug.key} ({bug.gist}; {bug.status()})")
    assert line.endswith(
        "control: specbench run sweeps/correctness-triton-control.yaml; "
        "fix and report: docs/results/2026-12-06-flashmla-draft-decode-context.md"
    )
    assert "\n" not in line
    # A server whose SGLang carries the fix patch does not take the path; one edited after patching still does.
    fixed = "flashmla-draft-decode-context (4c4c4390f372)"
    assert not bug.applies("0.5.13.post1", "flashmla", "v1", 3, patch=fixed)
    assert acceptance_suspect("0.5.13.post1", "flashmla", "v2", 3, patch=fixed) is None
    assert fixed_by_patch(fixed) == [bug] and fixed_by_patch("none") == [] and fixed_by_patch(None) == []
    changed = f"{fixed}, then changed: sglang/srt/layers/attention/flashmla_backend.py"
    assert bug.applies("0.5.13.post1", "flashmla", "v1", 3, patch=changed)
    assert bug.applies("0.5.13.post1", "flashmla", "v1", 3, patch="other-fix (0123456789ab)")
    # No crash, so no log names it: a failed launch stays a failed launch.
    assert bug.log_signature is None and identify_failure("0.5.13.post1", "flashmla", "v1", CRASH) is None


def test_no_suspect_for_a_crash_an_unreadable_version_or_another_backend() -> None:
    assert acceptance_suspect("0.5.12", "flashmla", "v2", 1) is None  # only the crash applies at 1 step
    assert acceptance_suspect("not-a-version", "flashmla", "v1", 3) is None
    assert acceptance_suspect("0.5.13.post1", "fa3", "v1", 3) is None
    with pytest.raises(VersionError):
        FLASHMLA_DRAFT_DECODE_CONTEXT.applies("not-a-version", "flashmla", "v1", 3)


def test_the_control_sweep_is_the_gate_sweep_off_flashmla() -> None:
    """The control the gate points to exists, runs the same checkpoint, release-independent speculation and
    check as the FlashMLA proof sweep (steps 2-4, v1 and v2), and takes no known wrong path."""
    control = load_sweep(REPO_ROOT / str(FLASHMLA_DRAFT_DECODE_CONTEXT.control))
    gate = load_sweep(REPO_ROOT / "sweeps" / "flashmla-draft-fix-proof.yaml")
    assert control.server.attention_backend == "triton" and control.server.backend == "sglang"
    assert control.model == gate.model and control.measure.correctness == gate.measure.correctness
    assert (control.grid.algorithm, control.grid.steps, control.grid.topk) == (
        gate.grid.algorithm,
        gate.grid.steps,
        gate.grid.topk,
    )
    launches = [g.server for g in expand(control)]
    assert (control.grid.batch_sizes, control.grid.spec_modes) == (
        gate.grid.batch_sizes,
        gate.grid.spec_modes,
    )
    assert sorted((s.steps or 0, s.spec_mode or "") for s in launches) == [
        (n, m) for n in (2, 3, 4) for m in ("v1", "v2")
    ]
    for version in RELEASES:
        assert all(not bugs_for(version, "triton", s.spec_mode, s.steps) for s in launches)
