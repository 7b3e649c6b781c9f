"""Start or resume a run: wire config, library, tasks, pool, mutators and engine together.

This is the Python API behind ``evokernel run``::

    from evokernel import load_config, run_experiment
    summary = run_experiment(load_config("experiments/quickstart.yaml", ["budget.evaluations=8"]))
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable, Sequence

from evokernel.config.loading import from_dict, to_dict
from evokernel.config.schema import ExperimentConfig, RayConfig
from evokernel.db import SolutionLibrary
from evokernel.exceptions import ConfigError, TaskError, Terminated
from evokernel.mutators.base import Mutator
from evokernel.mutators.build import build_mutators as configured_mutators
from evokernel.run.credentials import check_credentials
from evokernel.run.engine import Engine, Evaluator, build_strategy
from evokernel.run.progress import ProgressPrinter, Reporter
from evokernel.run.summary import RunSummary
from evokernel.tasks import load_tasks
from evokernel.types import Operator, Scored, Task

LLM_HINT = (
    "no LLM configured: this run uses the tune operator only (Triton knob search on the tasks' seed "
    "kernels). To let an LLM write kernels, set mutators.llm.model (any litellm model string, e.g. "
    "mutators.llm.model=openai/gpt-4o with OPENAI_API_KEY set, or a local OpenAI-compatible server "
    "with mutators.llm.model=openai/<name> mutators.llm.api_base=http://127.0.0.1:8000/v1)."
)


def build_mutators(config: ExperimentConfig, reporter: Reporter) -> list[Mutator]:
    """The configured mutators (:func:`evokernel.mutators.build.build_mutators`), with a hint
    when no LLM is configured."""
    if not config.mutators.llm.enabled():
        reporter.say(LLM_HINT)
    return configured_mutators(config)


def run_experiment(
    config: ExperimentConfig,
    *,
    resume: str | None = None,
    overrides: Sequence[str] = (),
    reporter: Reporter | None = None,
    pool: Evaluator | None = None,
    mutators: list[Mutator] | None = None,
    tasks: list[Task] | None = None,
) -> RunSummary:
    """Run ``config`` to its budget (or resume run ``resume`` from ``config.library``).

    ``pool``, ``mutators`` and ``tasks`` replace what the config would build (a Ray pool, the
    configured mutators, the task files): tests, benchmarks and ``evokernel.conformance`` pass
    in-process ones. A run given ``tasks`` must be resumed with the same tasks.
    """
    return asyncio.run(
        run_experiment_async(
            config,
            resume=resume,
            overrides=overrides,
            reporter=reporter,
            pool=pool,
            mutators=mutators,
            tasks=tasks,
        )
    )


async def run_experiment_async(
    config: ExperimentConfig,
    *,
    resume: str | None = None,
    overrides: Sequence[str] = (),
    reporter: Reporter | None = None,
    pool: Evaluator | None = None,
    mutators: list[Mutator] | None = None,
    tasks: list[Task] | None = None,
    handle_sigint: bool = True,
    on_engine: Callable[[Engine], None] | None = None,
) -> RunSummary:
    """:func:`run_experiment` inside a running event loop, so several runs (a sweep's cells) can
    share one pool in one process. ``handle_sigint`` False leaves SIGINT to the caller (it can stop
    the run through ``Engine.interrupt``, given by ``on_engine``); cancelling the task stops the
    run at once, leaving it "interrupted" and resumable."""
    reporter = reporter or ProgressPrinter()
    if mutators is None:
        check_credentials(config)  # before the library or Ray: a missing key is one line, exit 2
    library = SolutionLibrary(config.library)
    try:
        first_start = resume is None
        if resume:
            info = library.get_run(resume)
            stored = from_dict(info.config, overrides)
            stored.library = config.library
            if any(o.split("=", 1)[0].strip().split(".")[0] == "tasks" for o in overrides):
                # load_config resolved the overridden paths (beside the config file, then the
                # current folder); the stored config would look them up from nowhere.
                stored.tasks = config.tasks
            config, run_id = stored, resume
            if mutators is None:
                check_credentials(config)
            first_start = info.status == "pending"  # a sweep's cell that never started
            if not first_start:
                reporter.say(f"resuming run {run_id} ({info.name}, status was {info.status})")
        tasks = load_tasks(config.tasks) if tasks is None else tasks
        if config.seed_kernels:
            from evokernel.run.seed_kernels import apply_seed_kernels

            tasks = apply_seed_kernels(tasks, config.seed_kernels)
        build_strategy(config)  # a wrong strategy fails here, before the run is recorded or Ray starts
        if resume:
            _check_same_tasks(library, run_id, tasks)
        else:
            run_id = library.create_run(config.name, to_dict(config), config.seed)
            for position, task in enumerate(tasks):
                library.register_task(run_id, task, position)
        library.set_run_status(run_id, "running")
        kind = "started" if first_start else "resumed"
        library.log_event(run_id, kind, "", {"tasks": [t.name for t in tasks]})
        mutators = build_mutators(config, reporter) if mutators is None else mutators
        own_pool = pool is None
        if pool is None:
            from evokernel.pool.evaluator_pool import (
                EvaluatorPool,  # Ray and torch: only when a real pool is needed
            )

            notice = ray_notice(config.ray)
            if notice:
                reporter.say(notice)
            evaluator: Evaluator = EvaluatorPool(config.evaluation, config.ray, baselines=library)
        else:
            evaluator = pool
        reporter.start(run_id, config, tasks, evaluator, library)
        engine = Engine(config, library, evaluator, mutators, run_id, tasks, on_event=reporter.event)
        engine.handle_sigint = handle_sigint
        if on_engine is not None:
            on_engine(engine)
        try:
            stopped = await _run(engine, mutators)
        except BaseException as exc:
            library.set_run_status(run_id, "interrupted")
            elapsed = {"elapsed_s": engine.budget.elapsed_s() - engine.budget.elapsed_before_s}
            library.log_event(run_id, "interrupted", type(exc).__name__, elapsed)
            raise
        finally:
            if own_pool:
                evaluator.shutdown()  # type: ignore[attr-defined]
        elapsed = {"elapsed_s": engine.budget.elapsed_s() - engine.budget.elapsed_before_s}
        status = "interrupted" if engine.interrupted else "finished"
        library.set_run_status(run_id, status)
        library.log_event(run_id, status, "", {"stopped": stopped, **elapsed})
        best = {t.name: next(iter(library.top(run_id, t.name, 1)), None) for t in tasks}
        seeds = {t.name: _seed_candidate(library, run_id, t) for t in tasks}
        usage = library.llm_usage(run_id)
        summary = RunSummary(
            run_id,
            library.url,
            best,
            seeds,
            stopped,
            engine.interrupted,
            llm_calls=int(usage["calls"]),
            llm_failed=int(usage["failed"]),
        )
        reporter.finish(summary, tasks)
        return summary
    finally:
        library.close()


def ray_notice(config: RayConfig) -> str | None:
    """What a user waits for while the pool's Ray starts (a local cluster took ~8 s on 2 cores,
    silently); None when Ray is already up in this process."""
    import ray

    if ray.is_initialized():
        return None
    if config.address:
        return f"joining the Ray cluster at {config.address} ..."
    return "starting Ray (a local cluster for the evaluator pool; usually 5-15 s) ..."


async def _run(engine: Engine, mutators: list[Mutator]) -> dict[str, str]:
    try:
        return await engine.run()
    except asyncio.CancelledError:
        if engine.terminated:
            raise Terminated from None
        if engine.interrupted:  # a second SIGINT cancelled the run: stop at once, like Ctrl-C
            raise KeyboardInterrupt from None
        raise
    finally:
        for mutator in mutators:
            await mutator.aclose()


def _seed_candidate(library: SolutionLibrary, run_id: str, task: Task) -> Scored | None:
    gen0 = library.candidates(run_id, task.name, generation=0)
    return next((sc for sc in gen0 if sc.candidate.operator == Operator.SEED_FILE), None)


def _check_same_tasks(library: SolutionLibrary, run_id: str, tasks: list[Task]) -> None:
    stored = library.run_task_hashes(run_id)
    now = {t.name: t.source_hash for t in tasks}
    if set(stored) != set(now):
        raise ConfigError(
            f"run {run_id} was started with tasks {sorted(stored)}, the config now gives {sorted(now)}"
        )
    changed = [name for name in stored if stored[name] != now[name]]
    if changed:
        raise TaskError(
            f"task file(s) changed since run {run_id} started: {', '.join(changed)}; "
            "resuming would mix results of different tasks"
        )
