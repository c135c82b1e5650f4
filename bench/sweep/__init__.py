"""Sweep files: the YAML a user writes, validated in full before any server starts, and its expansion into
server configs (one launch each) and their points (batch size x workload). One module per job, re-exported
here: `fields` (types, limits), `sections` (each section's model), `spec` (the whole sweep, running
`problems`), `errors` (SweepError, pydantic in the sweep's words), `load` (a file, every problem at once),
`plan` (the expansion and its keys), `diff` (what two sweeps differ in, for resume)."""

from bench.sweep.diff import UNSET, FieldChange, describe_changes, sweep_changes
from bench.sweep.errors import SweepError
from bench.sweep.fields import MAX_POINTS, MAX_TOKENS, SIMULATE_ACC_ENV
from bench.sweep.load import load_sweep, parse_sweep, read_sweep_text
from bench.sweep.plan import PointPlan, ServerConfig, ServerGroup, expand
from bench.sweep.sections import CorrectnessSpec, ServerSpec, SimSettings, WorkloadSpec
from bench.sweep.spec import SweepSpec
