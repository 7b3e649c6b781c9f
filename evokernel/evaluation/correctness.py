"""Comparison of a candidate's output with the reference's, with a message a model can act on."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import torch

from evokernel.types import DEFAULT_TOLERANCE


@dataclass(frozen=True)
class Comparison:
    ok: bool
    max_abs_error: float | None
    message: str = ""


def _flatten(out: Any) -> list[Any]:
    if isinstance(out, tuple | list):
        return [x for item in out for x in _flatten(item)]
    return [out]


def compare(
    got: Any,
    expected: Any,
    tolerance: dict[str, tuple[float, float]] | None = None,
    got_devices: list[str | None] | None = None,
) -> Comparison:
    """Outputs must be plain tensors of the reference's shape, dtype and device, within tolerance.

    ``got_devices`` names where each output lived when the worker sent its bytes (they arrive
    on the CPU); without it the tensors' own devices are compared.
    """
    tol = tolerance or DEFAULT_TOLERANCE
    got_list, exp_list = _flatten(got), _flatten(expected)
    devices = got_devices if got_devices is not None else [None] * len(got_list)
    if len(got_list) != len(exp_list):
        return Comparison(
            False, None, f"returned {len(got_list)} outputs, the reference returns {len(exp_list)}"
        )
    worst = 0.0
    for i, (g, e) in enumerate(zip(got_list, exp_list, strict=True)):
        where = f"output {i}: " if len(exp_list) > 1 else ""
        if not isinstance(e, torch.Tensor):
            if g != e:
                return Comparison(False, None, f"{where}got {g!r}, expected {e!r}")
            continue
        if type(g) is not torch.Tensor:
            name = getattr(g, "type_name", type(g).__name__)
            return Comparison(False, None, f"{where}got {name}, expected a plain torch.Tensor")
        if g.shape != e.shape:
            return Comparison(False, None, f"{where}shape {tuple(g.shape)}, expected {tuple(e.shape)}")
        if g.dtype != e.dtype:
            return Comparison(False, None, f"{where}dtype {g.dtype}, expected {e.dtype}")
        named = devices[i] if i < len(devices) else None
        device = named if named is not None else str(g.device)
        if torch.device(device).type != e.device.type:
            return Comparison(False, None, f"{where}device {device}, expected {e.device}")
        g = g.to(e.device)
        atol, rtol = tol.get(str(e.dtype).removeprefix("torch."), (1e-4, 1e-4))
        g64, e64 = g.detach().double(), e.detach().double()
        bad_nan = torch.isnan(g64) & ~torch.isnan(e64)
        diff = (g64 - e64).abs().nan_to_num(nan=0.0)
        err = float(diff.max()) if diff.numel() else 0.0
        worst = max(worst, err)
        over = (diff > atol + rtol * e64.abs()) | bad_nan
        if bool(over.any()):
            idx = int(torch.nonzero(over.flatten())[0])
            pos = tuple(int(x) for x in torch.unravel_index(torch.tensor(idx), e.shape))
            n_bad = int(over.sum())
            return Comparison(
                False,
                err,
                f"{where}{n_bad}/{e.numel()} elements out of tolerance (atol={atol}, rtol={rtol}); "
                f"first at index {pos}: expected {float(e64.flatten()[idx]):.6g}, "
                f"got {float(g64.flatten()[idx]):.6g}; max abs error {err:.3g}",
            )
    return Comparison(True, worst)
