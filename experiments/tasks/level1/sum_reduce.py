"""Sum of a (batch_size, dim1, dim2) fp32 tensor over dim 1 -> (batch_size, dim2): a strided
(column) reduction, each output summing dim1 values that lie dim2 elements apart.
"""

import torch
import torch.nn as nn

batch_size = 32
dim1 = 1024
dim2 = 2048


class Model(nn.Module):
    def __init__(self, dim: int) -> None:
        super().__init__()
        self.dim = dim

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return torch.sum(x, dim=self.dim)


def get_inputs() -> list[torch.Tensor]:
    return [torch.randn(batch_size, dim1, dim2)]


def get_init_inputs() -> list:
    return [1]


EVOKERNEL = {
    "level": 1,
    "description": "Sum over the middle dim of a (batch_size, dim1, dim2) fp32 tensor",
    "small": {"batch_size": 4, "dim1": 64, "dim2": 128},
    "variants": [{"batch_size": 3, "dim1": 77, "dim2": 129}],
    # Outputs have std sqrt(1024) = 32, but a sum whose terms cancel has an absolute rounding error
    # set by its partial sums (~30 * 6e-8 per add, ~1e-4 after a different summation order), not by
    # the result: atol 1e-3 still rejects anything off by 0.003% of the output scale.
    "tolerance": {"float32": [1e-3, 1e-4]},
}
