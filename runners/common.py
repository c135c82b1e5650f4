"""What every verb shares: the --db option and friendly failure on bad input."""

import contextlib
import re
from collections.abc import Iterator
from datetime import timedelta
from pathlib import Path
from typing import Annotated, NoReturn

import typer
from rich.console import Console
from rich.markup import escape
from sqlalchemy import Engine
from sqlalchemy.engine import make_url

from bench.host.cpu_affinity import AffinityError, check_allowed, parse_cpu_list, pinned_runner
from bench.server.env import withhold
from db import models
from db.engine import (
    DEFAULT_URL,
    ENV_PREFIX,
    DatabaseMissingError,
    DatabaseURLError,
    redact,
    resolve_url,
    scrub,
    url_secrets,
)
from db.migrate import SchemaBehindError, open_database, open_database_readonly
from runners import host_recovery
from runners.recovery import OutagePolicy
from runners.terminal import guard

# Everything either prints has its control characters escaped (runners/terminal.py): stored names reach them.
console = guard(Console())
err_console = guard(Console(stderr=True))
# Logs and pipes have no width: Rich's default of 80 columns would fold every long line there.
for _c in (console, err_console):
    _c.soft_wrap = not _c.is_terminal

DbOption = Annotated[
    str | None,
    typer.Option(
        "--db",
        help=(
            "Database: a SQLite URL/file (sqlite:///PATH), or env:NAME to read a URL from the environment "
            f"variable NAME (keeps passwords out of argv). Default: $DATABASE_URL, else {DEFAULT_URL}"
        ),
        show_default=False,
    ),
]
# What `compare` and `ci` judge a change by (their defaults come from analysis.stats.compare).
ThresholdOption = Annotated[
    float, typer.Option(help="Smallest relative change flagged (0.05 = 5%).", min=0.0, max=100.0)
]
ConfidenceOption = Annotated[float, typer.Option(help="Interval confidence.", min=0.5, max=0.999)]
MAX_ID = models.MAX_ID
MAX_PRIORITY = 1_000_000


def db_url(url: str | None) -> str:
    """The resolved URL of `--db`, or a clear message and exit 2 (bad URL, unset env:NAME, a password in argv)."""
    if url and url.startswith(ENV_PREFIX):
        withhold(url.removeprefix(ENV_PREFIX))  # that variable now holds our database: no server ever gets it
    try:
        resolved = resolve_url(url)
    except DatabaseURLError as e:
        fail(str(e))
    if make_url(resolved).database in (None, "", ":memory:") and resolved.startswith("sqlite"):
        # Each connection would get its own empty database, gone when the command ends.
        fail(f"--db {redact(resolved)}: an in-memory SQLite database keeps nothing; give a file")
    secrets = url_secrets(resolved) if url and not url.startswith(ENV_PREFIX) else []
    if secrets:
        fail(
            f"--db {redact(resolved)}: a secret ({', '.join(secrets)}) on the command line is visible to every "
            "user of this host (ps, shell history); put the URL in an environment variable and pass --db "
            "env:NAME, or set DATABASE_URL"
        )
    return resolved


# The longest wait any option may ask for: more is a typo, and `inf` would overflow the timers.
MAX_WAIT_S = 7 * 86_400.0
OutageOption = Annotated[
    float | None,
    typer.Option(
        "--db-outage-limit-s",
        min=0.0,
        max=MAX_WAIT_S,
        help="How long to wait out an unreachable (or, on SQLite, locked) database before giving up. "
        "Default: $SPECBENCH_DB_OUTAGE_LIMIT_S, else 900.",
        show_default=False,
    ),
]


# The host's decisions (bench/host/policy.py): off unless given, whatever a sweep says (issue 35 §1).
TrustRemoteCodeOption = Annotated[
    bool,
    typer.Option(
        "--trust-remote-code",
        help="Let SGLang run Python a checkpoint ships (passes --trust-remote-code to every server). Off: a "
        "sweep cannot ask for it.",
    ),
]
HubDownloadsOption = Annotated[
    bool,
    typer.Option(
        "--allow-hub-downloads",
        help="Let servers download from the Hugging Face hub (passes the host's HF_HUB_OFFLINE and HF_TOKEN). "
        "Off: servers run with HF_HUB_OFFLINE=1 and TRANSFORMERS_OFFLINE=1, from the host's cache.",
    ),
]


# A host setting like --gpus, not the sweep's: it pins the runner (the client), not a server.
ClientCpusOption = Annotated[
    str | None,
    typer.Option(
        "--client-cpus",
        help="Pin this process (the benchmark client, every thread) to these CPUs, e.g. 8-15 or 2,3; the "
        "previous CPUs come back when it ends. Keep them apart from the sweep's server.cpu_affinity "
        "(docs/guide/gpu-hosts.md).",
        show_default=False,
    ),
]


def client_cpus(text: str | None) -> tuple[int, ...] | None:
    """`--client-cpus` as CPU numbers this host has, or a clear message and exit 2."""
    if text is None:
        return None
    try:
        cpus = parse_cpu_list(text)
    except ValueError as e:
        fail(f"--client-cpus {text[:40]!r}: {e}")
    try:
        check_allowed(cpus, "--client-cpus")
    except AffinityError as e:
        fail(str(e))
    return cpus


def pinned_client(cpus: tuple[int, ...] | None) -> contextlib.AbstractContextManager[object]:
    """The runner pinned to `cpus` (from `client_cpus`) while the block runs; nothing when None."""
    return contextlib.nullcontext() if cpus is None else pinned_runner(cpus)


def open_db(url: str | None, *, ride_out_outage: OutagePolicy | None = None) -> Engine:
    """The migrated database with dead processes' runs closed, or exit 2 when it cannot be reached.

    `ride_out_outage`: a long-lived process (worker, scheduler) waits out a database that is down at start.
    """
    resolved = db_url(url)
    try:
        if ride_out_outage is not None:
            from runners.dbretry import retry

            engine = retry(
                lambda: open_database(resolved), what="opening the database", policy=ride_out_outage
            )
        else:
            engine = open_database(resolved)
    except Exception as e:  # driver errors vary by backend; the user needs the URL and the cause
        fail(f"cannot open database {redact(resolved)}: {type(e).__name__}: {scrub(str(e), resolved)}")
    try:
        notes = host_recovery.close_dead_owners(engine)
    except Exception as e:  # a best effort: the command itself must not fail for it (the next one retries)
        notes = [
            f"could not check for runs left by dead processes: {type(e).__name__}: {scrub(str(e), resolved)}"
        ]
    for note in notes:
        err_console.print(f"note: {escape(note)}", style="yellow")
    return _closed_with_the_verb(engine)


def open_db_readonly(url: str | None) -> Engine:
    """The database for a verb that only reads, never migrated or created in place; exit 2 when unreadable."""
    resolved = db_url(url)
    try:
        engine, note = open_database_readonly(resolved)
    except DatabaseMissingError as e:
        fail(f"{e} (nothing stored there yet; `specbench run` or `specbench import` creates it)")
    except SchemaBehindError as e:
        fail(f"{redact(resolved)}: {e}")
    except Exception as e:  # driver errors vary by backend; the user needs the URL and the cause
        fail(f"cannot open database {redact(resolved)}: {type(e).__name__}: {scrub(str(e), resolved)}")
    if note:
        err_console.print(f"note: {escape(note)}")
    return _closed_with_the_verb(engine)


# The engines this verb opened, closed when it ends (runners.cli): left to the garbage collector, a PostgreSQL
# connection outlives the verb (psycopg warns) and the server logs an unexpected EOF for each.
_VERB_ENGINES: list[Engine] = []


def _closed_with_the_verb(engine: Engine) -> Engine:
    _VERB_ENGINES.append(engine)
    return engine


def close_verb_engines() -> None:
    while _VERB_ENGINES:
        _VERB_ENGINES.pop().dispose()


def write_output(path: Path, text: str) -> None:
    """Write a verb's `--output` file, or a clear message and exit 2 (missing directory, permissions)."""
    try:
        path.write_text(text)
    except OSError as e:
        fail(f"cannot write {path}: {e.strerror or e}")


def check_text(option: str, value: str | None, max_length: int) -> str | None:
    """Stored or matched text: one printable line within `max_length` (its column's width), else exit 2."""
    if value is not None and (not value.strip() or not value.isprintable() or len(value) > max_length):
        fail(f"{option} {value[:40]!r}: one line of printable text, at most {max_length} characters")
    return value


def check_label(label: str | None) -> str | None:
    """A run or job label: one printable line of at most 200 characters (shown in tables and PR text)."""
    return check_text("--label", label, 200)


def fail(message: str, code: int = 2) -> NoReturn:
    # The message quotes user input (sweep values, URLs): printed as text, never as rich markup.
    err_console.print(f"[bold red]error:[/] {escape(message)}")
    raise typer.Exit(code)


@contextlib.contextmanager
def failing(*errors: type[Exception]) -> Iterator[None]:
    """One of `errors` raised in the block ends the command with its message (a SweepError: each problem)."""
    try:
        yield
    except errors as e:
        fail(str(e))


RUN_REF_HELP = "id, uid (or 6+ of its first characters), `latest` or `latest~N` (N runs before the latest)"


def resolve_run_ref(engine: Engine, ref: str) -> int:
    """The run id a user means (see `db.queries.resolve_run`), or a clear message and exit 2."""
    from db import queries as q  # pandas: only for the verbs that name a run, not at start-up

    try:
        return q.resolve_run(engine, ref)
    except q.QueryError as e:
        fail(str(e))


_SPAN = re.compile(r"^([0-9]{1,7})\s*([hdw])$")
# Ten years: older than any history, and `now - span` stays a date.
MAX_SPAN = timedelta(days=3653)


def parse_span(text: str, option: str = "--since") -> timedelta:
    """`30d`, `12h`, `2w` -> a timedelta, at most MAX_SPAN."""
    m = _SPAN.match(text.strip().lower())
    if not m:
        raise ValueError(f"{option} {text[:40]!r}: expected a span like 30d, 12h or 2w")
    n, unit = int(m.group(1)), m.group(2)
    span = {"h": timedelta(hours=n), "d": timedelta(days=n), "w": timedelta(weeks=n)}[unit]
    if span > MAX_SPAN:
        raise ValueError(
            f"{option} {text[:40]!r}: at most {MAX_SPAN.days} days (ten years), e.g. 3650d or 520w"
        )
    return span
