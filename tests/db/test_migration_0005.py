"""Migration 0005 fills its denormalised columns on an existing library exactly as the writer does."""

from __future__ import annotations

from alembic import command
from sqlalchemy import text

from evokernel.db import SolutionLibrary, upgrade
from evokernel.db.connection import alembic_config, make_engine
from evokernel.types import Evaluation, Status
from tests.dashboard.fixture_library import build

QUERIES = {
    "candidates": "SELECT id, stage, reason_key, first_evaluation_id, first_speedup FROM candidates"
    " ORDER BY id",
    "llm_calls": "SELECT id, task_id FROM llm_calls ORDER BY id",
}


def _columns(url: str) -> dict[str, list[tuple[object, ...]]]:
    engine = make_engine(url)
    try:
        with engine.connect() as conn:
            return {name: [tuple(r) for r in conn.execute(text(sql))] for name, sql in QUERIES.items()}
    finally:
        engine.dispose()


def test_upgrade_from_0004_fills_what_the_writer_writes(library_url: str) -> None:
    url = library_url if "://" in library_url else f"sqlite:///{library_url}"
    fixture = build(url)
    lib = SolutionLibrary(url)
    # A re-evaluated candidate: its latest verdict is the one that counts; and a multi-line reason.
    lib.record_evaluation(
        fixture.child,
        Evaluation(Status.RUNTIME_ERROR, "\n  RuntimeError: boom\nTraceback ...", stage="correctness"),
    )
    lib.close()
    written = _columns(url)
    child = next(r for r in written["candidates"] if r[0] == fixture.child)
    # The latest verdict's stage and key; the first verdict's speedup (the runtime error came later).
    assert child[1:3] == ("correctness", "RuntimeError: boom") and child[4] == 1.3
    assert sum(1 for row in written["candidates"] if row[2]) == 5  # 4 failures + the re-evaluated one
    assert all(task is not None for _id, task in written["llm_calls"])

    command.downgrade(alembic_config(url), "0004")  # drops the columns
    command.upgrade(alembic_config(url), "0005")
    assert _columns(url) == written
    assert upgrade(url) == url
