"""`make demo` on a fresh clone, timed: `make setup` and `make demo-db` (everything `make demo` does before it
starts the dashboard), each with its wall time, the CPU time of everything it ran, and the host's load.

    python benchmarks/demo_build.py                    # clones this checkout's HEAD into a temporary folder
    python benchmarks/demo_build.py --venv .venv       # the clone uses this environment: times demo-db alone

The target is 90 s of wall time for `make demo` on the 2-core development host. On a shared host the wall time
follows the load (other processes take the cores), so the CPU seconds, which do not, are printed beside it.
"""

from __future__ import annotations

import argparse
import os
import resource
import sqlite3
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
TARGET_S = 90.0


def timed(args: list[str], cwd: Path) -> tuple[float, float]:
    """(wall, CPU) seconds of a command and every process it waited for."""
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    start = time.monotonic()
    subprocess.run(args, cwd=cwd, check=True, stdout=subprocess.DEVNULL)
    wall = time.monotonic() - start
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    return wall, (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)


def kinds(db: Path) -> str:
    """Runs of each kind the demo database holds (every page needs some of each)."""
    with sqlite3.connect(db) as c:
        rows = c.execute(
            "SELECT CASE WHEN trigger = 'synthetic' THEN 'synthetic' WHEN simulated THEN 'simulated' "
            "ELSE 'measured' END AS kind, count(*) FROM runs GROUP BY kind ORDER BY kind"
        ).fetchall()
    return ", ".join(f"{n} {k}" for k, n in rows)


def main() -> int:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--venv", type=Path, help="an environment the clone links as .venv (skips its setup)")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory(prefix="specbench-demo-") as tmp:
        clone = Path(tmp) / "specbench"
        subprocess.run(["git", "clone", "-q", str(ROOT), str(clone)], check=True)
        keep = []
        if args.venv is not None:
            (clone / ".venv").symlink_to(args.venv.resolve())
            keep = ["-o", ".venv/.installed"]  # that environment is not set up again
        print(f"fresh clone of {ROOT} at {clone}; load average before: {os.getloadavg()[0]:.1f}")
        total = 0.0
        for target in ("setup", "demo-db") if args.venv is None else ("demo-db",):
            wall, cpu = timed(["make", "-s", *keep, target], clone)
            total += wall
            print(f"make {target}: {wall:.1f} s wall, {cpu:.1f} s CPU, load average {os.getloadavg()[0]:.1f}")
        met = "yes" if total < TARGET_S else "NO"
        print(f"make demo up to the dashboard: {total:.1f} s wall (under {TARGET_S:.0f} s: {met})")
        print(f"demo database: {kinds(clone / 'specbench.db')} run(s)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
