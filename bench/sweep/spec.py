"""The whole sweep file: its sections put together, what they imply (repeats, windows, pairing), and the
cross-field checks (bench/sweep/problems.py) run on validation."""

from __future__ import annotations

from typing import TYPE_CHECKING, Annotated, Any

from pydantic import Field, model_validator

from bench.sweep.fields import (
    DEFAULT_MIN_WINDOW_S,
    DEFAULT_PAIRED_REPEATS,
    DEFAULT_REPEATS,
    PathText,
    Seconds,
    Slug,
)
from bench.sweep.problems import find_problems
from bench.sweep.sections import (
    GridSpec,
    MeasureSpec,
    ProfileSpec,
    ServerSpec,
    Strict,
    WarmupSpec,
    WorkloadSpec,
)

if TYPE_CHECKING:  # plan.py imports this module
    from bench.sweep.plan import PointPlan


class SweepSpec(Strict):
    name: Slug
    model: PathText
    draft_model: PathText | None = None
    server: ServerSpec = Field(default_factory=ServerSpec)
    grid: GridSpec
    workload: WorkloadSpec | Annotated[list[WorkloadSpec], Field(min_length=1, max_length=64)] = Field(
        default_factory=WorkloadSpec
    )
    repeats: int = Field(3, ge=1, le=100)
    warmup: WarmupSpec = Field(default_factory=WarmupSpec)
    measure: MeasureSpec = Field(default_factory=MeasureSpec)
    request_timeout_s: Seconds = 600.0
    profile: ProfileSpec | None = None

    @property
    def workloads(self) -> list[WorkloadSpec]:
        return self.workload if isinstance(self.workload, list) else [self.workload]

    @property
    def min_window_s(self) -> float:
        explicit = self.measure.min_window_s
        return DEFAULT_MIN_WINDOW_S[self.server.backend] if explicit is None else explicit

    @property
    def warmup_after_start_s(self) -> float:
        if self.warmup.after_start_s is not None:
            return self.warmup.after_start_s
        return self.min_window_s if self.server.backend == "sglang" else 0.0

    @property
    def drift_check(self) -> bool:
        explicit = self.measure.drift_check
        return (self.paired or self.server.backend != "sim") if explicit is None else explicit

    @property
    def max_pair_repeats(self) -> int:
        """Repeats a colocated v1/v2 pair may grow to under `measure.ratio_target` (else just `repeats`)."""
        if self.measure.ratio_target is None:
            return self.repeats
        return self.measure.max_repeats if self.measure.max_repeats is not None else 3 * self.repeats

    def repeats_may_grow(self, plan: PointPlan) -> bool:
        """`measure.ratio_target` may add ABBA repeats to this point, up to `max_pair_repeats`: a side of a
        colocated pair (v1/v2, or the baseline with `baseline_pairs`) at batch >= `ratio_target_min_batch`."""
        linked = plan.server.spec_mode in ("v1", "v2") or (
            bool(self.measure.baseline_pairs) and plan.server.spec_mode is None
        )
        return (
            self.measure.ratio_target is not None
            and self.server.pair_colocate
            and linked
            and plan.batch_size >= self.measure.ratio_target_min_batch
        )

    @property
    def paired(self) -> bool:
        """Both spec modes present (and pairing not switched off): the sweep measures v1/v2 pairs."""
        return self.measure.paired and {"v1", "v2"} <= set(self.grid.spec_modes)

    @model_validator(mode="before")
    @classmethod
    def _default_repeats(cls, data: Any) -> Any:
        # Pairs default to more repeats; decided on the raw mapping so `repeats` stays a plain int.
        if isinstance(data, dict) and "repeats" not in data:
            grid = data.get("grid")
            modes = grid.get("spec_modes", ["v1", "v2"]) if isinstance(grid, dict) else []
            # Raw input: the modes may be anything (a list of lists is refused later, not crashed on here).
            paired = isinstance(modes, list) and {"v1", "v2"} <= {m for m in modes if isinstance(m, str)}
            data = {**data, "repeats": DEFAULT_PAIRED_REPEATS if paired else DEFAULT_REPEATS}
        return data

    @model_validator(mode="after")
    def _check_combinations(self) -> SweepSpec:
        if problems := find_problems(self):
            raise ValueError("\n".join(problems))
        return self
