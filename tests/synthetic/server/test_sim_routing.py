"""The stand-in takes SGLang's routing switches as each release does (contract §1.6) and says what it would
route like; it names the GPU it stands for, whose bandwidth gives its points a floor."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from tests.fixtures.sim import SimFactory, get_json

DUMMY = ("--load-format", "dummy")


def _routing(sim_server: SimFactory, version: str, env: dict[str, str], model: str | None = None) -> str:
    extra = {"model_path": model} if model else {}
    sim = sim_server.start(*DUMMY, env={"SPECBENCH_SIM_VERSION": version, **env}, **extra)
    info = get_json(sim, "/server_info")
    assert info["specbench_sim"]["gpu_name"] == "NVIDIA H200"
    return str(info["specbench_sim"]["expert_routing"])


@pytest.mark.parametrize("value", ["1", "true", "YES", "y"])
def test_uniform_switch_is_honoured_from_0_5_13(sim_server: SimFactory, value: str) -> None:
    routing = _routing(sim_server, "0.5.13.post1", {"SGLANG_SIMULATE_UNIFORM_EXPERTS": value})
    assert routing == "uniform (SGLANG_SIMULATE_UNIFORM_EXPERTS)"


def test_switch_off_unset_or_absent_leaves_routing_collapsed(sim_server: SimFactory) -> None:
    assert _routing(sim_server, "0.5.23", {"SGLANG_SIMULATE_UNIFORM_EXPERTS": "0"}).startswith(
        "as initialised: collapsed"
    )
    assert _routing(sim_server, "0.5.13", {}).startswith("as initialised: collapsed")
    old = _routing(sim_server, "0.5.12", {"SGLANG_SIMULATE_UNIFORM_EXPERTS": "1"})
    assert old.endswith("SGLANG_SIMULATE_UNIFORM_EXPERTS ignored (SGLang 0.5.12 has no such switch)")


def test_round_robin_and_both(sim_server: SimFactory) -> None:
    rr = {"SGLANG_SIMULATE_ROUND_ROBIN_EXPERTS": "1"}
    assert _routing(sim_server, "0.5.14", rr) == "round robin (SGLANG_SIMULATE_ROUND_ROBIN_EXPERTS)"
    both = {**rr, "SGLANG_SIMULATE_UNIFORM_EXPERTS": "1", "SPECBENCH_SIM_VERSION": "0.5.15"}
    code, log = sim_server.run_to_exit(*DUMMY, env=both)
    assert code != 0 and "mutually exclusive" in log


def test_a_dense_model_directory_routes_nothing(sim_server: SimFactory, tmp_path: Path) -> None:
    (tmp_path / "config.json").write_text(json.dumps({"vocab_size": 1000, "hidden_size": 64}))
    routing = _routing(sim_server, "0.5.13.post1", {"SGLANG_SIMULATE_UNIFORM_EXPERTS": "1"}, str(tmp_path))
    assert routing == "dense model: no experts to route"
