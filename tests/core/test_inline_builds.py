"""Which load_inline calls get torch's implicit header dropped from the .cu, or torch/types.h for
torch/extension.h in it, and what they get instead (the builds themselves run on the GPU machine:
tests/core/test_pool.py, test_gpu.py)."""

from __future__ import annotations

import inspect
import shutil
from pathlib import Path

import pytest
import torch.utils.cpp_extension as cpp_extension

from evokernel.evaluation.arch_flags import supported_architectures, without_unbuildable_architectures
from evokernel.evaluation.inline_builds import (
    fails_as_written,
    inline_build_note,
    lean_cu_arguments,
    light_cu_arguments,
)

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
    assert inline_build_note({"light_cu": 2, "light_cu_fallback": 1}) == (
        "load_inline builds: 2 with torch/types.h for torch/extension.h in the .cu, "
        "1 rebuilt as written after failing with torch/types.h"
    )


KERNELBENCH_CU = """#include <torch/extension.h>
#include <cuda_runtime.h>
__global__ void k(float* y) { y[threadIdx.x] = 1.0f; }
torch::Tensor run(torch::Tensor x) {
    auto y = torch::empty_like(x);
    k<<<1, 32>>>(y.data_ptr<float>());
    return y;
}"""


def test_a_cu_that_includes_torch_extension_gets_torch_types_on_the_same_line() -> None:
    light = light_cu_arguments(call(cuda_sources=KERNELBENCH_CU, extra_cuda_cflags=["-O3"]))
    assert light is not None
    (cu,) = light["cuda_sources"]
    lines, original = cu.splitlines(), KERNELBENCH_CU.splitlines()
    assert len(lines) == len(original)  # compiler messages keep their line numbers
    assert lines[0].startswith("#include <torch/types.h>") and "torch/extension.h" in lines[0]
    assert lines[1:] == original[1:]
    # Everything else goes to torch as the candidate wrote it.
    assert {k: v for k, v in light.items() if k != "cuda_sources"} == {
        k: v for k, v in call(extra_cuda_cflags=["-O3"]).items() if k != "cuda_sources"
    }
    spaced = light_cu_arguments(call(cuda_sources=['  # include "torch/torch.h" // all of it\n', LEAN_CU]))
    assert spaced is not None
    assert spaced["cuda_sources"][0].startswith("#include <torch/types.h>")
    assert spaced["cuda_sources"][0].endswith(" // all of it\n")


def test_a_cu_using_what_only_the_umbrella_header_declares_keeps_it() -> None:
    for extra in (
        "namespace py = pybind11;",
        "PYBIND11_MODULE(ext, m) {}",
        "torch::nn::functional::relu(x);",
        "auto n = torch::cuda::device_count();",
        "at::parallel_for(0, n, 1, [&](int64_t a, int64_t b) {});",
        "TORCH_LIBRARY(ext, m) {}",
    ):
        assert light_cu_arguments(call(cuda_sources=KERNELBENCH_CU + "\n" + extra)) is None, extra


def test_a_cu_without_an_umbrella_include_is_not_a_light_build() -> None:
    assert light_cu_arguments(call()) is None  # torch-free: the lean build's case
    assert light_cu_arguments(call(cuda_sources="#include <torch/types.h>\n" + LEAN_CU)) is None
    assert light_cu_arguments(call(cuda_sources="// #include <torch/extension.h> later\n" + LEAN_CU)) is None
    assert light_cu_arguments(call(cuda_sources=None, cpp_sources=KERNELBENCH_CU)) is None
    assert light_cu_arguments(call(cuda_sources=[KERNELBENCH_CU, 3])) is None


CUDA13 = frozenset({75, 80, 86, 87, 88, 89, 90, 100, 103, 110, 120, 121})


def test_an_architecture_nvcc_cannot_build_for_is_dropped_with_its_value() -> None:
    fix = without_unbuildable_architectures
    assert fix(["-O3", "--use_fast_math", "-arch=sm_70"], CUDA13) == ["-O3", "--use_fast_math"]
    assert fix(["-arch", "sm_60", "-O3"], CUDA13) == ["-O3"]
    assert fix(["-gencode=arch=compute_70,code=sm_70", "-gencode=arch=compute_90,code=sm_90"], CUDA13) == [
        "-gencode=arch=compute_90,code=sm_90"
    ]
    assert fix(["-gencode", "arch=compute_52,code=sm_52", "-lineinfo"], CUDA13) == ["-lineinfo"]


def test_architectures_nvcc_builds_and_other_flags_are_left_as_written() -> None:
    fix = without_unbuildable_architectures
    assert fix(["-O3", "--use_fast_math", "-arch=sm_75"], CUDA13) is None
    assert fix(["-arch=sm_90a", "-std=c++17"], CUDA13) is None
    assert fix(["-O3", "-archive-looking-flag", "-U__CUDA_NO_HALF_OPERATORS__"], CUDA13) is None
    assert fix(["-arch=native"], CUDA13) is None  # no number: nvcc picks the GPU in hand


def test_the_installed_nvcc_lists_what_it_builds_for() -> None:
    nvcc = shutil.which("nvcc")
    if nvcc is None:
        pytest.skip("no nvcc on this machine")
    supported = supported_architectures(nvcc)
    assert supported is not None and 90 in supported  # every nvcc that lists architectures has sm_90
    assert supported_architectures("/no/such/nvcc") is None


def test_a_build_whose_cpp_part_alone_failed_is_not_rebuilt_as_written(tmp_path: Path) -> None:
    """The C++ part (main.cpp) is the same in every attempt: when ninja failed only there, the
    call as written would fail the same way (PIKE orig/task_43: -std=c++14 against torch's
    headers, three builds past the timeout, session 29). A real failed g++ build's message."""
    with pytest.raises(RuntimeError) as failed:
        cpp_extension.load_inline(
            "evk_cpp_part_fails",
            cpp_sources=["#include <Python.h>\nint f() { return undefined_name; }"],
            no_implicit_headers=True,
            build_directory=str(tmp_path),
        )
    assert fails_as_written(str(failed.value))
    cu_failed = "Error building extension 'x': ...\nFAILED: cuda.cuda.o\n/usr/local/cuda/bin/nvcc ..."
    assert not fails_as_written(cu_failed)
    assert not fails_as_written("FAILED: main.o\nc++ ...\nFAILED: cuda.cuda.o\nnvcc ...")
    assert not fails_as_written("Error building extension 'x'")  # verbose: ninja's output went to stdout
    assert "1 not rebuilt as written" in inline_build_note({"cpp_failed": 1})
