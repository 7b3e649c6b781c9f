"""A driver process on the instant parts, for tests that signal or kill it mid-run.

    python -m tests.core.instant_driver LIBRARY SPEC_JSON [--resume RUN_ID]

SPEC_JSON: {"strategy": ..., "params": {...}, "tasks": 2, "budget": {...}, "eval_delay_s": ...,
"mutate_delay_s": ..., "llm": false}. Exit status: 0 finished, 130 interrupted (SIGINT), 143 stopped
by SIGTERM.
"""

from __future__ import annotations

import json
import sys
from typing import Any

from evokernel.config.schema import ExperimentConfig
from evokernel.conformance import (
    InstantEvaluator,
    InstantMutator,
    QuietReporter,
    instant_config,
    instant_task,
)
from evokernel.exceptions import Terminated
from evokernel.run.runner import run_experiment
from evokernel.types import Task


def setup(
    library: str, spec: dict[str, Any]
) -> tuple[ExperimentConfig, list[Task], InstantEvaluator, InstantMutator]:
    tasks = [instant_task(f"t{i}") for i in range(int(spec.get("tasks", 1)))]
    config = instant_config(
        spec["strategy"], spec.get("params", {}), library, tasks, **spec.get("budget", {})
    )
    config.mutators.llm.max_retries = 0
    evaluator = InstantEvaluator(size=2, delay_s=float(spec.get("eval_delay_s", 0.0)))
    mutator = InstantMutator(
        uses_llm=bool(spec.get("llm", False)),
        cost_usd=float(spec.get("cost_usd", 0.0)),
        delay_s=float(spec.get("mutate_delay_s", 0.0)),
    )
    return config, tasks, evaluator, mutator


def main(argv: list[str]) -> int:
    library, spec = argv[0], json.loads(argv[1])
    resume = argv[3] if len(argv) > 3 and argv[2] == "--resume" else None
    config, tasks, evaluator, mutator = setup(library, spec)
    try:
        summary = run_experiment(
            config, resume=resume, reporter=QuietReporter(), pool=evaluator, mutators=[mutator], tasks=tasks
        )
    except Terminated:
        return 143
    except KeyboardInterrupt:
        return 130
    return 130 if summary.interrupted else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
