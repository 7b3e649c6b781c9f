"""Issue 34: a ``load_inline``/``load`` build directory outside the candidate's sandbox is moved into
it (evaluation/build_redirect.py), and a refusal that remains says what the sandbox forbade.

The corpus covers the whole path under the real confinement (tests/fixtures/legit/
axpy_cpu_build_directory_tmp.py, axpy_cpu_build_env.py through test_verify.py); these tests pin
the mapping, a real g++ build through the installed wrappers, and the wording of a refusal."""

from __future__ import annotations

import errno
import os
import subprocess
import sys
from pathlib import Path

import pytest

from evokernel.evaluation.build_redirect import redirect_arguments, redirected_path
from evokernel.evaluation.feedback import failure_text, sandbox_denial
from evokernel.evaluation.inline_builds import inline_build_note
from tests.core.corpus import ROOT, load_case
from tests.core.test_verify import evaluate


def test_an_outside_directory_maps_to_one_inside_per_path(tmp_path: Path) -> None:
    work = tmp_path / "work"
    assert redirected_path("/tmp/torch_extensions/k v", work) == work / "redirected/tmp/torch_extensions/k_v"
    assert redirected_path("/tmp/a/../b", work) == work / "redirected/tmp/b"
    assert redirected_path("/", work) == work / "redirected/_root"
    assert redirected_path("/dev/shm/x", work) != redirected_path("/dev/shm/y", work)


def test_only_a_directory_outside_the_candidates_own_is_moved(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    work = tmp_path / "work"
    work.mkdir()
    monkeypatch.chdir(work)
    monkeypatch.delenv("TORCH_EXTENSIONS_DIR", raising=False)
    call = {"name": "ext", "cpp_sources": "int f();"}
    assert redirect_arguments({**call, "build_directory": str(work / "build")}, work) is None
    assert redirect_arguments({**call, "build_directory": "relative/build"}, work) is None
    assert redirect_arguments(call, work) is None  # torch's default: under HOME, the candidate's
    outside = str(tmp_path / "elsewhere" / "ext")
    moved = redirect_arguments({**call, "build_directory": outside}, work)
    assert moved is not None
    arguments, requested, target = moved
    assert requested == outside and target.is_dir() and target.is_relative_to(work / "redirected")
    assert arguments == {**call, "build_directory": str(target)}
    # /dev/shm is writable but shared by every candidate on the node: moved as well.
    shm = redirect_arguments({**call, "build_directory": "/dev/shm/torch_ext/ext"}, work)
    assert shm is not None and shm[2] == work / "redirected/dev/shm/torch_ext/ext"
    # TORCH_EXTENSIONS_DIR outside: torch would build in <it>/<name>.
    monkeypatch.setenv("TORCH_EXTENSIONS_DIR", "/tmp/torch_extensions")
    env = redirect_arguments(call, work)
    assert env is not None and env[1] == "/tmp/torch_extensions/ext"
    assert env[2] == work / "redirected/tmp/torch_extensions/ext"
    # A link planted under redirected/ that leads out is not followed: the call goes as written.
    (work / "redirected").rename(tmp_path / "was_redirected")
    (work / "redirected").symlink_to(tmp_path / "elsewhere")
    assert redirect_arguments({**call, "build_directory": "/opt/other"}, work) is None


BUILD_SCRIPT = """
import sys
from pathlib import Path
import torch.utils.cpp_extension as cpp_extension
from evokernel.evaluation import inline_builds

work, outside = Path(sys.argv[1]), Path(sys.argv[2])
inline_builds.install(None, workdir=work)
source = '''
#include <Python.h>
static PyObject* seven(PyObject*, PyObject*) { return PyLong_FromLong(7); }
static PyMethodDef methods[] = {{"seven", seven, METH_NOARGS, ""}, {nullptr, nullptr, 0, nullptr}};
static struct PyModuleDef module = {PyModuleDef_HEAD_INIT, "NAME", nullptr, -1, methods};
PyMODINIT_FUNC PyInit_NAME(void) { return PyModule_Create(&module); }
'''
inline = cpp_extension.load_inline(
    "evk_redirect_inline", cpp_sources=[source.replace("NAME", "evk_redirect_inline")],
    no_implicit_headers=True, build_directory=str(outside / "inline"),
)
(work / "loaded.cpp").write_text(source.replace("NAME", "evk_redirect_load"))
loaded = cpp_extension.load(
    "evk_redirect_load", [str(work / "loaded.cpp")], build_directory=str(outside / "load"),
)
assert inline.seven() == 7 and loaded.seven() == 7
assert Path(inline.__file__).is_relative_to(work / "redirected"), inline.__file__
assert Path(loaded.__file__).is_relative_to(work / "redirected"), loaded.__file__
print(dict(inline_builds.counts))
"""


def test_a_real_build_outside_goes_into_the_candidates_directory(tmp_path: Path) -> None:
    """g++ builds of a tiny Python-C-API extension (no torch headers: ~1 s each) through the
    wrappers the worker installs, by ``load_inline`` and by ``load``."""
    work, outside = tmp_path / "work", tmp_path / "outside"
    work.mkdir()
    env = {**os.environ, "TORCH_EXTENSIONS_DIR": str(work / "torch_extensions")}
    done = subprocess.run(
        [sys.executable, "-c", BUILD_SCRIPT, str(work), str(outside)],
        capture_output=True,
        text=True,
        timeout=300,
        cwd=work,
        env=env,
        check=False,
    )
    assert done.returncode == 0, done.stderr[-3000:]
    assert done.stdout.strip().splitlines()[-1] == "{'redirected': 2}"
    assert not outside.exists()  # nothing was written where the call asked
    assert "is outside the candidate's sandbox; building in" in done.stderr
    assert inline_build_note({"redirected": 2}) == (
        "load_inline builds: 2 in work/redirected/ instead of a build directory outside the sandbox"
    )


def test_a_refused_access_says_what_the_sandbox_forbade() -> None:
    denied = PermissionError(errno.EACCES, "Permission denied", "/root/secret")
    reason, feedback = failure_text(denied, "import failed: ")
    assert reason.startswith("import failed: PermissionError: ")
    assert "the sandbox forbade access to /root/secret: a candidate may write only beneath its own" in reason
    assert "the sandbox forbade access to /root/secret" in feedback
    try:
        try:
            raise PermissionError(errno.EPERM, "Operation not permitted")
        except PermissionError as inner:
            raise RuntimeError("Error building extension 'k'") from inner
    except RuntimeError as outer:
        assert sandbox_denial(outer).startswith("the sandbox forbade this operation: ")
    assert sandbox_denial(FileNotFoundError(errno.ENOENT, "No such file", "/x")) == ""
    assert sandbox_denial(ValueError("bad")) == ""


REMAINING = ROOT / "tests/fixtures/legit/axpy_cpu_build_directory_tmp.py"


def test_reaching_the_original_directory_itself_is_refused_with_the_reason(tmp_path: Path) -> None:
    """The build is moved, the directory the candidate named is not: listing it after the build
    is refused by the sandbox, and the verdict says so instead of a bare PermissionError."""
    named = tmp_path / "named_build"
    named.mkdir()  # it exists, outside the candidate's sandbox
    source = REMAINING.read_text().replace('"/tmp/torch_extensions/evk_axpy_cpu_tmp"', repr(str(named)))
    source = source.replace("\n\nclass ModelNew", "\n_listing = os.listdir(_BUILD)\n\n\nclass ModelNew", 1)
    assert "_listing" in source and str(named) in source
    candidate = tmp_path / "lists_original_build_directory.py"
    candidate.write_text(source)
    ev = evaluate(load_case(candidate))
    assert (ev.status.value, ev.stage) == ("compile_error", "build"), ev.reason
    expected = f"the sandbox forbade access to {named}: a candidate may write"
    assert expected in ev.reason, ev.reason
