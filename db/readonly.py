"""Read-only access to a library: for viewers (the dashboard) that must never write.

The database itself refuses writes, not just the code paths we happen to call:
- SQLite: the file is opened through a ``mode=ro`` URI and ``PRAGMA query_only``; nothing sets the
  journal mode (that is a write). A library written by evokernel is already in WAL mode, so
  readers never block the running experiment's writer and see each commit as it lands.
- PostgreSQL: every transaction starts ``READ ONLY`` (``default_transaction_read_only``), and a
  ``statement_timeout`` keeps one slow page from holding a shared cluster database's resources.

Opening never migrates: a library behind the shipped schema is reported with the command that
upgrades it (run by whoever owns the experiment, not by a viewer).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any
from urllib.parse import quote, unquote

from sqlalchemy import Engine, create_engine, event, text
from sqlalchemy.engine import make_url
from sqlalchemy.exc import DBAPIError

from evokernel.db.connection import SQLITE_BUSY_TIMEOUT_S, redact
from evokernel.exceptions import LibraryError

# A dashboard page is a handful of index walks (docs/benchmarks.md: < 0.9 s at 1M evaluations);
# 30 s only stops a runaway query on a shared server.
PG_STATEMENT_TIMEOUT_MS = 30_000


def readonly_url(url_or_path: str | Path) -> str:
    """The SQLAlchemy URL of a library for reading: a bare path or ``sqlite:///`` URL becomes a
    ``mode=ro`` URI (the file must exist; nothing is created)."""
    text_url = str(url_or_path)
    if "://" not in text_url:
        text_url = f"sqlite:///{Path(text_url).expanduser().resolve()}"
    url = make_url(text_url)
    if url.get_backend_name() != "sqlite":
        return text_url
    database = url.database or ""
    if database in ("", ":memory:"):
        raise LibraryError("an in-memory SQLite library cannot be opened by another process")
    path = Path(database).expanduser().resolve()
    if not path.is_file():
        raise LibraryError(f"no SQLite library at {path}")
    return f"sqlite:///file:{quote(str(path))}?mode=ro&uri=true"


def display_url(url: str) -> str:
    """What to show people: the file path of a read-only SQLite URI, else the URL without password."""
    if url.startswith("sqlite:///file:"):
        return unquote(url.removeprefix("sqlite:///file:").split("?", 1)[0])
    return redact(url)


def make_readonly_engine(url: str) -> Engine:
    """An engine whose connections cannot write (see the module docstring)."""
    if url.startswith("sqlite"):
        engine = create_engine(
            url, connect_args={"timeout": SQLITE_BUSY_TIMEOUT_S, "check_same_thread": False}
        )

        @event.listens_for(engine, "connect")
        def _sqlite_readonly(dbapi_conn: Any, _record: Any) -> None:
            cur = dbapi_conn.cursor()
            cur.execute(f"PRAGMA busy_timeout={SQLITE_BUSY_TIMEOUT_S * 1000}")
            cur.execute("PRAGMA query_only=ON")
            cur.close()

        return engine
    options = f"-c default_transaction_read_only=on -c statement_timeout={PG_STATEMENT_TIMEOUT_MS}"
    connect_args = {"options": options} if url.startswith("postgresql") else {}
    return create_engine(url, pool_pre_ping=True, connect_args=connect_args)


def check_schema(engine: Engine, url: str) -> None:
    """Raise :class:`LibraryError` unless the library is at the shipped alembic head."""
    from alembic.script import ScriptDirectory

    from evokernel.db.connection import alembic_config

    head = ScriptDirectory.from_config(alembic_config(url)).get_current_head()
    try:
        with engine.connect() as conn:
            current = conn.execute(text("SELECT version_num FROM alembic_version")).scalar()
    except DBAPIError as exc:
        raise LibraryError(f"cannot read the library at {redact(url)}: {exc.orig or exc}") from exc
    if current != head:
        raise LibraryError(
            f"the library at {redact(url)} is at schema {current!r}, this evokernel reads {head!r}; "
            f"upgrade it with `evokernel db upgrade --library URL` (a read-only viewer never migrates)"
        )
