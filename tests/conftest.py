import gc
import os

import pytest

# One math thread per process (torch, numpy's BLAS, in this process and the ones it starts). On a 2-core box
# shared with other work, torch's OpenMP threads spin for each other: the synthetic checkpoint's CPU forward
# passes took 14x longer with two threads than with one. Set before anything imports torch; a value the caller
# set wins.
for _name in ("OMP_NUM_THREADS", "MKL_NUM_THREADS", "OPENBLAS_NUM_THREADS"):
    os.environ.setdefault(_name, "1")

pytest_plugins = ["tests.fixtures.db", "tests.fixtures.processes", "tests.fixtures.sim"]

# The CLI fits piped tables to COLUMNS when it is set (runners/tables.py). pytest-xdist's workers inherit
# COLUMNS=80 from their controller, and a CI shell may export one too; the tests that want a width set it.
os.environ.pop("COLUMNS", None)


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    """Slow and browser test files first. The parallel run hands whole files to its workers in this order, so
    the long ones start early instead of running alone at the end while the other workers idle (scripts/test.sh
    passes --no-loadscope-reorder, without which xdist orders the files by their number of tests). A file whose
    tests take more than a few seconds in all carries `pytestmark = pytest.mark.slow` for this."""
    first = {
        item.path for item in items if item.get_closest_marker("slow") or item.get_closest_marker("browser")
    }
    items.sort(key=lambda item: item.path not in first)  # stable: a file's tests keep their order


def pytest_collection_finish(session: pytest.Session) -> None:
    """Cyclic garbage collection took ~10% of an xdist worker's CPU: full passes over every object the worker
    imported, and young ones every 700 allocations, which promote whatever a test still holds at that instant.
    What collection imported (every test module, specbench, SQLAlchemy, pandas...) lives until the process
    ends, so it is frozen after one last collection and never scanned again; young collections run every 50,000
    allocations (tests allocate in bursts that mostly die young). Cycles are still collected, a little later."""
    gc.collect()
    gc.freeze()
    gc.set_threshold(50_000, 20, 20)
