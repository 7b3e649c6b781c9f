from __future__ import annotations

from pathlib import Path

import pytest

from evokernel.tasks import load_task
from evokernel.types import Task

FIXTURES = Path(__file__).resolve().parents[1] / "fixtures"


@pytest.fixture(scope="session")
def axpy_task() -> Task:
    return load_task(FIXTURES / "tasks" / "axpy.py")
