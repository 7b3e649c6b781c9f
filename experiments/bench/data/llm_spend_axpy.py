"""Benchmark task of experiments/bench/llm_spend.py: y = 3 * x + b over a vector (no seed file, so
both strategies start from LLM-written seeds)."""

import torch
import torch.nn as nn

n = 1 << 16


class Model(nn.Module):
    def __init__(self) -> None:
        super().__init__()

    def forward(self, x: torch.Tensor, b: torch.Tensor) -> torch.Tensor:
        return 3.0 * x + b


def get_inputs() -> list[torch.Tensor]:
    return [torch.randn(n), torch.randn(n)]


def get_init_inputs() -> list:
    return []


EVOKERNEL = {"level": 1, "small": {"n": 1000}, "variants": [{"n": 77}]}
