"""Row-wise softmax over the last dim of a (batch_size, dim) fp32 matrix.

Logits are scaled by 4 so each row has a few dominant entries: with unit-variance logits over 4096
columns every probability is below 0.01, and a kernel writing 1/dim everywhere would land within
~5e-3 of the reference. ModelNew takes no constructor arguments.
"""

import torch
import torch.nn as nn

batch_size = 8192
dim = 4096


class Model(nn.Module):
    def __init__(self) -> None:
        super().__init__()

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return torch.softmax(x, dim=-1)


def get_inputs() -> list[torch.Tensor]:
    return [torch.randn(batch_size, dim) * 4.0]


def get_init_inputs() -> list:
    return []


EVOKERNEL = {
    "level": 1,
    "description": "Row-wise softmax over the last dim of a (batch_size, dim) fp32 matrix",
    "small": {"batch_size": 8, "dim": 256},
    # Odd sizes exercise the masked tail of every column block.
    "variants": [{"batch_size": 7, "dim": 333}],
    "seed": "softmax.seed.py",
}
