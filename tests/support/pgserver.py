"""A private, throwaway PostgreSQL server: for the test suite, the benchmarks, and trying evokernel
against PostgreSQL without administering one.

``initdb`` into a temporary folder, start on 127.0.0.1 and a free port with trust authentication
and superuser ``postgres``, stop (``pg_ctl stop -m fast``) and delete on exit. PostgreSQL refuses
to run as root, so as root the server runs as the ``postgres`` OS account (created as a system
account when the binaries came without one). Durability is off (fsync, synchronous_commit,
full_page_writes): a throwaway server may lose data on power loss, and syncing every commit would
only measure the disk's flush latency instead of evokernel's own work.

Missing binaries or driver raise :class:`PostgresUnavailable` (a caller may skip); a server that
fails to initialise or start raises :class:`PostgresStartError` with the server's own output.
"""

from __future__ import annotations

import os
import pwd
import shutil
import socket
import subprocess
import tempfile
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from evokernel.exceptions import EvoKernelError

PG_USER = "postgres"  # the database superuser created by initdb -U, whatever the OS user
PG_OS_USER = "postgres"  # Debian's package creates it; as root the server runs as this account
START_TIMEOUT_S = 60


class PostgresUnavailable(EvoKernelError):
    """The PostgreSQL server binaries or the psycopg driver are not installed."""


class PostgresStartError(EvoKernelError):
    """initdb or pg_ctl failed; the message carries their output and the server log's tail."""


@dataclass
class PostgresServer:
    host: str
    port: int
    bindir: Path
    base: Path  # data dir, socket dir and log live here
    account: tuple[int, int] | None = None
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

    def create_database(self, name: str) -> str:
        """Create ``name`` and return its SQLAlchemy URL."""
        # FILE_COPY (PostgreSQL 15+; the only strategy before) copies template1's files: ~0.04 s
        # against ~0.4 s for 15's default WAL_LOG, which writes the whole template into the WAL.
        strategy = " STRATEGY FILE_COPY" if self.version_num >= 150000 else ""
        self.admin("CREATE DATABASE {}" + strategy, name)
        return self.url(name)

    def drop_database(self, name: str) -> None:
        # FORCE (PostgreSQL 13+) ends connections a caller forgot to close instead of failing.
        self.admin("DROP DATABASE IF EXISTS {} WITH (FORCE)", name)

    def stop(self) -> None:
        data = str(self.base / "data")
        _run([str(self.bindir / "pg_ctl"), "-D", data, "-m", "fast", "-w", "stop"], self.account, self.base)
        shutil.rmtree(self.base, ignore_errors=True)


def find_bindir() -> Path | None:
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


def start_server(max_connections: int = 200) -> PostgresServer:
    """initdb and start a private server; the caller must :meth:`PostgresServer.stop` it."""
    bindir = find_bindir()
    if bindir is None:
        raise PostgresUnavailable(
            "PostgreSQL server binaries (initdb, pg_ctl, postgres) not in PATH or /usr/lib/postgresql; "
            "install them (Debian: apt-get install postgresql)"
        )
    try:
        import psycopg  # noqa: F401
    except ImportError as exc:
        raise PostgresUnavailable(
            "psycopg (PostgreSQL driver) is not installed: pip install 'psycopg[binary]'"
        ) from exc
    account = _server_account()
    # A folder the server account owns: pytest's tmp_path root (mode 0700, ours) would be closed to it.
    base = Path(tempfile.mkdtemp(prefix="evokernel-pg-"))
    if account is not None:
        os.chown(base, *account)
    data = base / "data"
    initdb = _run(
        [str(bindir / "initdb"), "-D", str(data), "-U", PG_USER, "-A", "trust", "--no-locale", "-E", "UTF8",
         "--no-sync"],
        account,
        base,
    )  # fmt: skip
    if initdb.returncode != 0:
        shutil.rmtree(base, ignore_errors=True)
        raise PostgresStartError(f"initdb failed ({initdb.returncode}):\n{initdb.stdout}\n{initdb.stderr}")
    started: subprocess.CompletedProcess[str] | None = None
    for _attempt in range(3):  # the free port can be taken between probing and binding; rare
        port = _free_port()
        # Unix socket only in our folder (the default /var/run/postgresql may not exist or be writable).
        options = (
            f"-h 127.0.0.1 -p {port} -k {base} -c fsync=off -c synchronous_commit=off "
            f"-c full_page_writes=off -c max_connections={max_connections}"
        )
        started = _run(
            [str(bindir / "pg_ctl"), "-D", str(data), "-l", str(base / "server.log"), "-w",
             "-t", str(START_TIMEOUT_S), "-o", options, "start"],
            account,
            base,
        )  # fmt: skip
        if started.returncode == 0:
            server = PostgresServer("127.0.0.1", port, bindir, base, account)
            server.version_num = _version_num(server)
            return server
    assert started is not None
    log = base / "server.log"
    tail = log.read_text(errors="replace")[-3000:] if log.exists() else "(no server log)"
    shutil.rmtree(base, ignore_errors=True)
    raise PostgresStartError(f"pg_ctl start failed:\n{started.stdout}\n{started.stderr}\n{tail}")


@contextmanager
def private_server(max_connections: int = 200) -> Iterator[PostgresServer]:
    server = start_server(max_connections)
    try:
        yield server
    finally:
        server.stop()


@contextmanager
def postgres_database(name: str = "evokernel") -> Iterator[str]:
    """The SQLAlchemy URL of a fresh database on a private server that lives as long as the block."""
    with private_server() as server:
        yield server.create_database(name)


def _version_num(server: PostgresServer) -> int:
    import psycopg

    with psycopg.connect(host=server.host, port=server.port, user=PG_USER, dbname="postgres") as conn:
        row = conn.execute("SHOW server_version_num").fetchone()
    return int(row[0]) if row else 0


def _version_key(name: str) -> tuple[int, ...]:
    return tuple(int(part) for part in name.split(".") if part.isdigit())


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def _server_account() -> tuple[int, int] | None:
    """(uid, gid) to run the server as, or None to run as ourselves (we are not root)."""
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


def _run(cmd: list[str], account: tuple[int, int] | None, cwd: Path) -> subprocess.CompletedProcess[str]:
    # PG* variables of the caller's shell (PGDATA, PGPORT, ...) must not redirect our server.
    env = {k: v for k, v in os.environ.items() if not k.startswith("PG")}
    env["LC_ALL"] = "C"
    kwargs: dict[str, Any] = {}
    if account is not None:
        kwargs = {"user": account[0], "group": account[1], "extra_groups": []}
    # cwd: the server account may not be allowed into the caller's working directory.
    return subprocess.run(cmd, cwd=cwd, env=env, capture_output=True, text=True, **kwargs)
