"""SYNTHETIC benchmark history for load tests, demos and dashboard tests: a performance model and a row
generator. These numbers were never measured; `synthetic.history.seed` writes them, clearly marked."""

from synthetic.history.model import (
    DEFAULT_SHAPE,
    INJECTED_STEPS,
    LANES,
    RELEASES,
    SMALL_SHAPE,
    SYNTHETIC_LABEL,
    SYNTHETIC_PREFIX,
    SYNTHETIC_TRIGGER,
    Grid,
    InjectedStep,
    Lane,
    Shape,
    build_grid,
    server_config,
)

__all__ = [
    "DEFAULT_SHAPE",
    "INJECTED_STEPS",
    "LANES",
    "RELEASES",
    "SMALL_SHAPE",
    "SYNTHETIC_LABEL",
    "SYNTHETIC_PREFIX",
    "SYNTHETIC_TRIGGER",
    "Grid",
    "InjectedStep",
    "Lane",
    "Shape",
    "build_grid",
    "server_config",
]
