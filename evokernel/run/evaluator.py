"""``Evaluator``: what the run needs of an evaluation pool (the Ray pool or a stand-in)."""

from __future__ import annotations

from typing import Any, Protocol

from evokernel.types import Evaluation, Task


class HardwareInfo(Protocol):
    def describe(self) -> str: ...


class Evaluator(Protocol):
    """What the engine needs of an evaluation pool (:class:`~evokernel.pool.EvaluatorPool`, or an
    in-process stand-in such as :class:`~evokernel.conformance.InstantEvaluator`).

    ``tenant`` (the run id) and ``priority`` (fix attempts first) let a pool shared by several
    runs serve them fairly; a pool that serves one run may ignore both. ``health()`` gives the
    figures of the progress display's pool line (``{}``: the evaluator has none)."""

    size: int

    async def evaluate(
        self, task: Task, source: str, *, tenant: str = ..., priority: int = ...
    ) -> Evaluation: ...

    async def hardware(self) -> HardwareInfo: ...

    def health(self) -> dict[str, Any]: ...
