"""Candidates that try to escape, for tests/core/test_isolation.py: a correct axpy whose import
runs escape attempts and prints what each got (``EVK-PROBE {json}`` on stdout, read back from the
verdict's output tail). Outcomes are checked from outside as well (a listener that must see no
connection, files that must not change, a process that must be gone)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from evokernel.types import Evaluation

# Raw system calls from C (no libc socket()/open() wrappers, no Python), in a CPython extension
# built by load_inline without torch's header (a 1-2 s build instead of ~30 s on the CI machine).
C_PROBES = r"""
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>
#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <sys/syscall.h>
#include <sys/uio.h>
#include <sys/un.h>

extern char** environ;

static int try_tcp(int port) {
    long fd = syscall(SYS_socket, AF_INET, SOCK_STREAM, 0);
    if (fd < 0) return errno;
    struct sockaddr_in a; memset(&a, 0, sizeof a);
    a.sin_family = AF_INET; a.sin_port = htons(port); a.sin_addr.s_addr = htonl(0x7f000001);
    long r = syscall(SYS_connect, fd, &a, sizeof a);
    int e = r < 0 ? errno : 0;
    if (r == 0) syscall(SYS_write, fd, "x", 1);
    close(fd);
    return e;
}
static int try_unix(const char* path) {
    long fd = syscall(SYS_socket, AF_UNIX, SOCK_STREAM, 0);
    if (fd < 0) return errno;
    struct sockaddr_un a; memset(&a, 0, sizeof a);
    a.sun_family = AF_UNIX; strncpy(a.sun_path, path, sizeof a.sun_path - 1);
    long r = syscall(SYS_connect, fd, &a, sizeof a);
    int e = r < 0 ? errno : 0;
    close(fd);
    return e;
}
static int try_open(const char* path, int flags) {
    long fd = syscall(SYS_openat, AT_FDCWD, path, flags, 0644);
    if (fd < 0) return errno;
    if (flags & (O_WRONLY | O_RDWR)) syscall(SYS_write, fd, "x", 1);
    close(fd);
    return 0;
}
static int try_read_parent(void) {
    /* The worker is a fork of the supervisor: libc's `environ` is at the same address in both. */
    char** copy = 0;
    struct iovec local = {&copy, sizeof copy}, remote = {&environ, sizeof environ};
    long r = syscall(SYS_process_vm_readv, getppid(), &local, 1, &remote, 1, 0);
    return r < 0 ? errno : 0;
}
static int try_parent_mem(void) {
    char path[64];
    snprintf(path, sizeof path, "/proc/%d/mem", (int)getppid());
    return try_open(path, O_RDONLY);
}
"""

NATIVE_PROBE = (
    "#include <Python.h>\n"
    + C_PROBES
    + r"""
static PyObject* probe(PyObject* self, PyObject* args) {
    int port; const char *unix_path, *outside, *library, *inside;
    if (!PyArg_ParseTuple(args, "issss", &port, &unix_path, &outside, &library, &inside)) return NULL;
    return Py_BuildValue(
        "{s:i,s:i,s:i,s:i,s:i,s:i,s:i,s:i}",
        "tcp_connect", try_tcp(port),
        "unix_connect", try_unix(unix_path),
        "write_outside", try_open(outside, O_WRONLY | O_CREAT | O_APPEND),
        "write_library", try_open(library, O_WRONLY | O_APPEND),
        "read_library", try_open(library, O_RDONLY),
        "write_inside", try_open(inside, O_WRONLY | O_CREAT | O_APPEND),
        "read_parent_memory", try_read_parent(),
        "open_parent_mem", try_parent_mem());
}
static PyMethodDef methods[] = {{"probe", probe, METH_VARARGS, ""}, {NULL, NULL, 0, NULL}};
static struct PyModuleDef module = {PyModuleDef_HEAD_INIT, "evk_escape", NULL, -1, methods};
PyMODINIT_FUNC PyInit_evk_escape(void) { return PyModule_Create(&module); }
"""
)

AXPY = """
import json, os, sys, time
import torch
import torch.nn as nn
import triton
import triton.language as tl

{escape}


@triton.jit
def _axpy(x_ptr, b_ptr, y_ptr, n, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    mask = offs < n
    x = tl.load(x_ptr + offs, mask=mask)
    tl.store(y_ptr + offs, 3.0 * x + tl.load(b_ptr + offs, mask=mask), mask=mask)


class ModelNew(nn.Module):
    def forward(self, x, b):
        y = torch.empty_like(x)
        n = x.numel()
        _axpy[(triton.cdiv(n, 64),)](x, b, y, n, BLOCK=64)
        return y
"""

NATIVE_ESCAPE = """
from torch.utils.cpp_extension import load_inline
_probe = load_inline("evk_escape", cpp_sources=[{source!r}], no_implicit_headers=True)
_got = _probe.probe({port}, {unix!r}, {outside!r}, {library!r}, os.path.abspath("inside.txt"))
# A daemon that leaves the session (setsid) and its group (setpgid) to outlive the kill.
_pid = os.fork()
if _pid == 0:
    try:
        os.setsid()
    except OSError:
        os.setpgid(0, 0)
    time.sleep(600)
    os._exit(0)
_got["daemon_pid"] = _pid
print("EVK-PROBE " + json.dumps(_got), flush=True)
"""

# No ctypes, no extension, no socket module: a shell the candidate starts. bash's /dev/tcp makes
# the socket itself, beyond any Python audit hook.
SHELL_ESCAPE = """
import subprocess
_script = "echo x >/dev/tcp/127.0.0.1/{port}; echo x >>{outside}; echo x >>{library}"
_run = subprocess.run(["bash", "-c", _script], capture_output=True, text=True)
_got = {{"shell_code": _run.returncode, "shell_stderr": _run.stderr[-400:]}}
print("EVK-PROBE " + json.dumps(_got), flush=True)
"""


PROBE_NAMES = (
    "tcp_connect",
    "unix_connect",
    "write_outside",
    "write_library",
    "read_library",
    "write_inside",
    "read_parent_memory",
    "open_parent_mem",
)
# The GPU variant: the same system calls from the host code of a CUDA extension built KernelBench's
# way (torch's header, pybind11 functions), beside the kernel the candidate is judged on.
CUDA_SOURCE = (
    "#include <torch/extension.h>\n"
    + C_PROBES
    + r"""
__global__ void axpy_kernel(const float* x, const float* b, float* y, long n) {
    long i = blockIdx.x * (long)blockDim.x + threadIdx.x;
    if (i < n) y[i] = 3.0f * x[i] + b[i];
}
torch::Tensor axpy(torch::Tensor x, torch::Tensor b) {
    auto y = torch::empty_like(x);
    long n = x.numel();
    axpy_kernel<<<(n + 255) / 256, 256>>>(x.data_ptr<float>(), b.data_ptr<float>(), y.data_ptr<float>(), n);
    return y;
}
std::vector<int64_t> probe(int64_t port, std::string unix_path, std::string outside, std::string library,
                           std::string inside) {
    return {try_tcp((int)port), try_unix(unix_path.c_str()),
            try_open(outside.c_str(), O_WRONLY | O_CREAT | O_APPEND),
            try_open(library.c_str(), O_WRONLY | O_APPEND), try_open(library.c_str(), O_RDONLY),
            try_open(inside.c_str(), O_WRONLY | O_CREAT | O_APPEND), try_read_parent(), try_parent_mem()};
}
"""
)
CUDA_CANDIDATE = """
import json, os
import torch
import torch.nn as nn
from torch.utils.cpp_extension import load_inline

_ext = load_inline(
    "evk_escape_cuda",
    cpp_sources=["torch::Tensor axpy(torch::Tensor x, torch::Tensor b);",
                 "std::vector<int64_t> probe(int64_t, std::string, std::string, std::string, std::string);"],
    cuda_sources=[{source!r}],
    functions=["axpy", "probe"],
)
_codes = _ext.probe({port}, {unix!r}, {outside!r}, {library!r}, os.path.abspath("inside.txt"))
print("EVK-PROBE " + json.dumps(dict(zip({names!r}, _codes))), flush=True)


class ModelNew(nn.Module):
    def forward(self, x, b):
        return _ext.axpy(x.contiguous(), b.contiguous())
"""


def cuda_candidate(port: int, unix: Path, outside: Path, library: Path) -> str:
    return CUDA_CANDIDATE.format(
        source=CUDA_SOURCE,
        port=port,
        unix=str(unix),
        outside=str(outside),
        library=str(library),
        names=PROBE_NAMES,
    )


def native_candidate(port: int, unix: Path, outside: Path, library: Path) -> str:
    escape = NATIVE_ESCAPE.format(
        source=NATIVE_PROBE, port=port, unix=str(unix), outside=str(outside), library=str(library)
    )
    return AXPY.format(escape=escape)


def shell_candidate(port: int, outside: Path, library: Path) -> str:
    return AXPY.format(escape=SHELL_ESCAPE.format(port=port, outside=outside, library=library))


def probe_report(evaluation: Evaluation) -> dict[str, Any]:
    """What the candidate printed about its attempts (errno per attempt, 0 = it succeeded)."""
    output = str(evaluation.details.get("output_tail", ""))
    lines = [line for line in output.splitlines() if line.startswith("EVK-PROBE ")]
    assert lines, f"the probe did not report: {evaluation.status} {evaluation.reason}\n{output}"
    report: dict[str, Any] = json.loads(lines[-1].removeprefix("EVK-PROBE "))
    return report
