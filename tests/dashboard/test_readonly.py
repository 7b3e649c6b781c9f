"""The dashboard never writes: the database itself refuses it (SQLite ``mode=ro``, PostgreSQL
read-only transactions), and opening never migrates or creates anything."""

from __future__ import annotations

import socket
import subprocess
import sys
import time
from pathlib import Path

import httpx
import pytest
from sqlalchemy import func, select, text

from evokernel.dashboard import open_library
from evokernel.db import SolutionLibrary, upgrade
from evokernel.db.models import RunRow
from evokernel.exceptions import LibraryError
from tests.dashboard.fixture_library import Fixture


def _runs(url: str) -> int:
    lib = SolutionLibrary(url)
    try:
        return lib.read(lambda s: int(s.scalar(select(func.count()).select_from(RunRow)) or 0))
    finally:
        lib.close()


def test_library_opened_read_only_refuses_writes(fixture_library: tuple[str, Fixture]) -> None:
    url, fx = fixture_library
    lib = open_library(url)
    try:
        assert [r.id for r in lib.list_runs()] == [fx.run_id]  # it reads
        with pytest.raises(LibraryError):
            lib.create_run("sneaky", {})
        with pytest.raises(LibraryError):
            lib.set_run_status(fx.run_id, "finished")
        with pytest.raises(LibraryError):  # not even a raw statement gets through
            lib.read(lambda s: s.execute(text("DELETE FROM evaluations")))
    finally:
        lib.close()
    assert _runs(url) == 1
    writer = SolutionLibrary(url)
    try:
        assert writer.get_run(fx.run_id).status == "running"
    finally:
        writer.close()


def test_sqlite_is_opened_through_a_read_only_uri(tmp_path: Path) -> None:
    path = tmp_path / "lib.db"
    SolutionLibrary(path).close()
    lib = open_library(path)
    try:
        assert "mode=ro" in lib.url
        assert lib.read(lambda s: s.execute(text("PRAGMA query_only")).scalar()) == 1
    finally:
        lib.close()


@pytest.mark.postgres
def test_postgresql_transactions_are_read_only(postgres_db_url: str) -> None:
    upgrade(postgres_db_url)
    lib = open_library(postgres_db_url)
    try:
        assert lib.read(lambda s: s.execute(text("SHOW transaction_read_only")).scalar()) == "on"
    finally:
        lib.close()


def test_missing_library_is_an_error_and_nothing_is_created(tmp_path: Path) -> None:
    path = tmp_path / "nowhere" / "lib.db"
    with pytest.raises(LibraryError, match="no SQLite library"):
        open_library(path)
    assert not path.parent.exists()


def test_library_behind_the_schema_is_refused_not_migrated(tmp_path: Path) -> None:
    path = tmp_path / "old.db"
    upgrade(path, "0002")
    with pytest.raises(LibraryError, match="evokernel db upgrade"):
        open_library(path)
    lib = SolutionLibrary(path, migrate=False)
    try:
        version = lib.read(lambda s: s.execute(text("SELECT version_num FROM alembic_version")).scalar())
    finally:
        lib.close()
    assert str(version).startswith("0002")


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def test_cli_serves_the_library(fixture_library: tuple[str, Fixture]) -> None:
    url, fx = fixture_library
    port = _free_port()
    cmd = [sys.executable, "-m", "evokernel", "dashboard", "--library", url, "--port", str(port)]
    proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    try:
        deadline = time.monotonic() + 60
        while True:
            try:
                runs = httpx.get(f"http://127.0.0.1:{port}/api/runs", timeout=5).json()["runs"]
                break
            except httpx.TransportError:
                assert proc.poll() is None, proc.stdout.read() if proc.stdout else ""
                assert time.monotonic() < deadline, "the dashboard did not answer within 60 s"
                time.sleep(0.2)
        assert [r["id"] for r in runs] == [fx.run_id]
    finally:
        proc.terminate()
        out, _ = proc.communicate(timeout=30)
    assert "read-only" in out


def test_cli_reports_a_missing_library(tmp_path: Path) -> None:
    missing = tmp_path / "missing.db"
    cmd = [sys.executable, "-m", "evokernel", "dashboard", "--library", str(missing)]
    out = subprocess.run(cmd, capture_output=True, text=True, timeout=60)
    assert out.returncode == 2 and str(missing) in out.stderr
    assert not missing.exists()
