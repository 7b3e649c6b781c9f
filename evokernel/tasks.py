"""Load KernelBench-format task files into :class:`~evokernel.types.Task` s without running them.

A task file defines ``class Model(nn.Module)``, ``get_inputs()`` and ``get_init_inputs()`` at
module level; its sizes are module globals that those functions read at call time. It may carry a
literal ``EVOKERNEL = {...}`` dict of metadata (keys in :data:`METADATA_KEYS`)::

    EVOKERNEL = {
        "level": 1,
        "description": "Row-wise softmax over the last dim",
        "small": {"batch_size": 16, "dim": 256},   # globals for CPU / interpreter runs
        "variants": [{"batch_size": 7}],           # extra input variants, applied on top of a scale
        "tolerance": {"float16": [2e-2, 2e-2]},    # [atol, rtol], merged over DEFAULT_TOLERANCE
        "seed": "softmax.seed.py",                 # a ModelNew to start from, relative to the file
        "nondeterministic": False,
    }

Files are only parsed (``ast``), never imported, so loading a suite needs no torch and a broken
file cannot run code in the driver; the evaluator imports them later inside its sandbox. Every
problem is a :class:`~evokernel.exceptions.TaskError` that names the file and what is wrong, and a
folder with several broken files reports all of them at once.
"""

from __future__ import annotations

import ast
import re
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from evokernel.exceptions import TaskError
from evokernel.types import DEFAULT_TOLERANCE, Task

__all__ = ["METADATA_KEYS", "SCALES", "load_task", "load_tasks", "task_globals_overrides"]

METADATA_KEYS: tuple[str, ...] = (
    "level",
    "description",
    "small",
    "variants",
    "tolerance",
    "seed",
    "nondeterministic",
)
SCALES: tuple[str, ...] = ("full", "small")
REQUIRED_FUNCTIONS: tuple[str, ...] = ("get_inputs", "get_init_inputs")
SEED_SUFFIX = ".seed.py"
# "level1", "level_2", "Level-3": the KernelBench and bundled-suite folder names.
_LEVEL_DIR = re.compile(r"level[_-]?(\d+)", re.IGNORECASE)


def load_task(path: str | Path) -> Task:
    """Parse one task file. Raises :class:`TaskError` naming the file and every problem found."""
    p = Path(path)
    if not p.exists():
        raise TaskError(f"{p}: task file does not exist")
    if not p.is_file():
        raise TaskError(f"{p}: not a file (use load_tasks for folders)")
    return _parse_task(p.resolve())


def load_tasks(paths: str | Path | Sequence[str | Path]) -> list[Task]:
    """Load task files and folders of them.

    Each path may be a task file, a folder of task files (``experiments/tasks/level1`` or a
    KernelBench checkout's ``KernelBench/level1``) or a folder of such folders, searched
    recursively. In folders, files whose name starts with ``_`` or ends with ``.seed.py`` are
    skipped, as are ``__pycache__`` and folders whose name starts with ``_`` or ``.``. Tasks come
    back in argument order, each folder's files in natural order of their relative path (so
    ``2_Foo.py`` precedes ``10_Bar.py``).

    Raises :class:`TaskError` for a missing path, a folder without task files, broken files (one
    error listing each with its reason) and two files with the same task name (both named).
    """
    items = [paths] if isinstance(paths, str | Path) else list(paths)
    if not items:
        raise TaskError("no task paths given")
    files: list[Path] = []
    for item in items:
        p = Path(item)
        if not p.exists():
            raise TaskError(f"{p}: task path does not exist")
        if p.is_dir():
            found = _task_files(p)
            if not found:
                raise TaskError(
                    f"{p}: folder holds no task files (*.py not starting with '_' nor ending "
                    f"with '{SEED_SUFFIX}', searched recursively)"
                )
            files.extend(found)
        else:
            files.append(p)

    tasks: list[Task] = []
    errors: list[str] = []
    seen: dict[str, str] = {}
    for f in files:
        try:
            task = _parse_task(f.resolve())
        except TaskError as exc:
            errors.append(str(exc))
            continue
        if seen.get(task.name) == task.path:
            continue  # the same file reached through two arguments (a file and its folder)
        if task.name in seen:
            errors.append(f"duplicate task name {task.name!r}: {seen[task.name]} and {task.path}")
            continue
        seen[task.name] = task.path
        tasks.append(task)
    if len(errors) == 1:
        raise TaskError(errors[0])
    if errors:
        listing = "\n".join(f"  - {e}" for e in errors)
        raise TaskError(f"{len(errors)} task files could not be loaded:\n{listing}")
    return tasks


def task_globals_overrides(task: Task, scale: str, variant: int) -> dict[str, Any]:
    """Module-global overrides to set on the task module before calling its input functions.

    ``scale`` is ``"full"`` (the file's own sizes, for GPUs) or ``"small"`` (``task.small``, for
    CPU runs under Triton's interpreter). ``variant`` 0 is the scale's default sizes; ``i > 0``
    applies ``task.variants[i - 1]`` on top of the scale, so at small scale a variant sees the
    small sizes for every key it does not set. Variants should therefore use values that are
    cheap and meaningful at both scales (an odd batch of 7, a row length of 333).
    """
    if scale not in SCALES:
        raise TaskError(f"task {task.name!r}: unknown scale {scale!r}; valid scales: {', '.join(SCALES)}")
    if not 0 <= variant <= len(task.variants):
        raise TaskError(
            f"task {task.name!r}: variant {variant} out of range; it has variants 0..{len(task.variants)}"
        )
    out: dict[str, Any] = dict(task.small) if scale == "small" else {}
    if variant:
        out.update(task.variants[variant - 1])
    return out


def _natural_key(path: Path) -> list[tuple[int, int | str]]:
    # Digits compare as numbers so KernelBench's 2_Foo.py sorts before 10_Bar.py.
    key: list[tuple[int, int | str]] = []
    for part in path.parts:
        for tok in re.split(r"(\d+)", part):
            if tok:
                key.append((0, int(tok)) if tok.isdigit() else (1, tok))
    return key


def _task_files(folder: Path) -> list[Path]:
    found: list[Path] = []
    for p in folder.iterdir():
        if p.name.startswith(("_", ".")):
            continue  # also skips __pycache__ and __init__.py
        if p.is_dir():
            found.extend(_task_files(p))
        elif p.suffix == ".py" and not p.name.endswith(SEED_SUFFIX):
            found.append(p)
    return sorted(found, key=lambda f: _natural_key(f.relative_to(folder)))


def _parse_module(path: Path, what: str) -> tuple[str, ast.Module]:
    try:
        source = path.read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as exc:
        raise TaskError(f"{path}: cannot read {what}: {exc}") from exc
    try:
        return source, ast.parse(source, filename=str(path))
    except SyntaxError as exc:
        raise TaskError(f"{path}: syntax error in {what} at line {exc.lineno}: {exc.msg}") from exc


def _module_names(tree: ast.Module) -> tuple[set[str], set[str], set[str]]:
    """(classes, functions, assigned globals) defined directly at module level."""
    classes: set[str] = set()
    functions: set[str] = set()
    assigned: set[str] = set()
    for node in tree.body:
        if isinstance(node, ast.ClassDef):
            classes.add(node.name)
        elif isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef):
            functions.add(node.name)
        elif isinstance(node, ast.Assign | ast.AnnAssign | ast.AugAssign):
            targets = node.targets if isinstance(node, ast.Assign) else [node.target]
            for target in targets:
                assigned.update(n.id for n in ast.walk(target) if isinstance(n, ast.Name))
    return classes, functions, assigned


def _metadata(path: Path, tree: ast.Module) -> dict[str, Any]:
    value: ast.expr | None = None
    for node in tree.body:
        if isinstance(node, ast.Assign):
            targets = node.targets
        elif isinstance(node, ast.AnnAssign):
            targets = [node.target]
        else:
            continue
        if any(isinstance(t, ast.Name) and t.id == "EVOKERNEL" for t in targets):
            value = node.value
    if value is None:
        return {}
    try:
        meta = ast.literal_eval(value)
    except (ValueError, TypeError, SyntaxError, MemoryError, RecursionError) as exc:
        raise TaskError(
            f"{path}: EVOKERNEL (line {value.lineno}) is not a literal dict: it may hold only "
            f"literals (numbers, strings, lists, dicts), no names or calls ({exc})"
        ) from exc
    if not isinstance(meta, dict):
        raise TaskError(f"{path}: EVOKERNEL must be a literal dict, got {type(meta).__name__}")
    return meta


def _check_overrides(path: Path, where: str, value: Any, assigned: set[str]) -> dict[str, Any]:
    if not isinstance(value, dict) or not all(isinstance(k, str) for k in value):
        raise TaskError(f"{path}: EVOKERNEL {where} must be a dict of global name -> value")
    unknown = sorted(k for k in value if k not in assigned)
    if unknown:
        known = ", ".join(sorted(assigned)) or "none"
        raise TaskError(
            f"{path}: EVOKERNEL {where} overrides {', '.join(unknown)}, which the file does not "
            f"assign at module level (module-level globals: {known})"
        )
    return dict(value)


def _tolerance(path: Path, value: Any) -> dict[str, tuple[float, float]]:
    out = dict(DEFAULT_TOLERANCE)
    if not isinstance(value, dict):
        raise TaskError(f"{path}: EVOKERNEL tolerance must be a dict of dtype -> [atol, rtol]")
    for dtype, pair in value.items():
        if dtype not in DEFAULT_TOLERANCE:
            raise TaskError(
                f"{path}: EVOKERNEL tolerance has unknown dtype {dtype!r}; valid dtypes: "
                f"{', '.join(DEFAULT_TOLERANCE)}"
            )
        ok = isinstance(pair, list | tuple) and len(pair) == 2
        if not ok or not all(isinstance(v, int | float) and not isinstance(v, bool) and v >= 0 for v in pair):
            raise TaskError(
                f"{path}: EVOKERNEL tolerance[{dtype!r}] must be [atol, rtol] with two numbers >= 0, "
                f"got {pair!r}"
            )
        out[dtype] = (float(pair[0]), float(pair[1]))
    return out


def _seed(path: Path, value: Any) -> tuple[str, str]:
    if not isinstance(value, str) or not value:
        raise TaskError(f"{path}: EVOKERNEL seed must be a file path relative to the task file")
    seed_path = (path.parent / value).resolve()
    if not seed_path.is_file():
        raise TaskError(f"{path}: seed file {value!r} does not exist (looked for {seed_path})")
    seed_source, seed_tree = _parse_module(seed_path, f"seed of {path.name}")
    classes, _, _ = _module_names(seed_tree)
    if "ModelNew" not in classes:
        raise TaskError(f"{seed_path}: seed of {path} does not define class ModelNew at module level")
    return seed_source, str(seed_path)


def _infer_level(path: Path) -> int | None:
    m = _LEVEL_DIR.fullmatch(path.parent.name)
    return int(m.group(1)) if m else None


def _parse_task(path: Path) -> Task:
    source, tree = _parse_module(path, "task file")
    classes, functions, assigned = _module_names(tree)
    missing = [] if "Model" in classes else ["class Model"]
    missing += [f"function {name}()" for name in REQUIRED_FUNCTIONS if name not in functions]
    if missing:
        raise TaskError(f"{path}: missing module-level {', '.join(missing)}")

    meta = _metadata(path, tree)
    unknown = sorted(k for k in meta if k not in METADATA_KEYS)
    if unknown:
        raise TaskError(
            f"{path}: unknown EVOKERNEL key {', '.join(map(repr, unknown))}; "
            f"valid keys: {', '.join(METADATA_KEYS)}"
        )
    level = meta.get("level", _infer_level(path))
    if level is not None and (not isinstance(level, int) or isinstance(level, bool) or level < 0):
        raise TaskError(f"{path}: EVOKERNEL level must be a non-negative int, got {level!r}")
    description = meta.get("description", "")
    if not isinstance(description, str):
        raise TaskError(f"{path}: EVOKERNEL description must be a string")
    nondeterministic = meta.get("nondeterministic", False)
    if not isinstance(nondeterministic, bool):
        raise TaskError(f"{path}: EVOKERNEL nondeterministic must be True or False")
    small = _check_overrides(path, "small", meta.get("small", {}), assigned)
    raw_variants = meta.get("variants", [])
    if not isinstance(raw_variants, list | tuple):
        raise TaskError(f"{path}: EVOKERNEL variants must be a list of dicts")
    variants = tuple(
        _check_overrides(path, f"variants[{i}]", v, assigned) for i, v in enumerate(raw_variants)
    )
    tolerance = _tolerance(path, meta.get("tolerance", {}))
    seed_source, seed_path = _seed(path, meta["seed"]) if "seed" in meta else (None, None)
    return Task(
        name=path.name.removesuffix(".py"),
        path=str(path),
        source=source,
        level=level,
        tolerance=tolerance,
        tolerance_set=tuple(meta.get("tolerance", {})),
        variants=variants,
        small=small,
        seed_source=seed_source,
        seed_path=seed_path,
        nondeterministic=nondeterministic,
        description=description,
    )
