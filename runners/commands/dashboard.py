"""`specbench dashboard`: migrate the database, then serve the Streamlit app on it."""

import os
import subprocess
import sys
from pathlib import Path
from typing import Annotated

import typer

from db.engine import URL_ENV, DatabaseMissingError, make_readonly_engine, redact
from db.migrate import schema_revisions
from runners.common import DbOption, db_url, err_console, open_db

APP = Path(__file__).resolve().parents[2] / "dashboard" / "app.py"
_OPEN_WHEN_READY = """
import sys, time, urllib.request, webbrowser
url = sys.argv[1]
for _ in range(120):
    try:
        urllib.request.urlopen(url + "/_stcore/health", timeout=1)
        webbrowser.open(url)
        break
    except Exception:
        time.sleep(0.5)
"""


def spawn_detached(argv: list[str]) -> None:
    """Start `argv` as a grandchild adopted by init: Streamlit, which this process becomes, reaps no child."""
    pid = os.fork()
    if pid == 0:  # the intermediate child
        try:
            os.setsid()
            subprocess.Popen(
                argv, stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL
            )
        finally:
            os._exit(0)
    os.waitpid(pid, 0)


def streamlit_argv(port: int, address: str, headless: bool) -> list[str]:
    """`streamlit run dashboard/app.py` through `dashboard.serve`, as an argv list (never a shell string)."""
    return [
        *(sys.executable, "-m", "dashboard.serve", "run", str(APP)),
        *("--server.port", str(port), "--server.address", address),
        *("--server.headless", "true" if headless else "false", "--browser.gatherUsageStats", "false"),
        *("--server.fileWatcherType", "none", "--client.toolbarMode", "viewer"),
        # A forced full collection after every page run cost 0.1 s of a page on a loaded host.
        *("--runner.postScriptGC", "false"),
    ]


def streamlit_env(url: str) -> dict[str, str]:
    env = dict(os.environ)
    env[URL_ENV] = url  # the app reads it like every other command (db.engine.resolve_url)
    # The app imports `dashboard`, `db` and `bench`; make them importable without an installed package.
    root = str(APP.parents[1])
    env["PYTHONPATH"] = os.pathsep.join(p for p in (root, env.get("PYTHONPATH", "")) if p)
    return env


def _readable_as_is(url: str) -> bool:
    """True when the database exists at this schema, so serving it writes nothing."""
    try:
        engine = make_readonly_engine(url)
    except DatabaseMissingError:
        return False
    try:
        current, head = schema_revisions(engine, url)
    except Exception:  # unreadable here: let open_db report it
        return False
    finally:
        engine.dispose()
    return current == head


def dashboard(
    db: DbOption = None,
    port: Annotated[int, typer.Option("--port", min=1, max=65_535, help="Port to serve on.")] = 8501,
    address: Annotated[
        str, typer.Option("--address", help="Interface to bind; 0.0.0.0 to share.")
    ] = "127.0.0.1",
    headless: Annotated[
        bool,
        typer.Option(
            "--headless/--open-browser",
            help="Serve only (default), or also open the page in the local browser once it answers.",
        ),
    ] = True,
) -> None:
    """Serve the dashboard: trends, sweeps, run comparisons and regressions of the database."""
    url = db_url(db)
    if not _readable_as_is(url):
        # Create or migrate first: an empty database shows the empty state, not an error.
        open_db(db).dispose()
    # Always headless: else Streamlit's first run stops at an e-mail prompt. We open the browser.
    argv = streamlit_argv(port, address, headless=True)
    if not headless:
        page = f"http://{'127.0.0.1' if address == '0.0.0.0' else address}:{port}"
        spawn_detached([sys.executable, "-c", _OPEN_WHEN_READY, page])
    err_console.print(f"dashboard on http://{address}:{port} reading {redact(url)}")
    sys.stdout.flush()
    # Replace this process: Ctrl-C and the caller's SIGTERM reach Streamlit directly, with no orphan left.
    os.execve(argv[0], argv, streamlit_env(url))
