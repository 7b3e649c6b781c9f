"""What the search remembers in a prompt: earlier attempts with their outcome, ideas already tried,
and a direction of its own for a proposal that has no idea.

OpenEvolve shows previous attempts with their outcome; PIKE-B's brainstorm should not suggest an
idea that was tried. Everything here is read from the request (``history``: evaluated candidates
of earlier generations; ``ideas_of``: the idea each of their proposals carried), which the engine
builds from the library, so a resumed run renders the same prompts. Sections are bounded in
entries and characters: a long run must not grow its prompts without end.
"""

from __future__ import annotations

import difflib
import functools
from collections.abc import Sequence

from evokernel.mutators.base import MutationRequest
from evokernel.mutators.outcomes import describe_outcome, one_line
from evokernel.mutators.templates import load_template
from evokernel.types import Scored, Status

# A diff shown inline is at most this many changed lines of this many characters each.
_DIFF_LINES, _DIFF_CHARS = 4, 90
_IDEAS_SHOWN = 12


def _changed(child: str, parent: str | None) -> str:
    """What a candidate changed against its parent, in a few words."""
    if parent is None:
        return "written from the reference"
    old, new = parent.strip().splitlines(), child.strip().splitlines()
    removed: list[str] = []
    added: list[str] = []
    for tag, i1, i2, j1, j2 in difflib.SequenceMatcher(None, old, new, autojunk=False).get_opcodes():
        if tag != "equal":
            removed += [s.strip() for s in old[i1:i2] if s.strip()]
            added += [s.strip() for s in new[j1:j2] if s.strip()]
    if not removed and not added:
        return "no change"
    small = len(removed) + len(added) <= _DIFF_LINES and all(len(s) <= _DIFF_CHARS for s in removed + added)
    if small:
        parts = [f"`{r}`" for r in removed] or ["(nothing)"]
        return f"{' '.join(parts)} -> {' '.join(f'`{a}`' for a in added) or '(removed)'}"
    return f"rewrote {len(removed)} lines into {len(added)}"


def _relevance(request: MutationRequest, history: Sequence[Scored]) -> list[Scored]:
    """The parent's line first (its ancestors, nearest first), then its other children, then the
    rest newest first; the request's parents themselves are shown in full elsewhere."""
    shown = {p.candidate.id for p in request.parents}
    by_id = {sc.candidate.id: sc for sc in history}
    line: list[Scored] = []
    if request.parents:
        node = request.parents[0].candidate
        while node.parents and node.parents[0] in by_id and len(line) < len(history):
            parent = by_id[node.parents[0]]
            line.append(parent)
            node = parent.candidate
    first = request.parents[0].candidate.id if request.parents else None
    children = [sc for sc in reversed(history) if first is not None and sc.candidate.parents[:1] == (first,)]
    rest = list(reversed(history))
    out: list[Scored] = []
    for sc in (*line, *children, *rest):
        if sc.candidate.id not in shown:
            shown.add(sc.candidate.id)
            out.append(sc)
    return out


def previous_attempts(request: MutationRequest, limit: int, max_chars: int) -> str:
    """The "previous attempts" section (empty when there are none or ``limit`` is 0)."""
    if limit <= 0 or not request.history:
        return ""
    by_id = {sc.candidate.id: sc for sc in (*request.history, *request.parents)}
    lines: list[str] = []
    used = 0
    for sc in _relevance(request, request.history):
        cand = sc.candidate
        parent = by_id.get(cand.parents[0]) if cand.parents else None
        idea = request.ideas_of.get(cand.proposal_id)
        what = f"idea: {one_line(idea, 100)}; " if idea else ""
        what += _changed(cand.source, parent.candidate.source if parent else None)
        origin = f"{cand.operator} of #{cand.parents[0]}" if cand.parents else cand.operator
        text = f"- #{cand.id} ({origin}, generation {cand.generation}): {what} => {describe_outcome(sc)}"
        if used + len(text) > max_chars or len(lines) >= limit:
            break
        lines.append(text)
        used += len(text) + 1
    if not lines:
        return ""
    head = "\n## Previous attempts (most relevant first; learn from them, do not repeat them)\n"
    return head + "\n".join(lines) + "\n"


def tried_ideas(request: MutationRequest) -> str:
    """Ideas of earlier generations with the best outcome any candidate of theirs reached."""
    best: dict[str, Scored] = {}
    for sc in request.history:
        idea = request.ideas_of.get(sc.candidate.proposal_id)
        if idea is None:
            continue
        known = best.get(idea)
        if known is None or _rank(sc) > _rank(known):
            best[idea] = sc
    if not best:
        return ""
    ordered = sorted(best.items(), key=lambda item: _rank(item[1]), reverse=True)[:_IDEAS_SHOWN]
    lines = [f"- {one_line(idea, 160)} => best: {describe_outcome(sc)}" for idea, sc in ordered]
    return (
        "\n## Ideas already tried (propose different ones, or say how to make a promising one work)\n"
        + "\n".join(lines)
        + "\n"
    )


def _rank(sc: Scored) -> tuple[int, float]:
    ev = sc.evaluation
    ok = ev is not None and ev.status is Status.CORRECT
    return (1 if ok else 0, sc.speedup if ok else 0.0)


@functools.cache
def _directions() -> tuple[str, ...]:
    text = load_template("directions").template
    return tuple(line[2:].strip() for line in text.splitlines() if line.startswith("- "))


def direction(request: MutationRequest) -> str:
    """A direction of its own for a proposal without an idea: by branch, shifted per generation,
    so siblings of one generation (distinct branches) never get the same one while there are
    fewer siblings than directions."""
    options = _directions()
    p = request.proposal
    if p.idea or not options:
        return ""
    return options[(p.branch + 7 * p.generation + p.island) % len(options)]
