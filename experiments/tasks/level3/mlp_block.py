"""Transformer MLP: fc2(GELU(fc1(x))) over (batch_size, seq_len, embed_dim) fp32 tokens.

ModelNew must hold submodules ``fc1`` (embed_dim -> hidden_dim) and ``fc2`` (hidden_dim ->
embed_dim), or parameters with those names and shapes: the evaluator copies the reference's
state_dict into it. fp32 throughout; the reference runs cuBLAS without TF32, so a TF32 tl.dot
(Triton's default for fp32) misses the 1e-4 tolerance: use input_precision="ieee" or a
mixed-precision scheme that stays within it.
"""

import torch
import torch.nn as nn
import torch.nn.functional as F

batch_size = 8
seq_len = 512
embed_dim = 1024
hidden_dim = 4096


class Model(nn.Module):
    def __init__(self, embed_dim: int, hidden_dim: int) -> None:
        super().__init__()
        self.fc1 = nn.Linear(embed_dim, hidden_dim)
        self.fc2 = nn.Linear(hidden_dim, embed_dim)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.fc2(F.gelu(self.fc1(x)))


def get_inputs() -> list[torch.Tensor]:
    return [torch.randn(batch_size, seq_len, embed_dim)]


def get_init_inputs() -> list:
    return [embed_dim, hidden_dim]


EVOKERNEL = {
    "level": 3,
    "description": "Transformer MLP block: Linear -> exact GELU -> Linear, fp32",
    "small": {"batch_size": 2, "seq_len": 8, "embed_dim": 32, "hidden_dim": 64},
    "variants": [{"batch_size": 3, "seq_len": 13}],
}
