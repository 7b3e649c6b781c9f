"""The best kernels of runs as standalone KernelBench-format files, with a JSON manifest.

Layout under ``--out``::

    manifest.json                      one entry per kernel (see :data:`MANIFEST_KEYS`)
    <task>/reference.py                the task file as the run saw it (plus its seed file, if it names one)
    <task>/<run id>_rank<k>.py         the kernel: ``ModelNew`` and what it imports, nothing of evokernel

A kernel file is the candidate's source exactly as evaluated under a three-line comment header
(without it, the file hashes to the manifest's ``candidate_hash``), and
``evokernel verify <task>/reference.py <kernel>`` checks it."""

from __future__ import annotations

import ast
import json
import re
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from evokernel import analysis
from evokernel.analysis.overview import DEFAULT_PROFILE
from evokernel.db import SolutionLibrary
from evokernel.db.connection import redact
from evokernel.exceptions import ExportError
from evokernel.types import Scored, format_speedup, source_hash

MANIFEST = "manifest.json"
MANIFEST_KEYS = (
    "task", "file", "reference", "rank", "candidate_id", "candidate_hash", "run_id", "sweep_id", "point",
    "operator", "generation", "speedup_eager", "speedup_low", "speedup_high", "confirmed", "speedup_compile",
    "runtime_ms", "eager_ms", "compile_ms",
    "device", "interpreter", "profile", "library", "standalone",
)  # fmt: skip
_IMPORTS_EVOKERNEL = re.compile(r"^\s*(from|import)\s+evokernel\b", re.M)


@dataclass(frozen=True)
class Exported:
    out: Path
    entries: list[dict[str, Any]]

    @property
    def manifest(self) -> Path:
        return self.out / MANIFEST


def _header(entry: dict[str, Any]) -> str:
    speed, low, high = entry["speedup_eager"], entry["speedup_low"], entry["speedup_high"]
    figure = "no speedup measured"
    if speed is not None:
        paired = " (95 % interval)" if low is not None and high is not None else ""
        figure = f"{format_speedup(speed, low, high)} vs eager{paired}"
    where = "CPU Triton interpreter" if entry["interpreter"] else entry["device"] or "unknown device"
    return (
        f"# evokernel export: task {entry['task']}, run {entry['run_id']}, candidate {entry['candidate_id']} "
        f"(hash {entry['candidate_hash']}), rank {entry['rank']}\n"
        f"# recorded: {figure} on {where}, profile {entry['profile']}; verify with:\n"
        f"#   evokernel verify {entry['reference']} {entry['file']}\n"
    )


def seed_name(task_source: str) -> str | None:
    """The ``seed`` file a task's EVOKERNEL dict names (relative to the task file), if any."""
    for node in ast.parse(task_source).body:
        if isinstance(node, ast.Assign) and any(
            isinstance(t, ast.Name) and t.id == "EVOKERNEL" for t in node.targets
        ):
            try:
                meta = ast.literal_eval(node.value)
            except ValueError:
                return None
            seed = meta.get("seed") if isinstance(meta, dict) else None
            return seed if isinstance(seed, str) else None
    return None


def _write_reference(lib: SolutionLibrary, run_id: str, task: str, folder: Path) -> Path:
    source = _task_source(lib, run_id, task)
    folder.mkdir(parents=True, exist_ok=True)
    reference = folder / "reference.py"
    reference.write_text(source, encoding="utf-8")
    seed = seed_name(source)
    if seed is not None:  # load_task needs it beside the reference; the run's seed candidate is it
        seeds = [n for n in analysis.lineage(lib, run_id, task) if n.operator == "seed_file"]
        if not seeds:
            raise ExportError(f"task {task} names seed file {seed!r}, but run {run_id} has no seed candidate")
        seed_source = analysis.candidate_detail(lib, seeds[0].candidate).source
        (folder / seed).parent.mkdir(parents=True, exist_ok=True)
        (folder / seed).write_text(seed_source, encoding="utf-8")
    return reference


def _task_source(lib: SolutionLibrary, run_id: str, task: str) -> str:
    from sqlalchemy import select

    from evokernel.db.models import RunTaskRow, TaskRow

    stmt = (
        select(TaskRow.source)
        .join(RunTaskRow, RunTaskRow.task_id == TaskRow.id)
        .where(RunTaskRow.run_id == run_id, RunTaskRow.name == task)
    )
    found = lib.read(lambda s: s.scalar(stmt))
    if found is None:
        raise ExportError(f"run {run_id} has no task {task!r}")
    return str(found)


def export_kernels(
    lib: SolutionLibrary, target: str | None, out: str | Path, *, task: str | None = None, top: int = 1
) -> Exported:
    """Write the ``top`` fastest correct kernels per task of run or sweep ``target`` (None: the
    latest) into ``out``; ``task`` limits it to one task. Returns the manifest entries."""
    if top < 1:
        raise ExportError("--top must be at least 1")
    kind, ident = analysis.resolve_target(lib, target)
    runs = (
        [c for c in analysis.get_sweep(lib, ident).cells]
        if kind == "sweep"
        else [r for r in analysis.list_runs(lib) if r.id == ident]
    )
    out = Path(out)
    entries: list[dict[str, Any]] = []
    for run in runs:
        overview = analysis.run_overview(lib, run.id)
        names = [t.task for t in overview.tasks]
        if task is not None and task not in names:
            raise ExportError(f"run {run.id} has no task {task!r}; its tasks: {', '.join(names)}")
        for t in overview.tasks:
            if task is not None and t.task != task:
                continue
            best = lib.top(run.id, t.task, top)
            if not best:
                continue
            reference = _write_reference(lib, run.id, t.task, out / t.task)
            for rank, scored in enumerate(best, start=1):
                entries.append(_write_kernel(out, reference, run, rank, scored, t.profile, redact(lib.url)))
    if not entries:
        raise ExportError(
            f"no correct kernel to export in {kind} {ident}" + (f" for task {task}" if task else "")
        )
    out.mkdir(parents=True, exist_ok=True)
    (out / MANIFEST).write_text(json.dumps(entries, indent=2) + "\n", encoding="utf-8")
    return Exported(out, entries)


def _write_kernel(
    out: Path, reference: Path, run: analysis.RunRow, rank: int, scored: Scored, profile: str, library: str
) -> dict[str, Any]:
    cand, ev = scored.candidate, scored.evaluation
    assert ev is not None
    path = reference.parent / f"{run.id}_rank{rank}.py"
    entry: dict[str, Any] = {
        "task": cand.task,
        "file": str(path.relative_to(out)),
        "reference": str(reference.relative_to(out)),
        "rank": rank,
        "candidate_id": cand.id,
        "candidate_hash": source_hash(cand.source),
        "run_id": run.id,
        "sweep_id": run.sweep_id,
        "point": run.point,
        "operator": cand.operator,
        "generation": cand.generation,
        "speedup_eager": ev.speedup_eager,
        # The 95 % interval of speedup_eager (null: not measured paired) and its confirmation.
        "speedup_low": ev.speedup_low,
        "speedup_high": ev.speedup_high,
        "confirmed": ev.confirmed,
        "speedup_compile": ev.speedup_compile,
        "runtime_ms": ev.runtime_ms,
        "eager_ms": ev.eager_ms,
        "compile_ms": ev.compile_ms,
        "device": ev.device,
        "interpreter": ev.interpreter,
        "profile": str(ev.details.get("profile") or profile or DEFAULT_PROFILE),
        "library": library,
        "standalone": not _IMPORTS_EVOKERNEL.search(cand.source),
    }
    path.write_text(_header(entry) + cand.source, encoding="utf-8")
    return entry
