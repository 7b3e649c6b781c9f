"""Which load_inline calls get torch's implicit header dropped from the .cu, and what they get
instead (the builds themselves run on the GPU machine: tests/core/test_pool.py, test_gpu.py)."""

from __future__ import annotations

import inspect

import torch.utils.cpp_extension as cpp_extension

from evokernel.evaluation.inline_builds import inline_build_note, lean_cu_arguments

PARAMETERS = inspect.signature(cpp_extension.load_inline).parameters
LEAN_CU = "#include <cuda_runtime.h>\n__global__ void k(float* y) { y[threadIdx.x] = 1.0f; }"


def call(**change: object) -> dict[str, object]:
    return {"name": "ext", "cpp_sources": "void run();", "cuda_sources": LEAN_CU, **change}


def test_a_torch_free_cu_loses_only_the_torch_header() -> None:
    lean = lean_cu_arguments(call(), PARAMETERS)
    assert lean is not None
    # main.cpp as torch writes it: torch/extension.h first (where the precompiled header applies).
    assert lean["cpp_sources"] == ["#include <torch/extension.h>", "void run();"]
    assert lean["cuda_sources"] == ["#include <cuda.h>", "#include <cuda_runtime.h>", LEAN_CU]
    assert lean["no_implicit_headers"] is True
    assert lean["name"] == "ext"


def test_a_cu_naming_anything_of_torch_is_left_as_written() -> None:
    for cu in (
        "#include <torch/extension.h>\n" + LEAN_CU,
        LEAN_CU + "\nvoid f(at::Half* p);",
        LEAN_CU + "\n// takes a Tensor's data pointer",
        LEAN_CU + "\nvoid g() { C10_CUDA_KERNEL_LAUNCH_CHECK(); }",
        LEAN_CU + '\nvoid h() { AT_DISPATCH_FLOATING_TYPES(t, "h", [&] {}); }',
    ):
        assert lean_cu_arguments(call(cuda_sources=[cu]), PARAMETERS) is None, cu


def test_calls_that_are_not_eligible_are_left_as_written() -> None:
    assert lean_cu_arguments(call(cuda_sources=None), PARAMETERS) is None  # C++ only
    assert lean_cu_arguments(call(no_implicit_headers=True), PARAMETERS) is None  # already lean
    assert lean_cu_arguments(call(cuda_sources=[LEAN_CU, 3]), PARAMETERS) is None  # torch's error
    older_torch = {k: v for k, v in PARAMETERS.items() if k != "no_implicit_headers"}
    assert lean_cu_arguments(call(), older_torch) is None


def test_the_build_note_reports_only_well_formed_counts() -> None:
    counts = {"header": 1, "lean_cu": 1, "lean_cu_fallback": 0}
    note = "load_inline builds: 1 with the precompiled torch header, 1 without torch's header in the .cu"
    assert inline_build_note(counts) == note
    assert inline_build_note({"lean_cu_fallback": 2}) == (
        "load_inline builds: 2 rebuilt as written after failing without it"
    )
    assert inline_build_note("lots") == ""
    assert inline_build_note({"header": "1"}) == ""
