"""The directories of one evaluation, and who may write which.

```
evk-cand-XXXX/          the trusted root (0700): only the sandbox and the supervisor write here
    request.json        the request (0400), read by the supervisor before it forks the worker
    output.log          the supervisor's and worker's stdout/stderr; the worker holds only its fd
    supervisor/         the supervisor's cwd, HOME, TMPDIR: torch.compile's and Triton's caches
                        for the baselines (inductor imports the Python it caches from there)
    work/               the candidate's: its cwd, HOME, TMPDIR, Triton and extension caches; the
                        only place beside /dev/shm where its Landlock domain lets it write
```

Why the split (issue 33): everything the trusted processes execute or parse used to sit in the
candidate's writable directory. A candidate that rewrote ``reference.py`` ran its own code in the
unconfined supervisor (the API key, the library, the Ray token were all in reach), one that
replaced ``output.log`` with a symlink or a FIFO made the sandbox read the supervisor's
environment into the verdict or hang, and a cache planted under a shared ``TMPDIR`` would have been
imported by the supervisor's ``torch.compile`` baseline. Now the supervisor loads the task from
the request held in memory (:func:`evokernel.evaluation.loading.load_source`), reads nothing the
worker can write, keeps its caches in ``supervisor/``, and starts Python with ``-P`` so its
current directory is never on ``sys.path``.
"""

from __future__ import annotations

import os
import stat
import tempfile
from dataclasses import dataclass
from pathlib import Path

# Path variables that point a process's caches and scratch files at one directory.
DIRECTORY_VARS = ("HOME", "TRITON_HOME", "TMPDIR", "TORCH_EXTENSIONS_DIR", "TORCHINDUCTOR_CACHE_DIR")


def directory_env(directory: Path) -> dict[str, str]:
    """``DIRECTORY_VARS`` for a process whose every cache lives beneath ``directory``."""
    return {
        "HOME": str(directory),
        # Triton reads TRITON_HOME (else ~) at each use, so a forked worker can switch it.
        "TRITON_HOME": str(directory),
        "TMPDIR": str(directory),
        "TORCH_EXTENSIONS_DIR": str(directory / "torch_extensions"),
        "TORCHINDUCTOR_CACHE_DIR": str(directory / "torchinductor"),
    }


def enter_candidate_directory(directory: Path) -> None:
    """Make ``directory`` this process's cwd and the home of every cache it writes: the worker
    after its fork, and the profiling target before it confines itself (both were started with
    the supervisor's own directory, which their Landlock domain cannot write)."""
    os.chdir(directory)
    os.environ.update(directory_env(directory))
    tempfile.tempdir = None  # gettempdir() caches its first answer


@dataclass(frozen=True)
class Workspace:
    root: Path

    @property
    def request_path(self) -> Path:
        return self.root / "request.json"

    @property
    def output_path(self) -> Path:
        return self.root / "output.log"

    @property
    def supervisor(self) -> Path:
        return self.root / "supervisor"

    @property
    def work(self) -> Path:
        return self.root / "work"

    @classmethod
    def create(cls, root: Path) -> Workspace:
        """Lay out ``root`` (an empty directory this process made)."""
        space = cls(root)
        root.chmod(0o700)
        space.supervisor.mkdir(mode=0o700)
        space.work.mkdir(mode=0o700)
        return space


# What the sandbox reads of a candidate's output: its tail, a bounded amount.
OUTPUT_CAP_BYTES = 64 * 1024


def read_tail(path: Path, cap: int = OUTPUT_CAP_BYTES) -> str:
    """The last ``cap`` bytes of ``path``, read without trusting what is there: no symlink is
    followed (``O_NOFOLLOW``), a FIFO or device does not block or stream (``O_NONBLOCK``, regular
    files only), and no more than ``cap`` bytes are read whatever the file claims. Anything else
    reads as a line saying what was found, never as its contents."""
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC)
    except FileNotFoundError:
        return ""
    except OSError as exc:  # ELOOP: a symlink where the log was
        return f"[evokernel: the output log could not be read safely: {exc.strerror}]"
    try:
        info = os.fstat(fd)
        if not stat.S_ISREG(info.st_mode):
            return "[evokernel: the output log is not a regular file; not read]"
        start = max(0, info.st_size - cap)
        chunks, left = [], cap
        while left > 0 and (data := os.pread(fd, min(left, 1 << 16), start + cap - left)):
            chunks.append(data)
            left -= len(data)
        return b"".join(chunks).decode(errors="replace")
    finally:
        os.close(fd)
