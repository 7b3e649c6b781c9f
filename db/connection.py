"""Engines, sessions and migrations: how the library reaches its database.

A bare path means a SQLite file (WAL journal so readers never block the writer, 30 s busy timeout
so a second process such as a report waits instead of failing). Any other string is passed to
SQLAlchemy as a URL, e.g. ``postgresql+psycopg://user@host/db``. Alembic is the schema source:
:func:`upgrade` applies the shipped migrations, and opening a library runs it by default.
"""

from __future__ import annotations

import sqlite3
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from importlib import resources
from pathlib import Path
from typing import Any, TypeVar

from sqlalchemy import Connection, Engine, create_engine, event
from sqlalchemy.exc import DBAPIError, OperationalError
from sqlalchemy.orm import Session, sessionmaker

from evokernel.db.migration_lock import migration_lock
from evokernel.exceptions import LibraryError

T = TypeVar("T")

SQLITE_BUSY_TIMEOUT_S = 30
# Transient errors (locked SQLite file, dropped PostgreSQL connection) are retried this often,
# backing off 0.05, 0.1, 0.2, ... s; a real error surfaces after the last try.
MAX_ATTEMPTS = 5


def normalize_url(url_or_path: str | Path) -> str:
    text = str(url_or_path)
    if "://" in text:
        return text
    path = Path(text).expanduser().resolve()
    path.parent.mkdir(parents=True, exist_ok=True)
    return f"sqlite:///{path}"


def _enable_wal(cur: Any) -> None:
    """WAL mode (persistent in the file, so a no-op once set). Drivers opening a fresh file at the
    same moment both try to switch it, and the switch can answer "database is locked" at once,
    without waiting out the busy timeout (seen under load with 2 drivers): retried, bounded."""
    deadline = time.monotonic() + SQLITE_BUSY_TIMEOUT_S
    while True:
        try:
            cur.execute("PRAGMA journal_mode=WAL")
            return
        except sqlite3.OperationalError as exc:
            if "locked" not in str(exc) or time.monotonic() > deadline:
                raise
            time.sleep(0.05)


def make_engine(url: str) -> Engine:
    if url.startswith("sqlite"):
        engine = create_engine(
            url, connect_args={"timeout": SQLITE_BUSY_TIMEOUT_S, "check_same_thread": False}
        )

        @event.listens_for(engine, "connect")
        def _sqlite_pragmas(dbapi_conn: Any, _record: Any) -> None:
            cur = dbapi_conn.cursor()
            _enable_wal(cur)
            cur.execute(f"PRAGMA busy_timeout={SQLITE_BUSY_TIMEOUT_S * 1000}")
            cur.execute("PRAGMA foreign_keys=ON")
            # NORMAL is durable under WAL except for the last transactions on power loss, not on a
            # killed process, which is the failure resume must survive.
            cur.execute("PRAGMA synchronous=NORMAL")
            cur.close()

        return engine
    return create_engine(url, pool_pre_ping=True)


def alembic_config(url: str) -> Any:
    from alembic.config import Config

    cfg = Config()
    cfg.set_main_option("script_location", str(resources.files("evokernel.db") / "migrations"))
    cfg.set_main_option("sqlalchemy.url", url.replace("%", "%%"))
    return cfg


def upgrade(url_or_path: str | Path, revision: str = "head") -> str:
    """Apply the shipped alembic migrations up to ``revision``; returns the normalized URL.

    A library already at head is left alone without locking. Otherwise the upgrade runs under the
    library's migration lock (:mod:`evokernel.db.migration_lock`) on the lock's own connection, and
    the version is checked again once the lock is held: drivers that start together on a fresh
    library wait for the first to build the schema, then find it built.
    """
    from alembic import command
    from alembic.util.exc import CommandError

    url = normalize_url(url_or_path)
    cfg = alembic_config(url)
    engine = make_engine(url)
    try:
        with engine.connect() as conn:
            if _at_revision(conn, cfg, revision):
                return url
        with migration_lock(engine) as conn:
            if not _at_revision(conn, cfg, revision):
                cfg.attributes["connection"] = conn
                command.upgrade(cfg, revision)
    except (CommandError, DBAPIError) as exc:
        raise LibraryError(f"cannot migrate the library at {redact(url)}: {exc}") from exc
    finally:
        engine.dispose()
    return url


def _at_revision(conn: Connection, cfg: Any, revision: str) -> bool:
    """Whether the database is at ``revision`` already ("head"/"heads" only; any other target is
    alembic's to judge). Leaves ``conn`` outside a transaction, as alembic must receive it."""
    from alembic.migration import MigrationContext
    from alembic.script import ScriptDirectory

    if revision not in ("head", "heads"):
        return False
    try:
        current = set(MigrationContext.configure(conn).get_current_heads())
    finally:
        conn.rollback()
    return current == set(ScriptDirectory.from_config(cfg).get_heads())


def redact(url: str) -> str:
    """The URL without its password, for messages and logs."""
    from sqlalchemy.engine import make_url

    try:
        return make_url(url).render_as_string(hide_password=True)
    except Exception:  # noqa: BLE001 - a malformed URL must still produce a message
        return "<unparseable url>"


class SessionScope:
    """Every storage call runs in one short transaction with bounded retry on transient errors."""

    def __init__(self, engine: Engine) -> None:
        self._engine = engine
        self._factory = sessionmaker(engine, expire_on_commit=False)

    @contextmanager
    def session(self) -> Iterator[Session]:
        with self._factory() as session, session.begin():
            yield session

    def run(self, fn: Callable[[Session], T]) -> T:
        return self._retry(lambda: self._in_session(fn))

    def run_core(self, fn: Callable[[Connection], T]) -> T:
        """Like :meth:`run` on a bare connection: for hot Core-only writes (once per candidate), where
        a Session's setup was a fifth of the cost."""

        def once() -> T:
            with self._engine.begin() as conn:
                return fn(conn)

        return self._retry(once)

    def _in_session(self, fn: Callable[[Session], T]) -> T:
        with self.session() as session:
            return fn(session)

    def _retry(self, once: Callable[[], T]) -> T:
        delay = 0.05
        for attempt in range(MAX_ATTEMPTS):
            try:
                return once()
            except (OperationalError, DBAPIError) as exc:
                transient = isinstance(exc, OperationalError) or exc.connection_invalidated
                if not transient or attempt == MAX_ATTEMPTS - 1:
                    raise LibraryError(f"library write failed: {exc.orig or exc}") from exc
                time.sleep(delay)
                delay *= 2
        raise AssertionError("unreachable")
