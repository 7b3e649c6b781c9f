"""Benchmark: how much of an LLM search's spend produces evaluated candidates (issue 36).

    python experiments/bench/llm_spend.py                      # PIKE-B and PIKE-O, 40 evaluations each
    python experiments/bench/llm_spend.py --strategies pike_o --evaluations 20 --seed 1

A seeded scripted OpenAI-compatible server (``scripted_llm.py``: its reply mix is stated there)
answers every LLM call over real HTTP through litellm; candidates are verified on this machine's
real evaluation pool (Ray, the sandbox, Triton's interpreter on a CPU). Per strategy, from the
run's library:

- **wasted spend**: LLM dollars of proposals that ended without an evaluated candidate (failed
  mutations, failed ideas calls), over all LLM dollars (goal <= 5 %);
- **repaired**: of the replies that could not be used (unparsable, no ``ModelNew``, duplicate) and
  of the candidates that did not compile (``compile_error``, or ``runtime_error``: Triton compiles at
  the first call), the share that a repair round or a fix turned into an evaluated candidate;
- **identical prompts**: LLM requests whose prompt (all messages) some other request of the run
  also sent (goal 0);
- prompt length per kind (characters: median, max; seed, mutate, crossover, fix, ideas, repair).

Prices: 2.5 / 10 USD per million prompt / completion tokens (characters / 4). The last line of
output is one JSON object.
"""

from __future__ import annotations

import argparse
import io
import json
import sqlite3
import statistics
import sys
import tempfile
import time
from collections import Counter, defaultdict
from pathlib import Path
from typing import Any

from scripted_llm import ScriptedLLM

from evokernel.config.loading import load_config
from evokernel.run.progress import ProgressPrinter
from evokernel.run.runner import run_experiment

TASK = Path(__file__).resolve().parent / "data" / "llm_spend_axpy.py"
PARAMS = {
    "pike_b": ["strategy.params.branches=4", "strategy.params.top_k=2", "strategy.params.fix_rounds=2"],
    "pike_o": ["strategy.params.islands=2", "strategy.params.batch=3"],
}
FAST = [
    "evaluation.timing.warmup_ms=1",
    "evaluation.timing.min_reps=3",
    "evaluation.timing.max_ms=50",
    "evaluation.timeout_s=120",
]
UNUSABLE = ("no_code", "duplicate", "truncated")


def run_one(
    strategy: str, evaluations: int, seed: int, folder: Path, extra: list[str]
) -> tuple[str, Path, list[Any]]:
    db = folder / f"{strategy}.db"
    with ScriptedLLM(seed=seed) as llm:
        config = load_config(
            None,
            [
                f"tasks=[{TASK}]",
                f"library={db}",
                f"seed={seed}",
                f"strategy.name={strategy}",
                *PARAMS[strategy],
                f"budget.evaluations={evaluations}",
                "mutators.llm.model=openai/bench-model",
                f"mutators.llm.api_base={llm.url}",
                "mutators.llm.input_cost_per_mtok=2.5",
                "mutators.llm.output_cost_per_mtok=10",
                "mutators.llm.timeout_s=60",
                "concurrency.llm=4",
                *FAST,
                *extra,
            ],
        )
        summary = run_experiment(config, reporter=ProgressPrinter(io.StringIO()))
        return summary.run_id, db, llm.log


def _kind(operator: str, prompt: str) -> str:
    return "repair" if prompt.startswith("[repair") else operator


def measure(run_id: str, db: Path) -> dict[str, Any]:
    with sqlite3.connect(db) as conn:
        proposals = {
            pid: (op, state)
            for pid, op, state in conn.execute(
                "select id, operator, state from proposals where run_id=?", (run_id,)
            )
        }
        evaluated = {
            pid: (cid, status)
            for pid, cid, status in conn.execute(
                "select c.proposal_id, c.id, e.status from candidates c "
                "join evaluations e on e.candidate_id=c.id where c.run_id=?",
                (run_id,),
            )
        }
        parents = defaultdict(list)
        for child, parent in conn.execute(
            "select p.child_id, p.parent_id from candidate_parents p join candidates c on c.id=p.child_id "
            "where c.run_id=?",
            (run_id,),
        ):
            parents[parent].append(child)
        calls = conn.execute(
            "select proposal_id, cost_usd, outcome, prompt, prompt_hash, prompt_tokens "
            "from llm_calls where run_id=?",
            (run_id,),
        ).fetchall()
    total = sum(c[1] for c in calls)
    wasted = sum(c[1] for c in calls if c[0] not in evaluated and proposals.get(c[0], ("", ""))[0] != "ideas")
    wasted += sum(
        c[1] for c in calls if proposals.get(c[0], ("", ""))[0] == "ideas" and proposals[c[0]][1] != "done"
    )
    unusable = {c[0] for c in calls if c[2] in UNUSABLE}
    repaired_replies = sum(1 for pid in unusable if pid in evaluated)
    cand_status = {cid: status for cid, status in evaluated.values()}
    by_cand_proposal = {cid: pid for pid, (cid, _s) in evaluated.items()}
    # Triton compiles at the first call, so a kernel that does not compile fails as either.
    no_compile = [cid for cid, status in cand_status.items() if status in ("compile_error", "runtime_error")]
    fixed = sum(
        1
        for cid in no_compile
        if any(proposals.get(by_cand_proposal[ch], ("", ""))[0] == "fix" for ch in parents.get(cid, []))
    )
    broken = len(unusable) + len(no_compile)
    hashes = Counter(c[4] for c in calls)
    identical = sum(1 for c in calls if hashes[c[4]] > 1)
    lengths: dict[str, list[int]] = defaultdict(list)
    for c in calls:
        lengths[_kind(proposals.get(c[0], ("?", ""))[0], c[3])].append(len(c[3]))
    statuses = Counter(cand_status.values())
    return {
        "llm_calls": len(calls),
        "llm_usd": round(total, 5),
        "wasted_usd": round(wasted, 5),
        "wasted_share": round(wasted / total, 4) if total else 0.0,
        "unusable_replies": len(unusable),
        "no_compile_candidates": len(no_compile),
        "repaired": repaired_replies + fixed,
        "repaired_share": round((repaired_replies + fixed) / broken, 3) if broken else None,
        "identical_prompts": identical,
        "evaluated": len(evaluated),
        "statuses": dict(statuses),
        "failed_proposals": sum(1 for op, st in proposals.values() if st == "failed"),
        "prompt_chars": {
            k: {"n": len(v), "median": int(statistics.median(v)), "max": max(v)}
            for k, v in sorted(lengths.items())
        },
    }


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--strategies", nargs="+", default=["pike_b", "pike_o"], choices=sorted(PARAMS))
    ap.add_argument("--evaluations", type=int, default=40)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--keep", type=Path, help="write the libraries here (default: a temporary folder)")
    ap.add_argument(
        "overrides", nargs="*", help="config overrides key=value, e.g. mutators.llm.repair_rounds=1"
    )
    args = ap.parse_args(argv)
    results: dict[str, Any] = {}
    with tempfile.TemporaryDirectory(prefix="llm-spend-") as scratch:
        tmp = args.keep or Path(scratch)
        tmp.mkdir(parents=True, exist_ok=True)
        for strategy in args.strategies:
            start = time.monotonic()
            run_id, db, log = run_one(strategy, args.evaluations, args.seed, tmp, args.overrides)
            result = measure(run_id, db)
            result["wall_s"] = round(time.monotonic() - start, 1)
            result["reply_shapes"] = dict(Counter(shape for _k, _c, shape in log))
            results[strategy] = result
            print(
                f"{strategy}: {result['evaluated']} evaluated, {result['llm_calls']} LLM calls, "
                f"${result['llm_usd']:.4f}; wasted {100 * result['wasted_share']:.1f} % "
                f"(${result['wasted_usd']:.4f}); repaired {result['repaired']} of "
                f"{result['unusable_replies'] + result['no_compile_candidates']}; "
                f"identical prompts {result['identical_prompts']}; {result['wall_s']} s"
            )
            for kind, figures in result["prompt_chars"].items():
                print(
                    f"  {kind:<10} prompts {figures['n']:>3}  median {figures['median']:>6} chars"
                    f"  max {figures['max']:>6}"
                )
    goals = {s: r["wasted_share"] <= 0.05 and r["identical_prompts"] == 0 for s, r in results.items()}
    print(
        json.dumps(
            {
                "bench": "llm_spend",
                "seed": args.seed,
                "evaluations": args.evaluations,
                "overrides": args.overrides,
                "goals_met": goals,
                "results": results,
            },
            sort_keys=True,
        )
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
