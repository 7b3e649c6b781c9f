"""A run (or, with ``--sweep``, a 2-cell sweep of the axpy fixture) on instant parts that reports
through the CLI's progress choice, for pty tests:
``python -m tests.report.progress_driver LIBRARY [--quiet|--json-events] [--sweep]``."""

from __future__ import annotations

import sys

from evokernel.conformance import InstantEvaluator, InstantMutator, instant_config, instant_task
from evokernel.report.progress import progress_for
from evokernel.run.runner import run_experiment


def main(argv: list[str]) -> int:
    library, flags = argv[0], set(argv[1:])
    if "--sweep" in flags:
        return sweep(library, flags)
    tasks = [instant_task("alpha"), instant_task("beta")]
    config = instant_config("greedy", None, library, tasks, evaluations=12)
    progress = progress_for("--quiet" in flags, "--json-events" in flags)
    try:
        run_experiment(
            config,
            reporter=progress.reporter(),
            pool=InstantEvaluator(size=2, delay_s=0.15),
            mutators=[InstantMutator(incorrect_rate=0.3, uses_llm=True, cost_usd=0.001)],
            tasks=tasks,
        )
    finally:
        progress.close()
    return 0


def sweep(library: str, flags: set[str]) -> int:
    from pathlib import Path

    from evokernel.sweep.runner import run_sweep

    fixtures = Path(__file__).resolve().parents[1] / "fixtures" / "tasks"
    config = Path(library).with_suffix(".yaml")
    config.write_text(
        f"name: live\ntasks: [{fixtures / 'axpy.py'}]\nlibrary: {library}\nbudget: {{evaluations: 6}}\n"
    )
    progress = progress_for("--quiet" in flags, "--json-events" in flags)
    try:
        run_sweep(
            config,
            ["seed=0,1"],
            pool=InstantEvaluator(size=2, delay_s=0.15),
            reporter_for=lambda index, _run: progress.reporter(str(index)),
        )
    finally:
        progress.close()
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
