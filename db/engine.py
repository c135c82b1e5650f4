"""Engine and sessions from one URL: `--db`, else DATABASE_URL, else a SQLite file in the working dir."""

import functools
import os
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any
from urllib.parse import quote, quote_plus

from sqlalchemy import Engine, create_engine, event
from sqlalchemy.engine import URL, make_url
from sqlalchemy.exc import ArgumentError
from sqlalchemy.orm import Session

DEFAULT_URL = "sqlite:///specbench.db"
URL_ENV = "DATABASE_URL"  # the one setting that names the database, for every command and the dashboard


class DatabaseURLError(ValueError):
    """`--db` (or DATABASE_URL) is not a URL we can use; the message never contains the password."""


ENV_PREFIX = "env:"
# libpq parameters holding or naming a secret: `ps` shows argv to every user; matched in any case.
SECRET_PARAMS = frozenset(
    {"password", "sslpassword", "passfile", "sslkey", "sslkeylogfile", "oauth_client_secret"}
)
_MASK = "***"
_PLACEHOLDER = "SPECBENCHMASKED"  # letters only: survives URL rendering unquoted, then becomes ***


def resolve_url(url: str | None = None) -> str:
    """The URL, `postgresql://` mapped to psycopg 3; `env:NAME` reads variable NAME (no password in argv).
    Empty URLs and SQLite `file:` URIs are refused."""
    if url is not None and not url.strip():
        raise DatabaseURLError(
            "--db is empty; give sqlite:///PATH, postgresql://USER@HOST[:PORT]/DB or env:NAME, or leave --db out "
            f"to use $DATABASE_URL, else {DEFAULT_URL}"
        )
    if url and url.startswith(ENV_PREFIX):
        name = url.removeprefix(ENV_PREFIX)
        raw = os.environ.get(name)
        if not raw:
            raise DatabaseURLError(f"--db {url}: the environment variable {name!r} is not set or empty")
    else:
        raw = url or os.environ.get(URL_ENV) or DEFAULT_URL
    try:
        parsed = make_url(raw)
    except (ArgumentError, ValueError):
        # Not echoed: an almost-URL may still hold a password.
        raise DatabaseURLError(
            "the database URL cannot be parsed; expected sqlite:///PATH or postgresql://USER@HOST[:PORT]/DB "
            "(or env:NAME for a variable holding one)"
        ) from None
    if parsed.get_backend_name() == "sqlite" and (
        (parsed.database or "").startswith("file:") or "uri" in {k.lower() for k in parsed.query}
    ):
        raise DatabaseURLError(
            "SQLite URI filenames (sqlite:///file:...?uri=true) are not supported; give a path: sqlite:///PATH"
        )
    if parsed.drivername in ("postgresql", "postgres"):
        parsed = parsed.set(drivername="postgresql+psycopg")
    return parsed.render_as_string(hide_password=False)


def _secret_values(parsed: URL) -> list[tuple[str, str]]:
    """(where, value) of every secret in a parsed URL: the userinfo password and each secret parameter."""
    out: list[tuple[str, str]] = []
    if parsed.password:
        out.append(("password", str(parsed.password)))
    for key, value in parsed.query.items():
        if key.lower() in SECRET_PARAMS:
            out.extend((key, v) for v in ((value,) if isinstance(value, str) else value))
    return out


def url_secrets(url: str) -> list[str]:
    """Where `url` carries a secret: "password" (userinfo) or the parameter; unparseable counts."""
    try:
        parsed = make_url(url)
    except (ArgumentError, ValueError):
        return ["an unparseable URL"]
    return list(dict.fromkeys(where for where, _ in _secret_values(parsed)))


def redact(url: str) -> str:
    """The URL for logs, messages and provenance, every secret (any case) shown as ***."""
    try:
        parsed = make_url(url)
    except (ArgumentError, ValueError):
        return "<unparseable database URL>"
    masked = parsed.set(
        query={
            k: (_PLACEHOLDER if k.lower() in SECRET_PARAMS else v)
            for k, v in parsed.query.items()  # a repeated key holds a tuple: masked as one value
        }
    )
    if masked.password:
        masked = masked.set(password=_PLACEHOLDER)
    return masked.render_as_string(hide_password=False).replace(_PLACEHOLDER, _MASK)


def scrub(text: str, url: str | None) -> str:
    """`text` (a driver's error, say) with every secret of `url` masked, raw or percent-encoded."""
    if not url:
        return text
    try:
        secrets = [v for _, v in _secret_values(make_url(url))]
    except (ArgumentError, ValueError):
        return text
    # Longest first: a secret that contains another is masked whole.
    forms = {f for v in secrets for f in (v, quote(v, safe=""), quote_plus(v)) if f}
    for form in sorted(forms, key=len, reverse=True):
        text = text.replace(form, _MASK)
    return text


def _sqlite_pragmas(dbapi_conn: Any, _record: Any, *, busy_ms: int = 30000) -> None:
    # WAL + busy_timeout let workers and the dashboard share one file; NORMAL is durable enough under WAL.
    cur = dbapi_conn.cursor()
    cur.execute("PRAGMA journal_mode=WAL")
    cur.execute(f"PRAGMA busy_timeout={int(busy_ms)}")  # an int we computed, not input
    cur.execute("PRAGMA synchronous=NORMAL")
    cur.execute("PRAGMA foreign_keys=ON")
    cur.close()


# Makes SQLite's BEGIN IMMEDIATE: a claim's read-then-update cannot interleave with another writer.
SQLITE_IMMEDIATE = "specbench_sqlite_immediate"


def _sqlite_autocommit_driver(dbapi_conn: Any, _record: Any) -> None:
    # SQLAlchemy's pysqlite recipe ("Serializable isolation / Savepoints / Transactional DDL"): BEGIN is
    # emitted here, so a session is one real transaction, savepoints included.
    dbapi_conn.isolation_level = None


def _sqlite_begin(conn: Any) -> None:
    immediate = conn.get_execution_options().get(SQLITE_IMMEDIATE, False)
    conn.exec_driver_sql("BEGIN IMMEDIATE" if immediate else "BEGIN")


def make_engine(url: str | None = None, *, busy_timeout_s: float = 30.0, **kwargs: Any) -> Engine:
    """`busy_timeout_s` (SQLite): the wait for a writer's lock before "database is locked" (dbretry.py)."""
    resolved = resolve_url(url)
    parsed = make_url(resolved)
    if parsed.get_backend_name() == "sqlite":
        if parsed.database and parsed.database != ":memory:":
            os.makedirs(os.path.dirname(os.path.abspath(parsed.database)), exist_ok=True)
        engine = create_engine(resolved, connect_args={"timeout": busy_timeout_s}, **kwargs)
        event.listen(engine, "connect", _sqlite_autocommit_driver)
        event.listen(
            engine, "connect", functools.partial(_sqlite_pragmas, busy_ms=int(busy_timeout_s * 1000))
        )
        event.listen(engine, "begin", _sqlite_begin)
        return engine
    return create_engine(resolved, pool_pre_ping=True, **kwargs)


@contextmanager
def session_scope(engine: Engine) -> Iterator[Session]:
    """A unit of work: commit on success, roll back on any exception (Ctrl-C included)."""
    with Session(engine, expire_on_commit=False) as session:
        try:
            yield session
            session.commit()
        except BaseException:
            session.rollback()
            raise


# ---- Read-only access: export, compare, regressions, runs and the dashboard read; they never change a file.


def _sqlite_readonly_pragmas(dbapi_conn: Any, _record: Any) -> None:
    # No journal_mode switch (it rewrites the header) and query_only; readers wait out a writer's commit.
    cur = dbapi_conn.cursor()
    cur.execute("PRAGMA busy_timeout=30000")
    cur.execute("PRAGMA query_only=ON")
    cur.close()


class DatabaseMissingError(FileNotFoundError):
    """A read-only open of a SQLite file that does not exist (a read never creates one)."""


def make_readonly_engine(url: str | None = None, **kwargs: Any) -> Engine:
    """An engine that cannot write: SQLite opened with `mode=ro`, PostgreSQL sessions `READ ONLY`."""
    resolved = resolve_url(url)
    parsed = make_url(resolved)
    if parsed.get_backend_name() == "sqlite":
        database = parsed.database or ""
        if database in ("", ":memory:") or database.startswith("file:"):
            raise DatabaseURLError("a read-only open needs a SQLite file path (sqlite:///PATH)")
        path = os.path.abspath(database)
        if not os.path.isfile(path):
            raise DatabaseMissingError(f"no database file at {path}")
        ro = parsed.set(database=f"file:{quote(path)}", query={"mode": "ro", "uri": "true"})
        engine = create_engine(ro, connect_args={"timeout": 30}, **kwargs)
        event.listen(engine, "connect", _sqlite_readonly_pragmas)
        return engine
    return create_engine(
        resolved, pool_pre_ping=True, execution_options={"postgresql_readonly": True}, **kwargs
    )
