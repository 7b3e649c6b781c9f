"""``evokernel tasks check``: flag degenerate tasks, the way METR and robust-kbench do.

A task is degenerate when a kernel could pass it without computing it:

* ``nan-output``: the reference itself produces NaN or inf.
* ``zero-output``: an all-zeros output is within tolerance of the reference.
* ``constant-output``: one constant (the output's mean) is within tolerance, or each row's
  constant (the mean over the last dim) is.
* ``input-independent``: changing one input (fresh random values, others kept) leaves the output
  within tolerance; every input must matter.
* ``seed-independent``: two seeds give outputs within tolerance of each other.
* ``weight-independent``: re-initialising the model's parameters leaves the output within tolerance.

Tasks are the user's own trusted code, so they run in this process, at every variant of the
chosen scale (``small`` on a CPU).
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any

import torch

from evokernel.evaluation.correctness import compare
from evokernel.evaluation.loading import build_reference, flatten, load_module, make_inputs
from evokernel.tasks import task_globals_overrides
from evokernel.types import Task


@dataclass(frozen=True)
class Flag:
    task: str
    variant: int
    rule: str
    detail: str

    def describe(self) -> str:
        return f"{self.task} (variant {self.variant}): {self.rule}: {self.detail}"


def _outputs(model: Any, inputs: list[Any]) -> list[Any]:
    with torch.no_grad():
        return [o for o in flatten(model(*inputs)) if isinstance(o, torch.Tensor)]


def _passes(got: list[Any], expected: list[Any], tolerance: dict[str, tuple[float, float]]) -> bool:
    return compare(got, expected, tolerance).ok


def screen_task(task: Task, scale: str = "small", device: str = "cpu") -> list[Flag]:
    flags: list[Flag] = []
    dev = torch.device(device)
    tol = task.tolerance
    for variant in range(1 + len(task.variants)):
        overrides = task_globals_overrides(task, scale, variant)
        module = load_module(Path(task.path), f"evokernel_screen_{task.name}_{variant}", overrides)

        def flag(rule: str, detail: str, v: int = variant) -> None:
            flags.append(Flag(task.name, v, rule, detail))

        model = build_reference(module, dev)
        inputs = make_inputs(module, 0, dev)
        out = _outputs(model, inputs)
        if any(not bool(torch.isfinite(o.double()).all()) for o in out if o.is_floating_point()):
            flag("nan-output", "the reference output holds NaN or inf")
            continue
        if _passes([torch.zeros_like(o) for o in out], out, tol):
            flag("zero-output", "an all-zeros output is within tolerance")
        if _passes([torch.full_like(o, float(o.double().mean())) for o in out], out, tol):
            flag("constant-output", "a single constant (the output mean) is within tolerance")
        elif all(o.dim() >= 1 for o in out) and _passes(
            [o.double().mean(-1, keepdim=True).expand_as(o).to(o.dtype) for o in out], out, tol
        ):
            flag("constant-output", "a constant per row (the mean over the last dim) is within tolerance")
        other = make_inputs(module, 1, dev)
        if _passes(_outputs(model, other), out, tol):
            flag("seed-independent", "inputs from seeds 0 and 1 give outputs within tolerance")
        for i, value in enumerate(inputs):
            if not isinstance(value, torch.Tensor):
                continue
            mixed = [*inputs[:i], other[i], *inputs[i + 1 :]]
            if not torch.equal(other[i], value) and _passes(_outputs(model, mixed), out, tol):
                flag("input-independent", f"changing input {i} leaves the output within tolerance")
        params = [p for p in model.parameters()]
        if params:
            with torch.no_grad():
                for p in params:
                    spread = p.double().std().item() if p.numel() > 1 else 0.0
                    p.copy_(torch.randn_like(p) * (spread if spread > 0 else 1.0) + p.double().mean().item())
            if _passes(_outputs(model, inputs), out, tol):
                flag("weight-independent", "re-initialised weights give an output within tolerance")
    return flags


def screen_tasks(tasks: list[Task], scale: str = "small", device: str = "cpu") -> list[Flag]:
    return [f for task in tasks for f in screen_task(task, scale, device)]
