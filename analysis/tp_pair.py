"""Whether two runs are a one-GPU shard and its tensor-parallel deployment, and why not.

The shard's model must be `bench.model_config.shard_config` of the TP run's at its width, the same depth
(`model_shape`, else the preset in `model_synth`). A refusal gives every reason at once; another GPU or
release is a note. The rules: docs/reference/shard-vs-tp.md ("When two runs pair").
"""

from __future__ import annotations

import functools
import re
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from analysis.labels import MEASURED, SIMULATED, run_kind
from bench.model_config import is_shard_of

_SYNTH = re.compile(r"^preset (?P<preset>\S+) layers=(?P<layers>\d+)(?:/\d+)?(?: tp=(?P<tp>\d+))?$")


class PairRefused(ValueError):
    """The two runs are not a shard and its TP deployment; the message says every reason, one per line."""


@dataclass(frozen=True)
class RunSide:
    """What the comparison needs to know of one run (from db.queries.run_model_facts)."""

    run_id: int
    sweep: str
    sglang_version: str | None
    tps: tuple[int, ...]
    gpu_name: str  # the host's GPU, or the one the stand-in emulates
    gpus: int  # GPUs recorded: the host's, or the stand-in's emulated ones (one per TP rank)
    simulated: bool
    shape: dict[str, Any] | None
    synth: str | None
    kind: str = MEASURED  # analysis.labels.run_kind

    @classmethod
    def from_facts(cls, facts: dict[str, Any]) -> RunSide:
        real_gpus = int(facts.get("gpu_count") or 0)
        sim_gpus = facts.get("sim_gpu_count")
        emulated = real_gpus == 0 and isinstance(sim_gpus, int) and sim_gpus > 0
        shape = facts.get("model_shape")
        return cls(
            run_id=int(facts["id"]),
            sweep=str(facts.get("sweep_name") or ""),
            sglang_version=facts.get("sglang_version"),
            tps=tuple(int(t) for t in facts.get("tps") or ()),
            gpu_name=str(facts.get("sim_gpu_name") if emulated else facts.get("gpu_name") or "none"),
            gpus=int(sim_gpus) if emulated and isinstance(sim_gpus, int) else real_gpus,
            simulated=bool(facts.get("simulated")),
            shape=shape if isinstance(shape, dict) and shape else None,
            synth=facts.get("model_synth"),
            kind=run_kind(facts.get("simulated"), facts.get("trigger")),
        )

    @property
    def tp(self) -> int:
        """The run's one tensor-parallel width (the largest, where a run mixed them: a refused pair)."""
        return max(self.tps, default=1)

    def describe(self) -> str:
        """`run #3 sweep-name: tp 8 on 8x NVIDIA H200 (stand-in)`, plain text."""
        tps = "/".join(map(str, self.tps)) or "?"
        gpus = f"{self.gpus}x {self.gpu_name}" if self.gpus else "no GPU recorded"
        return f"run #{self.run_id} {self.sweep}: tp {tps} on {gpus}" + (
            f" ({'stand-in' if self.kind == SIMULATED else self.kind})" if self.kind != MEASURED else ""
        )


def _synth_pairs(shard: str | None, whole: str | None, tp: int) -> list[str] | None:
    """Why two presets' summaries do not pair ([] when they do); None when either is not a preset summary."""
    a, b = _SYNTH.match(shard or ""), _SYNTH.match(whole or "")
    if a is None or b is None:
        return None
    out = []
    if a["preset"] != b["preset"]:
        out.append(f"preset {a['preset']} vs {b['preset']}")
    if a["layers"] != b["layers"]:
        out.append(f"layers {a['layers']} vs {b['layers']}")
    shard_tp, whole_tp = int(a["tp"] or 1), int(b["tp"] or 1)
    if shard_tp != whole_tp * tp:
        out.append(
            f"the shard is 1/{shard_tp} of the model, the TP run serves 1/{whole_tp} of it {tp} ways "
            f"(1/{whole_tp * tp} per GPU)"
        )
    return out


def pair_problems(shard: RunSide, tp: RunSide) -> list[str]:
    """Every reason the two runs are not a shard and its TP deployment; [] when they are."""
    if shard.run_id == tp.run_id:
        return [f"the shard run and the TP run are the same run (#{shard.run_id}): give two runs"]
    out: list[str] = []
    if shard.tps != (1,):
        out.append(
            f"run #{shard.run_id} is not a one-GPU shard run: its servers ran at tp "
            f"{'/'.join(map(str, shard.tps)) or '(no points)'}; the shard run is one at tp 1"
        )
    if len(tp.tps) != 1 or tp.tps[0] < 2:
        out.append(
            f"run #{tp.run_id} is not a tensor-parallel run: its servers ran at tp "
            f"{'/'.join(map(str, tp.tps)) or '(no points)'}; the TP run is one at a single tp > 1"
        )
    if shard.simulated != tp.simulated:
        kinds = {True: "the stand-in's", False: "real"}
        out.append(
            f"run #{shard.run_id} is {kinds[shard.simulated]} and run #{tp.run_id} is {kinds[tp.simulated]}: "
            "stand-in and real numbers do not compare"
        )
    if out:  # the widths decide what "the same model" means; say the rest once they are right
        return out
    width = tp.tp
    if shard.shape is not None and tp.shape is not None:
        if diffs := is_shard_of(shard.shape, tp.shape, width):
            out.append(
                f"run #{shard.run_id}'s model is not one GPU of run #{tp.run_id}'s model at tp {width}: "
                + "; ".join(diffs)
                + " (shard vs the TP model split as SGLang splits it)"
            )
        return out
    synth = _synth_pairs(shard.synth, tp.synth, width)
    if synth is None:
        missing = [
            f"run #{r.run_id}" for r in (shard, tp) if r.shape is None and not _SYNTH.match(r.synth or "")
        ] or [f"run #{shard.run_id}", f"run #{tp.run_id}"]
        out.append(
            f"cannot tell whether the models pair: {' and '.join(missing)} record no model shape (provenance "
            "`model_shape`, recorded since specbench compares shards with TP runs) and no synthetic preset; "
            "run the sweeps again with this specbench"
        )
    elif synth:
        out.append(
            f"run #{shard.run_id}'s model is not one GPU of run #{tp.run_id}'s model at tp {width}: "
            + "; ".join(synth)
        )
    return out


def pair_notes(shard: RunSide, tp: RunSide) -> list[str]:
    """What does not refuse the pair but changes how it reads."""
    out: list[str] = []
    if shard.gpu_name != tp.gpu_name:
        out.append(
            f"the shard ran on {shard.gpu_name} and the TP run on {tp.gpu_name}: step times compare two GPUs"
        )
    if shard.sglang_version != tp.sglang_version:
        out.append(
            f"SGLang {shard.sglang_version or '?'} (shard) vs {tp.sglang_version or '?'} (TP): two releases"
        )
    if shard.gpus > 1:
        out.append(
            f"run #{shard.run_id} recorded {shard.gpus} GPUs for a one-GPU shard: the host's, not the one it ran "
            "on (pin it with `specbench run --gpus 0` or CUDA_VISIBLE_DEVICES=0 next time)"
        )
    if 0 < tp.gpus < tp.tp:
        out.append(f"run #{tp.run_id} recorded {tp.gpus} GPU(s) for tp {tp.tp}: its provenance is incomplete")
    return out


def check_pair(shard: RunSide, tp: RunSide) -> list[str]:
    """The notes of a valid pair; PairRefused (every reason, one per line) otherwise."""
    if problems := pair_problems(shard, tp):
        raise PairRefused(
            f"run #{shard.run_id} and run #{tp.run_id} are not a shard and its TP deployment:\n"
            + "\n".join(f"- {p}" for p in problems)
        )
    return pair_notes(shard, tp)


def default_pair(
    newest_first: list[int],
    widths: dict[int, list[int]],
    side_of: Callable[[int], RunSide],
    limit: int = 25,
) -> tuple[int, int] | None:
    """The newest TP run (tp > 1) some one-GPU run pairs with, and the newest such shard (None: none pairs).
    `widths`: db.queries.run_tp_widths; `side_of` reads a run (at most `limit` candidates of each kind)."""
    tps = [r for r in newest_first if len(widths.get(r, [])) == 1 and widths[r][0] > 1][:limit]
    shards = [r for r in newest_first if widths.get(r) == [1]][:limit]
    side = functools.cache(side_of)
    for t in tps:
        for s in shards:
            if not pair_problems(side(s), side(t)):
                return s, t
    return None
