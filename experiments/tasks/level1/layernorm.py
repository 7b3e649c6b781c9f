"""LayerNorm over the last dim of a (batch_size, dim) fp32 matrix, with a learned affine.

ModelNew must hold an ``ln`` submodule (or parameters named ``ln.weight`` and ``ln.bias``, shape
(dim,)): the evaluator copies the reference's state_dict into it. The affine is randomised at
construction because the default init (weight 1, bias 0) would let a kernel that ignores it pass.
"""

import torch
import torch.nn as nn

batch_size = 8192
dim = 4096


class Model(nn.Module):
    def __init__(self, dim: int) -> None:
        super().__init__()
        self.ln = nn.LayerNorm(dim, eps=1e-5)
        with torch.no_grad():
            self.ln.weight.normal_(1.0, 0.5)
            self.ln.bias.normal_(0.0, 0.5)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.ln(x)


def get_inputs() -> list[torch.Tensor]:
    # Offset mean and non-unit scale so a kernel that skips centring or scaling fails.
    return [torch.randn(batch_size, dim) * 2.0 + 0.5]


def get_init_inputs() -> list:
    return [dim]


EVOKERNEL = {
    "level": 1,
    "description": "LayerNorm (eps 1e-5, learned weight and bias) over the last dim, fp32",
    "small": {"batch_size": 8, "dim": 256},
    "variants": [{"batch_size": 7, "dim": 333}],
    "seed": "layernorm.seed.py",
}
