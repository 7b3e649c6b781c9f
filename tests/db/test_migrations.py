"""The shipped alembic migrations build exactly the schema of db/models/, on SQLite and PostgreSQL."""

from __future__ import annotations

import io
from argparse import Namespace
from collections.abc import Iterator
from importlib import resources
from pathlib import Path
from typing import Any

import pytest
from alembic import command
from alembic.autogenerate import compare_metadata
from alembic.config import Config
from alembic.migration import MigrationContext
from sqlalchemy import Engine, MetaData, String, create_engine, inspect, text

from evokernel.db import SolutionLibrary, upgrade
from evokernel.db.connection import alembic_config, make_engine
from evokernel.db.models import Base

HEAD = "0008"
MODEL_TABLES = set(Base.metadata.tables)


@pytest.fixture
def empty_url(library_url: str) -> str:
    """A URL (not a bare path) of an empty database: SQLite file or fresh PostgreSQL database."""
    return library_url if "://" in library_url else f"sqlite:///{library_url}"


@pytest.fixture
def engine(empty_url: str) -> Iterator[Engine]:
    eng = make_engine(empty_url)
    yield eng
    eng.dispose()


def schema_diff(engine: Engine, metadata: MetaData = Base.metadata) -> list[Any]:
    """Differences between the database and ``metadata``, as alembic's autogenerate sees them.

    Nothing is filtered on either backend: SQLite reflects names of named unique constraints and
    foreign-key ON DELETE actions from its stored CREATE TABLE text, so no documented reflection gap
    applies to this schema (unnamed constraints compare by their columns on both backends).
    """
    opts = {"compare_type": True, "compare_server_default": True}
    with engine.connect() as conn:
        return list(compare_metadata(MigrationContext.configure(conn, opts=opts), metadata))


def revision_of(engine: Engine) -> str | None:
    with engine.connect() as conn:
        return MigrationContext.configure(conn).get_current_revision()


def tables_of(engine: Engine) -> set[str]:
    return set(inspect(engine).get_table_names())


def test_upgrade_empty_database_creates_the_models_schema(empty_url: str, engine: Engine) -> None:
    assert tables_of(engine) == set()
    assert upgrade(empty_url) == empty_url
    assert tables_of(engine) == MODEL_TABLES | {"alembic_version"}
    assert revision_of(engine) == HEAD
    assert schema_diff(engine) == []


def test_upgrade_twice_is_a_no_op(empty_url: str, engine: Engine) -> None:
    upgrade(empty_url)
    lib = SolutionLibrary(empty_url)  # opening migrates too
    rid = lib.create_run("kept", {"a": 1})
    lib.close()
    upgrade(empty_url)
    assert revision_of(engine) == HEAD
    assert schema_diff(engine) == []
    again = SolutionLibrary(empty_url, migrate=False)
    assert again.get_run(rid).config == {"a": 1}
    again.close()


def test_downgrade_to_base_then_upgrade_again(empty_url: str, engine: Engine) -> None:
    upgrade(empty_url)
    lib = SolutionLibrary(empty_url)
    rid = lib.create_run("gone", {})
    lib.close()

    command.downgrade(alembic_config(empty_url), "base")
    assert tables_of(engine) == {"alembic_version"}
    assert revision_of(engine) is None

    upgrade(empty_url)
    assert revision_of(engine) == HEAD
    assert schema_diff(engine) == []
    lib = SolutionLibrary(empty_url)
    assert rid not in {r.id for r in lib.list_runs()}
    assert lib.list_runs() == []
    lib.close()


def test_schema_comparison_catches_drift(empty_url: str, engine: Engine) -> None:
    # Guards the guard: each kind of mismatch a hand-written migration could have must show up.
    upgrade(empty_url)
    drifted = MetaData()
    for table in Base.metadata.sorted_tables:
        table.to_metadata(drifted)
    evaluations, tasks, runs = (drifted.tables[n] for n in ("evaluations", "tasks", "runs"))
    for fk in evaluations.foreign_key_constraints:
        fk.ondelete = None  # the migration has ON DELETE CASCADE
    for uq in tasks.constraints:
        if uq.name == "uq_tasks_name_hash":
            uq.name = "uq_tasks_renamed"
    runs.c.name.type = String(100)  # the migration has String(200)
    runs.c.finished_at.nullable = False
    kinds = sorted(d[0] if isinstance(d, tuple) else d[0][0] for d in schema_diff(engine, drifted))
    assert kinds == [
        "add_constraint", "add_fk", "modify_nullable", "modify_type", "remove_constraint", "remove_fk",
    ]  # fmt: skip

    with engine.begin() as conn:
        conn.execute(text("DROP INDEX ix_candidates_source_hash"))
    assert [(d[0], d[1].name) for d in schema_diff(engine)] == [("add_index", "ix_candidates_source_hash")]


def test_upgrade_bare_path_gives_a_wal_sqlite_file(tmp_path: Path) -> None:
    path = tmp_path / "deep" / "library.db"
    url = upgrade(path)
    assert url == f"sqlite:///{path.resolve()}"
    engine = create_engine(url)
    try:
        with engine.connect() as conn:
            assert conn.exec_driver_sql("PRAGMA journal_mode").scalar() == "wal"
        assert revision_of(engine) == HEAD
    finally:
        engine.dispose()


@pytest.mark.parametrize("url", ["sqlite:///offline.db", "postgresql+psycopg://user@localhost/evokernel"])
def test_offline_mode_emits_sql(url: str) -> None:
    cfg = alembic_config(url)
    cfg.output_buffer = io.StringIO()
    command.upgrade(cfg, "head", sql=True)
    sql = cfg.output_buffer.getvalue()
    for table in MODEL_TABLES:
        assert f"CREATE TABLE {table} " in sql or f'CREATE TABLE "{table}"' in sql, table
    assert "CREATE INDEX ix_proposals_run_task_state" in sql
    assert "ON DELETE CASCADE" in sql


def test_shipped_ini_runs_with_url_given_by_x(tmp_path: Path) -> None:
    # The by-hand route: alembic -c db/alembic.ini -x url=PATH upgrade head
    ini = resources.files("evokernel.db") / "alembic.ini"
    path = tmp_path / "by_hand.db"
    cfg = Config(str(ini), cmd_opts=Namespace(x=[f"url={path}"]))
    cfg.attributes["configure_logger"] = False  # keep the test process's logging as pytest set it
    command.upgrade(cfg, "head")
    engine = create_engine(f"sqlite:///{path}")
    try:
        assert revision_of(engine) == HEAD
        assert schema_diff(engine) == []
    finally:
        engine.dispose()
