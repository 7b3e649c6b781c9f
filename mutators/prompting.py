"""Prompts of the LLM operators: template files under ``mutators/prompts/`` filled from a request.

Templates are :class:`string.Template` files (``$var``; ``$$`` for a literal ``$``), one per
operator plus ``system.md`` and one ``language_<name>.md`` guidance per target language, so a
researcher edits prose without touching code. Nothing here talks to a model.
"""

from __future__ import annotations

import functools
from importlib import resources
from string import Template
from typing import Any

from evokernel.evaluation.profiling.summary import profile_lines
from evokernel.exceptions import MutationError
from evokernel.mutators.base import MutationRequest
from evokernel.types import Evaluation, Operator, Scored

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


@functools.cache
def load_template(name: str) -> Template:
    """``mutators/prompts/<name>.md`` as a :class:`string.Template` (``$var``, ``$$`` for ``$``)."""
    path = resources.files("evokernel.mutators") / "prompts" / f"{name}.md"
    return Template(path.read_text(encoding="utf-8"))


def clip(text: str, limit: int) -> str:
    """``text`` cut to ``limit`` characters by dropping its middle, with a marker saying how much."""
    if len(text) <= limit:
        return text
    marker = f"\n[... {len(text) - limit} characters cut ...]\n"
    half = (limit - len(marker)) // 2
    return text[:half] + marker + text[-half:]


def format_feedback(scored: Scored) -> str:
    """How a parent did, in the words the next prompt shows the model."""
    ev: Evaluation | None = scored.evaluation
    if ev is None:
        return "Not evaluated yet."
    lines = [f"Status: {ev.status.value}" + (f" ({ev.reason})" if ev.reason else "")]
    if ev.runtime_ms is not None:
        timing = f"Runtime: {ev.runtime_ms:.4g} ms"
        if ev.eager_ms is not None:
            timing += f"; PyTorch eager {ev.eager_ms:.4g} ms"
        if ev.speedup_eager is not None:
            timing += f"; speedup {ev.speedup_eager:.3g}x vs eager"
        if ev.speedup_compile is not None:
            timing += f", {ev.speedup_compile:.3g}x vs torch.compile"
        lines.append(timing)
    if ev.max_abs_error is not None:
        lines.append(f"Max abs error vs reference: {ev.max_abs_error:.3g}")
    if ev.interpreter:
        lines.append("(Timings come from Triton's CPU interpreter, not from a GPU.)")
    profile = format_profile(ev.details.get("profiling"), "profile")
    if profile:
        lines.append(profile)
    if ev.feedback:
        lines.append("Details:\n" + clip(ev.feedback.strip(), MAX_FEEDBACK_CHARS))
    return "\n".join(lines)


def format_profile(profile: dict[str, Any] | None, template: str) -> str:
    """A profile (evaluation/profiling/) as its template (``profile`` or ``reference_profile``)
    shows it: a few token-bounded lines (profiling/summary.py); "" when there is none."""
    lines = profile_lines(profile)
    if not lines or profile is None:
        return ""
    values = {"level": str(profile.get("level", "")), "device": str(profile.get("device") or "the GPU")}
    return load_template(template).substitute(values, lines="\n".join(lines)).rstrip()


def _values(request: MutationRequest) -> dict[str, str]:
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
    return {
        "language": LANGUAGES[request.language],
        "language_guidance": load_template(f"language_{request.language}").template.strip(),
        "hardware": request.hardware.strip() or "unknown",
        "task_name": task.name,
        "task_description": task.description.strip(),
        "reference_source": task.source.strip(),
        "parent_source": request.parents[0].candidate.source.strip() if request.parents else "",
        "parent_feedback": format_feedback(request.parents[0]) if request.parents else "",
        "parents": parents,
        "context": "\n## Other implementations, for reference (ideas to borrow, not to copy blindly)\n"
        + context
        if context
        else "",
        "idea": f"\n## Idea to try\n{idea.strip()}\n" if idea else "",
        "reference_profile": format_profile(request.reference_profile, "reference_profile"),
        "starting_point": f"\n## Starting point (correct, maybe slow)\n```python\n{seed.strip()}\n```\n"
        if seed
        else "",
    }


def render_prompt(request: MutationRequest) -> tuple[str, str]:
    """(system, user) messages for ``request``; raises MutationError if the request cannot work."""
    op = request.proposal.operator
    if op in _NEEDS_PARENT and not request.parents:
        raise MutationError(f"operator {op!r} needs at least one parent")
    values = _values(request)
    return load_template("system").substitute(values), load_template(op).substitute(values)


def render_ideas_prompt(request: MutationRequest, count: int) -> tuple[str, str]:
    """(system, user) messages asking for ``count`` distinct optimization ideas.

    The request's parents (e.g. the best candidates so far) are shown as the current state; with
    none, the task's seed implementation is, if it has one.
    """
    if count < 1:
        raise MutationError(f"ideas needs count >= 1, not {count}")
    values = _values(request)
    values["count"] = str(count)
    if request.parents:
        values["current"] = "\n" + values["parents"] + "\n"
    else:
        values["current"] = values["starting_point"]
    return load_template("system").substitute(values), load_template("ideas").substitute(values)
