"""The process Nsight Compute profiles: one call of the candidate (or of the reference) on the same
inputs as the timed call (the timing variant's sizes, seed 0), between ``cudaProfilerStart`` and
``cudaProfilerStop``.

``python -m evokernel.evaluation.profiling.target REQUEST.json candidate|reference [TIMELINE.json]``,
run by the supervisor under ``ncu`` in the candidate's working directory (``candidate.py`` is
there; the task comes from the request, never from a file the candidate could have rewritten);
with ``TIMELINE.json`` (the reference's profile in the baselines job), no ``ncu``: the call's
timeline (:mod:`.timeline`) is written there instead, the call holding the GPU lock's shared
side. For a candidate it confines itself first, as the worker does
(:mod:`evokernel.evaluation.worker`): the CUDA context (and with it Nsight Compute's
injection) is made before, candidate code runs only after.
"""

from __future__ import annotations

import json
import os
import sys
import tempfile
from pathlib import Path
from typing import Any

import torch

from evokernel.evaluation import guards, inline_builds, isolation, remote_builds
from evokernel.evaluation.gpulock import GpuLock
from evokernel.evaluation.loading import (
    build_model,
    build_reference,
    candidate_class,
    copy_reference_weights,
    load_module,
    load_source,
    make_inputs,
)
from evokernel.evaluation.profiling import timeline
from evokernel.evaluation.request import EvaluationRequest
from evokernel.evaluation.workspace import enter_candidate_directory


def _model(request: EvaluationRequest, workdir: Path, mode: str, device: torch.device) -> tuple[Any, Any]:
    task = load_source(request.task.source, "evokernel_reference_profiled", request.overrides[0])
    reference = build_reference(task, device, request.training)
    if mode == "reference":
        return reference, task
    module = load_module(workdir / "candidate.py", "evokernel_candidate")
    entry = candidate_class(module)
    if entry is None:
        raise SystemExit("the candidate defines no ModelNew")
    model = build_model(entry, task.get_init_inputs(), device, request.training)
    copy_reference_weights(reference, model)
    return model, task


def main(argv: list[str]) -> int:
    request_path, mode = Path(argv[1]), argv[2]
    # Decoded once, where the JSON crosses into this process (request.py).
    request = EvaluationRequest.from_json(json.loads(request_path.read_text()))
    workdir = request.candidate_directory()  # the request itself lies where the candidate cannot write
    device = torch.device("cuda")
    guards.die_with_parent()
    torch.empty(1, device=device)  # the context, and Nsight Compute's hold on it, before confinement
    torch.backends.cuda.matmul.allow_tf32 = False
    torch.backends.cudnn.allow_tf32 = False
    if mode == "candidate":
        # The candidate's caches in its own directory, the only one its confinement lets it write.
        enter_candidate_directory(workdir)
        shared = [request.ncu_tmp] if request.ncu_tmp else []
        if shared:  # Nsight Compute's lock directory (stage.py), which its injection opens here
            os.environ["TMPDIR"] = shared[0]
            tempfile.tempdir = None
        isolation.confine(request.isolation, workdir, isolation.request_reads(request), shared)
        guards.apply_limits(guards.default_limits("cuda", request.timeout_s, request.host_memory_mb))
        guards.refuse_network()
        if request.object_cache:
            # The worker's extensions, from the node's object cache, instead of building them again.
            remote_builds.install(remote_builds.recorded(workdir, request.object_cache), workdir)
        inline_builds.install(request.torch_pch, light=request.light_cuda_headers, workdir=workdir)
    model, task = _model(request, workdir, mode, device)
    inputs = make_inputs(task, 0, device)
    if len(argv) > 3:
        timeline.prepare(device)  # CUPTI's start (seconds), outside the lock
        with torch.no_grad(), GpuLock.from_request(request).hold("profile"):
            model(*inputs)  # warm: cuDNN/cuBLAS pick their algorithms outside the profiled call
            found = timeline.profile_call(lambda: model(*inputs), device)
        Path(argv[3]).write_text(json.dumps(found))
        return 0
    with torch.no_grad():
        model(*inputs)  # JIT builds and autotuning happen here, outside the profiled range
        torch.cuda.synchronize(device)
        torch.cuda.profiler.start()
        model(*inputs)
        torch.cuda.synchronize(device)
        torch.cuda.profiler.stop()
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
