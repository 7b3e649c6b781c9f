"""A precompiled ``torch/extension.h`` for candidates' ``load_inline`` builds.

Why: ``load_inline`` writes a ``main.cpp`` that starts with ``#include <torch/extension.h>``, and
compiling it is mostly parsing that header: 22.5 s of one core on the H100 node, 10.0 s with a
precompiled header (docs/benchmarks.md, session 6). With the lean CUDA layout (torch-free ``.cu``)
that parse is most of a candidate's build.

How:

* **Trusted side** (:class:`HeaderCache`, one per GPU actor): runs ``python -m
  evokernel.evaluation.pch BASE`` in the background with the candidates' own environment. The
  builder asks torch which compiler and flags it gives a ``load_inline`` build's ``main.cpp`` (a
  probe build with a flag no compiler knows fails at once, after writing ``build.ninja``), and
  compiles the header with exactly those, once per entry of :data:`VARIANTS`, into
  ``BASE/<key>/<variant>/torch/extension.h.gch`` (written under a temporary name and renamed, so
  a build sees the whole file or none). ``<key>`` covers torch, Python, the compiler and CUDA;
  the node's actors share the directory under a file lock, and later runs on the node reuse it.
* **Untrusted side** (:mod:`evokernel.evaluation.inline_builds`, in the worker before the
  candidate is imported): a ``load_inline`` call whose ``extra_cflags`` name a built variant, and
  which adds no include paths of its own, gets ``-I<BASE/key/variant>`` in front of them. ``-I`` directories
  are searched before torch's ``-isystem`` ones, so gcc meets the ``.gch`` first; gcc checks a
  precompiled header against the compile's options and macros and reads the real header instead
  when they differ, so the header can change how fast a build is, never what it builds. nvcc
  cannot use gcc's headers; inline_builds keeps torch's headers out of torch-free ``.cu`` files.

Candidates run as the actor's user, so they could rewrite the cache as they could rewrite
site-packages; the actor records each header's inode, size, mtime and ctime when the build
reports it and stops offering the cache when any of them changes.
"""

from __future__ import annotations

import argparse
import contextlib
import fcntl
import hashlib
import json
import logging
import os
import shlex
import signal
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from evokernel.evaluation.feedback import tail
from evokernel.exceptions import EvaluationError

log = logging.getLogger(__name__)

# The extra_cflags a load_inline call may pass and still get a precompiled header: none, and the
# ["-O3"] that KernelBench-style candidates pass. gcc refuses a header made at another -O level
# (__OPTIMIZE__ and __NO_INLINE__ differ), so each needs its own (~700 MB, ~40 s of one core).
VARIANTS: tuple[tuple[str, ...], ...] = ((), ("-O3",))
HEADER = Path("torch") / "extension.h.gch"
# Unknown to gcc, clang and nvcc alike: the probe build stops at its first command.
PROBE_FLAG = "-fevokernel-flags-probe"
BUILD_TIMEOUT_S = 900.0


class HeaderBuildError(EvaluationError):
    """The precompiled header could not be built (no compiler, a probe that wrote no build file)."""


def variant_name(flags: Sequence[str]) -> str:
    return "-".join(flag.lstrip("-") for flag in flags) or "default"


def header_file(root: Path, flags: Sequence[str]) -> Path:
    """Where the header precompiled with these extra flags lives (``-I`` its grandparent)."""
    return root / variant_name(flags) / HEADER


def header_dir(root: Path, extra_cflags: Any) -> Path | None:
    """The directory to add with ``-I`` for a build with these ``extra_cflags``, or None."""
    if extra_cflags is None:
        flags: tuple[str, ...] = ()
    elif isinstance(extra_cflags, list | tuple) and all(isinstance(f, str) for f in extra_cflags):
        flags = tuple(f.strip() for f in extra_cflags if f.strip())
    else:
        return None  # torch would fail on it or read it oddly; leave the call as it was
    if flags not in VARIANTS:
        return None
    header = header_file(root, flags)
    return header.parent.parent if header.is_file() else None


# ---- building (python -m evokernel.evaluation.pch BASE [--cuda]) ---------------------------------


def cache_key() -> str:
    import torch
    import torch.utils.cpp_extension as cpp_extension

    compiler = cpp_extension.get_cxx_compiler()
    version = subprocess.run(
        [compiler, "-dumpfullversion", "-dumpversion"], capture_output=True, text=True, check=False
    ).stdout.strip()
    facts = [torch.__version__, str(Path(torch.__file__).parent), sys.version, compiler, version]
    facts.append(str(cpp_extension.CUDA_HOME))
    return hashlib.sha256(json.dumps(facts).encode()).hexdigest()[:16]


def probe_flags(workdir: Path, cuda: bool) -> tuple[list[str], list[str]]:
    """The compiler command and the flags torch gives a ``load_inline`` build's ``main.cpp``,
    less the extension's name (the header does not use it)."""
    import torch.utils.cpp_extension as cpp_extension

    build = workdir / "probe"
    build.mkdir()
    cuda_args: dict[str, Any] = (
        {"cuda_sources": "// probe", "extra_cuda_cflags": [PROBE_FLAG]} if cuda else {}
    )
    with contextlib.suppress(RuntimeError):  # the probe flag stops the build after build.ninja is written
        cpp_extension.load_inline(
            "evk_flags_probe",
            cpp_sources="",
            extra_cflags=[PROBE_FLAG],
            build_directory=str(build),
            verbose=False,
            **cuda_args,
        )
    ninja = build / "build.ninja"
    if not ninja.is_file():
        raise HeaderBuildError(f"the probe build wrote no {ninja.name}; is ninja installed?")
    values = dict(
        line.split(" = ", 1)
        for line in ninja.read_text().splitlines()
        if " = " in line and not line[:1].isspace()
    )
    if "cxx" not in values or "cflags" not in values:
        raise HeaderBuildError(f"{ninja} names no cxx or cflags: torch changed its build file")
    flags = shlex.split(values["cflags"]) + shlex.split(values.get("post_cflags", ""))
    flags = [f for f in flags if f != PROBE_FLAG and not f.startswith("-DTORCH_EXTENSION_NAME=")]
    return shlex.split(values["cxx"]), flags


def build(base: Path, cuda: bool) -> dict[str, Any]:
    """Build every missing variant under ``base/<key>`` (other builders wait on the lock)."""
    started = time.monotonic()
    key = cache_key()
    root = base / key
    root.mkdir(parents=True, exist_ok=True)
    with open(base / f"{key}.lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        missing = [v for v in VARIANTS if not header_file(root, v).is_file()]
        if missing:
            _compile(root, missing, cuda)
    return {
        "root": str(root),
        "built": [variant_name(v) for v in missing],
        "seconds": time.monotonic() - started,
    }


def _compile(root: Path, variants: list[tuple[str, ...]], cuda: bool) -> None:
    import torch.utils.cpp_extension as cpp_extension

    real_header = Path(cpp_extension.include_paths()[0]) / "torch" / "extension.h"
    with tempfile.TemporaryDirectory(dir=root) as tmp:
        compiler, flags = probe_flags(Path(tmp), cuda)
        jobs = []
        for variant in variants:
            target = header_file(root, variant)
            target.parent.mkdir(parents=True, exist_ok=True)
            # gcc resolves every later `#include <torch/extension.h>` (candidates often repeat it)
            # to the directory where it found the .gch, so the header must be there too; compiled
            # from that path, the #pragma once recorded in the .gch then skips the repeat.
            header = target.with_suffix("")
            if not header.exists():
                link = Path(tmp) / f"{variant_name(variant)}.h"
                link.symlink_to(real_header)
                os.replace(link, header)
            partial = Path(tmp) / f"{variant_name(variant)}.gch"
            command = [*compiler, "-x", "c++-header", str(header), "-o", str(partial), *flags, *variant]
            jobs.append((target, partial, subprocess.Popen(command, stderr=subprocess.PIPE, text=True)))
        failures = []
        for target, partial, proc in jobs:  # in parallel: ~40 s each on one core
            # stderr always holds "#pragma once in main file": compiling a header as the main file.
            _, stderr = proc.communicate()
            if proc.returncode != 0:
                failures.append(f"{target.parent.parent.name}: {tail(stderr, 600)}")
            else:
                os.replace(partial, target)
        if failures:
            raise HeaderBuildError("compiling torch/extension.h failed: " + "; ".join(failures))


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description="Build the precompiled torch/extension.h for load_inline.")
    parser.add_argument("base", type=Path)
    parser.add_argument("--cuda", action="store_true", help="with the flags of a build that has CUDA sources")
    args = parser.parse_args(argv)
    try:
        print(json.dumps(build(args.base, args.cuda)))
    except HeaderBuildError as exc:
        sys.exit(str(exc))


# ---- the trusted side ------------------------------------------------------------------------------


def _fingerprint(path: Path) -> tuple[int, int, int, int]:
    st = path.stat()
    return (st.st_ino, st.st_size, st.st_mtime_ns, st.st_ctime_ns)


class HeaderCache:
    """Builds (or finds) the node's headers in the background; :meth:`root` is what requests may
    name once they are ready and unchanged."""

    def __init__(self, base: Path, cuda: bool, env: dict[str, str]) -> None:
        self.base, self.cuda, self.env = base, cuda, env
        self.state, self.reason, self.build_s = "building", "", 0.0
        # The variants this build compiled: none when every header was found already built.
        self.built: list[str] = []
        self._root: Path | None = None
        self._fingerprints: dict[Path, tuple[int, int, int, int]] = {}
        self._thread = threading.Thread(target=self._build, name="evk-pch", daemon=True)
        self._thread.start()

    def _build(self) -> None:
        started = time.monotonic()
        command = [sys.executable, "-m", "evokernel.evaluation.pch", str(self.base)]
        proc = subprocess.Popen(
            command + (["--cuda"] if self.cuda else []),
            env=self.env,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
            start_new_session=True,  # a timeout kills the compilers too
        )
        try:
            stdout, stderr = proc.communicate(timeout=BUILD_TIMEOUT_S)
        except subprocess.TimeoutExpired:
            with contextlib.suppress(ProcessLookupError):
                os.killpg(proc.pid, signal.SIGKILL)
            proc.communicate()
            self._fail(f"not built within {BUILD_TIMEOUT_S:.0f} s")
            return
        self.build_s = time.monotonic() - started
        if proc.returncode != 0:
            self._fail(tail(stderr.strip() or f"exit code {proc.returncode}", 600))
            return
        result = json.loads(stdout.strip().splitlines()[-1])
        root, self.built = Path(result["root"]), list(result["built"])
        self._fingerprints = {
            path: _fingerprint(path) for v in VARIANTS if (path := header_file(root, v)).is_file()
        }
        self._root, self.state = root, "ready"

    def _fail(self, reason: str) -> None:
        self.state, self.reason = "failed", reason
        log.warning("no precompiled torch/extension.h for load_inline builds: %s", reason)

    def root(self) -> str | None:
        if self.state != "ready" or self._root is None:
            return None
        for path, fingerprint in self._fingerprints.items():
            try:
                same = _fingerprint(path) == fingerprint
            except OSError:
                same = False
            if not same:
                self._fail(f"{path} changed after it was built; builds go on without it")
                return None
        return str(self._root)

    def wait(self, timeout_s: float) -> dict[str, Any]:
        self._thread.join(timeout_s)
        return self.describe()

    def describe(self) -> dict[str, Any]:
        return {
            "state": self.state,
            "reason": self.reason,
            "build_s": round(self.build_s, 1),
            "built": self.built,
        }


if __name__ == "__main__":
    main()
