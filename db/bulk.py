"""Bulk inserts of pre-built rows (load tests, demos): 1M points and 3M samples into SQLite in minutes. Ids
are max(id)+1, so never beside a writing worker; `fix_sequences` moves PostgreSQL sequences past them."""

from collections.abc import Mapping, Sequence
from typing import Any, cast

from sqlalchemy import Engine, Table, delete, func, insert, select

from db.models import Point, Run, Sample, ServerInstance, Triage


class BulkIds:
    """Pre-assigned primary keys (one executemany per table, no RETURNING round-trips)."""

    def __init__(self, engine: Engine):
        with engine.connect() as c:
            self.next = {
                t: (c.execute(select(func.coalesce(func.max(table.c.id), 0))).scalar_one() or 0) + 1
                for t, table in _TABLES
            }

    def take(self, table: str, n: int) -> int:
        first = self.next[table]
        self.next[table] += n
        return first


_TABLES: tuple[tuple[str, Table], ...] = (
    ("runs", cast(Table, Run.__table__)),
    ("server_instances", cast(Table, ServerInstance.__table__)),
    ("points", cast(Table, Point.__table__)),
    ("samples", cast(Table, Sample.__table__)),
)


class BulkWriter:
    """executemany of SQLAlchemy's compiled `insert(table)`, bind processors once per column (5x faster)."""

    def __init__(self, engine: Engine):
        self.engine = engine
        self.dialect = engine.dialect

    def write(self, tables: Mapping[str, Mapping[str, Sequence[Any]]]) -> None:
        """`tables`: table name -> column name -> values (columns of one table have the same length)."""
        with self.engine.begin() as conn:
            if self.dialect.name == "sqlite":
                # 256 MiB page cache: fingerprint-order index inserts touch pages all over the file.
                conn.exec_driver_sql("PRAGMA cache_size = -262144")
            for name, table in _TABLES:
                data = tables.get(name) or {}
                if not data or not len(next(iter(data.values()))):
                    continue
                keys = list(data)
                compiled = insert(table).compile(dialect=self.dialect, column_keys=keys)
                processed = {k: self._process(table, k, list(data[k])) for k in keys}
                if self.dialect.positional:
                    order = list(compiled.positiontup or [])
                    rows: list[Any] = list(zip(*(processed[k] for k in order), strict=True))
                else:
                    rows = [
                        dict(zip(keys, vals, strict=True))
                        for vals in zip(*(processed[k] for k in keys), strict=True)
                    ]
                for i in range(0, len(rows), 50_000):
                    conn.exec_driver_sql(str(compiled), rows[i : i + 50_000])

    def _process(self, table: Table, key: str, values: list[Any]) -> list[Any]:
        # dialect_impl: the dialect's own variant of the type (psycopg wraps JSON values, SQLite dumps them).
        proc = table.c[key].type.dialect_impl(self.dialect).bind_processor(self.dialect)
        if proc is None:
            return values
        return [None if v is None else proc(v) for v in values]


def fix_sequences(engine: Engine) -> None:
    """PostgreSQL: explicit ids do not advance SERIAL sequences; move them past what we wrote."""
    if engine.dialect.name != "postgresql":
        return
    with engine.begin() as conn:
        for name, table in _TABLES:
            top = select(func.coalesce(func.max(table.c.id), 1)).scalar_subquery()
            conn.execute(select(func.setval(func.pg_get_serial_sequence(name, "id"), top)))


def delete_runs_by_trigger(engine: Engine, trigger: str) -> int:
    """Remove every run with this trigger, with its triage, samples, points and server instances."""
    with engine.begin() as conn:
        ids = conn.execute(select(Run.id).where(Run.trigger == trigger)).scalars().all()
        for part in range(0, len(ids), 500):
            chunk = ids[part : part + 500]
            # SQLite cascades only with foreign_keys=ON (db.engine sets it): delete children explicitly.
            point_ids = select(Point.id).where(Point.run_id.in_(chunk))
            conn.execute(delete(Triage).where(Triage.run_id.in_(chunk)))
            conn.execute(delete(Sample).where(Sample.point_id.in_(point_ids)))
            conn.execute(delete(Point).where(Point.run_id.in_(chunk)))
            conn.execute(delete(ServerInstance).where(ServerInstance.run_id.in_(chunk)))
            conn.execute(delete(Run).where(Run.id.in_(chunk)))
    return len(ids)
