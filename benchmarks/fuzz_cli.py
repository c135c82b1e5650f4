"""The CLI fuzz corpus (tests/fuzz_cli.py) on SQLite and on PostgreSQL, with its figures for
docs/reference/reliability.md.

    python -m benchmarks.fuzz_cli                    # SQLite, and PostgreSQL when SPECBENCH_TEST_PG_URL is set
    python -m benchmarks.fuzz_cli --backend sqlite --show 50

Each backend gets a fresh hostile database (two stand-in runs, every free-text field hostile) and an empty
one; PostgreSQL gets fresh schemas on the throwaway server the tests use (scripts/pg_test_server.sh). Prints
one line per backend (cases, tracebacks, hangs, raw control characters, seconds) and the failing cases.
"""

from __future__ import annotations

import argparse
import os
import tempfile
import time
from pathlib import Path

from benchmarks.chaos_audit import fresh_schema
from tests.fuzz_cli import Report, Targets, build_corpus, run_corpus
from tests.hostile import hostile_database


def run_backend(backend: str, work: Path, timeout_s: float) -> tuple[Report, float]:
    """The corpus on one backend; returns the report and the seconds spent preparing its databases."""
    started = time.monotonic()
    cleanups = []
    if backend == "postgres":
        base = os.environ.get("SPECBENCH_TEST_PG_URL")
        if not base:
            raise SystemExit("SPECBENCH_TEST_PG_URL is not set (scripts/pg_test_server.sh prints one)")
        db, drop_db = fresh_schema(base)
        empty, drop_empty = fresh_schema(base)
        cleanups += [drop_db, drop_empty]
    else:
        db, empty = f"sqlite:///{work / 'hostile.db'}", f"sqlite:///{work / 'empty.db'}"
    try:
        hostile_database(work / "runs", db)
        corpus = build_corpus(Targets(db=db, empty=empty, work=work / "corpus"))
        prepared = time.monotonic() - started
        return run_corpus(corpus, work / "corpus", timeout_s=timeout_s), prepared
    finally:
        for cleanup in cleanups:
            cleanup()


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--backend", choices=["sqlite", "postgres", "both"], default="both")
    p.add_argument("--timeout-s", type=float, default=60.0, help="Per case; past it the case is a hang.")
    p.add_argument("--show", type=int, default=20, help="Failing cases to print per backend.")
    args = p.parse_args(argv)
    backends = ["sqlite", "postgres"] if args.backend == "both" else [args.backend]
    if args.backend == "both" and not os.environ.get("SPECBENCH_TEST_PG_URL"):
        backends = ["sqlite"]
    failed = False
    print(
        "| backend | cases | tracebacks | hangs | raw control characters | seconds (corpus) | seconds (setup) |"
    )
    print("|---|---:|---:|---:|---:|---:|---:|")
    reports = {}
    for backend in backends:
        with tempfile.TemporaryDirectory(prefix=f"fuzz-{backend}-") as tmp:
            report, prepared = run_backend(backend, Path(tmp), args.timeout_s)
        reports[backend] = report
        print(
            f"| {backend} | {len(report.outcomes)} | {len(report.tracebacks)} | {len(report.hangs)} | "
            f"{len(report.raw_control)} | {report.seconds:.0f} | {prepared:.0f} |"
        )
        failed |= bool(report.failures())
    for backend, report in reports.items():
        print(f"\n{backend}: {report.summary()}")
        spent: dict[str, float] = {}
        for o in report.outcomes:
            spent[o.case.family] = spent.get(o.case.family, 0.0) + o.seconds
        print(
            "families (cases, seconds): "
            + ", ".join(f"{k} {n} ({spent[k]:.0f} s)" for k, n in sorted(report.families().items()))
        )
        slowest = sorted(report.outcomes, key=lambda o: -o.seconds)[:3]
        print("slowest: " + "; ".join(f"{' '.join(o.case.argv[:3])} {o.seconds:.1f} s" for o in slowest))
        for line in report.failures()[: args.show]:
            print("  " + line)
    return 1 if failed else 0


if __name__ == "__main__":
    raise SystemExit(main())
