"""Dashboard at scale: seed N synthetic points into a temporary SQLite file, then time what users wait for.

    python benchmarks/dashboard_scale.py                 # 1M points (a few minutes, ~2 GB of disk)
    python benchmarks/dashboard_scale.py --points 100000 --db sqlite:////tmp/scale.db --keep

Prints: seeding rate; trend-query p50/p95 (one series' history, the Trends page's query); every page's
render time through AppTest with cold caches (script + queries + analysis + chart building, no browser);
and the time to build a 100k-row CSV (a compare table, and 100k points read from the database).
Targets (issue 3): trend query p95 < 100 ms, a page < 2 s, CSV of 100k rows < 2 s.
"""

from __future__ import annotations

import argparse
import os
import random
import statistics
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

import pandas as pd  # noqa: E402

from db import queries as q  # noqa: E402
from db.migrate import open_database  # noqa: E402
from synthetic.history.seed import seed_history  # noqa: E402

PAGES = ("pages/overview.py", "pages/trends.py", "pages/sweep.py", "pages/compare.py")


def pct(values: list[float], p: float) -> float:
    s = sorted(values)
    return s[min(len(s) - 1, round(p / 100 * (len(s) - 1)))]


def bench_trend_queries(url: str, n: int) -> list[float]:
    """What the Trends page runs for a series: its points (index walk, no join) merged with the cached run
    table (read once, as the dashboard caches it)."""
    eng = open_database(url)
    fps = q.series_catalog(eng)["fingerprint"].tolist()
    random.seed(0)
    picks = random.choices(fps, k=n)
    axes = q.run_axes(eng)
    q.series_values(eng, picks[0])  # connection and statement warm-up
    times = []
    for fp in picks:
        t0 = time.perf_counter()
        q.with_run_axes(q.series_values(eng, fp, q.FACTOR_METRICS), axes)
        times.append((time.perf_counter() - t0) * 1000)
    eng.dispose()
    return times


def bench_pages(url: str) -> dict[str, float]:
    import streamlit as st
    from streamlit.testing.v1 import AppTest

    from dashboard.services import views

    def cold() -> None:  # every query, scan and chart runs
        st.cache_data.clear()
        views.clear()

    os.environ["DATABASE_URL"] = url
    out = {}
    for page in PAGES:
        cold()
        at = AppTest.from_file(str(ROOT / "dashboard" / "app.py"), default_timeout=120)
        if page != PAGES[0]:
            at.run()  # land on the app first, as a user does; then time the page itself, cold
            cold()
            at.switch_page(page)
        t0 = time.perf_counter()
        at.run()
        out[page] = time.perf_counter() - t0
        if at.exception:
            raise RuntimeError(f"{page}: {at.exception[0].value}")
    return out


def bench_csv(url: str) -> tuple[float, float, float, int]:
    from analysis import report
    from analysis.compare import compare_runs

    eng = open_database(url)
    runs = q.run_choices(eng)
    a, b = int(runs["id"].iloc[4]), int(runs["id"].iloc[0])
    table = compare_runs(
        q.run_points(eng, a),
        q.run_samples(eng, a, ["output_throughput"]),
        q.run_points(eng, b),
        q.run_samples(eng, b, ["output_throughput"]),
    )
    big = pd.concat([table] * (100_000 // len(table) + 1), ignore_index=True).head(100_000)
    t0 = time.perf_counter()
    report.document(big, {}, {}).text("csv")
    compare_s = time.perf_counter() - t0
    # 100k points straight from the database, as `specbench export --run ... --run ...` does: the newest runs
    # until they hold 100k points, then the same collect + CSV the command runs.
    from sqlalchemy import func, select

    from analysis.export import collect, document
    from db.engine import session_scope
    from db.models import Point

    per_run = select(Point.run_id, func.count()).group_by(Point.run_id).order_by(Point.run_id.desc())
    picked: list[int] = []
    total = 0
    with eng.connect() as conn:
        for run_id, n_points in conn.execute(per_run):
            if total >= 100_000:
                break
            picked.append(int(run_id))
            total += int(n_points)
    with session_scope(eng) as s:
        t0 = time.perf_counter()
        export = collect(s, picked, all_status=True)
        query_s = time.perf_counter() - t0
        t0 = time.perf_counter()
        document(export).text("csv")
        csv_s = time.perf_counter() - t0
    n = len(export.rows)
    eng.dispose()
    return compare_s, query_s, csv_s, n


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--points", type=int, default=1_000_000)
    ap.add_argument("--db", help="SQLite URL to seed (default: a temporary file)")
    ap.add_argument("--keep", action="store_true", help="keep the database afterwards")
    ap.add_argument("--queries", type=int, default=200, help="trend queries to time")
    ap.add_argument("--no-seed", action="store_true", help="reuse --db as it is")
    args = ap.parse_args()

    tmp = None
    url = args.db
    if url is None:
        tmp = tempfile.mkdtemp(prefix="specbench-scale-")
        url = f"sqlite:///{tmp}/scale.db"
    print(f"database: {url}")
    if not args.no_seed:
        eng = open_database(url)
        t0 = time.perf_counter()
        rep = seed_history(eng, args.points, seed=0)
        eng.dispose()
        secs = time.perf_counter() - t0
        print(
            f"seeded {rep.points:,} points, {rep.samples:,} samples, {rep.runs:,} runs in {secs:.1f} s "
            f"({rep.points / secs:,.0f} points/s)"
        )

    times = bench_trend_queries(url, args.queries)
    p50, p95 = statistics.median(times), pct(times, 95)
    print(f"trend query ({args.queries} series): p50 {p50:.1f} ms, p95 {p95:.1f} ms  [target p95 < 100 ms]")

    pages = bench_pages(url)
    for page, secs in pages.items():
        print(
            f"page {page.removeprefix('pages/').removesuffix('.py'):9s} cold render {secs:.2f} s  [target < 2 s]"
        )

    compare_s, query_s, csv_s, n = bench_csv(url)
    print(f"CSV of 100,000 compare rows: {compare_s:.2f} s  [target < 2 s]")
    print(f"specbench export of {n:,} points as CSV: query {query_s:.2f} s + CSV {csv_s:.2f} s")

    if tmp and not args.keep:
        for f in Path(tmp).glob("*"):
            f.unlink()
        os.rmdir(tmp)


if __name__ == "__main__":
    main()
