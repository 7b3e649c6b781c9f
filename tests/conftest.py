"""Top-level fixtures shared by the whole test suite.

Sections are delimited by banner comments; add new fixtures in their own section.
"""

from __future__ import annotations

import os
import pwd
import shutil
import socket
import subprocess
import tempfile
import uuid
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any, NoReturn

import pytest

from tests.llm_server import LLMServer

# ================================================================================================
# PostgreSQL: a real server started for the session (db tests run on SQLite and PostgreSQL)
# ================================================================================================
#
# `postgres_server` (session) runs initdb into a temporary folder and starts a private server on
# 127.0.0.1 and a free port, with trust authentication and superuser `postgres`; it is stopped
# (pg_ctl stop -m fast) when the session ends. `postgres_url` (session) is a database on it for
# tests that only need one; `postgres_db_url` (function) is a fresh empty database per test, dropped
# afterwards; `library_url` runs a test once on a SQLite file and once on a fresh PostgreSQL database.
#
# Without the server binaries the PostgreSQL tests skip, except under CI (env var CI set), where
# .ci/run installs PostgreSQL, so missing binaries are a defect and the tests fail.

PG_USER = "postgres"  # the database superuser created by initdb -U, whatever the OS user
PG_OS_USER = "postgres"  # Debian's package creates it; as root we run the server as this user
PG_START_TIMEOUT_S = 60


def _in_ci() -> bool:
    return os.environ.get("CI", "").strip().lower() not in ("", "0", "false", "no")


def _unavailable(reason: str) -> NoReturn:
    if _in_ci():
        pytest.fail(f"{reason} (CI is set: .ci/run must install PostgreSQL and psycopg)", pytrace=False)
    pytest.skip(reason)


def find_pg_bindir() -> Path | None:
    """The folder holding initdb, pg_ctl and postgres: PATH first, then Debian's versioned dirs."""
    which = shutil.which("pg_ctl")
    candidates: list[Path] = []
    if which:
        # Resolve symlinks (e.g. /usr/local/bin/pg_ctl -> /usr/lib/postgresql/15/bin/pg_ctl): pg_ctl
        # looks for `postgres` next to itself, and initdb must be of the same major version.
        candidates.append(Path(os.path.realpath(which)).parent)
    versioned = Path("/usr/lib/postgresql").glob("*/bin")
    candidates += sorted(versioned, key=lambda p: _version_key(p.parent.name), reverse=True)
    for bindir in candidates:
        if all((bindir / exe).is_file() for exe in ("initdb", "pg_ctl", "postgres")):
            return bindir
    return None


def _version_key(name: str) -> tuple[int, ...]:
    return tuple(int(part) for part in name.split(".") if part.isdigit())


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def _server_account() -> tuple[int, int] | None:
    """(uid, gid) to run the server as, or None to run as ourselves.

    PostgreSQL refuses to run as root, so as root we use Debian's `postgres` account, creating a
    system account of that name if the binaries came without one.
    """
    if os.geteuid() != 0:
        return None
    try:
        entry = pwd.getpwnam(PG_OS_USER)
    except KeyError:
        subprocess.run(
            ["useradd", "--system", "--no-create-home", "--shell", "/usr/sbin/nologin", PG_OS_USER],
            check=True,
            capture_output=True,
        )
        entry = pwd.getpwnam(PG_OS_USER)
    return entry.pw_uid, entry.pw_gid


@dataclass
class PostgresServer:
    host: str
    port: int
    bindir: Path
    base: Path  # data dir, socket dir and log live here
    version_num: int = 0  # server_version_num, e.g. 150018

    def url(self, database: str) -> str:
        return f"postgresql+psycopg://{PG_USER}@{self.host}:{self.port}/{database}"

    def admin(self, statement: str, database: str) -> None:
        """Run ``statement`` with ``{}`` standing for the quoted ``database``, outside a transaction."""
        import psycopg
        from psycopg import sql

        query = sql.SQL(statement).format(sql.Identifier(database))
        with psycopg.connect(
            host=self.host, port=self.port, user=PG_USER, dbname="postgres", autocommit=True
        ) as conn:
            conn.execute(query)

    def version(self) -> int:
        import psycopg

        with psycopg.connect(host=self.host, port=self.port, user=PG_USER, dbname="postgres") as conn:
            row = conn.execute("SHOW server_version_num").fetchone()
        assert row is not None
        return int(row[0])

    def create_database(self, name: str) -> str:
        # FILE_COPY (PostgreSQL 15+; the only strategy before) copies template1's files: ~0.04 s here
        # against ~0.4 s for 15's default WAL_LOG, which writes the whole template into the WAL.
        strategy = " STRATEGY FILE_COPY" if self.version_num >= 150000 else ""
        self.admin("CREATE DATABASE {}" + strategy, name)
        return self.url(name)

    def drop_database(self, name: str) -> None:
        # FORCE (PostgreSQL 13+) ends connections a test forgot to close instead of failing.
        self.admin("DROP DATABASE IF EXISTS {} WITH (FORCE)", name)


def _run_pg(cmd: list[str], account: tuple[int, int] | None, cwd: Path) -> subprocess.CompletedProcess[str]:
    # PG* variables of the developer's shell (PGDATA, PGPORT, ...) must not redirect our server.
    env = {k: v for k, v in os.environ.items() if not k.startswith("PG")}
    env["LC_ALL"] = "C"
    kwargs: dict[str, Any] = {}
    if account is not None:
        kwargs = {"user": account[0], "group": account[1], "extra_groups": []}
    # cwd: the server account may not be allowed into the caller's working directory.
    return subprocess.run(cmd, cwd=cwd, env=env, capture_output=True, text=True, **kwargs)


def _log_tail(base: Path) -> str:
    log = base / "server.log"
    return log.read_text(errors="replace")[-3000:] if log.exists() else "(no server log)"


@pytest.fixture(scope="session")
def postgres_server() -> Iterator[PostgresServer]:
    bindir = find_pg_bindir()
    if bindir is None:
        _unavailable(
            "PostgreSQL server binaries (initdb, pg_ctl, postgres) not in PATH or /usr/lib/postgresql"
        )
    try:
        import psycopg  # noqa: F401
    except ImportError:
        _unavailable("psycopg (PostgreSQL driver) is not installed: pip install 'psycopg[binary]'")

    account = _server_account()
    # Not pytest's tmp_path: its root is mode 0700 and owned by us, so the server account could not
    # enter it. mkdtemp's folder is private to whoever owns it, which we make the server account.
    base = Path(tempfile.mkdtemp(prefix="evokernel-pg-"))
    if account is not None:
        os.chown(base, *account)
    data = base / "data"
    initdb = _run_pg(
        [str(bindir / "initdb"), "-D", str(data), "-U", PG_USER, "-A", "trust", "--no-locale", "-E", "UTF8",
         "--no-sync"],
        account,
        base,
    )  # fmt: skip
    if initdb.returncode != 0:
        shutil.rmtree(base, ignore_errors=True)
        pytest.fail(f"initdb failed ({initdb.returncode}):\n{initdb.stdout}\n{initdb.stderr}", pytrace=False)

    # Durability off: a test server may lose data on power loss, and syncing on every commit would
    # only slow down the many small transactions of the db tests.
    # Unix socket only in our folder (the default /var/run/postgresql may not exist or be writable).
    server: PostgresServer | None = None
    started: subprocess.CompletedProcess[str] | None = None
    for _attempt in range(3):  # the free port can be taken between probing and binding; rare
        port = _free_port()
        options = (
            f"-h 127.0.0.1 -p {port} -k {base} -c fsync=off -c synchronous_commit=off "
            "-c full_page_writes=off -c max_connections=200"
        )
        started = _run_pg(
            [str(bindir / "pg_ctl"), "-D", str(data), "-l", str(base / "server.log"), "-w",
             "-t", str(PG_START_TIMEOUT_S), "-o", options, "start"],
            account,
            base,
        )  # fmt: skip
        if started.returncode == 0:
            server = PostgresServer(host="127.0.0.1", port=port, bindir=bindir, base=base)
            break
    if server is None:
        assert started is not None
        log = _log_tail(base)
        shutil.rmtree(base, ignore_errors=True)
        pytest.fail(f"pg_ctl start failed:\n{started.stdout}\n{started.stderr}\n{log}", pytrace=False)
    assert server is not None
    try:
        server.version_num = server.version()
        yield server
    finally:
        _run_pg([str(bindir / "pg_ctl"), "-D", str(data), "-m", "fast", "-w", "stop"], account, base)
        shutil.rmtree(base, ignore_errors=True)


@pytest.fixture(scope="session")
def postgres_url(postgres_server: PostgresServer) -> str:
    """A database shared by the whole session (tests using it see each other's rows)."""
    return postgres_server.create_database("evokernel_test")


@pytest.fixture
def postgres_db_url(postgres_server: PostgresServer) -> Iterator[str]:
    """A fresh, empty database for one test, dropped afterwards."""
    name = f"evokernel_t_{uuid.uuid4().hex[:12]}"
    url = postgres_server.create_database(name)
    try:
        yield url
    finally:
        postgres_server.drop_database(name)


@pytest.fixture(params=["sqlite", pytest.param("postgresql", marks=pytest.mark.postgres)])
def library_url(request: pytest.FixtureRequest, tmp_path: Path) -> str:
    """An empty library location: a SQLite file path, or the URL of a fresh PostgreSQL database.

    The PostgreSQL server is only started when a postgresql-parametrized test runs, so
    ``-m "not postgres"`` runs the SQLite half without it.
    """
    if request.param == "sqlite":
        return str(tmp_path / "library.db")
    return str(request.getfixturevalue("postgres_db_url"))


# ================================================================================================
# LLM: a scripted OpenAI-compatible HTTP server on 127.0.0.1 (see tests/llm_server.py)
# ================================================================================================


@pytest.fixture
def llm_server() -> Iterator[LLMServer]:
    with LLMServer() as server:
        yield server
