"""A private, throwaway PostgreSQL server for benchmarks (the approach of tests/conftest.py).

initdb into a temporary folder, start on 127.0.0.1 and a free port with trust authentication, stop
and delete on exit. As root it runs as the ``postgres`` OS account (PostgreSQL refuses root).
Durability is off (fsync, synchronous_commit) as in the test server: a benchmark of the engine's
own overhead should not measure the disk's flush latency.
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
from pathlib import Path
from typing import Any


def find_bindir() -> Path | None:
    found = shutil.which("pg_ctl")
    dirs = [Path(os.path.realpath(found)).parent] if found else []
    dirs += sorted(Path("/usr/lib/postgresql").glob("*/bin"), reverse=True)
    for d in dirs:
        if all((d / exe).is_file() for exe in ("initdb", "pg_ctl", "postgres")):
            return d
    return None


def _run(cmd: list[str], account: tuple[int, int] | None, cwd: Path) -> None:
    env = {k: v for k, v in os.environ.items() if not k.startswith("PG")}
    env["LC_ALL"] = "C"
    kwargs: dict[str, Any] = {}
    if account is not None:
        kwargs = {"user": account[0], "group": account[1], "extra_groups": []}
    done = subprocess.run(cmd, cwd=cwd, env=env, capture_output=True, text=True, **kwargs)
    if done.returncode != 0:
        raise RuntimeError(f"{cmd[0]} failed: {done.stdout}\n{done.stderr}")


@contextmanager
def postgres_database(name: str = "evokernel_bench") -> Iterator[str]:
    """Yield a SQLAlchemy URL of a fresh database on a private server."""
    import psycopg

    bindir = find_bindir()
    if bindir is None:
        raise RuntimeError("PostgreSQL binaries (initdb, pg_ctl, postgres) not found")
    account = None
    if os.geteuid() == 0:
        entry = pwd.getpwnam("postgres")
        account = (entry.pw_uid, entry.pw_gid)
    base = Path(tempfile.mkdtemp(prefix="evokernel-bench-pg-"))
    if account is not None:
        os.chown(base, *account)
    data = base / "data"
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port = int(sock.getsockname()[1])
    _run([str(bindir / "initdb"), "-D", str(data), "-U", "postgres", "-A", "trust", "--no-locale",
          "-E", "UTF8", "--no-sync"], account, base)  # fmt: skip
    options = (
        f"-h 127.0.0.1 -p {port} -k {base} -c fsync=off -c synchronous_commit=off -c full_page_writes=off"
    )
    _run([str(bindir / "pg_ctl"), "-D", str(data), "-l", str(base / "log"), "-w", "-o", options, "start"],
         account, base)  # fmt: skip
    try:
        with psycopg.connect(
            host="127.0.0.1", port=port, user="postgres", dbname="postgres", autocommit=True
        ) as c:
            c.execute(f'CREATE DATABASE "{name}"')
        yield f"postgresql+psycopg://postgres@127.0.0.1:{port}/{name}"
    finally:
        _run([str(bindir / "pg_ctl"), "-D", str(data), "-m", "fast", "-w", "stop"], account, base)
        shutil.rmtree(base, ignore_errors=True)
