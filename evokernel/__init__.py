"""evokernel: evolutionary search with LLM operators for fast, verified GPU kernels."""

from __future__ import annotations

__version__ = "0.1.0"
