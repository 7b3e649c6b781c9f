"""RMSNorm over the last dim of a (batch_size, dim) fp32 matrix: x / sqrt(mean(x^2) + eps) * weight.

ModelNew must hold a parameter named ``weight`` of shape (dim,) and a float ``eps``: the evaluator
copies the reference's state_dict into it. The weight is random (not ones) so it matters.
"""

import torch
import torch.nn as nn

batch_size = 8192
dim = 4096


class Model(nn.Module):
    def __init__(self, dim: int, eps: float = 1e-6) -> None:
        super().__init__()
        self.eps = eps
        self.weight = nn.Parameter(torch.randn(dim) * 0.5 + 1.0)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        rms = torch.rsqrt(x.pow(2).mean(dim=-1, keepdim=True) + self.eps)
        return x * rms * self.weight


def get_inputs() -> list[torch.Tensor]:
    return [torch.randn(batch_size, dim) * 3.0]


def get_init_inputs() -> list:
    return [dim]


EVOKERNEL = {
    "level": 1,
    "description": "RMSNorm (eps 1e-6, learned weight) over the last dim, fp32",
    "small": {"batch_size": 8, "dim": 256},
    "variants": [{"batch_size": 7, "dim": 333}],
    "seed": "rmsnorm.seed.py",
}
