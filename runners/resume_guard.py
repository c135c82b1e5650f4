"""Whether a sweep may continue a stored run: the same sweep, but for its stopping rule.

An edited sweep would measure the rest by another procedure. The stopping rule (STOPPING_RULE) only decides
how many ABBA pairs a point gets, so it may change; the replaced sweep stays in `provenance.sweep_edits`.
"""

from dataclasses import dataclass, field
from typing import Final

from bench.sweep import FieldChange, SweepError, SweepSpec, describe_changes, parse_sweep, sweep_changes

# Fields that only decide when a colocated pair stops adding ABBA repeats (runners/pair_target.py).
STOPPING_RULE: Final = frozenset(
    {"measure.ratio_target", "measure.max_repeats", "measure.ratio_target_min_batch"}
)


class ResumeRefused(ValueError):
    """This sweep cannot continue that run; the message says why and the ways out."""


@dataclass(frozen=True)
class ResumeCheck:
    """A resume that may go ahead; `warning`: the stored sweep does not parse; `edits`: stopping rules."""

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
    """ResumeRefused when `spec` is not run `run_id`'s stored sweep beyond its stopping rule."""
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
