"""y = GELU_tanh(x * scale + bias) with per-channel (dim,) parameters, fp32: a folded affine
(e.g. an inference-time batch norm) fused into the activation.

ModelNew must hold parameters named ``scale`` and ``bias`` of shape (dim,): the evaluator copies
the reference's state_dict into it. Both are random so each one matters.
"""

import torch
import torch.nn as nn
import torch.nn.functional as F

batch_size = 8192
dim = 4096


class Model(nn.Module):
    def __init__(self, dim: int) -> None:
        super().__init__()
        self.scale = nn.Parameter(torch.randn(dim) * 0.5 + 1.0)
        self.bias = nn.Parameter(torch.randn(dim) * 0.5)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return F.gelu(x * self.scale + self.bias, approximate="tanh")


def get_inputs() -> list[torch.Tensor]:
    return [torch.randn(batch_size, dim) * 2.0]


def get_init_inputs() -> list:
    return [dim]


EVOKERNEL = {
    "level": 2,
    "description": "Per-channel scale and bias followed by tanh-approximated GELU, fp32",
    "small": {"batch_size": 16, "dim": 256},
    "variants": [{"batch_size": 7, "dim": 333}],
}
