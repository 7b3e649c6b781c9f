"""A run on instant parts that reports through the CLI's progress choice (for pty tests):
``python -m tests.report.progress_driver LIBRARY [--quiet|--json-events]``."""

from __future__ import annotations

import sys

from evokernel.conformance import InstantEvaluator, InstantMutator, instant_config, instant_task
from evokernel.report.progress import progress_for
from evokernel.run.runner import run_experiment


def main(argv: list[str]) -> int:
    library, flags = argv[0], set(argv[1:])
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


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
