"""Whole runs end to end: real Ray, real SQLite library, real sandboxed evaluation on the CPU."""

from __future__ import annotations

import io
import sqlite3
from collections.abc import Iterator
from pathlib import Path

import pytest
import ray

from evokernel.config import load_config
from evokernel.db import SolutionLibrary
from evokernel.report import ProgressPrinter
from evokernel.runner import run_experiment
from evokernel.types import Status

FIXTURES = Path(__file__).resolve().parents[1] / "fixtures"
AXPY = str(FIXTURES / "tasks" / "axpy.py")
FAST = [
    "evaluation.timing.warmup_ms=1",
    "evaluation.timing.min_reps=3",
    "evaluation.timing.max_ms=50",
    "evaluation.timeout_s=120",
]

pytestmark = pytest.mark.slow


@pytest.fixture(scope="module", autouse=True)
def local_ray() -> Iterator[None]:
    ray.init(num_cpus=2, include_dashboard=False)
    yield
    ray.shutdown()


def test_tune_only_run_records_every_step(tmp_path: Path) -> None:
    db = tmp_path / "lib.db"
    config = load_config(
        None,
        [
            f"tasks=[{AXPY}]",
            f"library={db}",
            "budget.evaluations=5",
            "strategy.params.branches=2",
            "strategy.params.top_k=2",
            *FAST,
        ],
    )
    out = io.StringIO()
    summary = run_experiment(config, reporter=ProgressPrinter(out))
    text = out.getvalue()
    assert "no LLM configured" in text and "mutators.llm.model" in text
    assert "interpreter" in text
    assert "speedup vs eager" in text and "axpy" in text.splitlines()[-3]

    lib = SolutionLibrary(db)
    cands = lib.candidates(summary.run_id, "axpy")
    assert len(cands) == 5 and lib.count_evaluated(summary.run_id, "axpy") == 5
    assert cands[0].candidate.operator == "seed_file" and cands[0].candidate.generation == 0
    assert all(sc.candidate.operator == "tune" for sc in cands[1:])
    assert all(sc.candidate.parents for sc in cands[1:])
    assert len({sc.candidate.source_hash for sc in cands}) == 5  # tune never re-proposes a source
    assert all(sc.evaluation is not None for sc in cands)
    best = summary.best["axpy"]
    assert best is not None and best.evaluation is not None and best.evaluation.status is Status.CORRECT
    assert lib.get_run(summary.run_id).status == "finished"
    # generation-synchronous: gen 1 (2 branches) fully evaluated before any gen 2 candidate exists
    gens = [sc.candidate.generation for sc in cands]
    assert gens == sorted(gens) and gens[:3] == [0, 1, 1]


def _kernel_reply(block: int, scale: str = "3.0") -> str:
    seed = (FIXTURES / "tasks" / "axpy.seed.py").read_text()
    code = seed.replace("BLOCK=64", f"BLOCK={block}").replace("3.0 * x + b", f"{scale} * x + b")
    return f"Here is a faster kernel with a bigger block.\n\n```python\n{code}```\n"


def test_llm_run_against_a_local_openai_compatible_server(tmp_path: Path) -> None:
    from tests.llm_server import LLMServer, Reply

    db = tmp_path / "lib.db"
    with LLMServer() as server:
        replies = [
            Reply(_kernel_reply(128), prompt_tokens=1000, completion_tokens=200),
            Reply(
                "I would use a larger block, but I won't write code today.",
                prompt_tokens=900,
                completion_tokens=30,
            ),
            Reply(_kernel_reply(256, scale="2.0"), prompt_tokens=1100, completion_tokens=210),
            Reply(_kernel_reply(512), prompt_tokens=1200, completion_tokens=220),
            Reply(_kernel_reply(1024), prompt_tokens=1300, completion_tokens=230),
        ]
        server.push(*replies)
        config = load_config(
            None,
            [
                f"tasks=[{AXPY}]",
                f"library={db}",
                "budget.evaluations=4",
                "strategy.params.branches=2",
                "mutators.llm.model=openai/test-model",
                f"mutators.llm.api_base={server.url}",
                "mutators.llm.timeout_s=20",
                "mutators.llm.input_cost_per_mtok=1.0",
                "mutators.llm.output_cost_per_mtok=2.0",
                *FAST,
            ],
        )
        summary = run_experiment(config, reporter=ProgressPrinter(io.StringIO()))
        served = len(server.completions)
    lib = SolutionLibrary(db)
    cands = lib.candidates(summary.run_id, "axpy")
    assert len(cands) == 4
    llm_cands = [sc for sc in cands if sc.candidate.operator == "mutate"]
    assert len(llm_cands) == 3
    statuses = sorted(sc.evaluation.status.value for sc in llm_cands if sc.evaluation)
    assert statuses.count("incorrect") <= 1 and "correct" in statuses
    calls = lib.llm_calls(summary.run_id)
    assert len(calls) == served == 4  # 3 candidates + 1 reply without code
    used = replies[:served]
    assert sum(c.prompt_tokens for c in calls) == sum(r.prompt_tokens for r in used)
    assert sum(c.completion_tokens for c in calls) == sum(r.completion_tokens for r in used)
    usage = lib.llm_usage(summary.run_id)
    expected_cost = sum(r.prompt_tokens * 1.0 + r.completion_tokens * 2.0 for r in used) / 1e6
    assert usage["cost_usd"] == pytest.approx(expected_cost)
    with sqlite3.connect(db) as conn:
        failed = conn.execute("select reason, raw_reply from proposals where state='failed'").fetchall()
    assert len(failed) == 1 and "ModelNew" in failed[0][0] and "won't write code" in failed[0][1]
