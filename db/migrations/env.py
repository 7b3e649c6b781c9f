"""Alembic environment of the solution library.

:func:`evokernel.db.connection.upgrade` configures alembic in code (no ini file) and passes the
database URL as ``sqlalchemy.url``. By hand, use the shipped ini and give the URL with ``-x``::

    alembic -c db/alembic.ini -x url=postgresql+psycopg://user@host/evokernel upgrade head
    alembic -c db/alembic.ini -x url=runs/library.db upgrade head --sql   # offline: print the SQL
"""

from __future__ import annotations

from logging.config import fileConfig

from alembic import context
from sqlalchemy import Connection

from evokernel.db.connection import make_engine, normalize_url
from evokernel.db.models import Base

config = context.config
# Only an ini file run by hand configures logging; the library's programmatic upgrade() (no ini)
# must not reset the logging of the process that embeds it, nor may a caller that opts out.
if config.config_file_name is not None and config.attributes.get("configure_logger", True):
    fileConfig(config.config_file_name, disable_existing_loggers=False)

target_metadata = Base.metadata


def _url() -> str:
    url = context.get_x_argument(as_dictionary=True).get("url") or config.get_main_option("sqlalchemy.url")
    if not url:
        raise RuntimeError("no database URL: pass -x url=... or set sqlalchemy.url")
    # A bare path means a SQLite file, as everywhere else in evokernel.
    return normalize_url(url)


def _is_sqlite(url: str) -> bool:
    return url.startswith("sqlite")


def run_migrations_offline() -> None:
    """Emit the SQL as text (``--sql``) without a database connection."""
    url = _url()
    context.configure(
        url=url,
        target_metadata=target_metadata,
        literal_binds=True,
        dialect_opts={"paramstyle": "named"},
        render_as_batch=_is_sqlite(url),
        compare_type=True,
    )
    with context.begin_transaction():
        context.run_migrations()


def _run(connection: Connection) -> None:
    context.configure(
        connection=connection,
        target_metadata=target_metadata,
        # SQLite cannot ALTER most of a table; batch mode rebuilds it (copy, drop, rename) instead.
        render_as_batch=connection.dialect.name == "sqlite",
        compare_type=True,
    )
    with context.begin_transaction():
        context.run_migrations()


def run_migrations_online() -> None:
    # A caller that already holds a connection (e.g. a test) may pass it in config.attributes.
    given = config.attributes.get("connection")
    if given is not None:
        _run(given)
        return
    # make_engine gives SQLite files the same pragmas (WAL, busy timeout, foreign keys) as the
    # library, so a file created by a migration is in WAL mode from its first write.
    engine = make_engine(_url())
    try:
        with engine.connect() as connection:
            _run(connection)
    finally:
        engine.dispose()


if context.is_offline_mode():
    run_migrations_offline()
else:
    run_migrations_online()
