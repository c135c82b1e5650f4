"""Every dashboard page in a real browser: `specbench dashboard` on the demo database, driven by headless
Chromium, timed from navigation until the page is drawn.

    python benchmarks/page_render.py                           # builds the demo database first (a few minutes)
    python benchmarks/page_render.py --db sqlite:////tmp/demo.db --repeats 5

The demo database is what `make demo` builds: a small seeded (synthetic) nightly history, the stand-in sweep
`sweeps/demo-sim.yaml`, the bundled H200 runs (toy model, V3 slice, the grid), and the stand-in candidate
`sweeps/demo-sim-candidate.yaml`.

A page counts as open when its content is drawn (`tests/fixtures/dashboard.CONTENT_DRAWN`): Streamlit reports
the script finished, the title is on screen, no element still shows the skeleton Streamlit draws while that
element's JavaScript loads, every chart has drawn and every table on screen has its grid, and nothing on the page
has changed for a second. The time is that of the page's last change, from navigation start (the quiet second is
not counted). Each visit opens a new tab in a new browser context, so nothing is cached in the browser: it
loads and parses Streamlit's JavaScript every time. Columns, per page:

- floor: the same visit to an app with the same page config and navigation whose pages only draw their
  title, on a server started the same way: what Streamlit itself costs on this host (median).
- main-thread CPU: the browser's main-thread CPU seconds for the first visit (median over the starts), the
  figure a loaded host does not inflate: what the page costs the browser beside the floor's.
- first p50 / first max: the first visit of the page on a freshly started dashboard, over `--starts` starts
  of the server. The server renders every page once before its health check answers (`dashboard/warmup.py`),
  so this is what a user who opens the dashboard gets; target (issues 26, 37): under 1.5 s.
- tab p50 / tab max: later visits in fresh tabs.
- in-app p50 / max: a click on the sidebar link, as a user moves between pages (no page load).
- cold caches: the first visit with the warm-up turned off (`SPECBENCH_DASHBOARD_WARMUP=0`), median over the
  starts: what the first visit of a page costs after new data lands, when its data and charts are computed
  for it.
"""

from __future__ import annotations

import argparse
import contextlib
import os
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from bench.host.processes import free_port  # noqa: E402
from dashboard.navigation import PAGES as PAGE_SPECS  # noqa: E402
from dashboard.warmup import ENV as WARMUP_ENV  # noqa: E402
from runners.commands.dashboard import APP, streamlit_argv, streamlit_env  # noqa: E402
from tests.fixtures.dashboard import (  # noqa: E402
    CHROMIUM,
    stop_server,
    track_changes,
    wait_drawn,
    wait_healthy,
)

PAGES = {p.title.lower().replace(" ", "-") if p.url_path else "overview": p.url_path for p in PAGE_SPECS}
# Sidebar link and page title (h1) of each page, for in-app navigation.
NAV = {
    name: (spec.title, "specbench" if not spec.url_path else spec.title)
    for name, spec in zip(PAGES, PAGE_SPECS, strict=True)
}
TARGET_S = 1.5
FLOOR_APP = """import streamlit as st

from dashboard.navigation import PAGES

st.set_page_config(page_title="specbench", page_icon="⚡", layout="wide")
pages = [
    st.Page(p.file, title=p.title, icon=p.icon, url_path=p.url_path or None, default=not p.url_path)
    for p in PAGES
]
st.navigation(pages, position="sidebar").run()
"""


def build_demo(url: str) -> None:
    specbench = [sys.executable, "-m", "runners.cli"]
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    print("building the demo database (as `make demo`: history, stand-in sweep, H200 runs, candidate)...")
    for args in (
        ["seed", "--shape", "small", "--points", "600", "--once", "--db", url],
        ["run", "sweeps/demo-sim.yaml", "--db", url, "--no-progress"],
        ["import", "examples/h200-sglang-0.5.13.post1.db", "--db", url],
        ["import", "examples/h200-v3slice-paired.db", "--db", url],
        ["import", "examples/h200-v3slice-grid/grid.db", "--db", url],
        ["run", "sweeps/demo-sim-candidate.yaml", "--db", url, "--no-progress", "--label", "candidate"],
    ):
        subprocess.run([*specbench, *args], cwd=ROOT, env=env, check=True, stdout=subprocess.DEVNULL)


def floor_app(folder: Path) -> Path:
    """An app with the dashboard's page config and navigation whose pages only draw their title."""
    for spec in PAGE_SPECS:
        page = folder / spec.file
        page.parent.mkdir(parents=True, exist_ok=True)
        page.write_text(f"import streamlit as st\n\nst.title({spec.title!r})\n")
    app = folder / "app.py"
    app.write_text(FLOOR_APP)
    return app


@contextlib.contextmanager
def served(url: str, app: Path = APP, **env: str) -> Iterator[tuple[str, float]]:
    """The app served as `specbench dashboard` serves it (dashboard.serve, the same flags); yields its base URL
    and the seconds from start until its health check answered."""
    port = free_port()
    argv = streamlit_argv(port, "127.0.0.1", True)
    argv[argv.index(str(APP))] = str(app)
    t0 = time.perf_counter()
    proc = subprocess.Popen(
        argv,
        cwd=ROOT,
        env={**streamlit_env(url), **env},
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    try:
        wait_healthy(port, proc, timeout=180)
        yield f"http://127.0.0.1:{port}", time.perf_counter() - t0
    finally:
        stop_server(proc)


def fresh_tab_visit(browser: Any, url: str) -> tuple[float, float]:
    """Seconds until the page at `url` is drawn in a new tab of a new browser context, and the seconds of CPU
    the browser's main thread spent on it."""
    page = browser.new_page(viewport={"width": 1500, "height": 1100})
    try:
        track_changes(page)
        cdp = page.context.new_cdp_session(page)
        cdp.send("Performance.enable")
        page.goto(url, wait_until="commit")
        drawn = wait_drawn(page)
        metrics = {m["name"]: m["value"] for m in cdp.send("Performance.getMetrics")["metrics"]}
        return drawn, float(metrics.get("ThreadTime", float("nan")))
    finally:
        page.close()


def time_pages(
    base: str, repeats: int, *, in_app: bool = True
) -> tuple[dict[str, list[float]], dict[str, list[float]], dict[str, list[float]]]:
    """Per page: times of fresh-tab visits (the first one on a freshly started server), of in-app navigation,
    and the browser's main-thread CPU of each fresh-tab visit."""
    from playwright.sync_api import sync_playwright

    times: dict[str, list[float]] = {name: [] for name in PAGES}
    nav: dict[str, list[float]] = {name: [] for name in PAGES}
    cpu: dict[str, list[float]] = {name: [] for name in PAGES}
    with sync_playwright() as p:
        browser = p.chromium.launch(executable_path=CHROMIUM, args=["--no-sandbox", "--disable-gpu"])
        try:
            # The browser's own start-up (its first tab, its network service) is not the page's: one blank tab
            # first, as in a browser a user already has open.
            browser.new_page().close()
            for _ in range(repeats + 1):
                for name, path in PAGES.items():
                    drawn, thread = fresh_tab_visit(browser, f"{base}/{path}")
                    times[name].append(drawn)
                    cpu[name].append(thread)
            if not in_app:
                return times, nav, cpu
            # In-app navigation: a user clicking the sidebar, no page load (the JS bundle stays parsed).
            page = browser.new_page(viewport={"width": 1500, "height": 1100})
            track_changes(page)
            page.goto(base, wait_until="commit")
            wait_drawn(page)
            order = [*list(PAGES)[1:], "overview"]
            for _ in range(repeats):
                for name in order:
                    link, title = NAV[name]
                    clicked = float(page.evaluate("performance.now()"))
                    page.locator("[data-testid='stSidebarNav']").get_by_role("link", name=link).click()
                    page.wait_for_function(
                        "t => document.querySelector('h1') && document.querySelector('h1').innerText.trim() === t",
                        arg=title,
                        polling=20,
                        timeout=60_000,
                    )
                    nav[name].append(wait_drawn(page) - clicked / 1000)
            page.close()
        finally:
            browser.close()
    return times, nav, cpu


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--db", help="An existing demo database (default: build one in a temporary directory).")
    ap.add_argument("--repeats", type=int, default=5, help="Fresh-tab visits per page after the first one.")
    ap.add_argument(
        "--starts", type=int, default=3, help="Server starts, each timing the pages' first visits."
    )
    args = ap.parse_args()
    tmp = tempfile.TemporaryDirectory(prefix="specbench-render-")
    url = args.db or f"sqlite:///{Path(tmp.name) / 'demo.db'}"
    if not args.db:
        build_demo(url)
    load_before = os.getloadavg()[0]
    firsts: dict[str, list[float]] = {name: [] for name in PAGES}
    first_cpu: dict[str, list[float]] = {name: [] for name in PAGES}
    cold: dict[str, list[float]] = {name: [] for name in PAGES}
    starts: list[float] = []
    cold_starts: list[float] = []
    try:
        with served(url, floor_app(Path(tmp.name) / "floor")) as (base, floor_start):
            floor, _, floor_cpu = time_pages(base, args.repeats, in_app=False)
        print("  floor done", flush=True)
        for i in range(args.starts):
            last = i == args.starts - 1  # the last start also times later tabs and in-app clicks
            with served(url) as (base, start):
                times, nav, cpu = time_pages(base, args.repeats if last else 0, in_app=last)
            starts.append(start)
            with served(url, **{WARMUP_ENV: "0"}) as (base, start):
                unwarmed, _, _ = time_pages(base, 0, in_app=False)
            cold_starts.append(start)
            for name in PAGES:
                firsts[name].append(times[name][0])
                first_cpu[name].append(cpu[name][0])
                cold[name].append(unwarmed[name][0])
            print(f"  start {i + 1} of {args.starts} done", flush=True)
    finally:
        tmp.cleanup()
    med = statistics.median
    print(
        f"\npage render in Chromium (s), {os.cpu_count()} CPU(s), load avg {os.getloadavg()[0]:.1f} "
        f"(at the start: {load_before:.1f}); server start to healthy (median): {med(starts):.1f} s with the "
        f"warm-up, {med(cold_starts):.1f} s without, {floor_start:.1f} s for the floor app"
    )
    print("floor: an app whose pages only draw their title; first: a page's first visit after a start")
    print(
        f"({args.starts} starts); tab: later visits, each in a fresh tab; in-app: a click on the sidebar link;"
    )
    print("cold caches: the first visit with the warm-up off (what a visit after new data costs);")
    print("CPU: the browser's main-thread CPU seconds of the first visit (floor: of the floor app's visits)")
    head = (
        f"{'page':<12} {'floor':>6} {'first p50':>10} {'first max':>10} {'tab p50':>8} {'tab max':>8} "
        f"{'in-app p50':>11} {'in-app max':>11} {'cold caches':>12} {'CPU':>5} {'floor CPU':>9}"
    )
    print(head + f"  first under {TARGET_S:g} s")
    for name, ts in times.items():
        first, warm, moves = med(firsts[name]), ts[1:] or ts, nav[name] or [float("nan")]
        ok = "yes" if first < TARGET_S else "NO"
        print(
            f"{name:<12} {med(floor[name]):>6.2f} {first:>10.2f} {max(firsts[name]):>10.2f} {med(warm):>8.2f} "
            f"{max(warm):>8.2f} {med(moves):>11.2f} {max(moves):>11.2f} {med(cold[name]):>12.2f} "
            f"{med(first_cpu[name]):>5.2f} {med(floor_cpu[name]):>9.2f}  {ok}"
        )


if __name__ == "__main__":
    main()
