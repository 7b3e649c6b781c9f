"""Fixtures of the library tests: an empty library per test (SQLite file or PostgreSQL) and a run."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from evokernel.db import SolutionLibrary
from tests.db.helpers import make_task


@pytest.fixture
def lib(library_url: str) -> Iterator[SolutionLibrary]:
    library = SolutionLibrary(library_url)
    yield library
    library.close()


@pytest.fixture
def run_id(lib: SolutionLibrary) -> str:
    rid = lib.create_run("test-run", {"strategy": "greedy", "budget": {"evaluations": 10}}, seed=7)
    lib.register_task(rid, make_task())
    return rid
