"""The launcher against real processes: the stand-in server for every emulated release, real teardown."""

from __future__ import annotations

import importlib.util
import os
import signal
import socket
import subprocess
import sys
import threading
import time
from dataclasses import replace
from pathlib import Path

import pytest

from bench.host.processes import (
    PortError,
    ephemeral_port_range,
    free_port,
    server_port_range,
    terminate_group,
)
from bench.server.http import wait_healthy
from bench.server.launcher import (
    LaunchedServer,
    LaunchError,
    attach_external,
    detect_sglang_version,
    fetch_server_info,
    launch,
)
from bench.sweep import ServerConfig, ServerSpec, SimSettings
from tests.fixtures.sim import DEFAULT_MODEL as SIM_MODEL
from tests.fixtures.sim import SimFactory

VERSIONS = ["0.5.12", "0.5.13", "0.5.13.post1", "0.5.14", "0.5.15", "0.5.23"]
ENV_VAR_VERSIONS = {"0.5.12", "0.5.13", "0.5.13.post1"}

SPEC_CONFIG = ServerConfig(
    model="/models/tiny_dsv3",
    draft_model=None,
    attention_backend="flashmla",
    tp=1,
    algorithm="EAGLE",
    steps=3,
    topk=1,
    draft_tokens=4,
    spec_mode="v1",
)


def sim_spec(version: str = "0.5.13.post1", **sim: object) -> ServerSpec:
    settings = {"version": version, "startup_s": 0.02, "instant": True, **sim}
    sim_settings = SimSettings(**settings)  # type: ignore[arg-type]
    return ServerSpec(backend="sim", sim=sim_settings, startup_timeout_s=20)


def group_members(pgid: int) -> list[int]:
    """Live (non-zombie) processes of a process group."""
    out = []
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            try:
                stat = (entry / "stat").read_text()
            except OSError:
                continue
            fields = stat[stat.rfind(")") + 2 :].split()
            if int(fields[2]) == pgid and fields[0] not in ("Z", "X"):
                out.append(int(entry.name))
    return out


def assert_gone(pid: int) -> None:
    with pytest.raises(ProcessLookupError):
        os.kill(pid, 0)
    assert group_members(pid) == []


@pytest.mark.parametrize("mode", ["v1", "v2"])
@pytest.mark.parametrize("version", VERSIONS)
def test_each_release_runs_the_requested_mode(tmp_path: Path, version: str, mode: str) -> None:
    cfg = replace(SPEC_CONFIG, spec_mode=mode)
    if (version, mode) == ("0.5.12", "v2"):
        # 0.5.12's FlashMLA v2 dies at its warm-up (test_a_known_sglang_bug_names_the_failed_launch): FA3 here.
        cfg = replace(cfg, attention_backend="fa3")
    with launch(sim_spec(version), cfg, log_dir=tmp_path) as server:
        assert server.is_running()
        assert server.mismatches == []
        assert server.spec_mode_resolved == mode
        assert server.version == version
        assert server.server_info["version"] == version
        assert ("--disable-overlap-schedule" in server.argv) == (mode == "v1")
        expected_env = {"v1": "False", "v2": "True"}[mode] if version in ENV_VAR_VERSIONS else None
        assert server.env_delta.get("SGLANG_ENABLE_SPEC_V2") == expected_env
        assert server.env_delta["SPECBENCH_SIM_VERSION"] == version
        kind = ("non-overlap" if version == "0.5.12" else "synchronous") if mode == "v1" else "overlap"
        assert server.mode_detail.startswith(f"{mode}: {kind} ")
        assert server.mode_evidence["server_info"]["disable_overlap_schedule"] is (mode == "v1")
        # Every release prints a mode line except 0.5.14+ in overlap mode (contract §1.5).
        silent = mode == "v2" and version in {"0.5.14", "0.5.15", "0.5.23"}
        assert (server.mode_evidence["log_line"] is None) == silent
        assert server.startup_s > 0
        assert server.log_path is not None and server.log_path.parent == tmp_path
        pid = server.pid
        assert pid is not None
    assert_gone(pid)


def test_a_known_sglang_bug_names_the_failed_launch(tmp_path: Path) -> None:
    """sglang 0.5.12 + FlashMLA + spec v2 dies at its start-up warm-up, as measured on an H100: the launch error
    opens with the bug's one line and carries its key; the server's process group is gone."""
    cfg = replace(SPEC_CONFIG, algorithm="NEXTN", spec_mode="v2")
    with pytest.raises(LaunchError) as info:
        launch(sim_spec("0.5.12"), cfg, log_dir=tmp_path)
    err = info.value
    assert err.known_bug == "flashmla-draft-extend-v2"
    first, second = str(err).splitlines()[:2]
    assert first == (
        "server crashed in spec v2's draft extend: known SGLang bug flashmla-draft-extend-v2, fixed in 0.5.13 by "
        "PR #24640: AttributeError: 'PrefillMetadata' object has no attribute 'block_kv_indices'"
    )
    assert second == "server exited with code -9 before it was ready (killed by SIGKILL)"  # SGLang's own end
    assert err.exit_code == -9 and "SIGQUIT received" in err.log_tail
    assert err.pid is not None
    assert_gone(err.pid)
    # A failure no known bug explains stays as it was: unnamed.
    topk2 = replace(cfg, topk=2, draft_tokens=6, spec_mode="v1")
    with pytest.raises(LaunchError) as other:
        launch(sim_spec("0.5.12"), topk2, log_dir=tmp_path)
    assert other.value.known_bug is None
    assert str(other.value).startswith("server exited with code 1 before it was ready")


def test_nextn_and_draft_overwrite_are_not_mismatches(tmp_path: Path) -> None:
    cfg = replace(SPEC_CONFIG, algorithm="NEXTN", spec_mode="v2")
    with launch(sim_spec("0.5.14"), cfg, log_dir=tmp_path) as server:
        assert server.server_info["speculative_algorithm"] == "EAGLE"
        assert server.mismatches == []


def test_0512_silent_fallback_is_reported(tmp_path: Path) -> None:
    """0.5.12 forces v1 for an explicit topk > 1: the launch succeeds, but the mismatch is on record."""
    cfg = replace(SPEC_CONFIG, attention_backend="fa3", topk=2, draft_tokens=4, spec_mode="v2")
    with launch(sim_spec("0.5.12"), cfg, log_dir=tmp_path) as server:
        assert server.spec_mode_resolved == "v1"
        assert "EAGLEWorker " in server.mode_detail
        assert "spec v2 currently only supports topk = 1" in (server.mode_evidence["log_line"] or "")
        assert len(server.mismatches) == 1
        assert server.mismatches[0].startswith("spec mode: requested v2, server runs v1")
        assert "forces spec v1" in server.mismatches[0]
        assert not server.ok


def test_cuda_graph_flag_is_respelled_for_0523(tmp_path: Path) -> None:
    """`--cuda-graph-max-bs` is an ambiguous prefix in 0.5.23; the launcher sends the -decode spelling."""
    cfg = replace(SPEC_CONFIG, args=(("cuda-graph-max-bs", 8),))
    with launch(sim_spec("0.5.23"), cfg, log_dir=tmp_path) as server:
        assert "--cuda-graph-max-bs-decode" in server.argv
        assert server.server_info["cuda_graph_max_bs_decode"] == 8
        assert any("cuda-graph-max-bs-decode" in n for n in server.notes)


def test_server_dying_at_startup_raises_with_the_log_tail(tmp_path: Path) -> None:
    # FlashMLA forces page size 64, which rules out topk > 1: SGLang (and the sim) refuse at startup.
    cfg = replace(SPEC_CONFIG, topk=2, draft_tokens=4)
    t0 = time.monotonic()
    with pytest.raises(LaunchError) as e:
        launch(sim_spec("0.5.13"), cfg, log_dir=tmp_path)
    assert time.monotonic() - t0 < 10
    assert e.value.exit_code not in (None, 0)
    assert "exited with code" in str(e.value)
    assert "speculative_eagle_topk > 1" in e.value.log_tail
    assert "last lines of the server log" in str(e.value)
    assert e.value.pid is not None
    assert_gone(e.value.pid)


def test_startup_timeout_kills_the_server(tmp_path: Path) -> None:
    t0 = time.monotonic()
    with pytest.raises(LaunchError, match="not healthy within 1 s") as e:
        launch(sim_spec(startup_s=60.0), SPEC_CONFIG, log_dir=tmp_path, startup_timeout_s=1.0)
    assert time.monotonic() - t0 < 10
    assert e.value.pid is not None
    assert_gone(e.value.pid)


def test_stop_is_idempotent_and_leaves_nothing(tmp_path: Path) -> None:
    server = launch(
        sim_spec(),
        replace(SPEC_CONFIG, spec_mode=None, algorithm=None, steps=None, topk=None, draft_tokens=None),
        log_dir=tmp_path,
        gpus=[0],
    )
    assert server.pid is not None
    assert server.env_delta["CUDA_VISIBLE_DEVICES"] == "0"
    assert server.spec_mode_resolved is None
    assert server.mismatches == []
    server.stop()
    server.stop()
    assert not server.is_running()
    assert_gone(server.pid)


def test_keyboard_interrupt_tears_down(tmp_path: Path) -> None:
    pid = None
    with pytest.raises(KeyboardInterrupt), launch(sim_spec(), SPEC_CONFIG, log_dir=tmp_path) as server:
        pid = server.pid
        raise KeyboardInterrupt
    assert pid is not None
    assert_gone(pid)


def test_sigterm_ignored_escalates_to_sigkill() -> None:
    code = (
        "import signal, time; signal.signal(signal.SIGTERM, signal.SIG_IGN); "
        "print('up', flush=True); time.sleep(60)"
    )
    proc = subprocess.Popen([sys.executable, "-c", code], stdout=subprocess.PIPE, start_new_session=True)
    assert proc.stdout is not None and proc.stdout.readline() == b"up\n"
    t0 = time.monotonic()
    terminate_group(proc, 0.3)
    assert time.monotonic() - t0 < 5
    assert proc.returncode == -signal.SIGKILL
    proc.stdout.close()
    assert_gone(proc.pid)


def test_given_port_in_use_is_refused(tmp_path: Path) -> None:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        s.listen()
        port = s.getsockname()[1]
        with pytest.raises(LaunchError, match="already in use"):
            launch(sim_spec(), SPEC_CONFIG, log_dir=tmp_path, port=port)


def test_owned_env_is_refused_before_launch(tmp_path: Path) -> None:
    cfg = replace(SPEC_CONFIG, env=(("SGLANG_ENABLE_SPEC_V2", "True"),))
    with pytest.raises(LaunchError, match="SGLANG_ENABLE_SPEC_V2: set by specbench"):
        launch(sim_spec(), cfg, log_dir=tmp_path)
    assert list(tmp_path.iterdir()) == []  # nothing was started, so no log either


def test_bad_config_is_refused_before_launch(tmp_path: Path) -> None:
    cfg = replace(SPEC_CONFIG, args=(("port", 1),))
    with pytest.raises(LaunchError, match="set by the sweep"):
        launch(sim_spec(), cfg, log_dir=tmp_path)


def test_version_detection_names_the_interpreter() -> None:
    if importlib.util.find_spec("sglang") is not None:
        assert detect_sglang_version(sys.executable)
        return
    with pytest.raises(LaunchError, match="SGLang is not installed for"):
        detect_sglang_version(sys.executable)


def test_external_server(sim_server: SimFactory) -> None:
    """Attach to a server someone else started: nothing launched, the same verification."""
    sim = sim_server.start(
        *("--attention-backend", "flashmla", "--speculative-algorithm", "NEXTN"),
        *(
            "--speculative-num-steps",
            "3",
            "--speculative-eagle-topk",
            "1",
            "--speculative-num-draft-tokens",
            "4",
        ),
        env={"SPECBENCH_SIM_VERSION": "0.5.15", "SPECBENCH_SIM_INSTANT": "1"},
    )
    spec = ServerSpec(backend="external", base_url=sim.base_url + "/")
    cfg = replace(SPEC_CONFIG, model=SIM_MODEL, spec_mode="v2")
    with launch(spec, cfg) as ext:
        assert isinstance(ext, LaunchedServer)
        assert ext.pid is None and ext.argv == [] and ext.log_path is None and ext.env_delta == {}
        assert ext.base_url == sim.base_url
        assert ext.version == "0.5.15"
        assert ext.spec_mode_resolved == "v2"
        assert ext.mode_detail.startswith("v2: overlap EAGLEWorkerV2 (0.5.15)")
        assert ext.mismatches == []
        assert "the external server is the specbench stand-in" in ext.notes
    ext.stop()  # attached servers are not ours to stop
    assert sim.proc.poll() is None
    asked_v1 = attach_external(spec, replace(cfg, spec_mode="v1", steps=2, draft_tokens=3, model="other"))
    assert asked_v1.mismatches == [
        "spec mode: requested v1, server runs v2 (v2: overlap EAGLEWorkerV2 (0.5.15))",
        "model: requested 'other', server runs 'specbench/sim-mla-tiny'",
        "speculative steps: requested 2, server runs 3",
        "draft tokens: requested 3, server runs 4",
    ]
    assert fetch_server_info(sim.base_url)["version"] == "0.5.15"


def test_external_server_unreachable_names_the_url() -> None:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    url = f"http://127.0.0.1:{port}"
    with pytest.raises(LaunchError, match=f"cannot reach the server at {url}"):
        launch(ServerSpec(backend="external", base_url=url), SPEC_CONFIG)


def test_inherited_sim_knobs_do_not_leak(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("SPECBENCH_SIM_FAULT", "crash_after=0")
    with launch(sim_spec(), SPEC_CONFIG, log_dir=tmp_path) as server:
        assert "SPECBENCH_SIM_FAULT" not in server.env_delta
        assert server.server_info["specbench_sim"]["faults"] == {}
        assert "inherited SPECBENCH_SIM_FAULT not passed on (set by server.sim only)" in server.notes


def test_spec_args_missing_from_the_config_are_refused(tmp_path: Path) -> None:
    spec = ServerSpec(backend="sim", args={"skip-tokenizer-init": True})
    with pytest.raises(LaunchError, match=r"bench\.sweep\.expand"):
        launch(spec, SPEC_CONFIG, log_dir=tmp_path)


def test_free_port_leaves_room_for_sglang_derived_ports_and_avoids_the_ephemeral_range() -> None:
    # 0.5.13 refuses to start when --port + 10000 (its gRPC port) exceeds 65535, and a port inside the
    # ephemeral range can be taken by a health probe that TCP connects to itself.
    low, high = ephemeral_port_range()
    for _ in range(50):
        port = free_port()
        assert port + 10000 <= 65535
        assert not low <= port <= high


def test_server_ports_avoid_any_ephemeral_range(tmp_path: Path) -> None:
    assert server_port_range((32768, 60999)) == (20000, 32768)
    assert server_port_range((1024, 40000)) == (40001, 55536)  # ports above the range, gRPC port still valid
    with pytest.raises(PortError, match="ephemeral range"):
        server_port_range((1024, 65535))
    proc = tmp_path / "ip_local_port_range"
    proc.write_text("15000\t30000\n")
    assert ephemeral_port_range(proc) == (15000, 30000)
    assert ephemeral_port_range(tmp_path / "missing") == (32768, 60999)


def test_a_probe_that_reads_garbage_keeps_waiting(tmp_path: Path) -> None:
    # What a self-connected probe sees: its own request line instead of a status line. Not ready, not fatal.
    port = free_port()
    with socket.socket() as srv:
        srv.bind(("127.0.0.1", port))
        srv.listen()

        def answer_garbage_then_close() -> None:
            conn, _ = srv.accept()
            with conn:
                conn.recv(1024)
                conn.sendall(b"GET /health HTTP/1.1\r\n\r\n")

        t = threading.Thread(target=answer_garbage_then_close, daemon=True)
        t.start()
        # Its own process group, as the launcher starts a server: the timeout's SIGTERM to the group reaches it.
        proc = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(30)"], start_new_session=True)
        try:
            with pytest.raises(LaunchError, match="not healthy within"):
                wait_healthy(proc, f"http://127.0.0.1:{port}", tmp_path / "log", timeout_s=1.0)
        finally:
            proc.kill()
            proc.wait()
        t.join(timeout=5)


def test_the_stand_in_starts_in_the_folder_that_holds_the_packages() -> None:
    """Its working directory is what lets `-m synthetic.server` import this tree without an install."""
    from bench.server import launcher

    assert (launcher._PROJECT_ROOT / "synthetic" / "server" / "__main__.py").is_file()
