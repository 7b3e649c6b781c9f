"""The solution library: SQLAlchemy models, alembic migrations and the ``SolutionLibrary`` API."""

from __future__ import annotations

from evokernel.db.connection import upgrade
from evokernel.db.library import SolutionLibrary

__all__ = ["SolutionLibrary", "upgrade"]
