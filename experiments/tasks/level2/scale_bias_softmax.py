"""softmax(x * scale + bias, dim=-1) for attention scores x (batch, heads, seq, seq) and an additive
(seq, seq) bias broadcast over batch and heads (a relative-position bias), fp32.

Raw scores have std 16 (q.k over 64 dims of std-2 vectors) and scale is 1/8, so with the std-2
bias the logits have std ~2.8 and each row has a few probabilities above 0.1.
ModelNew takes the same ``scale`` constructor argument.
"""

import torch
import torch.nn as nn

batch_size = 8
heads = 16
seq_len = 512


class Model(nn.Module):
    def __init__(self, scale: float) -> None:
        super().__init__()
        self.scale = scale

    def forward(self, x: torch.Tensor, bias: torch.Tensor) -> torch.Tensor:
        return torch.softmax(x * self.scale + bias, dim=-1)


def get_inputs() -> list[torch.Tensor]:
    x = torch.randn(batch_size, heads, seq_len, seq_len) * 16.0
    bias = torch.randn(seq_len, seq_len) * 2.0
    return [x, bias]


def get_init_inputs() -> list:
    return [0.125]


EVOKERNEL = {
    "level": 2,
    "description": "Scaled attention scores plus a broadcast (seq, seq) bias, then softmax, fp32",
    "small": {"batch_size": 1, "heads": 2, "seq_len": 16},
    "variants": [{"heads": 1, "seq_len": 19}],
    "seed": "scale_bias_softmax.seed.py",
}
