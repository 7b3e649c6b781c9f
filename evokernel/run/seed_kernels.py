"""Published kernels in as a run's starting kernels: ``seed_kernels: [DIR]`` / ``evokernel seed import``.

A folder of solution files (KernelBench / PIKE layout ``task_<N>.py``, or ``<task name>.py``)
is matched to the run's tasks: ``task_<N>.py`` to the task whose name starts with ``<N>_`` (KernelBench
names its problems ``<N>_<Name>.py``), ``<name>.py`` to the task of that name. A matching file
replaces the task's own seed kernel, so generation 0 evaluates it and the search continues from it.
Files that call their kernel class ``Model`` (some PIKE solutions do) get ``ModelNew = Model``."""

from __future__ import annotations

import ast
import dataclasses
import re
from dataclasses import dataclass
from pathlib import Path

from evokernel.exceptions import ExportError
from evokernel.types import Task

_TASK_N = re.compile(r"task_(\d+)\.py")
_LEADING_N = re.compile(r"(\d+)_")
ALIAS = "\n\nModelNew = Model  # evokernel seed import: this file names its kernel class Model\n"


@dataclass(frozen=True)
class SeedMatch:
    """``task`` None: no task of the run matches ``file``. ``problem``: why it cannot seed, or ""."""

    file: Path
    task: str | None
    source: str
    problem: str = ""


def _kernel_source(path: Path) -> tuple[str, str]:
    """(source, problem) with ``ModelNew`` ensured."""
    try:
        source = path.read_text(encoding="utf-8")
        tree = ast.parse(source, filename=str(path))
    except (OSError, UnicodeDecodeError, SyntaxError) as exc:
        return "", f"cannot read or parse: {exc}"
    classes = {n.name for n in tree.body if isinstance(n, ast.ClassDef)}
    assigned = {
        t.id for n in tree.body if isinstance(n, ast.Assign) for t in n.targets if isinstance(t, ast.Name)
    }
    if "ModelNew" in classes | assigned:
        return source, ""
    if "Model" in classes:
        return source + ALIAS, ""
    return "", "defines neither ModelNew nor Model at module level"


def match_seed_files(folder: str | Path, tasks: list[Task]) -> list[SeedMatch]:
    folder = Path(folder)
    if not folder.is_dir():
        raise ExportError(f"seed folder {folder} does not exist")
    by_name = {t.name: t for t in tasks}
    by_number: dict[str, str] = {}
    for t in tasks:
        m = _LEADING_N.match(t.name)
        if m:
            by_number.setdefault(m.group(1), t.name)
    out = []
    for path in sorted(folder.glob("*.py")):
        m = _TASK_N.fullmatch(path.name)
        name = by_number.get(m.group(1)) if m else (path.stem if path.stem in by_name else None)
        source, problem = _kernel_source(path) if name else ("", "")
        out.append(SeedMatch(path, name, source, problem))
    return out


def apply_seed_kernels(tasks: list[Task], folders: list[str]) -> list[Task]:
    """The tasks with their seed kernels replaced by the matching files of ``folders`` (a later
    folder wins); a file that matches but cannot seed is an error naming it."""
    seeds: dict[str, SeedMatch] = {}
    for folder in folders:
        for match in match_seed_files(folder, tasks):
            if match.task is None:
                continue
            if match.problem:
                raise ExportError(f"{match.file}: cannot seed task {match.task}: {match.problem}")
            seeds[match.task] = match
    return [
        dataclasses.replace(t, seed_source=seeds[t.name].source, seed_path=str(seeds[t.name].file))
        if t.name in seeds
        else t
        for t in tasks
    ]
