"""The node's object cache (evaluation/object_cache.py, remote_builds.py): a child that repeats
its parent's extension imports the parent's object; the build runs confined, on the trusted side;
candidates cannot write the cache; failed builds say why. Real builds (g++ through torch's
load_inline and ninja) of a small CPython extension, real sandboxed evaluations."""

from __future__ import annotations

import errno
import hashlib
import json
import os
import re
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import torch

from evokernel.config.schema import TimingConfig
from evokernel.evaluation import landlock, seccomp
from evokernel.evaluation.forkserver import ForkServer
from evokernel.evaluation.object_cache import call_arguments, prune
from evokernel.evaluation.remote_builds import portable
from evokernel.evaluation.request import build_request
from evokernel.evaluation.sandbox import run_sandboxed
from evokernel.types import Evaluation, Status, Task

FAST = TimingConfig(warmup_ms=1, min_reps=3, max_reps=10, max_ms=30)
needs_isolation = pytest.mark.skipif(
    landlock.abi_version() < 1 or not seccomp.available(), reason="this kernel has no Landlock or seccomp"
)

# axpy (y = 3x + b) in C over the tensors' buffers: a CPython extension without torch's header,
# so a build takes ~1 s of g++ instead of ~30 s.
AXPY_C = r"""
#include <Python.h>
static PyObject* axpy(PyObject* self, PyObject* args) {
    PyObject *xo, *bo, *yo;
    if (!PyArg_ParseTuple(args, "OOO", &xo, &bo, &yo)) return NULL;
    Py_buffer x, b, y;
    if (PyObject_GetBuffer(xo, &x, PyBUF_SIMPLE) < 0) return NULL;
    if (PyObject_GetBuffer(bo, &b, PyBUF_SIMPLE) < 0) { PyBuffer_Release(&x); return NULL; }
    if (PyObject_GetBuffer(yo, &y, PyBUF_WRITABLE) < 0) {
        PyBuffer_Release(&x); PyBuffer_Release(&b); return NULL;
    }
    const float *xs = (const float*)x.buf, *bs = (const float*)b.buf;
    float* ys = (float*)y.buf;
    for (Py_ssize_t i = 0; i < (Py_ssize_t)(y.len / sizeof(float)); ++i) ys[i] = 3.0f * xs[i] + bs[i];
    PyBuffer_Release(&x); PyBuffer_Release(&b); PyBuffer_Release(&y);
    Py_RETURN_NONE;
}
static PyMethodDef methods[] = {{"axpy", axpy, METH_VARARGS, ""}, {NULL, NULL, 0, NULL}};
static struct PyModuleDef module = {PyModuleDef_HEAD_INIT, "evk_cached_axpy", NULL, -1, methods};
PyMODINIT_FUNC PyInit_evk_cached_axpy(void) { return PyModule_Create(&module); }
"""

CANDIDATE = """
import errno, json, os
import torch
import torch.nn as nn
from torch.utils.cpp_extension import load_inline

_ext = load_inline("evk_cached_axpy", cpp_sources=[{source!r}], no_implicit_headers=True{extra})


def _attempt(path, flags):
    try:
        os.close(os.open(path, flags, 0o644))
        return 0
    except OSError as exc:
        return exc.errno


_object = _ext.__file__
print("EVK-CACHE " + json.dumps({{
    "object": _object,
    "append": _attempt(_object, os.O_WRONLY | os.O_APPEND),
    "beside": _attempt(os.path.join(os.path.dirname(_object), "planted.so"), os.O_WRONLY | os.O_CREAT),
}}), flush=True)


class ModelNew(nn.Module):
    def forward(self, x, b):
        y = torch.empty_like(x)
        _ext.axpy(x.contiguous().numpy(), b.contiguous().numpy(), y.numpy())
        return y
# {generation}
"""


def candidate(generation: str, source: str = AXPY_C, extra: str = "") -> str:
    return CANDIDATE.format(source=source, extra=extra, generation=generation)


def report(ev: Evaluation) -> dict[str, Any]:
    found = re.search(r"EVK-CACHE (\{.*\})", str(ev.details.get("output_tail", "")) + ev.feedback)
    assert found, f"no report from the candidate: {ev.status} {ev.reason}"
    got: dict[str, Any] = json.loads(found.group(1))
    return got


def build_stage(ev: Evaluation) -> dict[str, Any]:
    return next(s for s in ev.details["stages"] if s["stage"] == "build")


@pytest.fixture
def server() -> Iterator[ForkServer]:
    forkserver = ForkServer("cpu", Path(tempfile.gettempdir()))
    try:
        yield forkserver
    finally:
        forkserver.close()


def evaluate(server: ForkServer, task: Task, source: str, root: Path) -> Evaluation:
    if root.name != "absent":
        root.mkdir(parents=True, exist_ok=True)  # as the actor makes it before any evaluation
    request = build_request(task, source, device="cpu", scale="small", timing=FAST)
    return run_sandboxed({**request, "object_cache": str(root)}, 180, launcher=server.spawn)


@needs_isolation
def test_a_child_that_keeps_its_parents_extension_imports_the_parents_object(
    axpy_task: Task, server: ForkServer, tmp_path: Path
) -> None:
    parent = evaluate(server, axpy_task, candidate("parent"), tmp_path)
    child = evaluate(server, axpy_task, candidate("child: the Python changed"), tmp_path)
    assert parent.status is Status.CORRECT, parent.reason
    assert child.status is Status.CORRECT, child.reason
    assert parent.details["object_cache"]["built"] == 1
    assert child.details["object_cache"] == {"hits": 1, "build_s": 0.0}
    assert "1 built into it" in build_stage(parent)["reason"]
    assert "1 from the node's object cache" in build_stage(child)["reason"]
    assert report(parent)["object"] == report(child)["object"]
    assert Path(report(child)["object"]).is_relative_to(tmp_path / "objects")
    # Different code is a different object.
    other = evaluate(server, axpy_task, candidate("other", AXPY_C.replace("3.0f", "3.0f + 0.0f")), tmp_path)
    assert other.details["object_cache"]["built"] == 1
    assert report(other)["object"] != report(parent)["object"]


@needs_isolation
def test_candidates_cannot_write_the_cache(axpy_task: Task, server: ForkServer, tmp_path: Path) -> None:
    ev = evaluate(server, axpy_task, candidate("writer"), tmp_path)
    got = report(ev)
    digest = hashlib.sha256(Path(got["object"]).read_bytes()).hexdigest()
    assert got["append"] == errno.EACCES
    assert got["beside"] == errno.EACCES
    assert not (Path(got["object"]).parent / "planted.so").exists()
    again = evaluate(server, axpy_task, candidate("writer again"), tmp_path)
    assert again.status is Status.CORRECT, again.reason
    assert hashlib.sha256(Path(report(again)["object"]).read_bytes()).hexdigest() == digest


@needs_isolation
def test_the_build_is_confined_a_flag_that_writes_outside_fails_the_build(
    axpy_task: Task, server: ForkServer, tmp_path: Path
) -> None:
    outside = tmp_path / "linker-map.txt"
    extra = f", extra_ldflags=['-Wl,-Map={outside}']"
    ev = evaluate(server, axpy_task, candidate("map", extra=extra), tmp_path / "cache")
    assert ev.status is Status.COMPILE_ERROR, ev.reason
    assert ev.details["object_cache"]["failed"] == 1
    assert not outside.exists()
    assert not list((tmp_path / "cache" / "objects").glob("*/*.so"))
    # The control: without isolation the worker builds it itself (no cache) and the linker writes.
    request = build_request(axpy_task, candidate("map, unconfined", extra=extra), device="cpu", scale="small")
    control = run_sandboxed(
        {**request, "object_cache": str(tmp_path / "cache"), "isolation": "off"}, 180, launcher=server.spawn
    )
    assert control.status is Status.CORRECT, control.reason
    assert "object_cache" not in control.details
    assert outside.exists()


@needs_isolation
def test_a_failed_build_says_what_the_compiler_said(
    axpy_task: Task, server: ForkServer, tmp_path: Path
) -> None:
    broken = AXPY_C.replace("Py_RETURN_NONE;", "Py_RETURN_NONE")
    ev = evaluate(server, axpy_task, candidate("broken", broken), tmp_path)
    assert ev.status is Status.COMPILE_ERROR
    # The compiler's own line, as from a build in the worker (g++: "expected ';' before '}'").
    assert re.search(r"build failed: main\.cpp:\d+:\d+: error: expected", ev.reason), ev.reason
    assert ev.details["object_cache"]["failed"] == 1
    assert not list((tmp_path / "objects").glob("*/*.so"))


@needs_isolation
def test_a_cache_root_that_does_not_exist_yet_leaves_the_build_to_the_worker(
    axpy_task: Task, server: ForkServer, tmp_path: Path
) -> None:
    """Found on the H200: a root made by the first build, after other workers had confined
    themselves, was unreadable to them ("cannot open shared object file: Permission denied")."""
    ev = evaluate(server, axpy_task, candidate("no root yet"), tmp_path / "absent")
    assert ev.status is Status.CORRECT, ev.reason
    assert "object_cache" not in ev.details
    assert not (tmp_path / "absent").exists()


def test_only_well_formed_calls_are_built_on_the_trusted_side() -> None:
    call = {"name": "ext", "cpp_sources": ["int f();"], "functions": ["f"], "extra_cflags": ["-O3"]}
    assert call_arguments(call) == call
    assert call_arguments({**call, "name": "../../etc"}) is None
    assert call_arguments({**call, "extra_include_paths": ["/tmp"]}) is None
    assert call_arguments({**call, "extra_cflags": "-O3"}) is None
    assert call_arguments({**call, "functions": {"f": 3}}) is None
    assert call_arguments({"name": "ext"}) is None
    assert call_arguments(["not", "a", "call"]) is None
    # The worker keeps calls with include paths, build directories or a non-module build.
    assert portable({**call, "verbose": True}) == call
    assert portable({**call, "build_directory": "/tmp/x"}) is None
    assert portable({**call, "is_python_module": False}) is None


def test_pruning_keeps_recent_objects_and_drops_the_least_recently_used(tmp_path: Path) -> None:
    old, recent = tmp_path / "objects" / "a" / "x.so", tmp_path / "objects" / "b" / "y.so"
    for path in (old, recent):
        path.parent.mkdir(parents=True)
        path.write_bytes(b"\0" * 1000)
    hour_ago = time.time() - 3600
    os.utime(old, (hour_ago, hour_ago))
    assert prune(tmp_path, max_bytes=1500) == [old.parent]
    assert recent.exists()
    assert prune(tmp_path, max_bytes=0) == []  # within the grace period: a worker may be importing it


@pytest.mark.gpu
@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA GPU")
@needs_isolation
def test_a_cuda_child_imports_its_parents_object_on_the_gpu(axpy_task: Task, tmp_path: Path) -> None:
    """nvcc under the build's confinement, then the hit."""
    fixture = Path(__file__).resolve().parents[1] / "fixtures" / "legit" / "axpy_cuda_load_inline.py"
    source = fixture.read_text()
    server = ForkServer("cuda", Path(tempfile.gettempdir()))
    tmp_path.mkdir(exist_ok=True)
    try:
        runs = []
        for generation in ("parent", "child"):
            request = build_request(axpy_task, f"{source}\n# {generation}\n", device="cuda", scale="small")
            runs.append(run_sandboxed({**request, "object_cache": str(tmp_path)}, 300, launcher=server.spawn))
    finally:
        server.close()
    parent, child = runs
    assert parent.status is Status.CORRECT, parent.reason
    assert child.status is Status.CORRECT, child.reason
    assert parent.details["object_cache"]["built"] == 1
    assert child.details["object_cache"] == {"hits": 1, "build_s": 0.0}
    assert build_stage(child)["seconds"] < build_stage(parent)["seconds"] / 5
