"""The fixed candidate sets of eval_throughput.py: Triton knob variations of the bundled seeds and
elementwise CUDA ``load_inline`` kernels in two source layouts.

* ``kernelbench`` (the issue's set): the ``.cu`` includes ``<torch/extension.h>`` and holds the
  ``torch::Tensor`` wrapper, the way KernelBench's reference solutions are written. nvcc then
  parses torch's headers three times (cudafe++, cicc, host gcc: 18 + 23 + 19 s of one core on the
  H100 node, 2026-11-23), 66 s per ``.cu``, plus 22 s for the generated ``main.cpp``.
* ``lean`` (what evokernel's CUDA prompt asks for, mutators/prompts/language_cuda.md): the ``.cu``
  holds only the kernel and a launcher over raw pointers with ``<cuda_runtime.h>``; the wrapper
  lives in ``cpp_sources``, and the stream comes from Python. Same kernels, same arithmetic.
"""

from __future__ import annotations

import re
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
TASKS = ROOT / "experiments" / "tasks"


def knobbed(source: str, block: int | None, warps: int | None, blocks: dict[str, int] | None = None) -> str:
    if block is not None:
        source = re.sub(r"BLOCK_SIZE=\d+", f"BLOCK_SIZE={block}", source, count=1)
    for name, value in (blocks or {}).items():
        source = re.sub(rf"{name}=\d+", f"{name}={value}", source, count=1)
    if warps is not None:
        source = re.sub(r"num_warps=\d+", f"num_warps={warps}", source, count=1)
    return source


WRONG = """

_Exact = ModelNew


class ModelNew(_Exact):
    def forward(self, *args):
        return super().forward(*args) * 1.001
"""


def triton_candidates() -> list[tuple[str, str, str]]:
    """(kind, task file, source) for 35 Triton candidates."""
    out: list[tuple[str, str, str]] = []
    rows = {
        "level1/gelu": [(128, 4), (256, 4), (512, 8), (1024, 8), (2048, 8)],
        "level1/rmsnorm": [(128, 4), (256, 4), (512, 8), (1024, 8)],
        "level1/softmax": [(128, 4), (256, 4), (512, 8), (1024, 8)],
        "level1/layernorm": [(128, 4), (256, 4), (512, 8), (1024, 8)],
        "level2/residual_add_layernorm": [(256, 4), (512, 8), (1024, 8)],
        "level2/scale_bias_softmax": [(256, 4), (1024, 8)],
    }
    for task, knobs in rows.items():
        seed = (TASKS / f"{task}.seed.py").read_text()
        out += [("correct", task, knobbed(seed, b, w)) for b, w in knobs]
    for task in ("level1/matmul_fp16", "level2/linear_bias_gelu"):
        seed = (TASKS / f"{task}.seed.py").read_text()
        tiles = [(64, 64, 32), (128, 64, 32)] + ([(64, 128, 64)] if task.endswith("fp16") else [])
        for m, n, k in tiles:
            out.append(("correct", task, knobbed(seed, None, 4, {"BLOCK_M": m, "BLOCK_N": n, "BLOCK_K": k})))
    for task in ("level1/gelu", "level1/softmax"):
        out.append(("slow", task, knobbed((TASKS / f"{task}.seed.py").read_text(), 16, 1)))
    for task in ("level1/gelu", "level1/rmsnorm", "level1/softmax"):
        out.append(("incorrect", task, (TASKS / f"{task}.seed.py").read_text() + WRONG))
    for task in ("level1/gelu", "level1/layernorm", "level2/residual_add_layernorm"):
        out.append(
            ("compile_error", task, (TASKS / f"{task}.seed.py").read_text().replace("tl.load(", "tl.lod(", 1))
        )
    return out


CUDA_OPS = {
    "level1/gelu": (
        "0.5f * v * (1.0f + erff(v * 0.70710678118654752f))",
        "",
        "",
        "_ext.run(x.contiguous(), x, x, 0.0)",
    ),
    "level1/leaky_relu": (
        "v > 0.0f ? v : slope * v",
        "negative_slope: float",
        "self.negative_slope = float(negative_slope)",
        "_ext.run(x.contiguous(), x, x, self.negative_slope)",
    ),
    "level2/scale_bias_gelu": (
        "gelu_tanh(v * scale[i % dim] + bias[i % dim])",
        "dim: int",
        "self.scale = nn.Parameter(torch.ones(dim))\n        self.bias = nn.Parameter(torch.zeros(dim))",
        "_ext.run(x.contiguous(), self.scale, self.bias, 0.0)",
    ),
}

# The elementwise kernel both layouts share (a str.format template: braces doubled).
KERNEL = """__device__ __forceinline__ float gelu_tanh(float u) {{
    return 0.5f * u * (1.0f + tanhf(0.7978845608028654f * (u + 0.044715f * u * u * u)));
}}

__global__ void {name}_kernel(const float* __restrict__ x, const float* __restrict__ scale,
                              const float* __restrict__ bias, float* __restrict__ y,
                              long n, long dim, float slope) {{
    long first = (blockIdx.x * (long)blockDim.x + threadIdx.x) * {items};
#pragma unroll
    for (int j = 0; j < {items}; ++j) {{
        long i = first + j;
        if (i < n) {{
            float v = x[i];
            y[i] = {expr};
        }}
    }}
}}
"""

# The module both layouts end with (call: the extension's entry point).
MODEL_NEW = """class ModelNew(nn.Module):
    def __init__(self{args}) -> None:
        super().__init__()
        {init}

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return {call}
"""

CUDA_TEMPLATE = (
    '''"""{task}: elementwise CUDA kernel, {threads} threads x {items} items per thread."""

import torch
import torch.nn as nn
from torch.utils.cpp_extension import load_inline

_SRC = r"""
#include <torch/extension.h>
#include <cuda_runtime.h>
#include <math.h>

'''
    + KERNEL
    + '''
torch::Tensor run(torch::Tensor x, torch::Tensor scale, torch::Tensor bias, double slope) {{
    auto y = torch::empty_like(x);
    long n = x.numel();
    long per_block = {threads}L * {items};
    {name}_kernel<<<(n + per_block - 1) / per_block, {threads}>>>(
        x.data_ptr<float>(), scale.data_ptr<float>(), bias.data_ptr<float>(), y.data_ptr<float>(),
        n, scale.numel(), (float)slope);
    return y;
}}
"""
_ext = load_inline(
    "{name}",
    cpp_sources="torch::Tensor run(torch::Tensor x, torch::Tensor scale, torch::Tensor bias, double slope);",
    cuda_sources=_SRC,
    functions=["run"],
    verbose=False,
)


'''
    + MODEL_NEW
)


LEAN_TEMPLATE = (
    '''"""{task}: elementwise CUDA kernel, {threads} x {items} items per thread, lean layout."""

import torch
import torch.nn as nn
from torch.utils.cpp_extension import load_inline

_CU = r"""
#include <cuda_runtime.h>
#include <math.h>

'''
    + KERNEL
    + '''
int {name}_launch(const float* x, const float* scale, const float* bias, float* y, long n, long dim,
                  float slope, void* stream) {{
    long per_block = {threads}L * {items};
    {name}_kernel<<<(n + per_block - 1) / per_block, {threads}, 0, (cudaStream_t)stream>>>(
        x, scale, bias, y, n, dim, slope);
    return (int)cudaGetLastError();
}}
"""

_CPP = r"""
int {name}_launch(const float* x, const float* scale, const float* bias, float* y, long n, long dim,
                  float slope, void* stream);

torch::Tensor run(torch::Tensor x, torch::Tensor scale, torch::Tensor bias, double slope, int64_t stream) {{
    TORCH_CHECK(x.is_cuda() && x.is_contiguous() && x.scalar_type() == torch::kFloat32, "fp32 CUDA x");
    auto y = torch::empty_like(x);
    int err = {name}_launch(x.data_ptr<float>(), scale.data_ptr<float>(), bias.data_ptr<float>(),
                            y.data_ptr<float>(), x.numel(), scale.numel(), (float)slope,
                            reinterpret_cast<void*>(stream));
    TORCH_CHECK(err == 0, "kernel launch failed with CUDA error ", err);
    return y;
}}
"""
_ext = load_inline("{name}", cpp_sources=_CPP, cuda_sources=_CU, functions=["run"], verbose=False)


def _run(*args):
    return _ext.run(*args, torch.cuda.current_stream().cuda_stream)


'''
    + MODEL_NEW
)


def cuda_candidates(layout: str = "kernelbench") -> list[tuple[str, str, str]]:
    """(kind, task file, source) for 10 CUDA candidates in ``layout`` (kernelbench or lean)."""
    template = CUDA_TEMPLATE if layout == "kernelbench" else LEAN_TEMPLATE
    shapes = {
        "level1/gelu": [(128, 1), (256, 2), (512, 4), (1024, 1)],
        "level1/leaky_relu": [(128, 2), (256, 1), (512, 2)],
        "level2/scale_bias_gelu": [(128, 4), (256, 1), (1024, 2)],
    }
    out = []
    for task, variants in shapes.items():
        expr, args, init, call = CUDA_OPS[task]
        for threads, items in variants:
            name = f"evk_{task.split('/')[1]}_{threads}_{items}" + ("_lean" if layout == "lean" else "")
            if layout == "lean":
                call = call.replace("_ext.run(", "_run(")
            source = template.format(
                task=task,
                name=name,
                threads=threads,
                items=items,
                expr=expr,
                args=f", {args}" if args else "",
                init=init or "pass",
                call=call,
            )
            out.append(("correct", task, source))
    return out
