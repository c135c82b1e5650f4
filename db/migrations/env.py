"""Alembic environment: the URL comes from the caller (db.migrate) or DATABASE_URL, never from a file."""

from __future__ import annotations

from typing import Any

from alembic import context
from sqlalchemy import Connection

from db.engine import SQLITE_IMMEDIATE, make_engine, resolve_url
from db.models import Base

config = context.config
target_metadata = Base.metadata


def run_migrations_offline() -> None:
    context.configure(
        url=resolve_url(config.get_main_option("sqlalchemy.url")),
        target_metadata=target_metadata,
        literal_binds=True,
        render_as_batch=True,
    )
    with context.begin_transaction():
        context.run_migrations()


def run_migrations_online() -> None:
    engine = make_engine(config.get_main_option("sqlalchemy.url"))
    # SQLite: BEGIN IMMEDIATE, so a second process opening the file waits for the first one's migration and then
    # finds it done. A deferred BEGIN reads the version first; once the other writer commits, its first write
    # fails at once with "database is locked" (WAL: a stale snapshot cannot be upgraded to a writer).
    with engine.connect().execution_options(**{SQLITE_IMMEDIATE: True}) as connection:
        sqlite = connection.dialect.name == "sqlite"
        if sqlite:
            # Batch mode alters a SQLite table by copying it and dropping the old one. With foreign keys on
            # (db.engine turns them on for every connection), that drop cascades: rebuilding `samples` once
            # deleted every row of `requests`. Off for the migration (the pragma only works outside a
            # transaction), checked and back on after it.
            _pragma(connection, "PRAGMA foreign_keys=OFF")
        # Batch mode lets later migrations alter columns on SQLite too.
        context.configure(connection=connection, target_metadata=target_metadata, render_as_batch=True)
        with context.begin_transaction():
            context.run_migrations()
        if sqlite:
            broken = _pragma(connection, "PRAGMA foreign_key_check")
            _pragma(connection, "PRAGMA foreign_keys=ON")
            if broken:
                raise RuntimeError(f"foreign keys broken after migrating: {broken[:5]} ({len(broken)} rows)")
    engine.dispose()


def _pragma(connection: Connection, statement: str) -> list[Any]:
    # On the driver's connection, outside any transaction: through SQLAlchemy the statement would first begin
    # one (db.engine emits BEGIN itself), and inside a transaction SQLite ignores `foreign_keys`.
    if connection.in_transaction():  # what Alembic left open (it reads its version table); its work is done
        connection.commit()
    cursor = connection.connection.driver_connection.execute(statement)  # type: ignore[union-attr]
    return list(cursor.fetchall())


if context.is_offline_mode():
    run_migrations_offline()
else:
    run_migrations_online()
