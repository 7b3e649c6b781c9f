"""A profile recorded in the library reaches the model: the mutate prompt carries the parent's
profile in a few bounded lines, the ideas prompt the reference's (over real HTTP to the scripted
OpenAI-compatible server; the assertions are on what the server received)."""

from __future__ import annotations

import asyncio
import copy
from pathlib import Path
from typing import Any

from evokernel.db import SolutionLibrary
from evokernel.evaluation.profiling.summary import MAX_CHARS, profile_lines
from evokernel.mutators.base import MutationRequest
from evokernel.types import Evaluation, Proposal, Status
from tests.db.helpers import make_task, new_candidate
from tests.mutators.test_llm import GOOD_REPLY, PARENT, _config, _mutator, _user_prompt
from tests.support.llm_server import LLMServer, Reply

# As the profiling stage recorded it for a Triton copy on an H200 (tests/core/test_profiling_gpu.py).
PROFILE: dict[str, Any] = {
    "level": "counters",
    "status": "ok",
    "device": "NVIDIA H200",
    "timeline": {
        "launches": 1,
        "copies": 0,
        "busy_ms": 0.264447,
        "span_ms": 0.264447,
        "idle_ms": 0.0,
        "lead_ms": 3.17,
        "kernels": [
            {"name": "copy_kernel", "base": "copy_kernel", "launches": 1, "ms": 0.264447, "share": 1.0}
        ],
    },
    "counters": {
        "status": "ok",
        "kernels": [
            {
                "name": "copy_kernel",
                "ms": 0.264447,
                "share": 1.0,
                "dram_pct": 83.44,
                "sm_pct": 6.19,
                "occupancy_pct": 80.13,
                "registers": 32.0,
                "smem_bytes": 0.0,
                "stalls": [["long_scoreboard", 139.17], ["lg_throttle", 69.03]],
            }
        ],
    },
    "sol": {
        "bytes": 1073741824,
        "flops": 0,
        "dtype": "float32",
        "bandwidth_gbps": 4800.0,
        "peak_tflops": 67.0,
        "memory_ms": 0.223696,
        "compute_ms": None,
        "min_ms": 0.223696,
        "limit": "memory",
        "share": 0.8344,
    },
    "bottleneck": "memory-bound",
    "why": "DRAM 83 % and SM 6 % of peak (time-weighted over the main kernels)",
}


def recorded_parent(tmp_path: Path) -> tuple[SolutionLibrary, Any]:
    lib = SolutionLibrary(tmp_path / "lib.db")
    run_id = lib.create_run("r", {})
    lib.register_task(run_id, make_task())
    cid = new_candidate(lib, run_id, PARENT)
    evaluation = Evaluation(
        Status.CORRECT, runtime_ms=0.268, eager_ms=0.27, speedup_eager=1.01, details={"profiling": PROFILE}
    )
    lib.record_evaluation(cid, evaluation)
    return lib, lib.get_candidate(cid)


def test_mutate_prompt_carries_the_recorded_profile(tmp_path: Path, llm_server: LLMServer) -> None:
    lib, parent = recorded_parent(tmp_path)
    llm_server.push(Reply(GOOD_REPLY))
    task = make_task()
    proposal = Proposal(task=task.name, operator="mutate", parents=(parent.candidate.id,))
    request = MutationRequest(proposal=proposal, task=task, parents=(parent,), hardware="NVIDIA H200")
    assert asyncio.run(_mutator(_config(llm_server)).mutate(request)).ok
    user = _user_prompt(llm_server)
    assert "Profile (counters, one call on NVIDIA H200, after timing):" in user
    assert "Bottleneck: memory-bound (DRAM 83 % and SM 6 % of peak" in user
    sol = (
        "Speed of light: 83% of the device's limit for this task (memory floor 0.224 ms: 1.07 GB at 4800 GB/s"
    )
    assert sol in user
    assert "Counters of copy_kernel: DRAM 83%, SM 6%, occupancy 80%, 32 registers/thread" in user
    assert "warps stall on long_scoreboard, lg_throttle" in user
    # The columns the report and PIKE-O read were filled from it.
    assert lib.read(lambda s: s.execute(_columns(parent.candidate.id)).one()) == (
        "memory-bound",
        0.8344,
        "memory-bound",
    )


def _columns(cid: int) -> Any:
    from sqlalchemy import select

    from evokernel.db.models import CandidateRow, EvaluationRow

    return (
        select(EvaluationRow.bottleneck, EvaluationRow.sol_share, CandidateRow.bottleneck)
        .join(CandidateRow, CandidateRow.id == EvaluationRow.candidate_id)
        .where(CandidateRow.id == cid)
    )


def test_ideas_prompt_carries_the_reference_profile(tmp_path: Path, llm_server: LLMServer) -> None:
    lib = SolutionLibrary(tmp_path / "lib.db")
    task = make_task()
    lib.put_task_profile(
        task.source_hash, "NVIDIA H200", "torch 2.11", "timeline", {**PROFILE, "level": "timeline"}
    )
    llm_server.push(Reply('```json\n["fuse", "vectorise"]\n```'))
    request = MutationRequest(
        proposal=Proposal(task=task.name, operator="ideas", count=2),
        task=task,
        reference_profile=lib.task_profile(task.source_hash),
    )
    assert asyncio.run(_mutator(_config(llm_server)).ideas(request, 2)).ideas == ("fuse", "vectorise")
    user = _user_prompt(llm_server)
    assert "## Where the reference's time goes (timeline profile on NVIDIA H200)" in user
    assert "Bottleneck: memory-bound" in user


def test_profile_lines_stay_bounded() -> None:
    long = copy.deepcopy(PROFILE)
    long["why"] = "x" * 500
    long["timeline"]["kernels"] = [
        {
            "name": "void cutlass::Kernel<" + "T" * 300 + ">",
            "base": "Kernel",
            "launches": 3,
            "ms": 1.0,
            "share": 0.3,
        }
    ] * 8
    lines = profile_lines(long)
    assert 1 <= len(lines) <= 4 and sum(len(line) + 1 for line in lines) <= MAX_CHARS + 1
    assert profile_lines({"status": "skipped: no GPU"}) == [] and profile_lines(None) == []
