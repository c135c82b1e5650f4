"""The stand-in's launch behaviour per emulated SGLang release: flags, resolution, mode, logs, lifecycle."""

from __future__ import annotations

import time
from dataclasses import dataclass

import pytest

from tests.fixtures.sim import SimFactory, SimHandle, get_json, http_status

VERSIONS = ("0.5.12", "0.5.13", "0.5.13.post1", "0.5.14", "0.5.15", "0.5.23")
FLASHMLA_MTP = ("--attention-backend", "flashmla", "--speculative-algorithm", "NEXTN")
V2_0512 = "Spec v2 is enabled by default for eagle/eagle3/standalone speculative decoding."
V1_0512 = "Spec v1 is used for eagle/eagle3/standalone speculative decoding because {}."
OVERLAP_0513 = "Overlap spec v2 is enabled by default for eagle/eagle3/standalone speculative decoding."
SYNC_V2 = "Non-overlap (synchronous) spec v2 is used for eagle/eagle3/standalone speculative decoding."
ENV_REMOVED = "SGLANG_ENABLE_SPEC_V2 has been removed"


@dataclass(frozen=True)
class Case:
    """One launch and what SGLang's source says it resolves to (contract §1.4, §1.5)."""

    version: str
    flags: tuple[str, ...]
    env: tuple[tuple[str, str], ...]
    disable_overlap: bool
    worker: str
    lines: tuple[str, ...] = ()
    absent: tuple[str, ...] = ()
    topk: int = 1
    backend: str = "flashmla"
    page_size: int = 64


def _matrix() -> dict[str, Case]:
    cases: dict[str, Case] = {}
    for v in VERSIONS:
        if v == "0.5.12":
            v2_line: tuple[str, ...] = (V2_0512,)
            v1_line, v1_worker = V1_0512.format("overlap schedule is disabled"), "v1"
        elif v.startswith("0.5.13"):
            v2_line, v1_line, v1_worker = (OVERLAP_0513,), SYNC_V2, "v2"
        else:
            v2_line, v1_line, v1_worker = (), SYNC_V2, "v2"
        # From 0.5.14 the overlap path logs nothing at all.
        quiet = (SYNC_V2, OVERLAP_0513, V2_0512) if v >= "0.5.14" else (SYNC_V2,)
        if v == "0.5.12":
            # 0.5.12's FlashMLA v2 dies at its warm-up (tests/synthetic/server/test_sim_wrong.py): FA3 here.
            fa3 = ("--attention-backend", "fa3", "--speculative-algorithm", "NEXTN")
            cases[f"{v}-v2"] = Case(v, fa3, (), False, "v2", v2_line, quiet, backend="fa3", page_size=1)
        else:
            cases[f"{v}-v2"] = Case(v, FLASHMLA_MTP, (), False, "v2", v2_line, quiet)
        v1_flags = (*FLASHMLA_MTP, "--disable-overlap-schedule")
        cases[f"{v}-v1-flag"] = Case(v, v1_flags, (), True, v1_worker, (v1_line,))
    env_off = (("SGLANG_ENABLE_SPEC_V2", "false"),)
    cases["0.5.12-v1-env"] = Case(
        "0.5.12", FLASHMLA_MTP, env_off, True, "v1", (V1_0512.format("SGLANG_ENABLE_SPEC_V2=False"),)
    )
    cases["0.5.13-sync-env"] = Case("0.5.13", FLASHMLA_MTP, env_off, True, "v2", (SYNC_V2,))
    cases["0.5.14-env-removed"] = Case(
        "0.5.14", FLASHMLA_MTP, env_off, False, "v2", (ENV_REMOVED,), (SYNC_V2,)
    )
    cases["0.5.15-env-removed"] = Case(
        "0.5.15", FLASHMLA_MTP, env_off, False, "v2", (ENV_REMOVED,), (SYNC_V2,)
    )
    cases["0.5.23-env-ignored"] = Case(
        "0.5.23", FLASHMLA_MTP, env_off, False, "v2", (), (ENV_REMOVED, SYNC_V2)
    )
    tree: tuple[str, ...] = ("--attention-backend", "fa3", "--speculative-algorithm", "EAGLE")
    tree += (
        "--speculative-num-steps",
        "3",
        "--speculative-eagle-topk",
        "2",
        "--speculative-num-draft-tokens",
        "6",
    )
    cases["0.5.12-topk2-fallback"] = Case(
        "0.5.12",
        tree,
        (),
        True,
        "v1",
        (V1_0512.format("spec v2 currently only supports topk = 1"),),
        topk=2,
        backend="fa3",
        page_size=1,
    )
    cases["0.5.13-topk2-overlap"] = Case(
        "0.5.13", tree, (), False, "v2", (OVERLAP_0513,), topk=2, backend="fa3", page_size=1
    )
    return cases


MATRIX = _matrix()


@pytest.fixture(scope="module")
def matrix(sim_server_module: SimFactory) -> dict[str, SimHandle]:
    # All launches in parallel: the start-up cost is paid once for the module.
    handles = {
        name: sim_server_module.start(
            *case.flags,
            env={"SPECBENCH_SIM_VERSION": case.version, "SPECBENCH_SIM_INSTANT": "1", **dict(case.env)},
            wait=False,
        )
        for name, case in MATRIX.items()
    }
    for handle in handles.values():
        handle.wait_ready()
    return handles


@pytest.mark.parametrize("name", sorted(MATRIX))
def test_resolved_spec_mode_per_version(matrix: dict[str, SimHandle], name: str) -> None:
    case, sim = MATRIX[name], matrix[name]
    info = get_json(sim, "/server_info")
    assert info["version"] == case.version
    assert info["disable_overlap_schedule"] is case.disable_overlap
    assert info["speculative_algorithm"] == "EAGLE"  # NEXTN is an alias
    assert info["speculative_eagle_topk"] == case.topk
    assert info["speculative_num_steps"] == 3
    assert info["speculative_num_draft_tokens"] == (4 if case.topk == 1 else 6)
    assert info["attention_backend"] == case.backend
    assert info["page_size"] == case.page_size
    assert info["max_running_requests"] == 48
    assert info["specbench_sim"]["spec_worker"] == case.worker
    assert info["specbench_sim"]["overlap"] is not case.disable_overlap
    log = sim.log()
    for line in case.lines:
        assert line in log, f"missing {line!r} in\n{log}"
    for line in case.absent:
        assert line not in log, f"unexpected {line!r} in\n{log}"
    assert "The server is fired up and ready to roll!" in log
    assert "server_args=ServerArgs(" in log
    assert f"disable_overlap_schedule={case.disable_overlap}" in log


@pytest.mark.parametrize("version", VERSIONS)
def test_server_info_keys_per_version(matrix: dict[str, SimHandle], version: str) -> None:
    sim = matrix[f"{version}-v2"]
    info = get_json(sim, "/server_info")
    assert get_json(sim, "/get_server_info")["version"] == version
    common = {
        "disable_overlap_schedule",
        "speculative_algorithm",
        "speculative_num_steps",
        "speculative_eagle_topk",
        "speculative_num_draft_tokens",
        "speculative_draft_model_path",
        "speculative_attention_mode",
        "attention_backend",
        "page_size",
        "max_running_requests",
        "mem_fraction_static",
        "tp_size",
        "version",
        "status",
        "max_total_num_tokens",
        "specbench_sim",
    }
    assert common <= info.keys()
    graph_key = "cuda_graph_max_bs" if version < "0.5.14" else "cuda_graph_max_bs_decode"
    assert info[graph_key] == 256
    if version >= "0.5.23":
        assert "cuda_graph_max_bs" not in info
    # 0.5.12-0.5.13 reserve 4 GiB more for speculative decoding, so the default fraction drops.
    assert info["mem_fraction_static"] == (0.9 if version < "0.5.14" else 0.929)
    assert info["speculative_draft_model_path"] == info["model_path"]
    assert "last_gen_throughput" in info["internal_states"][0]
    assert info["specbench_sim"]["stand_in"] is True
    assert http_status(sim.url("/ready")) == (200 if version == "0.5.23" else 404)
    models = get_json(sim, "/v1/models")
    assert models["data"][0]["id"] == info["served_model_name"]


def test_flashmla_draft_extend_notice(matrix: dict[str, SimHandle]) -> None:
    notice = "flashmla prefill backend is not yet supported for draft extend."
    assert notice in matrix["0.5.15-v2"].log()
    assert notice not in matrix["0.5.23-v2"].log()


def test_health_is_503_until_ready(sim_server: SimFactory) -> None:
    sim = sim_server.start(env={"SPECBENCH_SIM_STARTUP_S": "1.0"}, wait=False)
    seen: list[int] = []
    deadline = time.monotonic() + 15
    while time.monotonic() < deadline:
        status = http_status(sim.url("/health"), timeout=1.0)
        if status is not None and (not seen or seen[-1] != status):
            seen.append(status)
        if status == 200:
            break
        time.sleep(0.05)
    assert seen == [503, 200], sim.log()
    assert sim.log().count("The server is fired up and ready to roll!") == 1


@pytest.mark.parametrize("version", ["0.5.12", "0.5.13.post1"])
def test_flashmla_rejects_topk_above_one(sim_server: SimFactory, version: str) -> None:
    code, log = sim_server.run_to_exit(
        *FLASHMLA_MTP,
        *(
            "--speculative-num-steps",
            "3",
            "--speculative-eagle-topk",
            "2",
            "--speculative-num-draft-tokens",
            "6",
        ),
        env={"SPECBENCH_SIM_VERSION": version},
    )
    assert code != 0
    assert "ValueError: speculative_eagle_topk > 1 with page_size > 1 is unstable" in log
    assert "ready to roll" not in log


def test_cuda_graph_max_bs_is_ambiguous_in_0_5_23(sim_server: SimFactory) -> None:
    code, log = sim_server.run_to_exit("--cuda-graph-max-bs", "32", env={"SPECBENCH_SIM_VERSION": "0.5.23"})
    assert code == 2
    assert (
        "error: ambiguous option: --cuda-graph-max-bs could match --cuda-graph-max-bs-decode, "
        "--cuda-graph-max-bs-prefill" in log
    )


def test_flag_spellings_per_version(sim_server: SimFactory) -> None:
    env = {"SPECBENCH_SIM_INSTANT": "1"}
    old = sim_server.start(
        "--cuda-graph-max-bs", "32", "--tp", "2", env={**env, "SPECBENCH_SIM_VERSION": "0.5.13"}, wait=False
    )
    alias = sim_server.start(
        "--cuda-graph-max-bs", "32", env={**env, "SPECBENCH_SIM_VERSION": "0.5.14"}, wait=False
    )
    new = sim_server.start(
        "--cuda-graph-max-bs-decode", "16", env={**env, "SPECBENCH_SIM_VERSION": "0.5.23"}, wait=False
    )
    plain = sim_server.start(env={**env, "SPECBENCH_SIM_VERSION": "0.5.23"}, wait=False)
    info = get_json(old.wait_ready(), "/server_info")
    assert info["cuda_graph_max_bs"] == 32 and info["tp_size"] == 2
    info = get_json(alias.wait_ready(), "/server_info")
    assert info["cuda_graph_max_bs_decode"] == 32 and info["cuda_graph_max_bs"] is None
    assert "--cuda-graph-max-bs is deprecated, use --cuda-graph-max-bs-decode instead." in alias.log()
    assert get_json(new.wait_ready(), "/server_info")["cuda_graph_max_bs_decode"] == 16
    # Without --speculative-algorithm: no 48 cap, no spec fields, plain overlap scheduling.
    info = get_json(plain.wait_ready(), "/server_info")
    assert info["speculative_algorithm"] is None and info["speculative_num_steps"] is None
    assert info["max_running_requests"] is None and info["disable_overlap_schedule"] is False
    assert info["attention_backend"] == "fa3" and info["page_size"] == 1
    assert "Max running requests is reset to 48" not in plain.log()


def test_unknown_flag_fails_like_argparse(sim_server: SimFactory) -> None:
    code, log = sim_server.run_to_exit("--no-such-flag", "1")
    assert code == 2
    assert "error: unrecognized arguments: --no-such-flag 1" in log


def test_sigterm_exits_promptly(sim_server: SimFactory) -> None:
    sim = sim_server.start(env={"SPECBENCH_SIM_INSTANT": "1"})
    started = time.monotonic()
    assert sim.stop() == 0
    assert (
        time.monotonic() - started < 5.0
    )  # graceful (exit code 0), not killed; generous for a loaded CI box
