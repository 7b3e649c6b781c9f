"""Whole runs end to end: real Ray, real SQLite library, real sandboxed evaluation on the CPU."""

from __future__ import annotations

import io
import sqlite3
from collections.abc import Iterator
from pathlib import Path

import pytest
import ray

from evokernel.config.loading import load_config
from evokernel.db import SolutionLibrary
from evokernel.run.progress import ProgressPrinter
from evokernel.run.runner import run_experiment
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
            "evaluation.confirm_best=on",  # auto confirms on a GPU only
            *FAST,
        ],
    )
    out = io.StringIO()
    summary = run_experiment(config, reporter=ProgressPrinter(out))
    text = out.getvalue()
    assert "no LLM configured" in text and "mutators.llm.model" in text
    assert "interpreter" in text
    assert "speedup vs eager (strict)" in text and "axpy" in text.splitlines()[-3]
    assert "verdict profile strict" in text

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
    # Every candidate that became the best was evaluated again before it was recorded (run/confirm.py):
    # the seed alone, each later one in a window shared with the best before it.
    confirmed = [sc for sc in cands if sc.evaluation is not None and sc.evaluation.confirmed]
    assert confirmed and confirmed[0].candidate.operator == "seed_file"
    for sc in confirmed:
        assert sc.evaluation is not None
        record = sc.evaluation.details["confirmation"]
        assert record["first"]["status"] == "correct"
        assert record["incumbent"] is None or record["incumbent"] < sc.candidate.id
        assert record["incumbent"] is None or record["low"] <= record["vs_incumbent"] <= record["high"]
    assert lib.get_run(summary.run_id).status == "finished"
    # generation-synchronous: gen 1 (2 branches) fully evaluated before any gen 2 candidate exists
    gens = [sc.candidate.generation for sc in cands]
    assert gens == sorted(gens) and gens[:3] == [0, 1, 1]


def _kernel_reply(block: int, scale: str = "3.0") -> str:
    seed = (FIXTURES / "tasks" / "axpy.seed.py").read_text()
    code = seed.replace("BLOCK=64", f"BLOCK={block}").replace("3.0 * x + b", f"{scale} * x + b")
    return f"Here is a faster kernel with a bigger block.\n\n```python\n{code}```\n"


def test_llm_run_against_a_local_openai_compatible_server(tmp_path: Path) -> None:
    from tests.support.llm_server import LLMServer, Reply

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
            Reply(_kernel_reply(2048), prompt_tokens=1400, completion_tokens=240),
        ]
        server.push(*replies)
        config = load_config(
            None,
            [
                f"tasks=[{AXPY}]",
                f"library={db}",
                "budget.evaluations=4",
                "strategy.params.branches=2",
                # Mutation only: the ideas call and fix rounds have their own test below.
                "strategy.params.ideas=false",
                "strategy.params.fix_rounds=0",
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
    assert len(calls) == served == 4  # 3 candidates + 1 reply without code, which was repaired
    used = replies[:served]
    assert sum(c.prompt_tokens for c in calls) == sum(r.prompt_tokens for r in used)
    assert sum(c.completion_tokens for c in calls) == sum(r.completion_tokens for r in used)
    usage = lib.llm_usage(summary.run_id)
    expected_cost = sum(r.prompt_tokens * 1.0 + r.completion_tokens * 2.0 for r in used) / 1e6
    assert usage["cost_usd"] == pytest.approx(expected_cost)
    with sqlite3.connect(db) as conn:
        failed = conn.execute("select reason from proposals where state='failed'").fetchall()
        query = "select outcome, error, reply from llm_calls where outcome != 'ok'"
        unusable = conn.execute(query).fetchall()
    assert failed == []  # the reply without code went back to the model, and its repair was used
    assert len(unusable) == 1 and unusable[0][0] == "no_code" and "ModelNew" in unusable[0][1]
    assert "won't write code" in unusable[0][2]


def test_pike_b_ideas_branches_and_a_fix_round_with_a_scripted_llm(tmp_path: Path) -> None:
    from tests.support.llm_server import LLMServer, Reply

    db = tmp_path / "lib.db"
    ideas = ["Use a larger block so each program moves more bytes", "Fold the scale into one FMA"]
    with LLMServer() as server:
        server.push(
            Reply('```json\n["' + '", "'.join(ideas) + '"]\n```'),  # the ideas call of phase 1
            Reply(_kernel_reply(128)),  # branch 0: correct
            Reply(_kernel_reply(256, scale="2.0")),  # branch 1: wrong result -> fixed
            Reply(_kernel_reply(512)),  # the fix of branch 1: correct
        )
        config = load_config(
            None,
            [
                f"tasks=[{AXPY}]",
                f"library={db}",
                "budget.evaluations=4",
                "strategy.params.branches=2",
                "strategy.params.fix_rounds=1",
                "concurrency.llm=1",  # replies are served in request order; one at a time keeps it fixed
                "mutators.llm.model=openai/test-model",
                "mutators.llm.allow_unpriced=true",
                f"mutators.llm.api_base={server.url}",
                "mutators.llm.timeout_s=20",
                *FAST,
            ],
        )
        summary = run_experiment(config, reporter=ProgressPrinter(io.StringIO()))
        bodies = [r.body or {} for r in server.completions]
    lib = SolutionLibrary(db)
    props = lib.proposals(summary.run_id, "axpy")
    assert [(p.generation, p.operator, p.branch) for p in props] == [
        (0, "seed_file", 0),
        (1, "ideas", 0),
        (1, "mutate", 0),
        (1, "mutate", 1),
        (1, "fix", 1),
    ]
    assert props[1].ideas == tuple(ideas) and props[1].count == 2
    assert [p.idea for p in props[2:4]] == ideas
    cands = {sc.candidate.proposal_id: sc for sc in lib.candidates(summary.run_id, "axpy")}
    wrong = cands[props[3].id]
    assert wrong.evaluation is not None and wrong.evaluation.status is Status.INCORRECT
    fixed = cands[props[4].id]
    assert fixed.candidate.parents == (wrong.candidate.id,) and fixed.candidate.branch == 1
    assert fixed.evaluation is not None and fixed.evaluation.status is Status.CORRECT
    assert len(lib.llm_calls(summary.run_id)) == len(bodies) == 4  # each attempt counts
    assert ideas[1] in bodies[2]["messages"][1]["content"]  # branch 1's prompt carries idea 1
    assert wrong.candidate.source.strip()[:200] in bodies[3]["messages"][1]["content"]  # the fix sees it


def test_pike_o_islands_on_the_real_pool(tmp_path: Path) -> None:
    db = tmp_path / "lib.db"
    config = load_config(
        None,
        [
            f"tasks=[{AXPY}]",
            f"library={db}",
            "budget.evaluations=5",
            "strategy.name=pike_o",
            "strategy.params.islands=2",
            "strategy.params.batch=1",
            "strategy.params.migration_interval=2",
            "strategy.params.migration_rate=1.0",
            *FAST,
        ],
    )
    summary = run_experiment(config, reporter=ProgressPrinter(io.StringIO()))
    lib = SolutionLibrary(db)
    cands = lib.candidates(summary.run_id, "axpy")
    assert len(cands) == 5 and all(sc.evaluation is not None for sc in cands)
    assert [(sc.candidate.generation, sc.candidate.island) for sc in cands] == [
        (0, 0),
        (1, 0),
        (1, 1),
        (2, 0),
        (2, 1),
    ]
    events = lib.island_events(summary.run_id, "axpy")
    assert ("reseed", 1, 1) in [
        (e.kind, e.generation, e.island) for e in events
    ]  # island 1 starts from the seed
    assert any(e.kind == "migrate" and e.generation == 2 for e in events)
