"""Known SGLang bugs: which launches have them, and the log signature that names a failed launch's crash, read
against the real sglang 0.5.12 log measured on an H100 (tests/fixtures/logs)."""

from __future__ import annotations

import pytest

from bench.server.known_bugs import (
    FLASHMLA_DRAFT_EXTEND_V2,
    KnownFailure,
    bugs_for,
    flashmla_routes_draft_extend_v2,
    identify_failure,
)
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
    assert bugs_for("0.5.12", "flashmla", "v2") == [FLASHMLA_DRAFT_EXTEND_V2]
    assert bugs_for("0.5.12.post1", "flashmla", "v2") == [FLASHMLA_DRAFT_EXTEND_V2]
    assert bugs_for("0.5.13.post1", "flashmla", "v2") == []
    assert not flashmla_routes_draft_extend_v2("0.5.12") and flashmla_routes_draft_extend_v2("0.5.13")
    assert KnownFailure(FLASHMLA_DRAFT_EXTEND_V2, EXCEPTION).line() == LINE
