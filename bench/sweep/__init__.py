"""Sweep files: the YAML a user writes, validated in full before any server starts, and its expansion into
server configs (one launch each) and their points (batch size x workload). One module per job, re-exported
here: `fields` (types, limits), `sections` (each section's model), `spec` (the whole sweep, running
`problems`), `errors` (SweepError, pydantic in the sweep's words), `load` (a file, every problem at once),
`plan` (the expansion and its keys), `diff` (what two sweeps differ in, for resume)."""

from bench.sweep.diff import UNSET, FieldChange, describe_changes, sweep_changes
from bench.sweep.errors import SweepError
from bench.sweep.fields import (
    DEFAULT_MIN_WINDOW_S,
    DEFAULT_PAIRED_REPEATS,
    DEFAULT_REPEATS,
    MAX_POINTS,
    MAX_PROMPTS,
    MAX_SERVER_CONFIGS,
    MAX_TOKENS,
    SIMULATE_ACC_ENV,
    TOPK1_ONLY_BACKENDS,
    Activity,
    Algorithm,
    ArgValue,
    Backend,
    LoadFormat,
)
from bench.sweep.load import load_sweep, parse_sweep, read_sweep_text, validate_sweep
from bench.sweep.plan import PointPlan, ServerConfig, ServerGroup, expand
from bench.sweep.problems import find_problems
from bench.sweep.sections import (
    CorrectnessSpec,
    GridSpec,
    MeasureSpec,
    ProfileSpec,
    ServerSpec,
    SimSettings,
    WarmupSpec,
    WorkloadSpec,
)
from bench.sweep.spec import SweepSpec

__all__ = [
    "DEFAULT_MIN_WINDOW_S",
    "DEFAULT_PAIRED_REPEATS",
    "DEFAULT_REPEATS",
    "MAX_POINTS",
    "MAX_PROMPTS",
    "MAX_SERVER_CONFIGS",
    "MAX_TOKENS",
    "SIMULATE_ACC_ENV",
    "TOPK1_ONLY_BACKENDS",
    "UNSET",
    "Activity",
    "Algorithm",
    "ArgValue",
    "Backend",
    "CorrectnessSpec",
    "FieldChange",
    "GridSpec",
    "LoadFormat",
    "MeasureSpec",
    "PointPlan",
    "ProfileSpec",
    "ServerConfig",
    "ServerGroup",
    "ServerSpec",
    "SimSettings",
    "SweepError",
    "SweepSpec",
    "WarmupSpec",
    "WorkloadSpec",
    "describe_changes",
    "expand",
    "find_problems",
    "load_sweep",
    "parse_sweep",
    "read_sweep_text",
    "sweep_changes",
    "validate_sweep",
]
