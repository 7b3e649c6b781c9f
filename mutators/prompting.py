"""Prompts of the LLM operators: template files under ``mutators/prompts/`` filled from a request.

Templates are :class:`string.Template` files (``$var``; ``$$`` for a literal ``$``), one per
operator plus ``system.md`` and one ``language_<name>.md`` guidance per target language, so a
researcher edits prose without touching code. Nothing here talks to a model.
"""

from __future__ import annotations

import ast
import re
from dataclasses import dataclass
from typing import Any

from evokernel.evaluation.profiling.summary import profile_lines
from evokernel.exceptions import MutationError
from evokernel.mutators.base import MutationRequest
from evokernel.mutators.exemplars import exemplars_section
from evokernel.mutators.limits import estimate, limits_line, on_cpu, peaks_line
from evokernel.mutators.memory import direction, previous_attempts, tried_ideas
from evokernel.mutators.outcomes import speedup_text, spread
from evokernel.mutators.templates import clip, load_template
from evokernel.types import Evaluation, Operator, Scored, Task

__all__ = [
    "LANGUAGES",
    "PromptSettings",
    "clip",
    "format_feedback",
    "load_template",
    "render_ideas_prompt",
    "render_prompt",
]

# Feedback of a crashed candidate can be a long traceback; the head and tail carry the signal.
MAX_FEEDBACK_CHARS = 4000
LANGUAGES: dict[str, str] = {
    "triton": "Triton",
    "cuda": "CUDA C++ via torch.utils.cpp_extension.load_inline",
    "pytorch": "plain PyTorch",
    "any": "Triton, CUDA via torch.utils.cpp_extension.load_inline, or plain PyTorch",
}
# Operators whose prompt shows parents and that cannot work without one.
_NEEDS_PARENT = (Operator.MUTATE, Operator.FIX, Operator.CROSSOVER)


@dataclass(frozen=True)
class PromptSettings:
    """How much memory a prompt carries (``llm.previous_attempts``, ``history_chars``, ``diversify``)."""

    previous_attempts: int = 6
    history_chars: int = 2400
    diversify: bool = True
    exemplar_chars: int = 3000


def format_feedback(scored: Scored) -> str:
    """How a parent did, in the words the next prompt shows the model; each figure once."""
    ev: Evaluation | None = scored.evaluation
    if ev is None:
        return "Not evaluated yet."
    lines = [f"Status: {ev.status.value}" + (f" ({ev.reason})" if ev.reason and not ev.ok else "")]
    if ev.runtime_ms is not None:
        timing = f"Runtime: {ev.runtime_ms:.4g} ms{spread(ev)}"
        if ev.eager_ms is not None:
            timing += f"; PyTorch eager {ev.eager_ms:.4g} ms"
        if ev.speedup_eager is not None:
            timing += f"; speedup {speedup_text(ev.speedup_eager)} vs eager"
        if ev.speedup_compile is not None:
            timing += f", {speedup_text(ev.speedup_compile)} vs torch.compile"
        lines.append(timing)
    if ev.max_abs_error is not None:
        lines.append(f"Max abs error vs reference: {ev.max_abs_error:.3g}")
    if ev.interpreter:
        lines.append("(Timings come from Triton's CPU interpreter, not from a GPU.)")
    profile = format_profile(ev.details.get("profiling"), "profile")
    if profile:
        lines.append(profile)
    details = ev.feedback.strip() if not ev.ok else _beyond_figures(ev.feedback)
    if details:
        lines.append("Details:\n" + clip(details, MAX_FEEDBACK_CHARS))
    return "\n".join(lines)


# A correct verdict's feedback (evaluation/feedback.py's timing_feedback) restates the runtime,
# speedups and error in "; "-separated parts that start like these; the rest is new to the model.
_RESTATED = ("correct", "eager ", "torch.compile ", "max abs error", "Triton interpreter")


_RUNTIME = re.compile(r"^[\d.e+-]+ ms \(IQR")


def _beyond_figures(feedback: str) -> str:
    parts = [p.strip() for p in feedback.split(";") if p.strip()]
    restated = [p for p in parts if p.startswith(_RESTATED) or _RUNTIME.match(p)]
    kept = [p for p in parts if p not in restated]
    if any("launch-bound" in p for p in restated):
        kept.append("timed per call in CUDA graphs: launch-bound")
    return "; ".join(kept)


def format_profile(profile: dict[str, Any] | None, template: str) -> str:
    """A profile (evaluation/profiling/) as its template (``profile`` or ``reference_profile``)
    shows it: a few token-bounded lines (profiling/summary.py); "" when there is none."""
    lines = profile_lines(profile)
    if not lines or profile is None:
        return ""
    values = {"level": str(profile.get("level", "")), "device": str(profile.get("device") or "the GPU")}
    return load_template(template).substitute(values, lines="\n".join(lines)).rstrip()


def reference_for_prompt(task: Task) -> str:
    """The reference source without its ``EVOKERNEL`` metadata dict (evokernel's, not the model's)."""
    source = task.source.strip()
    try:
        tree = ast.parse(source)
    except SyntaxError:
        return source
    lines = source.split("\n")
    for node in reversed(tree.body):
        targets = node.targets if isinstance(node, ast.Assign) else []
        if any(isinstance(t, ast.Name) and t.id == "EVOKERNEL" for t in targets) and node.end_lineno:
            del lines[node.lineno - 1 : node.end_lineno]
    return "\n".join(lines).strip()


def _numerics(request: MutationRequest, dtypes: tuple[str, ...]) -> str:
    tolerance = request.task.tolerance
    shown = [d for d in dtypes if d in tolerance] or sorted(tolerance)
    rules = ", ".join(f"{d} atol {tolerance[d][0]:g} / rtol {tolerance[d][1]:g}" for d in shown)
    inputs = f"Input dtypes: {', '.join(dtypes)}. " if dtypes else ""
    return f"{inputs}Outputs must match the reference within {rules} (allclose), on several input shapes."


def _values(request: MutationRequest, settings: PromptSettings) -> dict[str, str]:
    if request.language not in LANGUAGES:
        raise MutationError(f"unknown language {request.language!r}; known: {', '.join(LANGUAGES)}")
    task = request.task
    parents = "\n\n".join(
        f"## Implementation {i} (candidate {p.candidate.id})\n```python\n{p.candidate.source.strip()}\n```\n"
        f"How it did:\n{format_feedback(p)}"
        for i, p in enumerate(request.parents, start=1)
    )
    # Parents after the first of a mutate request (PIKE-O's top programs and inspirations).
    context = "".join(
        f"\n### Candidate {p.candidate.id}\n```python\n{p.candidate.source.strip()}\n```\n"
        f"How it did:\n{format_feedback(p)}\n"
        for p in request.parents[1:]
    )
    idea, seed = request.proposal.idea, task.seed_source
    hardware = request.hardware.strip() or "unknown"
    limits = estimate(task, small=on_cpu(hardware))
    dtypes = limits.dtypes if limits is not None else ()
    first = request.parents[0].evaluation if request.parents else None
    runtime = first.runtime_ms if first is not None and first.ok else None
    peaks = peaks_line(hardware, dtypes)
    heading = request.proposal.operator != Operator.SEED
    steer = direction(request) if settings.diversify else ""
    return {
        "language": LANGUAGES[request.language],
        "language_guidance": load_template(f"language_{request.language}").template.strip(),
        "hardware": hardware,
        "peaks": f"Device peaks (datasheet): {peaks}.\n" if peaks else "",
        "software": request.software.strip() or "unknown",
        "numerics": _numerics(request, dtypes),
        "task_name": task.name,
        "task_description": task.description.strip(),
        "reference_source": reference_for_prompt(task),
        "parent_source": request.parents[0].candidate.source.strip() if request.parents else "",
        "parent_feedback": format_feedback(request.parents[0]) if request.parents else "",
        "parents": parents,
        "context": "\n## Other implementations, for reference (ideas to borrow, not to copy blindly)\n"
        + context
        if context
        else "",
        "idea": f"\n## Idea to try\n{idea.strip()}\n" if idea else "",
        "direction": f"\n## Direction for this attempt\n{steer}\n" if steer else "",
        "limits": limits_line(limits, hardware, runtime if heading else None),
        "history": previous_attempts(request, settings.previous_attempts, settings.history_chars),
        "tried": tried_ideas(request),
        "exemplars": exemplars_section(request.exemplars, settings.exemplar_chars),
        "reference_profile": format_profile(request.reference_profile, "reference_profile"),
        "starting_point": f"\n## Starting point (correct, maybe slow)\n```python\n{seed.strip()}\n```\n"
        if seed
        else "",
    }


def render_prompt(request: MutationRequest, settings: PromptSettings | None = None) -> tuple[str, str]:
    """(system, user) messages for ``request``; raises MutationError if the request cannot work."""
    op = request.proposal.operator
    if op in _NEEDS_PARENT and not request.parents:
        raise MutationError(f"operator {op!r} needs at least one parent")
    values = _values(request, settings or PromptSettings())
    return load_template("system").substitute(values), load_template(op).substitute(values)


def render_ideas_prompt(
    request: MutationRequest, count: int, settings: PromptSettings | None = None
) -> tuple[str, str]:
    """(system, user) messages asking for ``count`` distinct optimization ideas.

    The request's parents (e.g. the best candidates so far) are shown as the current state; with
    none, the task's seed implementation is, if it has one.
    """
    if count < 1:
        raise MutationError(f"ideas needs count >= 1, not {count}")
    values = _values(request, settings or PromptSettings())
    values["count"] = str(count)
    if request.parents:
        values["current"] = "\n" + values["parents"] + "\n"
    else:
        values["current"] = values["starting_point"]
    return load_template("system").substitute(values), load_template("ideas").substitute(values)
