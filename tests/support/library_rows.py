"""Counting rows of a run's SQLite library from outside the process that writes it.

``count`` is strict: a missing file, table or column fails the test (a check that read 0 from a
renamed column could never fail). ``polled_count`` is for waiting on a run that is starting: 0
until its library is migrated to the shipped head revision (alembic on SQLite commits each
migration alone, so tables appear before later columns do), then strict.
"""

from __future__ import annotations

import contextlib
import sqlite3
from pathlib import Path


def count(db: Path, sql: str) -> int:
    """The number ``sql`` counts in the library."""
    assert db.is_file(), f"no library at {db}"
    with contextlib.closing(sqlite3.connect(db, timeout=5)) as conn:
        return int(conn.execute(sql).fetchone()[0])


def schema_complete(db: Path) -> bool:
    """Whether a starting run has migrated its library to the shipped head revision."""
    from alembic.script import ScriptDirectory
    from sqlalchemy import create_engine, inspect, text

    from evokernel.db.connection import alembic_config

    if not db.is_file():
        return False
    url = f"sqlite:///{db}"
    engine = create_engine(url)
    try:
        if not inspect(engine).has_table("alembic_version"):
            return False
        with engine.connect() as conn:
            current = conn.execute(text("select version_num from alembic_version")).scalar()
    finally:
        engine.dispose()
    return current == ScriptDirectory.from_config(alembic_config(url)).get_current_head()


def polled_count(db: Path, sql: str) -> int:
    """:func:`count` while a run starts: 0 until its library's schema is complete, then strict."""
    return count(db, sql) if schema_complete(db) else 0
