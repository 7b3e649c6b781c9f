"""C = A @ B for fp16 A (M, K) and B (K, N); the result is fp16. ModelNew takes no arguments.

Both operands are scaled by K**-0.25 so C has unit variance whatever K is: with plain randn inputs
|C| ~ sqrt(4096) = 64, where one fp16 ulp is 0.06, and cuBLAS's fp16 split-K reductions could then
differ from an fp32-accumulating kernel by more than the fp16 atol of 1e-2 near zero.
4096^3 because 2048^3 takes only 47 us in cuBLAS on an H100, too short to time kernels against.
"""

import torch
import torch.nn as nn

M = 4096
N = 4096
K = 4096


class Model(nn.Module):
    def __init__(self) -> None:
        super().__init__()

    def forward(self, a: torch.Tensor, b: torch.Tensor) -> torch.Tensor:
        return torch.matmul(a, b)


def get_inputs() -> list[torch.Tensor]:
    s = K**-0.25
    a = (torch.randn(M, K) * s).half()
    b = (torch.randn(K, N) * s).half()
    return [a, b]


def get_init_inputs() -> list:
    return []


EVOKERNEL = {
    "level": 1,
    "description": "fp16 matmul (M, K) @ (K, N) -> (M, N), unit-variance output",
    "small": {"M": 64, "N": 64, "K": 64},
    # Odd M, N, K: every tile edge and the K tail need masks.
    "variants": [{"M": 33, "N": 65, "K": 47}],
    "seed": "matmul_fp16.seed.py",
}
