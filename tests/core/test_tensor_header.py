"""Which load_inline calls get the tensor header for torch's in their .cu (tensor_cu builds), what
they get instead, and that the header declares every name it claims to, with torch's line numbers
(a real nvcc compile against this torch's headers)."""

from __future__ import annotations

import functools
import inspect
import shutil
import subprocess
from pathlib import Path
from typing import Any

import pytest
import torch.utils.cpp_extension as cpp_extension

from evokernel.evaluation import tensor_header
from evokernel.evaluation.inline_builds import tensor_cu_arguments

from .test_inline_builds import KERNELBENCH_CU, LEAN_CU, call

PARAMETERS = inspect.signature(cpp_extension.load_inline).parameters


def test_a_cu_naming_only_tensors_gets_the_tensor_header_and_main_cpp_stays_as_torch_writes_it() -> None:
    cu_only_implicit = KERNELBENCH_CU.replace("#include <torch/extension.h>\n", "")
    for source in (KERNELBENCH_CU, cu_only_implicit, [KERNELBENCH_CU, LEAN_CU]):
        tensor = tensor_cu_arguments(call(cuda_sources=source, extra_cuda_cflags=["-O3"]), PARAMETERS)
        assert tensor is not None, source
        # main.cpp: torch's own first line, then the candidate's declarations, as torch writes it.
        assert tensor["cpp_sources"] == ["#include <torch/extension.h>", "void run();"]
        assert tensor["no_implicit_headers"] is True and tensor["extra_cuda_cflags"] == ["-O3"]
        prelude, *sources = tensor["cuda_sources"]
        assert prelude == "\n".join(tensor_header.PRELUDE) and prelude.endswith("#line 4")
        originals = source if isinstance(source, list) else [source]
        for got, original in zip(sources, originals, strict=True):
            assert len(got.splitlines()) == len(original.splitlines())  # one line for one line
            assert "#include <torch/" not in got
            kept = [line for line in original.splitlines() if "#include <torch/" not in line]
            assert [line for line in got.splitlines() if "evokernel tensor_cu" not in line] == kept


def test_a_cu_naming_more_of_torch_keeps_torch_s_headers() -> None:
    for extra in (
        "auto r = torch::sqrt(x);",  # an operator the header does not declare (pike pop_25 task_14)
        "at::Tensor r = at::matmul(x, x);",
        "auto n = torch::cuda::device_count();",  # torch's, not the candidate's at::cuda
        "namespace py = pybind11;",
        "#include <torch/csrc/autograd/variable.h>",
        "#include <torch/script.h>",
        "TORCH_LIBRARY(ext, m) {}",
    ):
        assert tensor_cu_arguments(call(cuda_sources=KERNELBENCH_CU + "\n" + extra), PARAMETERS) is None, (
            extra
        )
    # The candidate's own CUDA headers are its own: at::cuda and c10::cuda are fine.
    own = (
        "#include <ATen/cuda/CUDAContext.h>\n"
        "auto s = at::cuda::getCurrentCUDAStream();\nc10::cuda::CUDAGuard g(0);"
    )
    assert tensor_cu_arguments(call(cuda_sources=KERNELBENCH_CU + "\n" + own), PARAMETERS) is not None
    # Calls another build path (or torch) handles.
    assert (
        tensor_cu_arguments(call(cuda_sources=KERNELBENCH_CU, no_implicit_headers=True), PARAMETERS) is None
    )
    assert tensor_cu_arguments(call(cuda_sources=None, cpp_sources=KERNELBENCH_CU), PARAMETERS) is None
    assert tensor_cu_arguments(call(cuda_sources=KERNELBENCH_CU, cpp_sources=[3]), PARAMETERS) is None


# Every name the header claims, under torch::, at:: or c10:: as candidates write them.
EVERY_NAME = r"""static_assert(__LINE__ == 4, "the first line is line 4, as under torch's headers");
#include <cuda_fp16.h>
__global__ void twice(float* y, int n) { int i = threadIdx.x; if (i < n) y[i] *= 2.0f; }
torch::Tensor run(torch::Tensor x, torch::IntArrayRef shape, torch::optional<torch::Tensor> bias) {
    TORCH_CHECK(x.is_contiguous(), "x must be contiguous, got ", x.sizes());
    TORCH_CHECK(x.scalar_type() == torch::kFloat32 || x.dtype() == torch::kFloat, "float");
    torch::TensorOptions options =
        x.options().dtype(torch::kFloat).memory_format(torch::MemoryFormat::Contiguous);
    torch::Tensor y = torch::empty(shape, options);
    auto z = torch::zeros_like(x) + torch::zeros({2, 3}, x.options()) * 0 + at::empty_like(x).fill_(1);
    at::Tensor w = torch::empty_like(y).view({-1}).contiguous();
    torch::Dtype kinds[] = {torch::kHalf, torch::kDouble, torch::kInt, torch::kLong, torch::kBFloat16,
        torch::kByte, torch::kChar, torch::kShort, torch::kBool, torch::kFloat16, torch::kFloat64,
        torch::kInt8, torch::kInt16, torch::kInt32, torch::kInt64, torch::kUInt8};
    torch::ScalarType first = kinds[0];
    torch::Device device(torch::kCUDA, 0);
    torch::DeviceType where = x.is_cuda() ? torch::kCUDA : torch::kCPU;
    c10::Half h = c10::Half(1.0f); at::BFloat16 b = at::BFloat16(2.0f); torch::Half h2 = h;
    std::string said = c10::str("n=", x.numel(), where == torch::kCPU, first, device.index());
    c10::optional<int64_t> none = torch::nullopt;
    AT_DISPATCH_FLOATING_TYPES_AND_HALF(x.scalar_type(), "run", [&] { (void)sizeof(scalar_t); });
    twice<<<1, 32>>>(w.data_ptr<float>(), static_cast<int>(w.numel()));
    (void)h2; (void)b; (void)none; (void)said; (void)bias;
    return y + z;
}
"""


def front_end(cu: Path, text: str) -> subprocess.CompletedProcess[str]:
    """nvcc's front end (preprocessor and cudafe++, which resolves every name of host and device
    code) on ``text``: ~14 s here against ~28 s for the whole compile."""
    cu.write_text(text)
    includes = [f"-I{p}" for p in cpp_extension.include_paths()]
    command = ["nvcc", "--cuda", str(cu), "-o", str(cu.with_suffix(".ii")), "-std=c++17", *includes]
    return subprocess.run(command, capture_output=True, text=True, timeout=300)


@pytest.mark.skipif(shutil.which("nvcc") is None, reason="no nvcc on this machine")
def test_the_tensor_header_declares_every_name_it_claims(tmp_path: Path) -> None:
    """nvcc against this torch's headers (a CPU torch has the same ATen ones)."""
    used = set(tensor_header.QUALIFIED.findall(EVERY_NAME))
    assert {name for _, name in used} == set(tensor_header.NAMES)  # the test names them all
    assert tensor_header.eligible([EVERY_NAME])
    done = front_end(tmp_path / "cuda.cu", "\n".join([*tensor_header.PRELUDE, EVERY_NAME]))
    assert done.returncode == 0, done.stderr[-3000:]
    # And a name it does not claim is an error there, which is what sends a build to light_cu.
    more = EVERY_NAME + "\nat::Tensor root(at::Tensor x) { return torch::sqrt(x); }\n"
    done = front_end(tmp_path / "more.cu", "\n".join([*tensor_header.PRELUDE, more]))
    assert done.returncode != 0 and "sqrt" in done.stderr  # the error names what is missing


def recorder(real: Any, made: list[dict[str, object]], failures: int) -> Any:
    @functools.wraps(real)  # torch's signature, which the wrapper binds calls to
    def load_inline(*args: object, **kwargs: object) -> str:
        made.append(kwargs)
        if len(made) <= failures:
            raise RuntimeError("Error building extension 'ext'")
        return "module"

    return load_inline


def test_a_build_that_fails_with_the_tensor_header_is_made_with_torch_types_then_as_written(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """The order of attempts and what each is counted as; torch's load_inline is replaced by a
    recorder that fails the first builds as torch reports a compile error."""
    from evokernel.evaluation import inline_builds

    real = cpp_extension.load_inline
    for failures, built_as in ((0, "tensor_cu"), (1, "light_cu"), (2, "as written")):
        made: list[dict[str, object]] = []
        monkeypatch.setattr(cpp_extension, "load_inline", recorder(real, made, failures))
        monkeypatch.setattr(inline_builds, "counts", inline_builds.Counter())
        inline_builds.install(None)
        assert cpp_extension.load_inline(**call(cuda_sources=KERNELBENCH_CU)) == "module"
        kinds = ["tensor_cu", "light_cu", "as written"][: failures + 1]
        assert len(made) == len(kinds), built_as
        assert made[0]["no_implicit_headers"] is True  # the tensor header
        if failures >= 1:
            assert "#include <torch/types.h>  /* evokernel light_cu" in str(made[1]["cuda_sources"])
        if failures == 2:
            assert made[2] == call(cuda_sources=KERNELBENCH_CU)
        expected = {f"{k}_fallback": 1 for k in kinds[:failures]}
        if built_as != "as written":
            expected[built_as] = 1
        assert dict(inline_builds.counts) == expected


def test_a_cu_the_tensor_header_cannot_take_still_gets_torch_types_then_as_written(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """torch::sqrt is not the tensor header's: the light header is the first attempt there."""
    from evokernel.evaluation import inline_builds

    source = KERNELBENCH_CU + "\nat::Tensor root(at::Tensor x) { return torch::sqrt(x); }\n"
    made: list[dict[str, object]] = []
    monkeypatch.setattr(cpp_extension, "load_inline", recorder(cpp_extension.load_inline, made, 1))
    monkeypatch.setattr(inline_builds, "counts", inline_builds.Counter())
    inline_builds.install(None)
    assert cpp_extension.load_inline(**call(cuda_sources=source)) == "module"
    assert len(made) == 2
    assert "#include <torch/types.h>  /* evokernel light_cu" in str(made[0]["cuda_sources"])
    assert made[1] == call(cuda_sources=source)
    assert dict(inline_builds.counts) == {"light_cu_fallback": 1}
