"""A ``load_inline``/``load`` build directory outside the candidate's own, moved into it (issue 34).

The worker's Landlock domain lets a candidate write beneath its own directory (``work/``: its cwd,
``HOME``, ``TMPDIR`` and ``TORCH_EXTENSIONS_DIR``) and ``/dev/shm``, nowhere else
(:mod:`evokernel.evaluation.isolation`). Published kernels often build elsewhere:
``load_inline(..., build_directory="/tmp/torch_extensions/<name>")``, or
``os.environ["TORCH_EXTENSIONS_DIR"] = "/tmp/..."`` before the call. Built as written, torch's
first write there raised ``PermissionError`` and a correct kernel was scored ``compile_error``.

Here such a call is built in ``work/redirected/<the original absolute path>`` instead (each
component cut to ``[A-Za-z0-9._+-]``), so two build directories stay two and nothing outside the
candidate's sandbox is reached. Moving builds out of ``/dev/shm`` as well is deliberate: it is
shared by every candidate on the node, and an extension one candidate left there would be what
another candidate that names the same directory imports. A build directory inside ``work/``
(relative paths included) is left as written. The count goes into the build note
(inline_builds.NOTES); the original and the new path are printed to the candidate's output.

Published kernels make the directory first (``os.makedirs(build_dir, exist_ok=True)``; torch's
``load_inline`` does not make a ``build_directory`` it is given). So ``os.makedirs`` is wrapped
too: where the sandbox refuses it (``EACCES``/``EPERM``) for a path outside the candidate's
directory, the redirected directory is made instead and the call returns as if it had succeeded.
Only the directory moves: the sources, flags and the module torch builds are the candidate's.
A candidate that reaches the original path any other way (reading the ``.so`` from there, listing
it) is still refused by the sandbox, and the verdict's reason says what was forbidden
(:func:`evokernel.evaluation.feedback.sandbox_denial`).
"""

from __future__ import annotations

import errno
import functools
import os
import re
import sys
from collections import Counter
from pathlib import Path
from typing import Any

SUBDIRECTORY = "redirected"
_UNSAFE = re.compile(r"[^A-Za-z0-9._+-]")


def _inside(path: str, workdir: Path) -> bool:
    """Whether ``path`` (links resolved, relative to the cwd) lies beneath ``workdir``."""
    return Path(os.path.realpath(path)).is_relative_to(os.path.realpath(workdir))


def redirected_path(path: str, workdir: Path) -> Path:
    """``work/redirected/<path made absolute, each component made safe>``."""
    absolute = os.path.normpath(os.path.abspath(path))
    parts = [_UNSAFE.sub("_", part) for part in Path(absolute).parts[1:]]
    parts = [part if part not in (".", "..") else part.replace(".", "_") for part in parts]
    return workdir.joinpath(SUBDIRECTORY, *parts) if parts else workdir / SUBDIRECTORY / "_root"


def _requested_directory(arguments: dict[str, Any]) -> str | None:
    """The directory torch would build this call in, when the call or the environment names one."""
    given = arguments.get("build_directory")
    if given:
        path = os.fspath(given) if isinstance(given, str | os.PathLike) else None
        return path if isinstance(path, str) else None
    root, name = os.environ.get("TORCH_EXTENSIONS_DIR"), arguments.get("name")
    # torch's _get_build_directory: <TORCH_EXTENSIONS_DIR>/<name>.
    return os.path.join(root, name) if root and isinstance(name, str) else None


def redirect_arguments(arguments: dict[str, Any], workdir: Path) -> tuple[dict[str, Any], str, Path] | None:
    """(the call's arguments with the build directory inside ``workdir``, the directory asked for,
    the one given instead), or None when the call builds inside ``workdir`` already, names no
    directory torch could use, or the new directory cannot be made (then the call goes as
    written, and the sandbox's refusal is what the verdict reports)."""
    requested = _requested_directory(arguments)
    if requested is None or _inside(requested, workdir):
        return None
    target = redirected_path(requested, workdir)
    try:
        target.mkdir(parents=True, exist_ok=True)
    except OSError:
        return None
    if not _inside(str(target), workdir):  # a link the candidate planted under redirected/
        return None
    print(
        f"evokernel: build directory {requested} is outside the candidate's sandbox; building in {target}",
        file=sys.stderr,
    )
    return {**arguments, "build_directory": str(target)}, requested, target


def install_makedirs(workdir: Path, counts: Counter[str]) -> None:
    """Wrap ``os.makedirs`` so that a directory the sandbox refuses outside ``workdir`` is made
    where a redirected build will look for it (counted as ``redirected_makedirs``)."""
    original = os.makedirs
    depth = [0]  # os.makedirs calls itself (by its global name) for each missing parent

    @functools.wraps(original)
    def makedirs(name: Any, mode: int = 0o777, exist_ok: bool = False) -> None:
        if depth[0]:
            return original(name, mode, exist_ok)
        depth[0] += 1
        try:
            return original(name, mode, exist_ok)
        except PermissionError as exc:
            target = _refused_directory(exc, name, workdir)
            if target is None:
                raise
            try:
                original(target, mode, exist_ok=True)
            except OSError:
                raise exc from None
            counts["redirected_makedirs"] += 1
            print(
                f"evokernel: {name} is outside the candidate's sandbox; made {target} instead",
                file=sys.stderr,
            )
            return None
        finally:
            depth[0] -= 1

    os.makedirs = makedirs


def _refused_directory(exc: PermissionError, name: Any, workdir: Path) -> Path | None:
    """Where a directory the sandbox refused goes instead; None when it is not such a refusal."""
    path = os.fspath(name) if isinstance(name, str | os.PathLike) else None
    if exc.errno not in (errno.EACCES, errno.EPERM) or not isinstance(path, str) or _inside(path, workdir):
        return None
    target = redirected_path(path, workdir)
    # A link the candidate planted under redirected/ leads nowhere new: the sandbox still decides.
    return target if _inside(str(target.parent), workdir) else None
