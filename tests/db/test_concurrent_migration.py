"""Drivers that open one fresh library at once (issue 33, finding 7): all start, the schema is built once.

Each driver is a real Python process that imports evokernel, says it is ready, waits for the word
to go (one line on its stdin, sent to all of them together), then opens the
:class:`SolutionLibrary`, which migrates, and records a run. Before the migration lock, two drivers
on a fresh PostgreSQL database crashed on ``UniqueViolation ... alembic_version`` and two on a fresh
SQLite file on ``table alembic_version already exists``.
"""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest
from alembic.script import ScriptDirectory
from sqlalchemy import inspect, text

from evokernel.db.connection import alembic_config, make_engine, normalize_url
from evokernel.db.migration_lock import migration_lock, sqlite_lock_path
from evokernel.db.models import Base
from evokernel.exceptions import LibraryError

ROOT = Path(__file__).resolve().parents[2]
# Spawning and importing eight interpreters on a loaded two-core machine, then migrating one by one.
TIMEOUT_S = 180

# A driver says "migrated" when it ran alembic's upgrade itself (not finding the schema built).
DRIVER = """
import sys
import alembic.command
from evokernel.db import SolutionLibrary

alembic_upgrade = alembic.command.upgrade

def counted(*args, **kwargs):
    print("migrated", flush=True)
    alembic_upgrade(*args, **kwargs)

alembic.command.upgrade = counted
print("ready", flush=True)
sys.stdin.readline()
lib = SolutionLibrary(sys.argv[1])
lib.create_run("concurrent", {"a": 1})
lib.close()
"""


def _head() -> str:
    head = ScriptDirectory.from_config(alembic_config("sqlite://")).get_current_head()
    assert head is not None
    return head


def _start(url: str) -> subprocess.Popen[str]:
    return subprocess.Popen(
        [sys.executable, "-c", DRIVER, url],
        cwd=ROOT,
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )


def _run_at_once(url: str, drivers: int) -> list[tuple[int, str, str]]:
    """Start ``drivers`` processes, let them open ``url`` together; their (exit code, stdout, stderr)."""
    procs = [_start(url) for _ in range(drivers)]
    try:
        for proc in procs:
            assert proc.stdout is not None
            assert proc.stdout.readline().strip() == "ready", proc.communicate(timeout=TIMEOUT_S)[1]
        for proc in procs:  # the go, to all, before waiting on any
            assert proc.stdin is not None
            proc.stdin.write("go\n")
            proc.stdin.flush()
        return [(proc.wait(TIMEOUT_S), *proc.communicate()) for proc in procs]
    finally:
        for proc in procs:
            if proc.poll() is None:
                proc.kill()
                proc.communicate()


@pytest.mark.parametrize("drivers", [2, 8])
def test_drivers_opening_a_fresh_library_at_once_all_start(library_url: str, drivers: int) -> None:
    results = _run_at_once(library_url, drivers)
    failures = [err for code, _out, err in results if code != 0]
    assert failures == [], "\n".join(failures)
    assert sum("migrated" in out for _code, out, _err in results) == 1  # the others found it built

    engine = make_engine(normalize_url(library_url))
    try:
        with engine.connect() as conn:
            assert conn.execute(text("SELECT version_num FROM alembic_version")).scalars().all() == [_head()]
            assert conn.execute(text("SELECT count(*) FROM runs")).scalar_one() == drivers
        assert set(inspect(engine).get_table_names()) == set(Base.metadata.tables) | {"alembic_version"}
    finally:
        engine.dispose()


def test_a_held_migration_lock_makes_another_wait_then_give_up(library_url: str) -> None:
    engine = make_engine(normalize_url(library_url))
    try:
        # The second lock is taken on another connection of the engine: another PostgreSQL session,
        # another open lock file.
        with (
            migration_lock(engine),
            pytest.raises(LibraryError, match="migration lock"),
            migration_lock(engine, wait_s=0.3),
        ):
            pass
        with migration_lock(engine, wait_s=0.3):  # released
            pass
    finally:
        engine.dispose()


@pytest.mark.parametrize(
    ("url", "lock"),
    [
        ("sqlite:////data/lib.db", Path("/data/lib.db.lock")),
        ("sqlite://", None),
        ("sqlite:///:memory:", None),
        ("postgresql+psycopg://u@h/db", None),
    ],
)
def test_sqlite_lock_path(url: str, lock: Path | None) -> None:
    assert sqlite_lock_path(url) == lock
