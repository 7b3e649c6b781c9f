"""A pre-norm GPT transformer layer: x + attn(ln1(x)), then + mlp(ln2(x)); causal, fp32.

ModelNew must hold submodules (or parameters with the same names and shapes) ``ln1``, ``ln2``
(LayerNorm(embed_dim)), ``qkv`` (embed_dim -> 3 * embed_dim, q, k, v stacked in that order),
``proj`` (embed_dim -> embed_dim), ``fc1`` (embed_dim -> 4 * embed_dim) and ``fc2``
(4 * embed_dim -> embed_dim): the evaluator copies the reference's state_dict into it.
The LayerNorm affines are randomised at construction so a kernel that ignores them fails.
"""

import math

import torch
import torch.nn as nn
import torch.nn.functional as F

batch_size = 8
seq_len = 512
embed_dim = 1024
num_heads = 16


class Model(nn.Module):
    def __init__(self, embed_dim: int, num_heads: int) -> None:
        super().__init__()
        self.num_heads = num_heads
        self.ln1 = nn.LayerNorm(embed_dim)
        self.ln2 = nn.LayerNorm(embed_dim)
        self.qkv = nn.Linear(embed_dim, 3 * embed_dim)
        self.proj = nn.Linear(embed_dim, embed_dim)
        self.fc1 = nn.Linear(embed_dim, 4 * embed_dim)
        self.fc2 = nn.Linear(4 * embed_dim, embed_dim)
        with torch.no_grad():
            for ln in (self.ln1, self.ln2):
                ln.weight.normal_(1.0, 0.5)
                ln.bias.normal_(0.0, 0.5)

    def attention(self, x: torch.Tensor) -> torch.Tensor:
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
        return self.proj((att @ v).transpose(1, 2).reshape(B, T, C))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = x + self.attention(self.ln1(x))
        return x + self.fc2(F.gelu(self.fc1(self.ln2(x))))


def get_inputs() -> list[torch.Tensor]:
    return [torch.randn(batch_size, seq_len, embed_dim)]


def get_init_inputs() -> list:
    return [embed_dim, num_heads]


EVOKERNEL = {
    "level": 3,
    "description": "Pre-norm GPT layer: causal multi-head attention and a 4x GELU MLP, both residual, fp32",
    "small": {"batch_size": 2, "seq_len": 16, "embed_dim": 32, "num_heads": 2},
    "variants": [{"batch_size": 3, "seq_len": 13}],
}
