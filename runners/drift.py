"""The drift check's references and finding (runners/run_checks.py)."""

from dataclasses import asdict, dataclass
from typing import Any

from bench.sweep import PointPlan


@dataclass(frozen=True)
class DriftWindow:
    """One window of the reference point: the invocation's first or the re-measured one."""

    output_throughput: float | None
    tpot_mean_ms: float | None
    repeat: int | None = None
    order_index: int | None = None
    status: str | None = None


@dataclass(frozen=True)
class Drift:
    """What the drift check found, stored whole on the run (`runs.drift`, None fields left out)."""

    point_key: str
    label: str
    batch_size: int
    # True: re-measured on its server still up at the end; False: on a fresh start (`startup_s`, `log_path`).
    same_server: bool
    note: str
    startup_s: float | None = None
    log_path: str | None = None
    telemetry: dict[str, Any] | None = None
    first: DriftWindow | None = None
    last: DriftWindow | None = None
    output_throughput_change: float | None = None
    tpot_change: float | None = None
    error: str | None = None

    def as_json(self) -> dict[str, Any]:
        return _without_none(asdict(self))


def _without_none(d: dict[str, Any]) -> dict[str, Any]:
    return {
        k: _without_none(v) if isinstance(v, dict) and k != "telemetry" else v
        for k, v in d.items()
        if v is not None
    }


class DriftCheck:
    """The invocation's first point (`reference`), the current pair's (`pair_reference`), the `result`."""

    def __init__(self) -> None:
        self.reference: PointPlan | None = None
        self.pair_reference: PointPlan | None = None
        self.result: Drift | None = None
        # The server rows that measured each reference's first window (a chain restarts a config).
        self.rows: dict[str, int | None] = {}

    def measured(self, plan: PointPlan, server_row_id: int | None = None) -> None:
        if self.reference is None:
            self.reference = plan
            self.rows["reference"] = server_row_id
        if self.pair_reference is None:
            self.pair_reference = plan
            self.rows["pair"] = server_row_id

    def row_of(self, plan: PointPlan) -> int | None:
        """The server row that measured `plan`'s first window here (a reference), or None."""
        if plan is self.reference:
            return self.rows.get("reference")
        return self.rows.get("pair") if plan is self.pair_reference else None

    def new_pair(self) -> None:
        self.pair_reference = None
        self.rows.pop("pair", None)
