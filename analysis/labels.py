"""How points, series, GPUs and workloads read in tables, charts and reports: one label per concept."""

import math
import re
from collections.abc import Iterable, Mapping, Sequence
from typing import Any


def none_if_nan(v: Any) -> Any:
    """NaN (what pandas makes of SQL NULL in numeric columns) -> None."""
    return None if isinstance(v, float) and math.isnan(v) else v


def short_model(model: str | None) -> str:
    return (model or "?").rstrip("/").split("/")[-1]


def short_gpu(name: str | None, count: Any = None) -> str:
    n = (name or "none").replace("NVIDIA ", "")
    n = n.split(" ")[0] if n.startswith(("H100", "H200", "B200", "A100")) else n
    c = none_if_nan(count)
    return f"{n}×{int(c)}" if c else n


def short_workload(key: str | None) -> str:
    """`random:random:in1024:out512:seed1:t0.0` -> `in1024/out512` (the dataset too, when not random)."""
    if not key:
        return "?"
    parts = key.split(":")
    io = [p for p in parts if p.startswith(("in", "out")) and p[2:].lstrip("t").isdigit()]
    head = "" if parts[0] == "random" else f"{parts[0]} "
    return head + "/".join(io) if io else key


def config_label(row: Mapping[str, Any], *, with_batch: bool = True) -> str:
    """`EAGLE s3 v2 · bs16` or `baseline · bs16`: how a point's server config reads in tables."""
    steps = none_if_nan(row.get("steps"))
    if none_if_nan(row.get("algorithm")) is None or steps is None:
        head = "baseline"
    else:
        topk = none_if_nan(row.get("topk"))
        k = f" k{int(topk)}" if topk and int(topk) != 1 else ""
        head = f"{row['algorithm']} s{int(steps)}{k} {none_if_nan(row.get('spec_mode')) or ''}".rstrip()
    return f"{head} · bs{int(row['batch_size'])}" if with_batch else head


def series_label(row: Mapping[str, Any]) -> str:
    return " · ".join(
        [
            short_model(row.get("model")),
            short_gpu(row.get("gpu_name"), row.get("gpu_count")),
            config_label(row),
            short_workload(row.get("workload_key")),
        ]
    )


def spec_mode_key(value: Any) -> str:
    """Filter value for a spec mode: `v1`, `v2` or `baseline` (no speculative decoding)."""
    return str(value) if none_if_nan(value) else "baseline"


def key_part(v: Any) -> str:
    """A config key's value as text: NULL -> "", 3.0 -> "3" (pandas makes an int column with NULLs float)."""
    v = none_if_nan(v)
    if isinstance(v, float) and v.is_integer():
        v = int(v)
    return "" if v is None else str(v)


# A run's tag: none for a measurement; a stand-in server's run (no GPU, a performance model) "simulated
# (stand-in)"; `specbench seed`'s load-test history "synthetic". Both are `simulated`: the trigger tells.
STAND_IN_TAG = "simulated (stand-in)"
SYNTHETIC_TAG = "synthetic"


def run_tag(simulated: Any, trigger: Any) -> str | None:
    """The tag shown next to a run, or None for a real measurement."""
    if trigger == SYNTHETIC_TAG:
        return SYNTHETIC_TAG
    simulated = none_if_nan(simulated)
    return STAND_IN_TAG if simulated is not None and bool(simulated) else None


# The kind of a number, as every `kind` field and column holds it; made-up first, as `kinds_text` joins.
SIMULATED = "simulated"
MEASURED = "measured"
KINDS: tuple[str, ...] = (SYNTHETIC_TAG, SIMULATED, MEASURED)
KIND_TAG = {MEASURED: MEASURED, SIMULATED: STAND_IN_TAG, SYNTHETIC_TAG: SYNTHETIC_TAG}  # in prose
KIND_HELP = "measured; simulated: the stand-in server, no GPU; synthetic: seeded history, not a measurement"


def run_kind(simulated: Any, trigger: Any) -> str:
    """`measured`, `simulated` (the stand-in server) or `synthetic` (seeded history)."""
    tag = run_tag(simulated, trigger)
    return MEASURED if tag is None else SIMULATED if tag == STAND_IN_TAG else SYNTHETIC_TAG


def kinds_text(kinds: Iterable[Any]) -> str:
    """The kind of a number from these runs' (`synthetic+measured`): partly made up never reads measured."""
    found = {str(k) for k in kinds if none_if_nan(k) is not None}
    return "+".join(k for k in KINDS if k in found) or MEASURED


# ---- what a run's numbers are made of (the one caption every export, the PR comment and the Sweep page use)

_PUBLISHED_V3_LAYERS = 61  # DeepSeek-V3's num_hidden_layers: the deployment a slice or shard stands for
_LAYERS = re.compile(r"layers=(\d+)")
_PATH_LAYERS = re.compile(r"-(\d+)l\b")


def _and(values: list[str]) -> str:
    return values[0] if len(values) == 1 else ", ".join(values[:-1]) + " and " + values[-1]


def numbers_caption(facts: Mapping[str, Any]) -> str:
    """ "dummy weights, acceptance pinned at 2.5, balanced routing", from `db.queries.caption_facts`."""
    parts: list[str] = []
    dummy = facts.get("dummy_weights")
    if dummy:
        parts.append("dummy weights")
    accepts = sorted({float(a) for a in facts.get("accept_lengths") or [] if none_if_nan(a) is not None})
    if accepts:
        parts.append("acceptance pinned at " + _and([f"{a:g}" for a in accepts]))
    elif dummy:
        parts.append("acceptance not pinned")
    if routing := routing_part(facts):
        parts.append(routing)
    return ", ".join(parts)


def routing_part(facts: Mapping[str, Any]) -> str:
    """The routing words of `numbers_caption`: "" for real weights (routing as trained) or no MoE to tell."""
    routings = {str(r) for r in facts.get("routings") or [] if none_if_nan(r)}
    if routings == {"balanced"}:
        return "balanced routing"
    if routings == {"collapsed"}:
        return "routing collapsed"
    if routings:
        return "routing balanced on some servers and collapsed on others"
    if not facts.get("dummy_weights"):
        return ""
    if model_class(facts) in ("slice", "shard"):
        # Stored before specbench recorded routing (and set SGLang's switch): the MoE layers collapsed.
        return "routing collapsed"
    return "routing not recorded"


def model_class(facts: Mapping[str, Any]) -> str:
    """slice | shard | toy | full: what the run's model stands for, from its preset (or its path)."""
    synth = str(facts.get("model_synth") or "")
    path = short_model(facts.get("model")).lower()
    if synth.startswith("preset deepseek-v3-tp8-shard") or "shard" in path:
        return "shard"
    if synth.startswith("preset deepseek-v3-slice") or "slice" in path:
        return "slice"
    if synth and not synth.startswith("preset"):
        return "toy"
    return "full"


def _layers(facts: Mapping[str, Any]) -> int | None:
    m = _LAYERS.search(str(facts.get("model_synth") or "")) or _PATH_LAYERS.search(
        short_model(facts.get("model"))
    )
    return int(m.group(1)) if m else None


def spec_over_baseline_caption(facts: Mapping[str, Any], *, simulated: bool = False) -> str:
    """What speculation over the no-spec baseline means for this run's model class (Sweep page, exports)."""
    text = _class_caption(facts)
    if simulated:
        return f"Stand-in server: these ratios come from its performance model, not a GPU. On a GPU, {text}"
    return text[0].upper() + text[1:]


def _class_caption(facts: Mapping[str, Any]) -> str:
    kind = model_class(facts)
    routing = routing_part(facts)
    layers = _layers(facts)
    if kind == "slice":
        heavier = f"{_PUBLISHED_V3_LAYERS / layers:.0f}x" if layers else "15x"
        return (
            f"host-bound slice: the draft is {heavier} heavier than in a deployment"
            + (f", {routing}" if routing else "")
            + ". Speculation over the baseline here is not what a deployment sees; compare v2 with v1."
        )
    if kind == "shard":
        short = (
            f" {layers} of {_PUBLISHED_V3_LAYERS} layers, so the draft weighs "
            f"{_PUBLISHED_V3_LAYERS / layers:.1f}x what it does in a deployment and speculation reads lower;"
            if layers and layers < _PUBLISHED_V3_LAYERS
            else ""
        )
        return (
            "one GPU of a TP-8 DeepSeek-V3 deployment:"
            + short
            + " speculation over the baseline as that GPU sees it, less TP's two all-reduces per layer"
            + (f" ({routing})" if routing else "")
            + "."
        )
    if kind == "toy":
        return (
            "tiny synthetic model: overhead-bound, so speculation over the baseline measures the scheduler, "
            "not the GPU."
        )
    return "the model as deployed: speculation over the baseline is the gain a user sees" + (
        f" ({numbers_caption(facts)})." if numbers_caption(facts) else "."
    )


def part_check_text(check: Mapping[str, Any] | None) -> str:
    """A part's drift check: `agreed (+1.2%)`, `did not agree (-7.1%)`, `check failed` or `not checked`."""
    if not check:
        return "not checked"
    if check.get("error"):
        return "check failed"
    change = check.get("change")
    pct = f" ({change:+.1%})" if isinstance(change, int | float) else ""
    return ("agreed" if check.get("agrees") else "did not agree") + pct


def parts_line(parts: Sequence[Mapping[str, Any]]) -> str | None:
    """`2 parts: gpu-a (H200), gpu-b (H100×1, agreed +1.2%)`, with the drift check of a part that moved host
    or GPU (db.queries.run_parts); None for a single part."""
    if len(parts) < 2:
        return None
    shown = []
    before: tuple[Any, ...] | None = None
    for p in parts:
        where = short_gpu(p.get("gpu_name"), p.get("gpu_count")) if p.get("gpu_count") else "no GPU"
        place = (p.get("host"), p.get("gpu_name"), p.get("gpu_count"))
        check = f", {part_check_text(p.get('check'))}" if before is not None and place != before else ""
        shown.append(f"{p.get('host')} ({where}{check})")
        before = place
    return f"{len(parts)} parts: " + ", ".join(shown)
