"""y = GELU_tanh(x @ W^T + b) with an fp16 nn.Linear: the classic matmul + bias + activation fusion.

ModelNew must hold a submodule ``linear`` (or parameters ``linear.weight`` of shape
(out_features, in_features) and ``linear.bias`` of shape (out_features,), fp16): the evaluator
copies the reference's state_dict into it. With nn.Linear's init and randn inputs the pre-activation
has std ~0.6, so outputs are O(1) and the default fp16 tolerance (1e-2) is a few ulps.
"""

import torch
import torch.nn as nn
import torch.nn.functional as F

batch_size = 4096
in_features = 2048
out_features = 4096


class Model(nn.Module):
    def __init__(self, in_features: int, out_features: int) -> None:
        super().__init__()
        self.linear = nn.Linear(in_features, out_features, dtype=torch.float16)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return F.gelu(self.linear(x), approximate="tanh")


def get_inputs() -> list[torch.Tensor]:
    return [torch.randn(batch_size, in_features).half()]


def get_init_inputs() -> list:
    return [in_features, out_features]


EVOKERNEL = {
    "level": 2,
    "description": "fp16 Linear (x @ W^T + b) followed by tanh-approximated GELU",
    "small": {"batch_size": 32, "in_features": 64, "out_features": 96},
    "variants": [{"batch_size": 7, "in_features": 40, "out_features": 72}],
    "seed": "linear_bias_gelu.seed.py",
}
