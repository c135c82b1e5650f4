"""Whether a sweep may continue a stored run: the same sweep name and, parsed, the same sweep.

A run keeps the sweep text it started from (`runs.sweep_yaml`) as its provenance. Resuming it with an edited
sweep would measure its remaining repeats by another procedure (measure.*, warmup, repeats and timeouts are
in no point key), under the first sweep's text. `specbench run` (real and dry) and the runner itself, for
workers too, ask here before they touch the run.
"""

from __future__ import annotations

from bench.sweep import SweepError, SweepSpec, describe_changes, parse_sweep, sweep_changes


class ResumeRefused(ValueError):
    """This sweep cannot continue that run; the message says why and the ways out."""


def check_resume(run_id: int, sweep_name: str, sweep_yaml: str, spec: SweepSpec) -> str | None:
    """Raise ResumeRefused when `spec` is not the sweep run `run_id` stored (`sweep_name`, `sweep_yaml`).
    Returns a warning when the stored text no longer parses (a run an older specbench wrote, an imported
    run's placeholder), so the comparison could not be made; None when the sweep is the run's own."""
    if sweep_name != spec.name:
        raise ResumeRefused(f"run {run_id} belongs to sweep {sweep_name!r}, not {spec.name!r}")
    try:
        stored = parse_sweep(sweep_yaml, f"run {run_id}'s stored sweep")
    except SweepError as e:
        first = e.problems[0] if e.problems else str(e)
        more = f" (and {len(e.problems) - 1} more problem(s))" if len(e.problems) > 1 else ""
        return (
            f"run {run_id}'s stored sweep does not parse with this specbench ({first}{more}); resuming "
            "without checking that this sweep is the one the run started from"
        )
    changes = sweep_changes(stored, spec)
    if not changes:
        return None
    raise ResumeRefused(
        f"run {run_id} started from a different sweep; resuming it with this one would mix two procedures "
        f"in one run. Changed since: {describe_changes(changes)}. Either continue it with the sweep it "
        f"started from (specbench runs --yaml {run_id} > sweep.yaml, then specbench run sweep.yaml "
        f"--resume-run {run_id}) or start a new run (drop --resume / --resume-run)."
    )
