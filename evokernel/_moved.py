"""Import paths of the flat layout (before the stage subpackages), still importable with a
:class:`DeprecationWarning`.

An old path is an alias of its new module (``evokernel.runner is evokernel.run.runner``), so
every name, private ones included, and monkeypatching keep working. The aliases are served by an
import hook rather than a stub file at each old path: no file sits where a moved one was, so git
follows the moves across branches.
"""

from __future__ import annotations

import importlib
import importlib.abc
import importlib.machinery
import sys
import warnings
from collections.abc import Sequence
from types import ModuleType

MOVED: dict[str, str] = {
    "evokernel.runner": "evokernel.run.runner",
    "evokernel.engine": "evokernel.run.engine",
    "evokernel.work": "evokernel.run.job",
    "evokernel.budget": "evokernel.run.budget",
    "evokernel.report": "evokernel.run.progress",
    "evokernel.view": "evokernel.strategies.view",
    "evokernel.config_schema": "evokernel.config.schema",
    "evokernel.testing": "evokernel.conformance",
    "evokernel.registry": "evokernel.plugins",
    "evokernel.actor": "evokernel.pool.actor",
    "evokernel.baselinecache": "evokernel.pool.baseline_cache",
    "evokernel.poolhealth": "evokernel.pool.health",
    "evokernel.fairqueue": "evokernel.pool.fair_queue",
    "evokernel.mutators.hardware": "evokernel.pool.hardware",
    "evokernel.export.seeds": "evokernel.run.seed_kernels",
}


class _Alias(importlib.abc.MetaPathFinder, importlib.abc.Loader):
    def find_spec(
        self, fullname: str, path: Sequence[str] | None, target: ModuleType | None = None
    ) -> importlib.machinery.ModuleSpec | None:
        if fullname not in MOVED:
            return None
        return importlib.machinery.ModuleSpec(fullname, self)

    def create_module(self, spec: importlib.machinery.ModuleSpec) -> ModuleType:
        new = MOVED[spec.name]
        # stacklevel 2: warnings skips importlib's frames, so 2 lands on the importing line.
        warnings.warn(f"{spec.name} is deprecated; import from {new}", DeprecationWarning, stacklevel=2)
        return importlib.import_module(new)

    def exec_module(self, module: ModuleType) -> None:
        """The new module is already executed."""


def install() -> None:
    if not any(isinstance(finder, _Alias) for finder in sys.meta_path):
        sys.meta_path.append(_Alias())
