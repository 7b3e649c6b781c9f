"""Operating-system isolation of the candidate's process tree, and what this machine allows of it.

Applied by the worker (the only process that runs candidate code) right after its fork, before it
imports the candidate, so native code (a ``load_inline`` extension) is bound like Python is and the
fork-server keeps its speed. Two kernel layers, both inherited by every child and impossible to lift:

* **Filesystem and TCP: Landlock** (:mod:`.landlock`). Read/execute only beneath the system
  directories, the Python installation, the ``evokernel`` package, CUDA and the precompiled-header
  cache; write only beneath the candidate's own directory (its ``HOME``, ``TMPDIR``, Triton cache
  and torch extension dir are all there) and ``/dev/shm`` (torch's CUDA IPC reference counters);
  a few device files. The library, the checkout, home directories, ``/tmp`` and other candidates'
  directories are neither readable nor writable. TCP bind/connect, signals and abstract UNIX
  sockets outside the candidate, and ptrace, are refused by the same domain where the ABI has them.
* **Network and processes: seccomp** (:mod:`.seccomp`). No socket but connected ``AF_UNIX``
  pairs, no ``connect``, no io_uring, no ``setsid`` (the sandbox kills the whole session:
  :mod:`.sessions`), no ptrace, no new namespaces.

Namespaces (``unshare --net``, bubblewrap) are not used: they need root or unprivileged user
namespaces, which containers and many clusters turn off, while Landlock and seccomp need neither
(measured in docs/benchmarks.md: both work here as root and as ``nobody``).

``evaluation.isolation``: ``required`` (the default) refuses to evaluate where either layer is
missing; ``best-effort`` applies what the kernel has and records what held in each verdict's
``details["isolation"]``. Requests may also say ``off`` (benchmarks and tests measuring the layers).
"""

from __future__ import annotations

import functools
import json
import os
import shutil
import subprocess
import sys
import sysconfig
import tempfile
import time
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from evokernel.evaluation import landlock, privileges, seccomp
from evokernel.exceptions import EvaluationError

if TYPE_CHECKING:
    from evokernel.evaluation.request import EvaluationRequest

MODES = ("required", "best-effort")
# Read and execute: what a Python + torch + triton + compiler process needs of the system.
SYSTEM_READ = ("/usr", "/lib", "/lib32", "/lib64", "/libx32", "/bin", "/sbin", "/etc", "/proc", "/sys")
DEVICE_FILES = ("/dev/null", "/dev/zero", "/dev/full", "/dev/random", "/dev/urandom", "/dev/nvidia-caps")
SHARED_WRITE = ("/dev/shm",)


SECCOMP_LINE = "sockets, connect, io_uring, ptrace, setsid, namespaces refused"


class IsolationUnavailable(EvaluationError):
    """``evaluation.isolation: required`` on a machine that cannot provide it."""


@dataclass(frozen=True)
class Support:
    """What the kernel of this node allows (probed in a child process that confines itself)."""

    landlock_abi: int
    seccomp: bool
    uid: int
    # The probe's own check, once confined: which escapes it tried were refused.
    refused: dict[str, bool]
    error: str = ""

    def missing(self) -> list[str]:
        missing = []
        if self.landlock_abi < 1:
            missing.append("Landlock (filesystem isolation; Linux >= 5.13 with landlock in the LSM list)")
        if not self.seccomp:
            missing.append("seccomp filters (network isolation)")
        missing += [f"the probe's {name} was not refused" for name, ok in self.refused.items() if not ok]
        return missing

    def lines(self) -> list[str]:
        abi = self.landlock_abi
        net = ", TCP refused" if abi >= 4 else ""
        scopes = ", signals and abstract sockets scoped" if abi >= 6 else ""
        proven = ", ".join(sorted(name for name, ok in self.refused.items() if ok))
        return [
            f"landlock  {f'ABI {abi}: filesystem allow-list{net}{scopes}' if abi else 'unavailable'}",
            f"seccomp   {SECCOMP_LINE if self.seccomp else 'unavailable'}",
            f"probe     {'refused: ' + proven if proven else 'no confined probe ran'}"
            + (f" ({self.error})" if self.error else ""),
            f"user      uid {self.uid}"
            + (" (root: run evaluators as an unprivileged user)" if self.uid == 0 else ""),
        ]


@functools.cache
def detect() -> Support:
    """Probe once per process: a child interpreter confines itself as a worker would and tries to
    escape (~60 ms: no torch import)."""
    try:
        # Made here: the confined probe cannot remove its own directory's parent.
        with tempfile.TemporaryDirectory(prefix="evk-isolation-probe-") as tmp:
            out = subprocess.run(
                [sys.executable, "-m", "evokernel.evaluation.isolation", tmp],
                capture_output=True,
                timeout=60,
                check=False,
                env={k: v for k, v in os.environ.items() if k in ("PATH", "PYTHONPATH", "LANG")},
            )
        if out.returncode != 0:
            raise ValueError(
                out.stderr.decode(errors="replace").strip()[-300:] or f"exit code {out.returncode}"
            )
        return Support(**json.loads(out.stdout.decode().strip().splitlines()[-1]))
    except (subprocess.TimeoutExpired, ValueError, IndexError, TypeError, OSError) as exc:
        return Support(landlock.abi_version(), False, os.getuid(), {}, f"probe failed: {exc}")


def check(mode: str) -> Support:
    """Raise :class:`IsolationUnavailable` when ``mode`` is ``required`` and a layer is missing."""
    if mode not in MODES:
        raise EvaluationError(f"evaluation.isolation must be one of {', '.join(MODES)}, not {mode!r}")
    support = detect()
    if mode == "required" and support.missing():
        raise IsolationUnavailable(
            "evaluation.isolation is 'required' but this machine lacks: "
            + "; ".join(support.missing())
            + ". Set evaluation.isolation=best-effort to evaluate with what it has (see README, Security)."
        )
    return support


def doctor_report() -> tuple[str, bool]:
    """``evokernel doctor``: what this machine allows, and whether ``required`` would run here."""
    support = detect()
    missing = support.missing()
    verdict = (
        "evaluation.isolation=required: available"
        if not missing
        else "evaluation.isolation=required: REFUSED ("
        + "; ".join(missing)
        + "); best-effort would evaluate with what there is"
    )
    return "\n".join(
        ["candidate isolation", *(f"  {line}" for line in support.lines()), verdict]
    ), not missing


def request_reads(request: EvaluationRequest) -> list[str]:
    """The node's shared read-only paths a candidate of ``request`` gets beyond the machine's: the
    precompiled header and the object cache (both written only by trusted processes)."""
    return [path for path in (request.torch_pch, request.object_cache) if path]


def allowed_paths(
    workdir: Path, extra_read: list[str], extra_write: list[str] | None = None
) -> tuple[list[Path], list[Path], list[Path]]:
    """(read, write, devices) for a candidate in ``workdir``; ``extra_write``: a directory the
    trusted side made for this process alone (Nsight Compute's lock directory for the target)."""
    read, devices = machine_paths()
    write = [workdir, *(Path(p) for p in SHARED_WRITE), *(Path(p) for p in extra_write or [])]
    return [*read, *(Path(p) for p in extra_read)], write, devices


@functools.cache
def machine_paths() -> tuple[list[Path], list[Path]]:
    """(read, devices) that are the same for every candidate of this process: the fork-server
    computes them once before it forks (2.3 ms of sysconfig and sys.path work each time otherwise)."""
    read = [Path(p) for p in SYSTEM_READ]
    prefixes = {sys.prefix, sys.base_prefix, sys.exec_prefix, sys.base_exec_prefix}
    prefixes |= {sysconfig.get_path(key) for key in ("stdlib", "platstdlib", "purelib", "platlib")}
    read += [Path(p) for p in sorted(prefixes) if p]
    read.append(Path(__file__).resolve().parents[1])  # the evokernel package itself
    # sys.path beyond the installation (PYTHONPATH, --target installs), except the current
    # directory: the fork-server's home or a checkout the process happened to start in.
    cwd = Path.cwd().resolve()
    read += [Path(p) for p in sys.path if p and Path(p).is_dir() and Path(p).resolve() != cwd]
    for name in ("CUDA_HOME", "CUDA_PATH"):
        if os.environ.get(name):
            read.append(Path(os.environ[name]))
    read += toolchain_prefixes(cwd)
    read += [Path(p) for p in os.environ.get("LD_LIBRARY_PATH", "").split(":") if p]
    devices = [Path(p) for p in DEVICE_FILES]
    devices += sorted(Path("/dev").glob("nvidia*"))
    return list(dict.fromkeys(read)), list(dict.fromkeys(devices))


# What a `load_inline` build runs: torch asks for $CXX (else c++), nvcc and ninja, and the
# compiler drivers call their own cc1plus, as and ld from the same installation.
BUILD_TOOLS = ("c++", "g++", "gcc", "cc", "nvcc", "ninja", "ld", "as")


def toolchain_prefixes(cwd: Path) -> list[Path]:
    """The installations of the build tools on PATH, read and executed by candidates' builds: a
    compiler outside /usr (the GPU image's /opt/gcc/bin/g++) needs its whole prefix (bin/, lib/,
    libexec/); a toolchain under a home directory (~/miniconda3, ~/.local) is opened, the home
    itself never. Neither is / nor the current directory or any folder that holds it."""
    home = Path.home().resolve()
    names = [*BUILD_TOOLS, *(os.environ[v].split()[0] for v in ("CXX", "CC") if os.environ.get(v))]
    found: list[Path] = []
    for name in names:
        where = shutil.which(name)
        if where is None:
            continue
        for tool in {Path(where), Path(where).resolve()}:  # a symlink's own dir and its target's
            prefix = tool.parent.parent if tool.parent.name == "bin" else tool.parent
            if cwd.is_relative_to(prefix) or home.is_relative_to(prefix):
                prefix = tool.parent  # a prefix that holds the checkout or a home: its bin/ alone
            if not (cwd.is_relative_to(prefix) or home.is_relative_to(prefix)):
                found.append(prefix)
    return list(dict.fromkeys(found))


def confine(
    mode: str, workdir: Path, extra_read: list[str], extra_write: list[str] | None = None
) -> dict[str, Any]:
    """Confine this process (a freshly forked worker, one thread) for good. Returns what held,
    for the verdict's details; raises :class:`IsolationUnavailable` under ``required`` when a
    layer cannot be applied."""
    if mode == "off":
        return {"mode": "off"}
    start = time.perf_counter()
    record: dict[str, Any] = {"mode": mode}
    errors = []
    try:
        # A root candidate's capabilities would reach past both layers (/proc of every process,
        # other users' files): privileges.py.
        record["capabilities"] = privileges.drop_capabilities()
    except OSError as exc:
        errors.append(f"capabilities: {exc}")
        record["capabilities"] = "held"
    abi = landlock.abi_version()
    try:
        record.update(landlock.restrict(abi, *allowed_paths(workdir, extra_read, extra_write)))
        record["landlock_abi"] = abi
    except OSError as exc:
        errors.append(f"Landlock: {exc}")
        record["filesystem"] = False
    try:
        seccomp.install()
        record["seccomp"] = True
    except OSError as exc:
        errors.append(f"seccomp: {exc}")
        record["seccomp"] = False
    record["apply_ms"] = round(1000 * (time.perf_counter() - start), 3)
    if errors:
        record["errors"] = errors
        if mode == "required":
            raise IsolationUnavailable("isolation required but not applied: " + "; ".join(errors))
    return record


def _probe(tmp: Path) -> dict[str, Any]:
    """Run in a child interpreter by :func:`detect`: confine, then try what a candidate would."""
    import errno
    import socket

    abi = landlock.abi_version()
    refused: dict[str, bool] = {}
    workdir = tmp / "candidate"
    workdir.mkdir()
    record = confine("best-effort", workdir, [])
    try:
        socket.socket(socket.AF_INET, socket.SOCK_STREAM).close()
        refused["inet socket"] = False
    except PermissionError:
        refused["inet socket"] = True
    try:
        os.close(os.open(tmp / "outside", os.O_WRONLY | os.O_CREAT, 0o600))
        refused["write outside"] = False
    except OSError as exc:
        refused["write outside"] = exc.errno == errno.EACCES
    try:
        (workdir / "inside").write_text("ok")
    except OSError as exc:
        record.setdefault("errors", []).append(f"could not write its own directory: {exc}")
    return {
        "landlock_abi": abi,
        "seccomp": bool(record.get("seccomp")),
        "uid": os.getuid(),
        "refused": refused,
        "error": "; ".join(record.get("errors", [])),
    }


if __name__ == "__main__":
    print(json.dumps(asdict(Support(**_probe(Path(sys.argv[1]))))))
