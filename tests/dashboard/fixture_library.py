"""A small but complete library for the dashboard tests: one run, two tasks, a lineage with a
crossover, every kind of verdict, LLM calls with prompt and reply, a migration, stage timings.

Written through the public ``SolutionLibrary`` API, exactly as a run writes it."""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass

from evokernel.db import SolutionLibrary
from evokernel.types import Evaluation, IslandEvent, LLMCall, Proposal, Status, Task

BODY = "(torch.nn.Module):\n    def forward(self, x):\n        return torch.relu(x)\n"
REFERENCE = "import torch\n\nclass Model" + BODY
SEED = "import torch\n\nclass ModelNew" + BODY


def kernel(body: str) -> str:
    return (
        "import torch\nimport triton\nimport triton.language as tl\n\n\n@triton.jit\n"
        f"def relu_kernel(x_ptr, y_ptr, n, BLOCK: tl.constexpr):\n{body}\n\n"
        "class ModelNew(torch.nn.Module):\n    def forward(self, x):\n        return x.clamp_min(0)\n"
    )


V1 = kernel(
    "    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)\n    mask = offs < n\n"
    "    x = tl.load(x_ptr + offs, mask=mask)\n    tl.store(y_ptr + offs, tl.maximum(x, 0), mask=mask)"
)
V2 = V1.replace("tl.maximum(x, 0)", "tl.where(x > 0, x, 0.0)")
V3 = V2.replace("mask=mask)\n    tl.store", "mask=mask, other=0.0)\n    tl.store")


@dataclass(frozen=True)
class Fixture:
    run_id: str
    seed: int
    best: int  # the fastest correct candidate of "relu"
    child: int  # a mutation of best with one parent
    crossover: int  # two parents


def correct(speedup: float, profile: str = "strict") -> Evaluation:
    stages = [
        {"stage": "queue", "status": "passed", "reason": "", "seconds": 0.01},
        {"stage": "build", "status": "passed", "reason": "", "seconds": 0.4},
        {"stage": "correctness", "status": "passed", "reason": "", "seconds": 0.2},
        {"stage": "timing", "status": "passed", "reason": "", "seconds": 0.5},
    ]
    return Evaluation(
        Status.CORRECT,
        stage="timing",
        device="cpu (interpreter)",
        interpreter=True,
        max_abs_error=1e-7,
        runtime_ms=2.0 / speedup,
        runtime_iqr_ms=0.01,
        runtime_cv=0.02,
        eager_ms=2.0,
        speedup_eager=speedup,
        compile_ms=1.5,
        speedup_compile=1.5 / (2.0 / speedup),
        duration_s=1.1,
        details={
            "stages": stages,
            "profile": profile,
            "gpu_lock": {"wait_s": 0.1, "exclusive_s": 0.5, "shared_s": 0.2},
            # The shapes the verifier records (evokernel.evaluation.supervisor and timing).
            "checks": [
                {
                    "variant": v,
                    "label": f"variant {v}",
                    "seed": seed,
                    "ok": True,
                    "max_abs_error": 1e-7,
                    "seconds": 0.1,
                }
                for v in (0, 1)
                for seed in (0, 1, 2)
            ],
            "timing": {"candidate": {"median_ms": 2.0 / speedup, "reps": 25, "method": "cuda_event"}},
        },
    )


def profiled(evaluation: Evaluation) -> Evaluation:
    """``evaluation`` with the profile the profiling stage records (evaluation/profiling/)."""
    profile = {
        "level": "timeline",
        "status": "ok",
        "device": "NVIDIA H200",
        "bottleneck": "memory-bound",
        "why": "kernels run at 71% of the memory floor",
        "sol": {
            "share": 0.71,
            "limit": "memory",
            "min_ms": 0.79,
            "bytes": 3_800_000_000,
            "bandwidth_gbps": 4800.0,
        },
    }
    return dataclasses.replace(evaluation, details={**evaluation.details, "profiling": profile})


def _failed(status: Status, stage: str, reason: str) -> Evaluation:
    stages = [{"stage": stage, "status": "failed", "reason": reason, "seconds": 0.3}]
    return Evaluation(
        status, reason, stage=stage, device="cpu (interpreter)", duration_s=0.3, details={"stages": stages}
    )


def add(
    lib: SolutionLibrary,
    run_id: str,
    task: str,
    source: str,
    evaluation: Evaluation | None,
    *,
    operator: str = "mutate",
    parents: tuple[int, ...] = (),
    island: int = 0,
    generation: int = 0,
    llm: bool = True,
) -> int:
    proposal = lib.add_proposal(
        run_id,
        Proposal(
            task=task,
            operator=operator,
            island=island,
            generation=generation,
            parents=parents,
            idea="fuse the mask into the load" if llm else None,
        ),
    )
    if llm:
        call = LLMCall(
            model="fake/kernel-writer",
            prompt_tokens=812,
            completion_tokens=240,
            cost_usd=0.0031,
            latency_s=1.7,
            prompt=f"Improve this kernel for {task}:\n{source[:80]}",
            reply=f"```python\n{source}```",
        )
        lib.record_llm_call(run_id, proposal.id, call)
    cid = lib.add_candidate(run_id, proposal, source).id
    if evaluation is not None:
        lib.record_evaluation(cid, evaluation)
    return cid


def build(url: str) -> Fixture:
    """Write the fixture into the (empty) library at ``url``."""
    lib = SolutionLibrary(url)
    try:
        run_id = lib.create_run("fixture-run", {"strategy": "pike_b", "budget": {"evaluations": 40}}, seed=3)
        for pos, name in enumerate(("relu", "softmax")):
            lib.register_task(
                run_id,
                Task(name=name, path=f"/tasks/{name}.py", source=REFERENCE + f"# {name}\n", level=1),
                pos,
            )
            lib.ensure_islands(run_id, name, 2)
        lib.log_event(run_id, "started", "", {"tasks": ["relu", "softmax"]})
        seed = add(lib, run_id, "relu", SEED, correct(1.0), operator="seed", llm=False)
        best = add(lib, run_id, "relu", V1, profiled(correct(1.8)), parents=(seed,), generation=1)
        add(
            lib,
            run_id,
            "relu",
            V1 + "syntax error(",
            _failed(Status.COMPILE_ERROR, "build", "SyntaxError: '(' was never closed (line 14)"),
            parents=(seed,),
            island=1,
            generation=1,
        )
        add(
            lib,
            run_id,
            "relu",
            V1.replace("0)", "1)"),
            _failed(Status.INCORRECT, "correctness", "variant 0: max abs error 1.0 > atol 1e-4"),
            parents=(best,),
            generation=2,
        )
        add(
            lib,
            run_id,
            "relu",
            V1 + "\n# cached\n",
            _failed(
                Status.REJECTED, "integrity", "rule output_reuse: the output tensor is returned from a cache"
            ),
            parents=(best,),
            island=1,
            generation=2,
        )
        child = add(lib, run_id, "relu", V2, correct(1.3), parents=(best,), island=1, generation=2)
        lib.record_island_events(run_id, "relu", [IslandEvent("migrate", 3, 1, best, 0)])
        crossover = add(
            lib,
            run_id,
            "relu",
            V3,
            correct(1.6),
            operator="crossover",
            parents=(best, child),
            island=1,
            generation=3,
        )
        add(lib, run_id, "softmax", SEED, correct(1.0), operator="seed", llm=False)
        add(
            lib,
            run_id,
            "softmax",
            V1,
            _failed(Status.TIMEOUT, "timing", "timed out after 180 s"),
            generation=1,
        )
        return Fixture(run_id, seed, best, child, crossover)
    finally:
        lib.close()
