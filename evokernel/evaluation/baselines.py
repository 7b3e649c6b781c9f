"""Eager and ``torch.compile`` baselines: timed like candidates, cached per (task, device, software).

The pool looks a task's baselines up in the solution library (``get_baseline``/``put_baseline``)
and sends them with the request together with the key they were stored under; the supervisor
uses them only when that key is its own device and software (a heterogeneous cluster gets its
own figures per GPU type) and otherwise measures and returns what it measured for storing.

``torch.compile`` needs a C++ toolchain and tens of seconds per task on a CPU, where its timing
says nothing about GPUs anyway, so ``compile_baseline: auto`` means on for cuda only.
"""

from __future__ import annotations

import functools
from importlib import metadata
from types import ModuleType
from typing import Any

import torch

from evokernel.evaluation.loading import build_reference, make_inputs
from evokernel.evaluation.timing import TimingSettings, gpu_clocks, time_callable

KINDS = ("eager", "compile")


def software_versions(device: str) -> str:
    """e.g. ``torch 2.11.0 / triton 3.6.0 / cuda 12.8``: a baseline is reused on identical software."""
    parts = []
    for package in ("torch", "triton"):
        try:
            parts.append(f"{package} {metadata.version(package)}")
        except metadata.PackageNotFoundError:
            parts.append(f"{package} ?")
    if device == "cuda":
        parts.append(f"cuda {torch.version.cuda}")
    return " / ".join(parts)


def device_label(device: torch.device) -> str:
    return torch.cuda.get_device_name(device) if device.type == "cuda" else "cpu (Triton interpreter)"


def compile_enabled(setting: str, device: str) -> bool:
    if setting not in ("auto", "on", "off"):
        raise ValueError(f"evaluation.compile_baseline must be auto, on or off, not {setting!r}")
    return setting == "on" or (setting == "auto" and device == "cuda")


def measure_baselines(task: ModuleType, device: torch.device, request: dict[str, Any]) -> dict[str, Any]:
    """``{"eager": timing, "compile": timing | None, "baseline_key": ..., ...}`` on the timing
    variant's seed-0 inputs; timings are dicts of :class:`~evokernel.evaluation.timing.TimingResult`."""
    key = {"device": device_label(device), "versions": software_versions(device.type)}
    cached = request.get("baselines") or {}
    usable = cached.get("key") == key
    settings = TimingSettings(**request["timing"])
    reference = build_reference(task, device)
    inputs = make_inputs(task, 0, device)
    out: dict[str, Any] = {"baseline_key": key, "gpu_clocks": gpu_clocks(device)}
    with torch.no_grad():
        for kind in KINDS:
            if kind == "compile" and not compile_enabled(request["compile_baseline"], device.type):
                out[kind] = None
                continue
            if usable and cached.get(kind):
                out[kind] = {**cached[kind], "cached": True}
                continue
            model = reference
            if kind == "compile":
                try:
                    model = torch.compile(reference)
                    model(*inputs)  # compiles here, outside the timing
                except Exception as exc:  # noqa: BLE001 - Inductor failing is a fact to report
                    out[kind] = None
                    out["compile_note"] = f"torch.compile failed: {type(exc).__name__}: {exc}"[:300]
                    continue
            timing = time_callable(functools.partial(model, *inputs), device, settings).to_dict()
            out[kind] = {**timing, "cached": False}
    return out
