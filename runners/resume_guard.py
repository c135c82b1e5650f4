"""Whether a sweep may continue a stored run: the same sweep name and, parsed, the same sweep, except for the
rule that decides how many extra pairs a v1/v2 point takes.

A run keeps the sweep text it started from (`runs.sweep_yaml`) as its provenance. Resuming it with an edited
sweep would measure its remaining repeats by another procedure (measure.*, warmup, repeats and timeouts are
in no point key), under the first sweep's text. `specbench run` (real and dry) and the runner itself, for
workers too, ask here before they touch the run.

The stopping rule (STOPPING_RULE) is the exception: it decides only how many ABBA pairs a point gets, never
how one window is measured, so every repeat of the run is still measured one way. Raising
`measure.max_repeats` to narrow a point left wide, or exempting small batches, is what a user resumes for. The
runner then stores the edited sweep as the run's own and keeps the one it replaces in the run's provenance
(`sweep_edits`), so the stored sweep always says the rule that finished the run.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Final

from bench.sweep import (
    FieldChange,
    SweepError,
    SweepSpec,
    describe_changes,
    parse_sweep,
    sweep_changes,
)

# Fields that only decide when a colocated pair stops adding ABBA repeats (runners/pair_target.py).
STOPPING_RULE: Final = frozenset(
    {"measure.ratio_target", "measure.max_repeats", "measure.ratio_target_min_batch"}
)


class ResumeRefused(ValueError):
    """This sweep cannot continue that run; the message says why and the ways out."""


@dataclass(frozen=True)
class ResumeCheck:
    """A resume that may go ahead. `warning`: the stored sweep could not be compared (it does not parse
    with this specbench). `edits`: stopping-rule fields the sweep changes; the run takes the new sweep."""

    warning: str | None = None
    edits: list[FieldChange] = field(default_factory=list)

    def lines(self, run_id: int) -> list[str]:
        """What to tell the user before the resume goes ahead (plain text; escape it for rich)."""
        out = [f"warning: {self.warning}"] if self.warning else []
        if self.edits:
            out.append(
                f"note: run {run_id} continues with a changed stopping rule ({describe_changes(self.edits)}): "
                "it changes how many pairs a point takes, not how a window is measured; the run stores this "
                "sweep and keeps the one it replaces in its provenance (sweep_edits)"
            )
        return out


def check_resume(run_id: int, sweep_name: str, sweep_yaml: str, spec: SweepSpec) -> ResumeCheck:
    """Raise ResumeRefused when `spec` is not the sweep run `run_id` stored (`sweep_name`, `sweep_yaml`),
    beyond its stopping rule. Otherwise say what the caller should know (ResumeCheck)."""
    if sweep_name != spec.name:
        raise ResumeRefused(f"run {run_id} belongs to sweep {sweep_name!r}, not {spec.name!r}")
    try:
        stored = parse_sweep(sweep_yaml, f"run {run_id}'s stored sweep")
    except SweepError as e:
        first = e.problems[0] if e.problems else str(e)
        more = f" (and {len(e.problems) - 1} more problem(s))" if len(e.problems) > 1 else ""
        return ResumeCheck(
            warning=(
                f"run {run_id}'s stored sweep does not parse with this specbench ({first}{more}); resuming "
                "without checking that this sweep is the one the run started from"
            )
        )
    changes = sweep_changes(stored, spec)
    procedure = [c for c in changes if c.path not in STOPPING_RULE]
    if not procedure:
        return ResumeCheck(edits=changes)
    raise ResumeRefused(
        f"run {run_id} started from a different sweep; resuming it with this one would mix two procedures "
        f"in one run. Changed since: {describe_changes(procedure)}. Either continue it with the sweep it "
        f"started from (specbench runs --yaml {run_id} > sweep.yaml, then specbench run sweep.yaml "
        f"--resume-run {run_id}) or start a new run (drop --resume / --resume-run)."
    )
