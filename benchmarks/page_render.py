"""Every dashboard page in a real browser: `specbench dashboard` on the demo database, driven by headless
Chromium, timed from navigation until the page is drawn.

    python benchmarks/page_render.py                           # builds the demo database first (a few minutes)
    python benchmarks/page_render.py --db sqlite:////tmp/demo.db --repeats 5

The demo database is what `make demo` builds: the stand-in sweep `sweeps/demo-sim.yaml`, the bundled H200
runs, and the stand-in candidate `sweeps/demo-sim-candidate.yaml`. "Drawn" means: Streamlit reports the script finished (`stApp[data-test-script-state=notRunning]`),
the page title is on screen, and every chart has its canvas or SVG. The first visit of each page runs on
cold caches (a fresh server); the later visits reload the page in a fresh browser tab (warm server caches,
as a user clicking around sees them). Prints a table of cold and warm times (median and max) per page.
Target (issue 12): every page under 2 s.
"""

from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import sys
import tempfile
import time
import urllib.request
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from bench.launcher import free_port  # noqa: E402

CHROMIUM = "/usr/bin/chromium"
PAGES = {"overview": "", "trends": "trends", "sweep": "sweep", "compare": "compare", "jobs": "jobs"}
TARGET_S = 2.0
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
    print("building the demo database (as `make demo`: stand-in sweep, H200 runs, stand-in candidate)...")
    for args in (
        ["run", "sweeps/demo-sim.yaml", "--db", url, "--no-progress"],
        ["import", "examples/h200-sglang-0.5.13.post1.db", "--db", url],
        ["run", "sweeps/demo-sim-candidate.yaml", "--db", url, "--no-progress", "--label", "candidate"],
    ):
        subprocess.run([*specbench, *args], cwd=ROOT, env=env, check=True, stdout=subprocess.DEVNULL)


def wait_healthy(port: int, proc: subprocess.Popen[bytes], timeout: float = 60.0) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            raise RuntimeError(f"specbench dashboard exited with {proc.returncode}")
        try:
            with urllib.request.urlopen(f"http://127.0.0.1:{port}/_stcore/health", timeout=1) as r:
                if r.status == 200:
                    return
        except OSError:
            time.sleep(0.3)
    raise TimeoutError("the dashboard did not become healthy")


def time_pages(base: str, repeats: int) -> dict[str, list[float]]:
    from playwright.sync_api import sync_playwright

    times: dict[str, list[float]] = {name: [] for name in PAGES}
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
        finally:
            browser.close()
    return times


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--db", help="An existing demo database (default: build one in a temporary directory).")
    ap.add_argument("--repeats", type=int, default=5, help="Warm visits per page after the cold one.")
    args = ap.parse_args()
    tmp = tempfile.TemporaryDirectory(prefix="specbench-render-")
    url = args.db or f"sqlite:///{Path(tmp.name) / 'demo.db'}"
    if not args.db:
        build_demo(url)
    port = free_port()
    cmd = [sys.executable, "-m", "runners.cli", "dashboard", "--db", url, "--port", str(port), "--headless"]
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    proc = subprocess.Popen(cmd, cwd=ROOT, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        wait_healthy(port, proc)
        times = time_pages(f"http://127.0.0.1:{port}", args.repeats)
    finally:
        proc.terminate()
        proc.wait(timeout=15)
        tmp.cleanup()
    print(f"\npage render in Chromium (s), {os.cpu_count()} CPU(s), load avg {os.getloadavg()[0]:.1f}")
    print(f"{'page':<10} {'cold':>6} {'warm p50':>9} {'warm max':>9}  under {TARGET_S:g} s")
    worst = 0.0
    for name, ts in times.items():
        cold, warm = ts[0], ts[1:] or ts
        worst = max(worst, cold, max(warm))
        ok = "yes" if max(cold, max(warm)) < TARGET_S else "NO"
        print(f"{name:<10} {cold:>6.2f} {statistics.median(warm):>9.2f} {max(warm):>9.2f}  {ok}")
    print(f"slowest visit: {worst:.2f} s")


if __name__ == "__main__":
    main()
