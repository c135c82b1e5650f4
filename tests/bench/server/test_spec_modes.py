"""Spec v1/v2 per SGLang release: launch settings and resolution from synthetic /server_info and log text."""

from __future__ import annotations

from typing import Any

import pytest

from bench.server.spec_modes import (
    ENV_SPEC_V2,
    FLAG_NON_OVERLAP,
    VersionError,
    env_var_status,
    find_log_mode,
    known_fallback,
    launch_settings,
    parse_version,
    resolve_mode,
    rule_note,
)

TS = "[2026-05-01 12:00:00] "
LOG_0512_V2 = TS + "Spec v2 is enabled by default for eagle/eagle3/standalone speculative decoding."
LOG_0512_V1_TOPK = (
    TS + "Spec v1 is used for eagle/eagle3/standalone speculative decoding because "
    "spec v2 currently only supports topk = 1."
)
LOG_0512_V1_FLAG = (
    TS
    + "Spec v1 is used for eagle/eagle3/standalone speculative decoding because overlap schedule is disabled."
)
LOG_0513_V2 = TS + "Overlap spec v2 is enabled by default for eagle/eagle3/standalone speculative decoding."
LOG_SYNC = TS + "Non-overlap (synchronous) spec v2 is used for eagle/eagle3/standalone speculative decoding."
LOG_REMOVED = (
    TS + "SGLANG_ENABLE_SPEC_V2 has been removed: speculative decoding always runs the V2 worker. "
    "Use --disable-overlap-schedule to select the non-overlap (synchronous) path."
)


def info(version: str, disable_overlap: bool | None, algorithm: str | None = "EAGLE", **extra: Any) -> dict:
    out: dict[str, Any] = {"version": version, "speculative_algorithm": algorithm, **extra}
    if disable_overlap is not None:
        out["disable_overlap_schedule"] = disable_overlap
    return out


# ---- version parsing -------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("text", "release"),
    [
        ("0.5.12", (0, 5, 12)),
        ("0.5.13.post1", (0, 5, 13)),
        ("0.5.14rc0", (0, 5, 14)),
        ("0.5.23.dev3+g1234abc", (0, 5, 23)),
        ("v0.6.0", (0, 6, 0)),
    ],
)
def test_parse_version_keeps_the_release(text: str, release: tuple[int, ...]) -> None:
    assert parse_version(text) == release


def test_parse_version_refuses_garbage() -> None:
    with pytest.raises(VersionError, match="cannot read"):
        parse_version("not-a-version")


# ---- launch settings -------------------------------------------------------------------------------------

# version -> (v1 flags, v1 env, v2 flags, v2 env): the table the launcher implements.
LAUNCH_TABLE = {
    "0.5.12": ([FLAG_NON_OVERLAP], {ENV_SPEC_V2: "False"}, [], {ENV_SPEC_V2: "True"}),
    "0.5.13": ([FLAG_NON_OVERLAP], {ENV_SPEC_V2: "False"}, [], {ENV_SPEC_V2: "True"}),
    "0.5.13.post1": ([FLAG_NON_OVERLAP], {ENV_SPEC_V2: "False"}, [], {ENV_SPEC_V2: "True"}),
    "0.5.14": ([FLAG_NON_OVERLAP], {}, [], {}),
    "0.5.15": ([FLAG_NON_OVERLAP], {}, [], {}),
    "0.5.23": ([FLAG_NON_OVERLAP], {}, [], {}),
    # Unknown releases follow the nearest rule: older like 0.5.12, in-between and newer like 0.5.14+.
    "0.5.10": ([FLAG_NON_OVERLAP], {ENV_SPEC_V2: "False"}, [], {ENV_SPEC_V2: "True"}),
    "0.5.18": ([FLAG_NON_OVERLAP], {}, [], {}),
    "0.6.1": ([FLAG_NON_OVERLAP], {}, [], {}),
}


@pytest.mark.parametrize("version", sorted(LAUNCH_TABLE))
def test_launch_settings_per_version(version: str) -> None:
    v1_flags, v1_env, v2_flags, v2_env = LAUNCH_TABLE[version]
    assert launch_settings(version, "v1") == (v1_flags, v1_env)
    assert launch_settings(version, "v2") == (v2_flags, v2_env)
    assert launch_settings(version, None) == ([], {})


def test_env_var_is_not_set_where_it_was_removed() -> None:
    assert env_var_status("0.5.13.post1") == "honoured"
    assert env_var_status("0.5.14") == "removed_warns"
    assert env_var_status("0.5.15") == "removed_warns"
    assert env_var_status("0.5.23") == "ignored"
    for version in ("0.5.14", "0.5.15", "0.5.23"):
        for mode in ("v1", "v2"):
            assert ENV_SPEC_V2 not in launch_settings(version, mode)[1]  # type: ignore[arg-type]


def test_launch_settings_refuses_unknown_mode() -> None:
    with pytest.raises(ValueError, match="v1"):
        launch_settings("0.5.13", "v3")  # type: ignore[arg-type]


def test_rule_note_marks_assumed_rules() -> None:
    assert rule_note("0.5.13.post1") is None
    assert "0.5.12's rules" in (rule_note("0.5.10") or "")
    assert "between 0.5.15 and 0.5.23" in (rule_note("0.5.18") or "")
    assert "0.5.23's rules" in (rule_note("0.6.0") or "")


# ---- resolution ------------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("version", "disable", "log", "mode", "detail"),
    [
        ("0.5.12", True, LOG_0512_V1_FLAG, "v1", "v1: non-overlap EAGLEWorker (0.5.12)"),
        ("0.5.12", False, LOG_0512_V2, "v2", "v2: overlap EAGLEWorkerV2 (0.5.12)"),
        ("0.5.13", True, LOG_SYNC, "v1", "v1: synchronous EAGLEWorkerV2 (0.5.13)"),
        ("0.5.13.post1", False, LOG_0513_V2, "v2", "v2: overlap EAGLEWorkerV2 (0.5.13.post1)"),
        ("0.5.14", True, LOG_SYNC, "v1", "v1: synchronous EAGLEWorkerV2 (0.5.14)"),
        ("0.5.14", False, "", "v2", "v2: overlap EAGLEWorkerV2 (0.5.14)"),
        ("0.5.15", False, LOG_REMOVED, "v2", "v2: overlap EAGLEWorkerV2 (0.5.15)"),
        ("0.5.23", True, LOG_SYNC, "v1", "v1: synchronous EAGLEWorkerV2 (0.5.23)"),
        ("0.5.23", False, None, "v2", "v2: overlap EAGLEWorkerV2 (0.5.23)"),
    ],
)
def test_resolve_every_version(version: str, disable: bool, log: str | None, mode: str, detail: str) -> None:
    r = resolve_mode(version, info(version, disable), log)
    assert r.mode == mode
    assert r.detail.startswith(detail)
    assert r.spec_enabled
    assert r.contradiction is None
    assert r.server_info_keys["disable_overlap_schedule"] is disable
    assert r.server_info_keys["speculative_algorithm"] == "EAGLE"
    mode_lines = (LOG_0512_V1_FLAG, LOG_0512_V2, LOG_0513_V2, LOG_SYNC)
    assert r.evidence["log_line"] == (log.strip() if log in mode_lines else None)


def test_0512_topk_fallback_resolves_v1_with_the_reason() -> None:
    """0.5.12 silently forces v1 for an explicit topk > 1; the resolution must say so."""
    r = resolve_mode("0.5.12", info("0.5.12", True, speculative_eagle_topk=2), TS + "x\n" + LOG_0512_V1_TOPK)
    assert r.mode == "v1"
    assert "EAGLEWorker " in r.detail
    assert "spec v2 currently only supports topk = 1" in r.detail
    assert r.log_line == LOG_0512_V1_TOPK.strip()
    assert known_fallback("0.5.12", "v2", "EAGLE", 2) is not None
    assert known_fallback("0.5.12", "v2", "EAGLE", 1) is None
    assert known_fallback("0.5.13", "v2", "EAGLE", 2) is None  # the V2 worker supports tree drafts
    assert known_fallback("0.5.12", "v1", "EAGLE", 2) is None


def test_0512_standalone_and_multilayer_worker_names() -> None:
    r = resolve_mode("0.5.12", info("0.5.12", True, "STANDALONE"), None)
    assert r.detail.startswith("v1: non-overlap StandaloneWorker (0.5.12)")
    r = resolve_mode("0.5.13", info("0.5.13", False, enable_multi_layer_eagle=True), None)
    assert r.detail.startswith("v2: overlap MultiLayerEagleWorkerV2 (0.5.13)")
    assert r.server_info_keys["enable_multi_layer_eagle"] is True


def test_server_version_wins_over_the_detected_one() -> None:
    r = resolve_mode("0.5.14", info("0.5.12", True), None)
    assert r.version == "0.5.12"
    assert "EAGLEWorker " in r.detail
    r = resolve_mode("0.5.12", info("dev", True), None)
    assert r.version == "0.5.12"
    assert r.server_info_keys["version"] == "dev"


@pytest.mark.parametrize(
    ("version", "disable", "log", "says"),
    [
        ("0.5.12", False, LOG_0512_V1_TOPK, "v1"),
        ("0.5.13", True, LOG_0513_V2, "v2"),
        ("0.5.14", False, LOG_SYNC, "v1"),
        ("0.5.23", False, LOG_SYNC, "v1"),
    ],
)
def test_contradiction_between_server_info_and_log(version: str, disable: bool, log: str, says: str) -> None:
    r = resolve_mode(version, info(version, disable), log)
    assert r.mode == ("v1" if disable else "v2")  # /server_info holds the effective value: it decides
    assert r.log_mode == says
    assert r.contradiction is not None
    assert f"the launch log says {says}" in r.contradiction


def test_no_line_is_no_contradiction_from_0514() -> None:
    """0.5.14+ prints nothing for overlap, and a quieter log level hides the non-overlap line."""
    r = resolve_mode("0.5.14", info("0.5.14", True), TS + "some other line\n")
    assert r.mode == "v1"
    assert r.contradiction is None
    assert r.log_line is None


def test_no_speculation() -> None:
    r = resolve_mode("0.5.13", info("0.5.13", False, None), "")
    assert r.mode is None and not r.spec_enabled
    assert r.detail.startswith("no speculative decoding")
    r = resolve_mode("0.5.13", info("0.5.13", False, None), LOG_0513_V2)
    assert r.contradiction is not None


def test_missing_key_falls_back_to_the_server_args_dump() -> None:
    dump = (
        TS + "server_args=ServerArgs(model_path='m', disable_overlap_schedule=True, speculative_num_steps=3)"
    )
    r = resolve_mode("0.5.14", info("0.5.14", None), dump)
    assert r.mode == "v1"
    assert "ServerArgs dump" in r.detail


def test_missing_key_with_only_a_log_line() -> None:
    r = resolve_mode("0.5.13", info("0.5.13", None), LOG_SYNC)
    assert r.mode == "v1"
    assert "log line only" in r.detail


def test_nothing_decides_the_mode() -> None:
    r = resolve_mode("0.5.14", info("0.5.14", None), None)
    assert r.mode is None
    assert r.spec_enabled
    assert r.contradiction == "no evidence of the spec mode"


def test_find_log_mode_takes_the_last_line_and_tells_0512_from_0513() -> None:
    assert find_log_mode(LOG_0513_V2) == ("v2", LOG_0513_V2.strip())
    assert find_log_mode(LOG_0512_V2) == ("v2", LOG_0512_V2.strip())
    assert find_log_mode(LOG_0512_V2 + "\n" + LOG_SYNC + "\n") == ("v1", LOG_SYNC.strip())
    assert find_log_mode(LOG_REMOVED) == (None, None)
    assert find_log_mode(None) == (None, None)
