"""SYNTHETIC benchmark history (never measured): a performance model and a row generator."""

from synthetic.history.model import (
    DEFAULT_SHAPE,
    INJECTED_STEPS,
    SMALL_SHAPE,
    SYNTHETIC_LABEL,
    SYNTHETIC_PREFIX,
    SYNTHETIC_TRIGGER,
)
