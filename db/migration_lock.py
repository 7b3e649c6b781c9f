"""One migration at a time per library: the lock :func:`evokernel.db.connection.upgrade` runs under.

Drivers started together on a fresh library all try to build its schema; without a lock they race
on ``CREATE TABLE alembic_version`` and all but one crash (issue 33, finding 7). The lock is
process-wide and dies with its holder, so a killed driver never leaves a library locked:

- PostgreSQL: a session-level advisory lock (``pg_advisory_lock``) on a fixed key, held on the very
  connection that runs alembic's upgrade and released after. Advisory locks are scoped to one
  database, so libraries in other databases of the server do not wait on each other. (A pooler in
  transaction mode, such as PgBouncer's, does not keep session locks: migrate through a direct
  connection, e.g. ``evokernel db upgrade``, before starting drivers behind one.)
- SQLite file: ``flock`` on ``<file>.lock`` beside the database. Not ``BEGIN EXCLUSIVE``: Python's
  sqlite3 driver issues no BEGIN before DDL, so alembic's "transaction" does not cover the
  migration's CREATE/ALTER statements (two drivers race past it: ``table runs already exists``), and
  a waiter on SQLite's own lock gives up after the busy timeout (30 s), shorter than a batch rebuild
  of a large table may take. The file lock covers the whole upgrade whatever the driver does.
- In-memory SQLite and other backends: no lock (one process sees the database, or none is known).

The waiter re-checks the schema version after taking the lock, so it finds the work done.
"""

from __future__ import annotations

import fcntl
import os
import time
from collections.abc import Iterator
from contextlib import contextmanager, suppress
from pathlib import Path

from sqlalchemy import Connection, Engine, text
from sqlalchemy.engine import make_url
from sqlalchemy.exc import DBAPIError, OperationalError

from evokernel.exceptions import LibraryError

# ASCII "evokernl": the key of the migration's advisory lock, the same for every evokernel version.
ADVISORY_KEY = 0x65766F6B65726E6C
# A migration of a large library may take minutes; a holder that long is hung, not busy.
LOCK_WAIT_S = 600.0


def sqlite_lock_path(url: str) -> Path | None:
    """``<database file>.lock`` for a SQLite file URL; None for in-memory SQLite and other backends."""
    parsed = make_url(url)
    if parsed.get_backend_name() != "sqlite":
        return None
    database = parsed.database or ""
    if database in ("", ":memory:") or database.startswith("file:") or parsed.query.get("mode") == "memory":
        return None
    return Path(database).with_name(Path(database).name + ".lock")


@contextmanager
def migration_lock(engine: Engine, wait_s: float = LOCK_WAIT_S) -> Iterator[Connection]:
    """A connection of ``engine``, outside any transaction, while this process holds the library's
    migration lock; the lock is released when the block ends (or the process dies)."""
    lock_file = sqlite_lock_path(engine.url.render_as_string(hide_password=False))
    if lock_file is not None:
        with _file_lock(lock_file, wait_s), engine.connect() as conn:
            yield conn
        return
    with engine.connect() as conn:
        if conn.dialect.name != "postgresql":
            yield conn
            return
        with _advisory_lock(conn, wait_s):
            yield conn


@contextmanager
def _advisory_lock(conn: Connection, wait_s: float) -> Iterator[None]:
    try:
        # lock_timeout bounds the wait of pg_advisory_lock (55P03, an OperationalError, on expiry).
        conn.execute(text("SELECT set_config('lock_timeout', :ms, false)"), {"ms": f"{int(wait_s * 1000)}"})
        conn.execute(text("SELECT pg_advisory_lock(:key)"), {"key": ADVISORY_KEY})
        conn.execute(text("RESET lock_timeout"))
        conn.commit()  # the session lock outlives the transaction; alembic begins its own
    except OperationalError as exc:
        raise LibraryError(
            f"another process has held the library's migration lock for {wait_s:.0f} s: {exc.orig or exc}"
        ) from exc
    try:
        yield
    finally:
        if conn.in_transaction():  # a migration that failed midway; alembic rolled back its part
            conn.rollback()
        # Closing the connection releases the lock too, so a connection lost meanwhile holds nothing;
        # unlocking keeps a pooled connection clean.
        with suppress(DBAPIError):
            conn.execute(text("SELECT pg_advisory_unlock(:key)"), {"key": ADVISORY_KEY})
            conn.commit()


@contextmanager
def _file_lock(path: Path, wait_s: float) -> Iterator[None]:
    fd = os.open(path, os.O_RDWR | os.O_CREAT | os.O_CLOEXEC, 0o644)
    try:
        deadline = time.monotonic() + wait_s
        delay = 0.01
        while True:
            try:
                fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
                break
            except BlockingIOError:
                if time.monotonic() >= deadline:
                    raise LibraryError(
                        f"another process has held the library's migration lock {path} for {wait_s:.0f} s"
                    ) from None
                time.sleep(delay)
                delay = min(delay * 2, 0.25)
        try:
            yield
        finally:
            fcntl.flock(fd, fcntl.LOCK_UN)
    finally:
        os.close(fd)
