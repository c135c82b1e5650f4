"""Expert routing when dummy weights meet a MoE model: balanced, or collapsed. Dummy router weights and biases
are uniform in ±1e-3, so nearly every token picks the same few experts (SGLang PR #25571; issue 29). The
release's switch (`spec_modes.balanced_routing_switch`) makes routing uniform; specbench sets it for every
dummy-weight launch of a (possible) MoE (`server.balanced_routing: auto`); `off`, or a release without it,
leaves routing collapsed, said loudly and stored per point (`points.expert_routing`). Uniform routing is the
most experts a step can touch; trained routing lies between it and the collapse."""

from dataclasses import dataclass, field
from typing import Literal

from bench.server.spec_modes import balanced_routing_switch

BalancedRouting = Literal["auto", "off"]
# Stored per point: NULL for real weights (trained routing) and dense models (nothing to route).
ExpertRouting = Literal["balanced", "collapsed"]


@dataclass(frozen=True)
class RoutingPlan:
    """What the launch does about expert routing, and what its numbers are labelled with."""

    routing: ExpertRouting | None
    env: dict[str, str] = field(default_factory=dict)
    warning: str | None = None  # set when routing stays collapsed: printed at dry-run and run time


def plan_routing(
    *, version: str, load_format: str, setting: BalancedRouting, moe: bool | None
) -> RoutingPlan:
    """The routing of one launch. `moe`: whether the model's config.json has routed experts (None: no local
    config, e.g. a hub id; treated as a possible MoE, since the switch does nothing to a dense model)."""
    if load_format != "dummy" or moe is False:
        return RoutingPlan(None)
    switch = balanced_routing_switch(version)
    collapsed = (
        "with dummy weights nearly every token picks the same few experts, so each MoE layer reads a few "
        "percent of what a deployment reads (the GPU side of a step is understated, most at large batch); "
        "its points are labelled 'routing collapsed'"
    )
    if setting == "off":
        # Explicitly off: overrides a value the host's environment may pass on (SGLANG_* is host-passed).
        return RoutingPlan(
            "collapsed", {switch: "0"} if switch else {}, f"server.balanced_routing: off: {collapsed}"
        )
    if switch is None:
        return RoutingPlan(
            "collapsed",
            {},
            f"SGLang {version} has no balanced-routing switch (SGLANG_SIMULATE_UNIFORM_EXPERTS came with "
            f"0.5.13): {collapsed}",
        )
    return RoutingPlan("balanced", {switch: "1"})
