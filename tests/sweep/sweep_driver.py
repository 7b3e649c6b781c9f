"""A sweep of the axpy fixture on instant parts, slowed so signals land mid-flight (for signal
tests): ``python -m tests.sweep.sweep_driver LIBRARY [SWEEP_ID]`` (the id resumes it;
SWEEP_DRIVER_DELAY_S sets each evaluation's time, 0.4 s). Exits 130
when SIGINT interrupted it (once or twice) and 143 when SIGTERM stopped it, as the CLI does."""

from __future__ import annotations

import os
import sys
from pathlib import Path

from evokernel.conformance import InstantEvaluator, QuietReporter
from evokernel.exceptions import Terminated
from evokernel.sweep.runner import run_sweep

FIXTURES = Path(__file__).resolve().parents[1] / "fixtures" / "tasks"
BUDGET = 13  # the seed and three generations of 4 (greedy and random both propose 4 at a time)


def main(argv: list[str]) -> int:
    library = Path(argv[0])
    config = library.with_suffix(".yaml")
    config.write_text(
        f"name: sig\ntasks: [{FIXTURES / 'axpy.py'}]\nlibrary: {library}\nbudget: {{evaluations: {BUDGET}}}\n"
    )
    try:
        summary = run_sweep(
            config,
            ["strategy.name=greedy,random", "seed=0,1", "concurrency.evaluations=1"],
            resume=argv[1] if len(argv) > 1 else None,
            pool=InstantEvaluator(size=2, delay_s=float(os.environ.get("SWEEP_DRIVER_DELAY_S", "0.4"))),
            reporter_for=lambda _index, _run: QuietReporter(),
        )
    except Terminated:
        return 143
    except KeyboardInterrupt:  # a second SIGINT: every cell stopped at once
        return 130
    print(summary.sweep_id, flush=True)
    return 130 if summary.interrupted else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
