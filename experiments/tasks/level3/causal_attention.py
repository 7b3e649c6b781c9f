"""Multi-head causal self-attention block (GPT style) with explicit matmuls and softmax, fp32.

x (batch_size, seq_len, embed_dim) -> qkv projection -> per-head softmax(q k^T / sqrt(d) + causal
mask) v -> output projection. ModelNew must hold submodules ``qkv`` (embed_dim -> 3 * embed_dim,
q, k, v stacked in that order) and ``proj`` (embed_dim -> embed_dim), or parameters with those
names and shapes: the evaluator copies the reference's state_dict into it.

x has std 3: with unit inputs and nn.Linear's init the scores have std ~0.3, softmax is nearly
uniform and late rows average ~1000 values down to ~0.01; at std 3 the scores have std ~3, each
row attends to a few keys and the outputs stay O(1).
"""

import math

import torch
import torch.nn as nn

batch_size = 8
seq_len = 1024
embed_dim = 1024
num_heads = 16


class Model(nn.Module):
    def __init__(self, embed_dim: int, num_heads: int) -> None:
        super().__init__()
        self.num_heads = num_heads
        self.qkv = nn.Linear(embed_dim, 3 * embed_dim)
        self.proj = nn.Linear(embed_dim, embed_dim)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        B, T, C = x.shape
        H = self.num_heads
        D = C // H
        q, k, v = self.qkv(x).split(C, dim=2)
        q = q.view(B, T, H, D).transpose(1, 2)
        k = k.view(B, T, H, D).transpose(1, 2)
        v = v.view(B, T, H, D).transpose(1, 2)
        att = (q @ k.transpose(-2, -1)) * (1.0 / math.sqrt(D))
        future = torch.ones(T, T, dtype=torch.bool, device=x.device).triu(1)
        att = torch.softmax(att.masked_fill(future, float("-inf")), dim=-1)
        y = (att @ v).transpose(1, 2).reshape(B, T, C)
        return self.proj(y)


def get_inputs() -> list[torch.Tensor]:
    return [torch.randn(batch_size, seq_len, embed_dim) * 3.0]


def get_init_inputs() -> list:
    return [embed_dim, num_heads]


EVOKERNEL = {
    "level": 3,
    "description": "Multi-head causal self-attention with qkv and output projections, fp32",
    "small": {"batch_size": 2, "seq_len": 16, "embed_dim": 32, "num_heads": 2},
    "variants": [{"batch_size": 3, "seq_len": 13}],
}
