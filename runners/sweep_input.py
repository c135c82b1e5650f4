"""What commands check of their input (a sweep for `submit` and `schedule add`); a failure exits 2."""

from pathlib import Path
from typing import Any

from sqlalchemy import Engine

from bench.sweep import SweepSpec
from runners import queue
from runners.common import fail, failing
from runners.gpus import parse_requires


def sweep_requirements(sweep: Path, requires: str | None) -> dict[str, Any]:
    """The sweep file must exist and `--requires` parse; the parsed requirements."""
    if not sweep.exists():  # one that is no regular file is refused, saying so, when it is read
        fail(f"{sweep}: file not found")
    with failing(ValueError):
        return parse_requires(requires)


def interpreter_offered(engine: Engine, spec: SweepSpec) -> None:
    """`server.python` must name an interpreter some worker offers, else exit 2 (it would wait forever)."""
    name = spec.server.python
    if name is None or spec.server.backend == "external":
        return
    for problem in queue.job_problems(spec):
        fail(problem)
    offered = queue.offered_interpreters(engine)
    if name not in offered:
        known = ", ".join(sorted(offered)) or "none yet"
        fail(
            f"server.python: {name!r} is not an interpreter any worker of this database offers (offered: {known}); "
            "a worker's operator adds one with: specbench worker --python NAME=/path/to/python"
        )
