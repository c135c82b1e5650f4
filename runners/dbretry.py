"""Ride out database outages: retry transient failures with backoff up to the outage limit; every unit
retried is idempotent or one transaction, so a retry neither loses nor duplicates a row."""

import logging
import threading
import time
from collections.abc import Callable
from typing import TypeVar

from sqlalchemy import Engine
from sqlalchemy.exc import DBAPIError, DisconnectionError, InterfaceError, OperationalError
from sqlalchemy.exc import TimeoutError as PoolTimeout
from sqlalchemy.orm import Session

from db.engine import session_scope
from runners.recovery import OutagePolicy

log = logging.getLogger("specbench.db")
T = TypeVar("T")


class DatabaseUnavailable(RuntimeError):
    """The database stayed unreachable for longer than the outage limit."""


def is_transient(exc: BaseException) -> bool:
    """A failure that waiting can cure: connection refused/lost, server shutting down, SQLite busy."""
    if isinstance(exc, DisconnectionError | PoolTimeout):
        return True
    if isinstance(exc, DBAPIError) and exc.connection_invalidated:
        return True
    if isinstance(exc, OperationalError | InterfaceError):
        orig = getattr(exc, "orig", None)
        if orig is not None and type(orig).__module__.startswith("sqlite3"):
            # SQLite's schema errors ("no such table") are OperationalError too; only lock waits pass.
            text = str(orig).lower()
            return "locked" in text or "busy" in text
        return True
    return False


def retry(
    fn: Callable[[], T], *, what: str, policy: OutagePolicy | None = None, stop: threading.Event | None = None
) -> T:
    """`fn()`, retried within `policy.limit_s`; DatabaseUnavailable after (or once `stop` is set)."""
    policy = policy or OutagePolicy.from_env()
    started: float | None = None
    delay = policy.first_delay_s
    while True:
        try:
            result = fn()
        except Exception as e:
            if not is_transient(e):
                raise
            now = time.monotonic()
            if started is None:
                started = now
                log.warning(
                    "database unavailable (%s): %s; retrying for up to %.0f s", what, short(e), policy.limit_s
                )
            waited = now - started
            if waited >= policy.limit_s:
                raise DatabaseUnavailable(
                    f"database unavailable for {waited:.0f} s ({what}): {short(e)}"
                ) from e
            pause = min(delay, policy.limit_s - waited)
            if stop is None:
                time.sleep(pause)
            elif stop.wait(pause):
                raise DatabaseUnavailable(f"stopped while the database was unavailable ({what})") from e
            delay = min(delay * 2, policy.max_delay_s)
            continue
        if started is not None:
            log.warning("database back after %.1f s (%s)", time.monotonic() - started, what)
        return result


def in_session(
    engine: Engine,
    fn: Callable[[Session], T],
    *,
    what: str,
    policy: OutagePolicy | None = None,
    stop: threading.Event | None = None,
) -> T:
    """`fn(session)` as one transaction, retried as a whole through an outage."""

    def unit() -> T:
        with session_scope(engine) as s:
            return fn(s)

    return retry(unit, what=what, policy=policy, stop=stop)


def short(e: BaseException) -> str:
    text = str(getattr(e, "orig", None) or e).strip().splitlines()
    return f"{type(e).__name__}: {text[0] if text else ''}"[:300]
