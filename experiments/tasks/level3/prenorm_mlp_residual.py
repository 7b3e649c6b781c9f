"""x + fc2(GELU(fc1(LayerNorm(x)))): the pre-norm MLP half of a transformer layer, fp32.

ModelNew must hold submodules ``ln`` (LayerNorm(embed_dim)), ``fc1`` (embed_dim -> hidden_dim)
and ``fc2`` (hidden_dim -> embed_dim), or parameters with those names and shapes: the evaluator
copies the reference's state_dict into it. The LayerNorm affine is randomised at construction so a
kernel that ignores it fails.
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
        self.ln = nn.LayerNorm(embed_dim)
        self.fc1 = nn.Linear(embed_dim, hidden_dim)
        self.fc2 = nn.Linear(hidden_dim, embed_dim)
        with torch.no_grad():
            self.ln.weight.normal_(1.0, 0.5)
            self.ln.bias.normal_(0.0, 0.5)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return x + self.fc2(F.gelu(self.fc1(self.ln(x))))


def get_inputs() -> list[torch.Tensor]:
    return [torch.randn(batch_size, seq_len, embed_dim)]


def get_init_inputs() -> list:
    return [embed_dim, hidden_dim]


EVOKERNEL = {
    "level": 3,
    "description": "Pre-norm transformer MLP with residual: x + MLP(LayerNorm(x)), fp32",
    "small": {"batch_size": 2, "seq_len": 8, "embed_dim": 32, "hidden_dim": 64},
    "variants": [{"batch_size": 3, "seq_len": 13}],
}
