"""Sweep files: the YAML a user writes, validated in full before any server starts, and its expansion.

A sweep expands into server configs (everything that needs a restart) and, under each, the points measured
on that server (batch size x workload). Launches therefore equal the number of distinct server configs.

One module per job; this package re-exports their public names, so `from bench.sweep import ...` is the
one import callers need:
- `fields`: the field types and limits every value goes through;
- `sections`: the schema of each section (pydantic models: server, grid, workload, warmup, measure, ...);
- `spec`: the whole sweep, which runs `problems` (the cross-field checks) on validation;
- `errors`: SweepError and pydantic's errors in the sweep's words (did-you-mean, one line per problem);
- `load`: reading and validating a file, every problem in one pass;
- `plan`: the expansion into server configs and points, and their keys;
- `diff`: the fields two sweeps differ in (a run is resumed only by the sweep it started from).
"""

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
