"""The tensor header for a ``.cu`` that uses only tensors (issue 37): ``tensor_cu`` builds.

Why: after ``light_cu`` (inline_builds.py) a real level-3 ``.cu`` still parses ``torch/types.h``,
which is all of ATen (every operator's declaration) plus autograd, three times (cudafe++, cicc and
the host compiler): 29-30 s of nvcc for pike-level3 files on the CI machine, nearly all of it the
header. What such a file names of torch is almost always the tensor type and its methods,
``empty``/``empty_like``/``zeros``, dtypes, ``TORCH_CHECK`` and ``AT_DISPATCH_*`` (pike-level3's
86 CUDA files: ``torch::Tensor`` 1,693 times, ``TORCH_CHECK`` 370, ``torch::empty`` 101,
``torch::empty_like`` 84; docs/benchmarks.md, session 23). :data:`PRELUDE` declares exactly that
(``ATen/core/Tensor.h`` with the methods and operators, four factories, the dispatch macros) and gives it the
``torch::`` names ``torch/types.h`` gives: the same files build in 14 s.

When: every ``torch::``/``at::``/``c10::`` name the CUDA sources use is one the prelude declares
(:data:`NAMES`; ``at::cuda``/``c10::cuda`` are the candidate's own includes), they include no
torch header but the umbrella ones and ``torch/types.h`` (those lines become comments, one line
each), and nothing of pybind11. The call then goes out with ``no_implicit_headers=True``,
``#include <torch/extension.h>`` first in ``cpp_sources`` as torch itself would put it (so
``main.cpp`` and its host binding are unchanged) and the prelude first in the ``.cu``, ending in a
``#line`` so that compiler messages keep the line numbers torch's own three header lines give.

What it changes: which declarations the ``.cu`` sees, never a line of the candidate's code.
``torch::empty`` and friends resolve to ATen's functions instead of the autograd wrappers of
``torch/types.h``; the two differ only for ``requires_grad`` options, which a kernel's outputs do
not set (and ATen refuses, loudly). A name the scan missed fails the build in the front end
(~3 s); the call is then made as ``light_cu`` would, then as written (``tensor_cu_fallback``).
"""

from __future__ import annotations

import re

# Declared by the prelude, under torch::, at:: and c10:: alike (torch:: takes at:: as types.h does).
NAMES = frozenset(
    {
        "Tensor", "TensorOptions", "IntArrayRef", "ScalarType", "Dtype", "MemoryFormat", "Device",
        "DeviceType", "Half", "BFloat16", "empty", "empty_like", "zeros", "zeros_like", "optional",
        "nullopt", "str", "kFloat", "kHalf", "kDouble", "kInt", "kLong", "kBFloat16", "kByte",
        "kChar", "kShort", "kBool", "kFloat16", "kFloat32", "kFloat64", "kInt8", "kInt16", "kInt32",
        "kInt64", "kUInt8", "kCUDA", "kCPU",
    }
)  # fmt: skip
# Namespaces the candidate's own includes declare (ATen/cuda/CUDAContext.h, c10/cuda/...).
OWN = frozenset({("at", "cuda"), ("c10", "cuda")})
PRELUDE = [
    # ATen's headers include each operator they use, not ATen/Functions.h with all of them, as in
    # torch's own build: the tensor operators' header then costs 13 s of nvcc instead of 18.
    "#define AT_PER_OPERATOR_HEADERS",
    "#include <ATen/core/Tensor.h>",
    "#include <ATen/TensorOperators.h>",
    "#include <ATen/ops/empty.h>",
    "#include <ATen/ops/empty_like.h>",
    "#include <ATen/ops/zeros.h>",
    "#include <ATen/ops/zeros_like.h>",
    "#include <ATen/Dispatch.h>",
    "#include <c10/util/Exception.h>",
    "#include <optional>",
    "#include <cuda.h>",
    "#include <cuda_runtime.h>",
    "namespace torch { using namespace at; using std::nullopt; using std::optional;"
    " using Dtype = at::ScalarType; constexpr auto kUInt8 = at::kByte;"
    " constexpr auto kInt8 = at::kChar; constexpr auto kInt16 = at::kShort;"
    " constexpr auto kInt32 = at::kInt; constexpr auto kInt64 = at::kLong;"
    " constexpr auto kFloat16 = at::kHalf; constexpr auto kFloat32 = at::kFloat;"
    " constexpr auto kFloat64 = at::kDouble; }  /* evokernel tensor_cu: what torch/types.h names */",
    # torch's own three header lines (types.h, cuda.h, cuda_runtime.h) put the sources at line 4.
    "#line 4",
]
QUALIFIED = re.compile(r"\b(torch|at|c10)\s*::\s*(\w+)")
TORCH_INCLUDE = re.compile(r'^[ \t]*#[ \t]*include[ \t]*[<"](torch/[\w/.]+)[>"]', re.M)
REPLACEABLE = {"torch/extension.h", "torch/torch.h", "torch/all.h", "torch/types.h"}
PYBIND = re.compile(r"pybind|PYBIND|\bpy::|\bTHP|TORCH_LIBRARY")


def eligible(cuda: list[str]) -> bool:
    """Whether every torch name of these CUDA sources is one the prelude declares."""
    for source in cuda:
        if PYBIND.search(source):
            return False
        if any(m.group(1) not in REPLACEABLE for m in TORCH_INCLUDE.finditer(source)):
            return False
        for m in QUALIFIED.finditer(source):
            if m.group(2) not in NAMES and (m.group(1), m.group(2)) not in OWN:
                return False
    return True


def without_torch_includes(source: str) -> str:
    """``source`` with each torch header include a comment of one line."""
    return TORCH_INCLUDE.sub(lambda m: f"/* evokernel tensor_cu: was {m.group(1)} */", source)
