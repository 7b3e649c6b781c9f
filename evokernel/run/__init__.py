"""Stage 2 -- run: the loop that turns a config into recorded candidates.

Enters: an :class:`~evokernel.config.ExperimentConfig`, the tasks it names, a library, an
evaluator (the pool) and the configured mutators.
Leaves: rows in the solution library (proposals, LLM calls, candidates, evaluations, island
events) and a :class:`RunSummary`.
Inside: :mod:`.runner` wires the parts; :mod:`.engine` is the only place that sequences work
(asks the strategy, keeps budgets via :mod:`.budget`, resumes); :mod:`.job` runs one proposal
(mutate, record, evaluate, tell); :mod:`.elastic` keeps the evaluations in flight in step with
the pool's size; :mod:`.progress` prints what happens.
Plug-in points: the strategy (:mod:`evokernel.strategies`, which reads the run through a
read-only :class:`~evokernel.strategies.view.RunView`) and the mutators (:mod:`evokernel.mutators`).

Importing this package does not import Ray or litellm; the pool and the LLM mutator are imported
only when a run needs them.
"""

from __future__ import annotations

from evokernel.run.runner import RunSummary, build_mutators, run_experiment, run_experiment_async

__all__ = ["RunSummary", "build_mutators", "run_experiment", "run_experiment_async"]
