"""y = LayerNorm(x + residual) over the last dim, fp32: the post-residual norm of a transformer.

ModelNew must hold an ``ln`` submodule (or parameters ``ln.weight`` and ``ln.bias``, shape
(dim,)): the evaluator copies the reference's state_dict into it. The affine is randomised at
construction so a kernel that ignores it fails.
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

    def forward(self, x: torch.Tensor, residual: torch.Tensor) -> torch.Tensor:
        return self.ln(x + residual)


def get_inputs() -> list[torch.Tensor]:
    # Different scales so that dropping either operand changes the normalised output.
    return [torch.randn(batch_size, dim), torch.randn(batch_size, dim) * 2.0 + 1.0]


def get_init_inputs() -> list:
    return [dim]


EVOKERNEL = {
    "level": 2,
    "description": "Residual add followed by LayerNorm (eps 1e-5, learned affine), fp32",
    "small": {"batch_size": 8, "dim": 256},
    "variants": [{"batch_size": 7, "dim": 333}],
    "seed": "residual_add_layernorm.seed.py",
}
