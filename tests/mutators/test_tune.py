"""The tune operator on real seed kernels of the bundled suite: knobs, rewriting, and the moves of
both searches (the model-based one learning from history is tested in test_tune_model.py)."""

from __future__ import annotations

import asyncio
from pathlib import Path

import pytest

from evokernel.mutators.base import MutationRequest
from evokernel.mutators.tune import CHOICES, SEARCHES, TuneMutator, apply_values, find_knobs, valid_setting
from evokernel.tasks import load_task
from evokernel.types import Candidate, Proposal, Scored, source_hash

ROOT = Path(__file__).resolve().parents[2]


def scored(source: str, cid: int = 1) -> Scored:
    return Scored(Candidate(cid, "run", "t", cid, 0, 0, "seed_file", (), source), None)


def matmul_seed() -> str:
    source = load_task(ROOT / "experiments/tasks/level1/matmul_fp16.py").seed_source
    assert source is not None
    return source


def test_finds_launch_knobs_in_the_matmul_seed() -> None:
    names = [k.name for k in find_knobs(matmul_seed())]
    assert "num_warps" in names and "num_stages" in names
    assert any("BLOCK" in n for n in names)
    for knob in find_knobs(matmul_seed()):
        assert knob.value in knob.choices or knob.name.startswith("GROUP")


def test_triton_config_dicts_are_knobs() -> None:
    src = "import triton\nconfigs = [triton.Config({'BLOCK_M': 64, 'other': 3}, num_warps=4)]\n"
    assert [(k.name, k.value) for k in find_knobs(src)] == [("BLOCK_M", 64), ("num_warps", 4)]


def test_rewrite_changes_only_the_literals() -> None:
    src = "k[grid](x, y, BLOCK_SIZE=64, num_warps=4)  # BLOCK_SIZE=64 in a comment stays\n"
    knobs = find_knobs(src)
    out = apply_values(src, knobs, [128, 8])
    assert out == "k[grid](x, y, BLOCK_SIZE=128, num_warps=8)  # BLOCK_SIZE=64 in a comment stays\n"


def run(mutator: TuneMutator, request: MutationRequest):
    return asyncio.run(mutator.mutate(request))


def test_random_move_is_valid_reproducible_and_avoids_known() -> None:
    parent = matmul_seed()
    proposal = Proposal(task="matmul_fp16", operator="tune", parents=(1,))
    req = MutationRequest(
        proposal=proposal,
        task=load_task(ROOT / "experiments/tasks/level1/matmul_fp16.py"),
        parents=(scored(parent),),
        rng_seed=7,
    )
    tuner = TuneMutator(max_changes=2, search="random")
    first, again = run(tuner, req), run(tuner, req)
    assert first.source is not None and first.source == again.source  # same seed, same child
    assert first.source != parent
    before = {k.name + str(i): k.value for i, k in enumerate(find_knobs(parent))}
    after = {k.name + str(i): k.value for i, k in enumerate(find_knobs(first.source))}
    changed = [k for k in before if before[k] != after[k]]
    assert 1 <= len(changed) <= 2
    for knob in find_knobs(first.source):
        assert knob.value in knob.choices
    avoided = run(tuner, MutationRequest(**{**req.__dict__, "avoid": frozenset({source_hash(first.source)})}))
    assert avoided.source is not None and avoided.source != first.source


@pytest.mark.parametrize("search", SEARCHES)
def test_exhausted_space_and_knobless_parent_fail_with_a_reason(search: str) -> None:
    task = load_task(ROOT / "experiments/tasks/level1/matmul_fp16.py")
    tuner = TuneMutator(search=search)
    proposal = Proposal(task="t", operator="tune", parents=(1,))
    plain = "import torch\nclass ModelNew(torch.nn.Module):\n    def forward(self, x):\n        return x\n"
    res = run(tuner, MutationRequest(proposal=proposal, task=task, parents=(scored(plain),)))
    assert res.source is None and "no Triton knobs" in res.error
    tiny = "k[g](x, num_stages=1)\n"
    every = frozenset(source_hash(f"k[g](x, num_stages={v})\n") for v in CHOICES["num_stages"])
    res = run(tuner, MutationRequest(proposal=proposal, task=task, parents=(scored(tiny),), avoid=every))
    assert res.source is None and "no untried" in res.error


def test_knob_crossover_mixes_parents_of_one_structure() -> None:
    """Random move: one change from parent a cannot raise both knobs; only taking b's values can."""
    a = "k[g](x, BLOCK_SIZE=16, num_warps=1)\n"
    b = "k[g](x, BLOCK_SIZE=1024, num_warps=16)\n"
    task = load_task(ROOT / "experiments/tasks/level1/matmul_fp16.py")
    both_high = 0
    for seed in range(20):
        req = MutationRequest(
            proposal=Proposal(task="t", operator="tune", parents=(1, 2)),
            task=task,
            parents=(scored(a, 1), scored(b, 2)),
            rng_seed=seed,
        )
        res = run(TuneMutator(max_changes=1, search="random"), req)
        assert res.source is not None
        values = {k.name: k.value for k in find_knobs(res.source)}
        both_high += values["BLOCK_SIZE"] >= 512 and values["num_warps"] >= 8
    assert both_high > 0


def test_choices_follow_the_kernels_use_of_each_knob() -> None:
    """tl.dot caps tiles at 256; the bundled softmax (masked, no dot) may grow to a whole row."""
    matmul = {k.name: k.choices for k in find_knobs(matmul_seed())}
    assert matmul["BLOCK_M"] == (16, 32, 64, 128, 256)
    softmax = load_task(ROOT / "experiments/tasks/level1/softmax.py").seed_source
    assert softmax is not None
    assert {k.name: k.choices for k in find_knobs(softmax)}["BLOCK_SIZE"][-1] == 8192


UNMASKED = """import triton
import triton.language as tl


@triton.autotune(configs=[triton.Config({"BLOCK": 128}, num_warps=4)], key=["n"])
@triton.jit
def copy(x_ptr, y_ptr, n, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    tl.store(y_ptr + offs, tl.load(x_ptr + offs))
"""


def test_unmasked_kernel_blocks_only_shrink_and_space_overrides() -> None:
    block, warps = find_knobs(UNMASKED)
    assert (block.name, block.choices) == ("BLOCK", (16, 32, 64, 128))  # divisors of 128 only
    assert warps.name == "num_warps" and block.launch == warps.launch
    (block,) = [k for k in find_knobs(UNMASKED, {"BLOCK": [64, 32]}) if k.name == "BLOCK"]
    assert block.choices == (32, 64)


@pytest.mark.parametrize("search", SEARCHES)
def test_num_warps_must_fit_the_tile(search: str) -> None:
    knobs = find_knobs("k[g](x, BLOCK_SIZE=64, num_warps=2)\nk[g](y, BLOCK_SIZE=16, num_warps=1)\n")
    assert valid_setting(knobs, [64, 2, 32, 1]) and not valid_setting(knobs, [64, 4, 32, 1])
    assert not valid_setting(knobs, [64, 2, 16, 1])  # 32 threads on 16 elements
    task = load_task(ROOT / "experiments/tasks/level1/matmul_fp16.py")
    tuner = TuneMutator(max_changes=2, search=search)
    for seed in range(30):
        request = MutationRequest(
            proposal=Proposal(task="t", operator="tune", parents=(1,)),
            task=task,
            parents=(scored("k[g](x, BLOCK_SIZE=64, num_warps=2)\n"),),
            rng_seed=seed,
        )
        res = run(tuner, request)
        assert res.source is not None
        values = {k.name: k.value for k in find_knobs(res.source)}
        assert 32 * values["num_warps"] <= values["BLOCK_SIZE"]


def test_model_crossover_takes_each_knob_from_a_parent() -> None:
    """Model search with two parents of one structure: every knob of the child is one parent's."""
    a = "k[g](x, BLOCK_SIZE=16, num_warps=1, num_stages=1)\n"
    b = "k[g](x, BLOCK_SIZE=1024, num_warps=16, num_stages=4)\n"
    task = load_task(ROOT / "experiments/tasks/level1/matmul_fp16.py")
    req = MutationRequest(
        proposal=Proposal(task="t", operator="tune", parents=(1, 2)),
        task=task,
        parents=(scored(a, 1), scored(b, 2)),
    )
    res = run(TuneMutator(), req)
    assert res.source is not None and res.source not in (a, b)
    values = [k.value for k in find_knobs(res.source)]
    assert all(v in pair for v, pair in zip(values, [(16, 1024), (1, 16), (1, 4)], strict=True))


def test_unknown_search_is_a_config_error() -> None:
    from evokernel.exceptions import ConfigError

    with pytest.raises(ConfigError, match=r"mutators\.tune\.search must be one of model, random"):
        TuneMutator(search="bayes")
