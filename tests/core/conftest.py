from __future__ import annotations

import tempfile
from collections.abc import Iterator
from pathlib import Path

import pytest

from evokernel.evaluation.forkserver import ForkServer
from evokernel.tasks import load_task
from evokernel.types import Task

FIXTURES = Path(__file__).resolve().parents[1] / "fixtures"


@pytest.fixture(scope="session")
def axpy_task() -> Task:
    return load_task(FIXTURES / "tasks" / "axpy.py")


@pytest.fixture(scope="module")
def fork_server() -> Iterator[ForkServer]:
    """The pool's launch path (``launcher=fork_server.spawn``): each supervisor forked from a server
    that imported torch and triton once (its worker forked from it in turn), instead of a new
    interpreter per evaluation (~2.5 s each on 2 cores, most of it imports). Used where a module
    runs many evaluations (test_verify's corpus cases, test_rules, test_bundled_seeds);
    ``evokernel verify``'s new-interpreter path is what test_verify's command tests run."""
    server = ForkServer("cpu", Path(tempfile.gettempdir()))
    try:
        server.wait_ready()
        yield server
    finally:
        server.close()
