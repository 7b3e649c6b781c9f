"""Triton seed for residual_add_layernorm.py: one program per row; three masked passes that each
re-read both operands (mean, variance, normalise) instead of materialising x + residual.
"""

import torch
import torch.nn as nn
import triton
import triton.language as tl


@triton.jit
def _add_layernorm_kernel(
    x_ptr, r_ptr, w_ptr, b_ptr, y_ptr, n_cols, stride_x, stride_r, stride_y, eps, BLOCK_SIZE: tl.constexpr
):
    row = tl.program_id(0).to(tl.int64)
    x_row = x_ptr + row * stride_x
    r_row = r_ptr + row * stride_r
    y_row = y_ptr + row * stride_y
    offs = tl.arange(0, BLOCK_SIZE)

    acc = tl.zeros([BLOCK_SIZE], tl.float32)
    for start in range(0, n_cols, BLOCK_SIZE):
        cols = start + offs
        mask = cols < n_cols
        x = tl.load(x_row + cols, mask=mask, other=0.0).to(tl.float32)
        r = tl.load(r_row + cols, mask=mask, other=0.0).to(tl.float32)
        acc += x + r
    mean = tl.sum(acc, axis=0) / n_cols

    acc = tl.zeros([BLOCK_SIZE], tl.float32)
    for start in range(0, n_cols, BLOCK_SIZE):
        cols = start + offs
        mask = cols < n_cols
        x = tl.load(x_row + cols, mask=mask, other=0.0).to(tl.float32)
        r = tl.load(r_row + cols, mask=mask, other=0.0).to(tl.float32)
        d = tl.where(mask, x + r - mean, 0.0)
        acc += d * d
    rstd = 1.0 / tl.sqrt(tl.sum(acc, axis=0) / n_cols + eps)

    for start in range(0, n_cols, BLOCK_SIZE):
        cols = start + offs
        mask = cols < n_cols
        x = tl.load(x_row + cols, mask=mask, other=0.0).to(tl.float32)
        r = tl.load(r_row + cols, mask=mask, other=0.0).to(tl.float32)
        w = tl.load(w_ptr + cols, mask=mask, other=0.0).to(tl.float32)
        b = tl.load(b_ptr + cols, mask=mask, other=0.0).to(tl.float32)
        y = (x + r - mean) * rstd * w + b
        tl.store(y_row + cols, y.to(y_ptr.dtype.element_ty), mask=mask)


class ModelNew(nn.Module):
    def __init__(self, dim: int) -> None:
        super().__init__()
        self.ln = nn.LayerNorm(dim, eps=1e-5)

    def forward(self, x: torch.Tensor, residual: torch.Tensor) -> torch.Tensor:
        x2 = x.contiguous().view(-1, x.shape[-1])
        r2 = residual.contiguous().view(-1, residual.shape[-1])
        y = torch.empty_like(x2)
        n_rows, n_cols = x2.shape
        _add_layernorm_kernel[(n_rows,)](
            x2,
            r2,
            self.ln.weight,
            self.ln.bias,
            y,
            n_cols,
            x2.stride(0),
            r2.stride(0),
            y.stride(0),
            self.ln.eps,
            BLOCK_SIZE=64,
            num_warps=4,
            num_stages=2,
        )
        return y.view(x.shape)
