"""Every dashboard page in a real browser: `specbench dashboard` on the demo database, driven by headless
Chromium, timed from navigation until the page is drawn.

    python benchmarks/page_render.py                           # builds the demo database first (a few minutes)
    python benchmarks/page_render.py --db sqlite:////tmp/demo.db --repeats 5

The demo database is what `make demo` builds: a small seeded (synthetic) nightly history, the stand-in sweep
`sweeps/demo-sim.yaml`, the bundled H200 runs (toy model, V3 slice, the grid), and the stand-in candidate
`sweeps/demo-sim-candidate.yaml`. "Drawn" means: Streamlit reports the script finished (`stApp[data-test-script-state=notRunning]`),
the page title is on screen, and every chart has its canvas or SVG. The first visit of each page runs on
cold caches (a fresh server); the later visits load the page in a fresh browser tab (warm server caches).
Then each page is reached by clicking its sidebar link, as a user moving between pages does (no page load).
Prints cold, fresh-tab and in-app times (median and max) per page.
Target (issue 26): every page under 1.5 s cold in a fresh tab.
"""

from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from tests.fixtures.dashboard import CHROMIUM, served_dashboard  # noqa: E402

PAGES = {
    "overview": "",
    "trends": "trends",
    "sweep": "sweep",
    "profiles": "profiles",
    "compare": "compare",
    "jobs": "jobs",
}
# Sidebar link and page title (h1) of each page, for in-app navigation.
NAV = {
    "overview": ("Overview", "specbench"),
    "trends": ("Trends", "Trends"),
    "sweep": ("Sweep", "Sweep"),
    "profiles": ("Profiles", "Profiles"),
    "compare": ("Compare", "Compare"),
    "jobs": ("Jobs", "Jobs"),
}
TARGET_S = 1.5
DRAWN = """() => {
  const app = document.querySelector("[data-testid='stApp']");
  if (!app || app.getAttribute("data-test-script-state") !== "notRunning") return false;
  if (!document.querySelector("h1")) return false;
  const charts = [...document.querySelectorAll("[data-testid='stVegaLiteChart']")];
  return charts.every(c => c.querySelector("canvas, svg"));
}"""


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


def time_pages(base: str, repeats: int) -> tuple[dict[str, list[float]], dict[str, list[float]]]:
    """Per page: times of fresh-tab visits (the first one cold) and of in-app navigation."""
    from playwright.sync_api import sync_playwright

    times: dict[str, list[float]] = {name: [] for name in PAGES}
    nav: dict[str, list[float]] = {name: [] for name in PAGES}
    with sync_playwright() as p:
        browser = p.chromium.launch(executable_path=CHROMIUM, args=["--no-sandbox", "--disable-gpu"])
        try:
            for visit in range(repeats + 1):
                for name, path in PAGES.items():
                    page = browser.new_page(viewport={"width": 1500, "height": 1100})
                    t0 = time.perf_counter()
                    page.goto(f"{base}/{path}", wait_until="commit")
                    page.wait_for_function(DRAWN, polling=20, timeout=60_000)
                    times[name].append(time.perf_counter() - t0)
                    page.close()
                if visit == 0:
                    print("  cold visits done", flush=True)
            # In-app navigation: a user clicking the sidebar, no page load (the JS bundle stays parsed).
            page = browser.new_page(viewport={"width": 1500, "height": 1100})
            page.goto(base, wait_until="commit")
            page.wait_for_function(DRAWN, polling=20, timeout=60_000)
            order = [*list(PAGES)[1:], "overview"]
            for _ in range(repeats):
                for name in order:
                    link, title = NAV[name]
                    t0 = time.perf_counter()
                    page.locator("[data-testid='stSidebarNav']").get_by_role("link", name=link).click()
                    page.wait_for_function(
                        "t => document.querySelector('h1') && document.querySelector('h1').innerText.trim() === t",
                        arg=title,
                        polling=20,
                        timeout=60_000,
                    )
                    page.wait_for_function(DRAWN, polling=20, timeout=60_000)
                    nav[name].append(time.perf_counter() - t0)
            page.close()
        finally:
            browser.close()
    return times, nav


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--db", help="An existing demo database (default: build one in a temporary directory).")
    ap.add_argument("--repeats", type=int, default=5, help="Warm visits per page after the cold one.")
    args = ap.parse_args()
    tmp = tempfile.TemporaryDirectory(prefix="specbench-render-")
    url = args.db or f"sqlite:///{Path(tmp.name) / 'demo.db'}"
    if not args.db:
        build_demo(url)
    load_before = os.getloadavg()[0]
    try:
        with served_dashboard(url) as base:
            times, nav = time_pages(base, args.repeats)
    finally:
        tmp.cleanup()
    print(
        f"\npage render in Chromium (s), {os.cpu_count()} CPU(s), load avg {os.getloadavg()[0]:.1f} "
        f"(at the start: {load_before:.1f})"
    )
    print("fresh tab: a new tab loads the page (the first visit on cold server caches);")
    print("in-app: a click on the sidebar link, as a user moves between pages")
    head = f"{'page':<10} {'cold':>6} {'tab p50':>8} {'tab max':>8} {'in-app p50':>11} {'in-app max':>11}"
    print(head + f"  cold under {TARGET_S:g} s")
    for name, ts in times.items():
        cold, warm, moves = ts[0], ts[1:] or ts, nav[name] or [float("nan")]
        ok = "yes" if cold < TARGET_S else "NO"
        print(
            f"{name:<10} {cold:>6.2f} {statistics.median(warm):>8.2f} {max(warm):>8.2f} "
            f"{statistics.median(moves):>11.2f} {max(moves):>11.2f}  {ok}"
        )


if __name__ == "__main__":
    main()
