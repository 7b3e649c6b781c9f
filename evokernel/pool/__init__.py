"""Stage 3 -- pool: turns (task, source) into an :class:`~evokernel.types.Evaluation`, at scale.

Enters: evaluation requests from the run (task, candidate source, the run's evaluation settings,
a tenant id and a priority).
Leaves: one :class:`~evokernel.types.Evaluation` per request, with queue and start times added.
Inside: Ray actors, one per GPU (:mod:`.actor`); fair admission over runs (:mod:`.fair_queue`);
eager/compile baselines measured once per task (:mod:`.baseline_cache`); throughput and queue
health (:mod:`.health`); the device facts prompts quote (:mod:`.hardware`); actors pinned to the
cluster's nodes, following nodes that join or leave (:mod:`.placement`); starting or joining
the Ray cluster (:mod:`.ray_cluster`); deduplication of identical requests (:mod:`.dedup`); the
harness-fault retry, alone on the pool (:mod:`.solo_retry`); the pool itself, with retries of a
lost actor's requests (:mod:`.evaluator_pool`). The pool knows nothing of islands, strategies or
the library.
Plug-in point: anything implementing :class:`evokernel.run.evaluator.Evaluator` (``evaluate``,
``hardware``, ``health``) can stand in for it; the conformance kit's instant evaluator is one.

Importing this package does not import Ray (the run's progress printer reads :mod:`.health`);
touching :class:`EvaluatorPool` does.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from evokernel.pool.evaluator_pool import EvaluatorPool, default_concurrency, init_ray

__all__ = ["EvaluatorPool", "default_concurrency", "init_ray"]


def __getattr__(name: str) -> Any:
    if name not in __all__:
        raise AttributeError(f"module 'evokernel.pool' has no attribute {name!r}")
    return getattr(importlib.import_module("evokernel.pool.evaluator_pool"), name)
