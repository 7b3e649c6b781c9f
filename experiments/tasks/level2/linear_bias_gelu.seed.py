"""Triton seed for linear_bias_gelu.py: a tiled x @ W^T with fp32 accumulation, bias and tanh-GELU
applied to the accumulator before the single fp16 store (one pass over the output, not three).
"""

import torch
import torch.nn as nn
import triton
import triton.language as tl


@triton.jit
def _linear_gelu_kernel(
    x_ptr,
    w_ptr,
    b_ptr,
    y_ptr,
    M,
    N,
    K,
    stride_xm,
    stride_xk,
    stride_wn,
    stride_wk,
    stride_ym,
    stride_yn,
    BLOCK_M: tl.constexpr,
    BLOCK_N: tl.constexpr,
    BLOCK_K: tl.constexpr,
):
    pid_m = tl.program_id(0)
    pid_n = tl.program_id(1)
    offs_m = pid_m * BLOCK_M + tl.arange(0, BLOCK_M)
    offs_n = pid_n * BLOCK_N + tl.arange(0, BLOCK_N)
    offs_k = tl.arange(0, BLOCK_K)
    acc = tl.zeros([BLOCK_M, BLOCK_N], dtype=tl.float32)
    for k0 in range(0, K, BLOCK_K):
        ks = k0 + offs_k
        x = tl.load(
            x_ptr + offs_m[:, None] * stride_xm + ks[None, :] * stride_xk,
            mask=(offs_m[:, None] < M) & (ks[None, :] < K),
            other=0.0,
        )
        # W is (N, K) row-major; read the (BLOCK_K, BLOCK_N) tile of W^T through strides.
        w = tl.load(
            w_ptr + ks[:, None] * stride_wk + offs_n[None, :] * stride_wn,
            mask=(ks[:, None] < K) & (offs_n[None, :] < N),
            other=0.0,
        )
        acc += tl.dot(x, w)
    bias = tl.load(b_ptr + offs_n, mask=offs_n < N, other=0.0).to(tl.float32)
    h = acc + bias[None, :]
    # tanh(z) = sign(z) * (1 - e) / (1 + e) with e = exp(-2|z|): never overflows.
    z = 0.7978845608028654 * (h + 0.044715 * h * h * h)
    e = tl.exp(-2.0 * tl.abs(z))
    t = (1.0 - e) / (1.0 + e)
    t = tl.where(z < 0, -t, t)
    y = 0.5 * h * (1.0 + t)
    mask = (offs_m[:, None] < M) & (offs_n[None, :] < N)
    tl.store(
        y_ptr + offs_m[:, None] * stride_ym + offs_n[None, :] * stride_yn,
        y.to(y_ptr.dtype.element_ty),
        mask=mask,
    )


class ModelNew(nn.Module):
    def __init__(self, in_features: int, out_features: int) -> None:
        super().__init__()
        self.linear = nn.Linear(in_features, out_features, dtype=torch.float16)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x2 = x.reshape(-1, x.shape[-1])
        w = self.linear.weight
        M, K = x2.shape
        N = w.shape[0]
        y = torch.empty((M, N), device=x.device, dtype=x.dtype)
        grid = lambda meta: (triton.cdiv(M, meta["BLOCK_M"]), triton.cdiv(N, meta["BLOCK_N"]))  # noqa: E731
        _linear_gelu_kernel[grid](
            x2,
            w,
            self.linear.bias,
            y,
            M,
            N,
            K,
            x2.stride(0),
            x2.stride(1),
            w.stride(0),
            w.stride(1),
            y.stride(0),
            y.stride(1),
            BLOCK_M=64,
            BLOCK_N=64,
            BLOCK_K=32,
            num_warps=4,
            num_stages=2,
        )
        return y.view(*x.shape[:-1], N)
