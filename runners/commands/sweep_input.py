"""What `submit` and `schedule add` both check in a sweep given on the command line, each failure as exit 2."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from bench.sweep import SweepError
from runners.common import fail
from runners.gpus import parse_requires


def sweep_requirements(sweep: Path, requires: str | None) -> dict[str, Any]:
    """The sweep file must exist and `--requires` parse; the parsed requirements."""
    if not sweep.is_file():
        fail(f"{sweep}: file not found")
    try:
        return parse_requires(requires)
    except ValueError as e:
        fail(str(e))


@contextmanager
def sweep_problems_fail() -> Iterator[None]:
    """An invalid sweep (read or validated inside the block) ends the command with every problem listed."""
    try:
        yield
    except SweepError as e:
        fail(str(e))
