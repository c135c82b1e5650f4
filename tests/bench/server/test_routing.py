"""Balanced expert routing when dummy weights meet a MoE model: which release has the switch, what a launch
sets, and what a sweep may say about it."""

from __future__ import annotations

from pathlib import Path

import pytest

from bench.server.launcher import plan_launch
from bench.server.routing import plan_routing
from bench.server.spec_modes import (
    ENV_UNIFORM_EXPERTS,
    RELEASES,
    balanced_routing_switch,
    fused_shared_slot_drawn,
)
from bench.sweep import SweepError, expand, parse_sweep
from synthetic.model.presets import build_preset

# Read from each release's sglang/srt/environ.py (docs/reference/sglang-contract.md §1.6).
SWITCH = {
    "0.5.12": None,
    "0.5.13": ENV_UNIFORM_EXPERTS,
    "0.5.13.post1": ENV_UNIFORM_EXPERTS,
    "0.5.14": ENV_UNIFORM_EXPERTS,
    "0.5.15": ENV_UNIFORM_EXPERTS,
    "0.5.23": ENV_UNIFORM_EXPERTS,
}


def test_every_release_has_its_switch_recorded() -> None:
    assert set(SWITCH) == set(RELEASES)
    for version, switch in SWITCH.items():
        assert balanced_routing_switch(version) == switch, version
    assert [v for v in RELEASES if fused_shared_slot_drawn(v)] == [
        "0.5.13",
        "0.5.13.post1",
        "0.5.14",
        "0.5.15",
    ]


@pytest.mark.parametrize(
    ("version", "load_format", "setting", "moe", "routing", "env", "warned"),
    [
        ("0.5.13.post1", "dummy", "auto", True, "balanced", {ENV_UNIFORM_EXPERTS: "1"}, False),
        (
            "0.5.23",
            "dummy",
            "auto",
            None,
            "balanced",
            {ENV_UNIFORM_EXPERTS: "1"},
            False,
        ),  # a hub id: maybe MoE
        ("0.5.13.post1", "dummy", "off", True, "collapsed", {ENV_UNIFORM_EXPERTS: "0"}, True),
        ("0.5.12", "dummy", "auto", True, "collapsed", {}, True),  # no switch in 0.5.12
        ("0.5.13.post1", "dummy", "auto", False, None, {}, False),  # a dense model routes nothing
        ("0.5.13.post1", "auto", "auto", True, None, {}, False),  # real weights route as trained
    ],
)
def test_plan_routing(
    version: str,
    load_format: str,
    setting: str,
    moe: bool | None,
    routing: str | None,
    env: dict,
    warned: bool,
) -> None:
    plan = plan_routing(version=version, load_format=load_format, setting=setting, moe=moe)  # type: ignore[arg-type]
    assert (plan.routing, plan.env, plan.warning is not None) == (routing, env, warned)
    if warned:
        assert "collapsed" in (plan.warning or "")


SWEEP = """
name: shard
model: {model}
server: {{backend: sim, load_format: dummy{extra}}}
grid: {{batch_sizes: [1], spec_modes: [v2], steps: [1], baseline: true}}
"""


def _launch_env(model: str, extra: str = "", version: str | None = None) -> tuple[dict[str, str], str | None]:
    if version:
        extra += f', sim: {{version: "{version}"}}'
    spec = parse_sweep(SWEEP.format(model=model, extra=extra))
    plan = plan_launch(spec.server, expand(spec)[0].server, version=spec.server.sim.version, port=30000)
    return plan.env_delta, plan.routing.warning


def test_the_launch_sets_the_switch_only_where_it_belongs(tmp_path: Path) -> None:
    shard = build_preset(tmp_path / "shard", "deepseek-v3-tp8-shard", 2)
    env, warning = _launch_env(str(shard))
    assert env[ENV_UNIFORM_EXPERTS] == "1" and warning is None
    env, warning = _launch_env(str(shard), ", balanced_routing: off")  # YAML's bare `off` reads as "off"
    assert env[ENV_UNIFORM_EXPERTS] == "0" and "server.balanced_routing: off" in str(warning)
    env, warning = _launch_env(str(shard), version="0.5.12")
    assert ENV_UNIFORM_EXPERTS not in env and "0.5.12 has no balanced-routing switch" in str(warning)
    dense = tmp_path / "dense"
    dense.mkdir()
    (dense / "config.json").write_text('{"hidden_size": 64, "num_hidden_layers": 1, "vocab_size": 100}')
    env, warning = _launch_env(str(dense))
    assert ENV_UNIFORM_EXPERTS not in env and warning is None


def test_a_sweep_may_not_set_the_routing_switches() -> None:
    for name in ("SGLANG_SIMULATE_UNIFORM_EXPERTS", "SGLANG_SIMULATE_ROUND_ROBIN_EXPERTS"):
        with pytest.raises(SweepError, match=f"server.env.{name}: set by specbench itself"):
            parse_sweep(SWEEP.format(model="sim-tiny", extra=f", env: {{{name}: '1'}}"))
    with pytest.raises(SweepError, match="balanced_routing"):
        parse_sweep(SWEEP.format(model="sim-tiny", extra=", balanced_routing: sometimes"))
