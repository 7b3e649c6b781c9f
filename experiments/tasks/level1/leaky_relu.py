"""LeakyReLU (negative_slope from the constructor) of a (batch_size, dim) fp32 matrix, elementwise.

The slope is 0.05 rather than PyTorch's default 0.01 so that the negative half carries values up
to ~0.2: a kernel computing plain ReLU misses by far more than the 1e-4 tolerance.
"""

import torch
import torch.nn as nn
import torch.nn.functional as F

batch_size = 4096
dim = 8192


class Model(nn.Module):
    def __init__(self, negative_slope: float) -> None:
        super().__init__()
        self.negative_slope = negative_slope

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return F.leaky_relu(x, negative_slope=self.negative_slope)


def get_inputs() -> list[torch.Tensor]:
    return [torch.randn(batch_size, dim)]


def get_init_inputs() -> list:
    return [0.05]


EVOKERNEL = {
    "level": 1,
    "description": "LeakyReLU with negative_slope 0.05, elementwise over a (batch_size, dim) fp32 matrix",
    "small": {"batch_size": 16, "dim": 256},
    "variants": [{"batch_size": 7, "dim": 333}],
}
