"""Hostile names on every page, in a real browser (issue 30 §6): no request leaves the page, and no element is
created from a name.

The database (tests/hostile.py) holds two measured stand-in runs, seeded history with flagged changes, a job,
a worker, a schedule, triage notes and a v1/v2 pair of profiles, and then every free-text field (model, sweep
name, label, host, GPU, versions, error reasons, log tails, triage notes, profile paths and warnings) is
overwritten with Markdown images and links, bare URLs, an e-mail address, HTML, Streamlit's colour, icon and
math markup, and terminal control sequences. `specbench dashboard` serves it; headless Chromium (Debian's, via
Playwright) opens each page and a few hostile links, with every request to another host than the app's
intercepted and counted. The pages' CSV downloads are checked for formula cells (analysis.render).
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from urllib.parse import quote, urlsplit

import pytest

from db.migrate import open_database
from tests.fixtures.dashboard import CHROMIUM, CHROMIUM_ARGS, require_browser, served_dashboard
from tests.hostile import EVIL_HOST, HOSTILE, flagged, formula_cells, hostile_database

pytestmark = [pytest.mark.browser, pytest.mark.timeout(900)]

# Each page, and links that carry hostile text themselves (a series, a run or a pair nobody stored).
PAGES = [
    "",
    "trends",
    "sweep",
    "profiles",
    "compare",
    "jobs",
    "sweep?run=2",
    "compare?a=1&b=2",
    f"trends?fp={quote(HOSTILE[:200])}&metric=output_throughput",
    "sweep?run=2147483648",
    f"compare?a={quote('![i](http://' + EVIL_HOST + '/q.png)')}&b=1",
]
# Elements a hostile name could become, in the app's DOM: images and links to the hostile host, math, and the
# icon, colour and emphasis the names spell.
CREATED = {
    "image": f"img[src*='{EVIL_HOST}']",
    "link": f"a[href*='{EVIL_HOST}']",
    "any source": f"[src*='{EVIL_HOST}'], [href*='{EVIL_HOST}'], [srcset*='{EVIL_HOST}']",
    "math": ".katex",
    "icon from a name": "[aria-label='home icon']",
    "coloured text": ".stMarkdownColoredText",
    "e-mail link": "a[href^='mailto:']",
}


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory, measured_runs: Path) -> Iterator[tuple[str, list[str]]]:
    require_browser()
    url = hostile_database(measured_runs, tmp_path_factory.mktemp("hostile"), history=True)
    engine = open_database(url)
    series = [fp for fp, _ in flagged(engine)][:1]  # a series with a flagged change, a triage form and a note
    engine.dispose()
    assert series
    with served_dashboard(url) as base:
        yield base, [f"trends?fp={fp}&metric=output_throughput" for fp in series]


def test_hostile_names_make_no_request_and_no_element(server: tuple[str, list[str]], tmp_path: Path) -> None:
    from playwright.sync_api import Route, sync_playwright

    base, flagged_series = server
    app_host = urlsplit(base).netloc
    left: list[str] = []

    def guard(route: Route) -> None:
        if urlsplit(route.request.url).netloc == app_host or route.request.url.startswith(("data:", "blob:")):
            route.continue_()
        else:  # counted, and never sent
            left.append(route.request.url)
            route.abort()

    shown_as_text: dict[str, bool] = {}
    created: dict[str, dict[str, int]] = {}
    with sync_playwright() as p:
        browser = p.chromium.launch(executable_path=CHROMIUM, args=CHROMIUM_ARGS)
        try:
            context = browser.new_context(viewport={"width": 1500, "height": 1300}, accept_downloads=True)
            context.route("**/*", guard)
            page = context.new_page()
            page.set_default_timeout(60_000)
            for path in [*PAGES, *flagged_series]:
                page.goto(f"{base}/{path}")
                page.wait_for_selector("h1")
                # Rendered once the script has finished: Streamlit's status widget goes away.
                page.wait_for_selector("[data-testid='stStatusWidget']", state="detached")
                page.wait_for_timeout(1500)  # images, icons and fonts the page asked for are requested by now
                assert page.get_by_test_id("stException").count() == 0, path
                created[path] = {k: page.locator(sel).count() for k, sel in CREATED.items()}
                text = page.locator("[data-testid='stMain']").inner_text().replace("\u2060", "")
                shown_as_text[path] = f"![i](http://{EVIL_HOST}/t.png)" in text or "=HYPERLINK(" in text
            # The pages' own CSV downloads: no formula cell from a stored name.
            downloads: dict[str, str] = {}
            for path, button in (
                ("sweep?run=2", "Download run CSV"),
                (flagged_series[0], "Download series CSV"),
                ("compare?a=1&b=2", "Download CSV"),
            ):
                page.goto(f"{base}/{path}")
                page.wait_for_selector("h1")  # the script has started: else the widget below is not there yet
                page.wait_for_selector("[data-testid='stStatusWidget']", state="detached")
                if button != "Download CSV":  # the table and its button sit in the page's last expander
                    page.get_by_test_id("stExpander").filter(has_text="oints of").click()
                    # A lazy expander: opening it reruns the page, which draws the button. A click before that
                    # rerun finishes can land on a button the rerun then replaces, and no download follows.
                    page.get_by_role("button", name=button).wait_for(state="visible")
                    page.wait_for_selector("[data-testid='stStatusWidget']", state="detached")
                with page.expect_download() as info:
                    page.get_by_role("button", name=button).click()
                target = tmp_path / f"{len(downloads)}.csv"
                info.value.save_as(target)
                downloads[path] = target.read_text()
        finally:
            browser.close()
    assert left == [], left
    made = {
        path: {k: n for k, n in counts.items() if n}
        for path, counts in created.items()
        if any(counts.values())
    }
    assert made == {}, made
    # The names are on the pages, as the characters they hold.
    assert sum(shown_as_text.values()) >= 4, shown_as_text
    for path, text in downloads.items():
        assert formula_cells(text) == [], (path, formula_cells(text)[:3])
    assert any("'=HYPERLINK(" in text for text in downloads.values())
