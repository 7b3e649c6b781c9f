"""Top-level fixtures shared by the whole test suite.

Sections are delimited by banner comments; add new fixtures in their own section.
"""

from __future__ import annotations

import contextlib
import os
import shutil
import signal
import tempfile
import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.support.killed_run import KilledRun, kill_and_resume
from tests.support.leaks import describe, processes_using, scratch_left, wait_for_no_processes
from tests.support.llm_server import LLMServer
from tests.support.pgserver import PostgresServer, PostgresStartError, PostgresUnavailable, start_server

# ================================================================================================
# Leaks: the session runs under a TMPDIR of its own; at its end nothing of evokernel may be left
# ================================================================================================
#
# Every Ray cluster, actor, fork-server, candidate and subprocess the suite starts inherits this
# TMPDIR, so after the last test (fault and hack cases included) `pytest_sessionfinish` finds any
# scratch directory or process left behind and fails the session, naming them. Short and under
# /tmp: Ray's unix sockets live below TMPDIR and their paths must stay under 108 bytes.
SUITE_TMP = Path(tempfile.mkdtemp(prefix="ekt-suite-", dir="/tmp"))
# Traversable by others, as /tmp is: as root the PostgreSQL fixture runs its server as the
# `postgres` account in a folder of its own below this one (tests/support/pgserver.py).
SUITE_TMP.chmod(0o755)
os.environ["TMPDIR"] = str(SUITE_TMP)
tempfile.tempdir = None


def pytest_sessionfinish(session: pytest.Session, exitstatus: int) -> None:
    import ray

    if ray.is_initialized():
        ray.shutdown()
    # Ray's agents whose raylet is gone are exiting and not counted (support/leaks.py says why).
    procs = wait_for_no_processes(SUITE_TMP, timeout_s=120.0)
    dirs = scratch_left(SUITE_TMP)
    if procs or dirs:
        report = [f"the suite left evokernel state behind under {SUITE_TMP}:"]
        report += [f"  directory {d}" for d in dirs]
        report += [f"  process {line.strip()}" for line in describe(procs).splitlines()]
        print("\n" + "\n".join(report))
        session.exitstatus = pytest.ExitCode.TESTS_FAILED
        return  # kept for a look
    shutil.rmtree(SUITE_TMP, ignore_errors=True)


# ================================================================================================
# PostgreSQL: a real server started for the session (db tests run on SQLite and PostgreSQL)
# ================================================================================================
#
# `postgres_server` (session) is a private server from tests.support.pgserver (initdb into a temporary
# folder, 127.0.0.1, a free port, trust authentication), stopped when the session ends.
# `postgres_url` (session) is a database on it for tests that only need one; `postgres_db_url`
# (function) is a fresh empty database per test, dropped afterwards; `library_url` runs a test once
# on a SQLite file and once on a fresh PostgreSQL database.
#
# Without the server binaries the PostgreSQL tests skip, except under CI (env var CI set), where
# .ci/run installs PostgreSQL, so missing binaries are a defect and the tests fail.


def _in_ci() -> bool:
    return os.environ.get("CI", "").strip().lower() not in ("", "0", "false", "no")


@pytest.fixture(scope="session")
def postgres_server() -> Iterator[PostgresServer]:
    try:
        server = start_server()
    except PostgresUnavailable as exc:
        if _in_ci():
            pytest.fail(f"{exc} (CI is set: .ci/run must install PostgreSQL and psycopg)", pytrace=False)
        pytest.skip(str(exc))
    except PostgresStartError as exc:
        pytest.fail(str(exc), pytrace=False)
    try:
        yield server
    finally:
        server.stop()


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


# ================================================================================================
# A real run from the command line, SIGKILLed mid-run and resumed (tests/support/killed_run.py)
# ================================================================================================
#
# Made once for test_cleanup, test_resume and test_export, which each checked one side of the same
# two `evokernel run` commands. Its TMPDIR is its own (short, under /tmp: Ray's unix sockets live
# below it); what still uses it when the session ends is killed then, after test_cleanup has
# looked for it.


@pytest.fixture(scope="session")
def killed_run(tmp_path_factory: pytest.TempPathFactory) -> Iterator[KilledRun]:
    private = Path(tempfile.mkdtemp(prefix="ekt-", dir="/tmp"))
    try:
        yield kill_and_resume(tmp_path_factory.mktemp("killed-run"), private)
    finally:
        for pid in processes_using(private, exiting_agents=True):
            with contextlib.suppress(ProcessLookupError):
                os.kill(pid, signal.SIGKILL)
        shutil.rmtree(private, ignore_errors=True)
