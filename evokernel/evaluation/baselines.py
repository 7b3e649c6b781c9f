"""Eager and ``torch.compile`` baselines: timed like candidates over a longer window
(:meth:`~evokernel.evaluation.timing.TimingSettings.for_baseline`), cached per (task, device, software).

The pool looks a task's baselines up in the solution library (``get_baseline``/``put_baseline``)
and sends them with the request together with the key they were stored under; the supervisor
uses them only when that key is its own device and software (a heterogeneous cluster gets its
own figures per GPU type) and otherwise measures and returns what it measured for storing.

A launch-bound baseline (event p10 under ``launch_bound_us``) also carries its CUDA-graph
per-call figure, cached as its own kind (``eager_graph``, ``compile_graph``) so that a candidate
of a launch-bound task is compared graph to graph (:func:`evokernel.evaluation.timing.comparable`)
with cached baselines too. The key's versions name the timing method, so figures taken by an
older method are measured again, never compared with new ones.

``torch.compile`` needs a C++ toolchain and tens of seconds per task on a CPU, where its timing
says nothing about GPUs anyway, so ``compile_baseline: auto`` means on for cuda only.
"""

from __future__ import annotations

import contextlib
import functools
from importlib import metadata
from types import ModuleType
from typing import TYPE_CHECKING, Any

import torch

from evokernel.evaluation.clocks import clock_state
from evokernel.evaluation.gpulock import GpuLock
from evokernel.evaluation.loading import build_reference, load_source, make_inputs
from evokernel.evaluation.timing import time_callable, timing_method

if TYPE_CHECKING:
    from evokernel.evaluation.request import EvaluationRequest

TIMED = ("eager", "compile")
# What the library caches per (task, device, versions): the timed kinds and their graph figures.
KINDS = (*TIMED, *(f"{kind}_graph" for kind in TIMED))


@functools.cache  # fixed for the process; asked for every candidate's timing stage
def software_versions(device: str, call_start: str, training: bool = False) -> str:
    """e.g. ``torch 2.11.0 / triton 3.6.0 / cuda 12.8 / timing settled-4``: a baseline is reused on
    identical software and timing method (``call_start``: timing.timing_method), and for the models'
    mode (``training``: the ``kernelbench`` profile's; eval mode adds nothing, so baselines cached
    before the mode was part of the key stay valid)."""
    parts = []
    for package in ("torch", "triton"):
        try:
            parts.append(f"{package} {metadata.version(package)}")
        except metadata.PackageNotFoundError:
            parts.append(f"{package} ?")
    if device == "cuda":
        parts.append(f"cuda {torch.version.cuda}")
    parts.append(f"timing {timing_method(call_start)}")
    if training:
        parts.append("training mode")
    return " / ".join(parts)


def device_label(device: torch.device) -> str:
    return torch.cuda.get_device_name(device) if device.type == "cuda" else "cpu (Triton interpreter)"


def compile_enabled(setting: str, device: str) -> bool:
    if setting not in ("auto", "on", "off"):
        raise ValueError(f"evaluation.compile_baseline must be auto, on or off, not {setting!r}")
    return setting == "on" or (setting == "auto" and device == "cuda")


def measure_baselines(task: ModuleType, device: torch.device, request: EvaluationRequest) -> dict[str, Any]:
    """``{"eager": timing, "compile": timing | None, "eager_graph": ..., "baseline_key": ..., ...}``
    on the timing variant's seed-0 inputs; timings are dicts of
    :class:`~evokernel.evaluation.timing.TimingResult`, ``*_graph`` the cache entries of graph figures."""
    # NVML through ctypes (microseconds a query), not nvidia-smi (a subprocess) once per candidate.
    out: dict[str, Any] = {
        "baseline_key": key_for(device, request.timing.call_start, request.training),
        "gpu_clocks": clock_state(device),
    }
    settings = request.timing
    if device.type == "cuda":  # on a CPU the interpreter's figures say nothing about drift on GPUs
        settings = settings.for_baseline()
    reference, inputs = None, None
    with torch.no_grad():
        for kind in TIMED:
            out[f"{kind}_graph"] = None
            if kind == "compile" and not compile_enabled(request.compile_baseline, device.type):
                out[kind] = None
                continue
            cached = _cached(request, kind, out["baseline_key"])
            if cached is not None:
                out[kind], out[f"{kind}_graph"] = cached
                continue
            if reference is None:  # only a figure to measure needs the model and its inputs
                reference = build_reference(task, device, request.training)
                inputs = make_inputs(task, 0, device)
            assert inputs is not None
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
            if timing["launch_bound"] and timing["graph_median_ms"]:
                out[f"{kind}_graph"] = {
                    "median_ms": timing["graph_median_ms"],
                    "iqr_ms": 0.0,
                    "graph_calls": timing["graph_calls"],
                    "cached": False,
                }
    return out


def key_for(device: torch.device, call_start: str, training: bool = False) -> dict[str, str]:
    return {"device": device_label(device), "versions": software_versions(device.type, call_start, training)}


def _cached(
    request: EvaluationRequest, kind: str, key: dict[str, str]
) -> tuple[dict[str, Any], dict[str, Any] | None] | None:
    """(timing, graph entry) of ``kind`` from the request's cached baselines when they were taken
    on this device and software, else None."""
    cached = request.baselines or {}
    if cached.get("key") != key or not cached.get(kind):
        return None
    timing = {**cached[kind], "cached": True}
    graph = cached.get(f"{kind}_graph")
    if not graph:
        return timing, None
    timing.update(launch_bound=True, graph_median_ms=graph["median_ms"])
    return timing, {**graph, "cached": True}


def all_cached(request: EvaluationRequest, device: torch.device) -> bool:
    """Every baseline the request needs is cached for this device and software: nothing to time."""
    key = key_for(device, request.timing.call_start, request.training)
    return all(
        _cached(request, kind, key) is not None
        for kind in TIMED
        if kind != "compile" or compile_enabled(request.compile_baseline, device.type)
    )


def measure_reference_baselines(
    device: torch.device, request: EvaluationRequest, gpu: GpuLock
) -> dict[str, Any]:
    """:func:`measure_baselines` of the request's task, loaded from its source in memory (at the
    timing variant's sizes), holding the GPU exclusively: the pool's baselines job and a candidate's
    timing stage measure the same way."""
    task = load_source(request.task.source, "evokernel_reference_timing", request.overrides[0])
    # All cached, the common case in a run: no GPU work, so no lock.
    hold = contextlib.nullcontext() if all_cached(request, device) else gpu.hold("baselines")
    with hold:
        return measure_baselines(task, device, request)
