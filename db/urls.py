"""What a ``library=`` / ``--library`` string may be, checked before anything connects.

A bare path is a SQLite file; anything with ``://`` is a SQLAlchemy URL. A URL that cannot be
parsed (a port that is not a number), names a database kind SQLAlchemy does not know
(``sqlit:///x.db``, the retired ``postgres://`` alias) or needs a driver that is not installed
is one :class:`~evokernel.exceptions.LibraryError` line naming the URL, instead of a traceback
from the first connection. Read-only commands (``runs``, ``report``, ``export``, the dashboard)
also refuse a library that does not exist (:func:`require_existing`): they must never create one.
"""

from __future__ import annotations

import re
from pathlib import Path
from urllib.parse import urlsplit

from evokernel.exceptions import LibraryError

FORMS = "a SQLite file path, sqlite:///PATH, or postgresql+psycopg://user@host:port/database"
# user:password@ -> user:***@, for a URL too broken for SQLAlchemy to redact.
_PASSWORD = re.compile(r"(://[^:/@]*:)[^@]*@")


def shown(text: str) -> str:
    """The URL as a message may show it: its password, if any, masked."""
    return _PASSWORD.sub(r"\1***@", text)


def check_url(text: str) -> None:
    """Raise :class:`LibraryError` unless ``text`` is a path or a URL evokernel can connect with."""
    if "://" not in text:
        return
    from sqlalchemy.engine import make_url
    from sqlalchemy.exc import ArgumentError

    try:
        url = make_url(text)
    except (ArgumentError, ValueError) as exc:
        port = urlsplit(text).netloc.rpartition("@")[2].rpartition(":")[2]
        why = f"its port '{port}' is not a number" if port and not port.isdigit() else shown(str(exc))
        raise LibraryError(f"library URL {shown(text)} is not a valid URL: {why}; use {FORMS}") from exc
    try:
        dialect = url.get_dialect()
    except ArgumentError as exc:  # NoSuchModuleError: no such dialect (or driver) in SQLAlchemy
        hint = " (PostgreSQL is postgresql+psycopg://)" if url.get_backend_name() == "postgres" else ""
        raise LibraryError(
            f"library URL {shown(text)}: unknown database kind '{url.drivername}'{hint}; use {FORMS}"
        ) from exc
    try:
        dialect.import_dbapi()
    except ImportError as exc:
        extra = " (pip install 'evokernel[postgres]')" if url.get_backend_name() == "postgresql" else ""
        raise LibraryError(
            f"library URL {shown(text)}: its driver '{exc.name}' is not installed{extra}"
        ) from exc


def sqlite_path(text: str) -> Path | None:
    """The file a bare path or ``sqlite:///`` URL names; None for a server URL."""
    if "://" not in text:
        return Path(text).expanduser().resolve()
    from sqlalchemy.engine import make_url

    url = make_url(text)
    if url.get_backend_name() != "sqlite":
        return None
    database = url.database or ""
    if database in ("", ":memory:"):
        raise LibraryError("an in-memory SQLite library holds nothing to read")
    return Path(database).expanduser().resolve()


def require_existing(url_or_path: str | Path, command: str) -> None:
    """For a command that only reads (``command``, e.g. ``runs``): a SQLite library must already be
    a file, and a server must answer, or this raises a one-line :class:`LibraryError`."""
    text = str(url_or_path)
    check_url(text)
    path = sqlite_path(text)
    if path is not None:
        if not path.is_file():
            raise LibraryError(
                f"no library at {path}: `evokernel {command}` reads an existing library and creates "
                "none (a run or sweep writes one; check --library)"
            )
        return
    _reach(text)


def _reach(url: str) -> None:
    from sqlalchemy import create_engine
    from sqlalchemy.exc import DBAPIError

    engine = create_engine(url)
    try:
        with engine.connect():
            pass
    except DBAPIError as exc:
        first = str(exc.orig or exc).strip().splitlines()[0]
        raise LibraryError(f"cannot reach the library at {shown(url)}: {first}") from exc
    finally:
        engine.dispose()
