"""Replies that give no usable candidate go back to the model that wrote them, with the reason.

PIKE sends an unparsable reply to its fixer instead of dropping it; here the reply and the reason
(parse error with its line, a SEARCH that does not apply, no ``ModelNew``, a duplicate of a source
already evaluated) continue the same conversation, so the model sees what it wrote. Each round is
an LLM call of the same proposal, recorded and costed like any other; ``llm.repair_rounds`` bounds
them. Compile and runtime errors found by evaluation go to the strategies' ``fix`` proposals.
"""

from __future__ import annotations

from dataclasses import dataclass

from evokernel.exceptions import MutationError
from evokernel.mutators.base import MutationRequest
from evokernel.mutators.outcomes import describe_outcome
from evokernel.mutators.parsing import extract_model_new
from evokernel.mutators.prompting import load_template
from evokernel.types import source_hash

NO_CODE, DUPLICATE = "no_code", "duplicate"
_HINTS = {
    NO_CODE: "Check the code block for the error named above before you send it.",
    DUPLICATE: "Make a real change this time: a different tiling, fusion, memory layout or launch "
    "configuration; a source already evaluated scores nothing new.",
}


@dataclass(frozen=True)
class Verdict:
    """A reply judged: ``source`` when usable, else the ``outcome`` and ``problem`` to send back."""

    source: str | None
    outcome: str = "ok"
    problem: str = ""


def judge(reply: str, request: MutationRequest) -> Verdict:
    """Parse ``reply`` against the request's parent and refuse sources already evaluated."""
    parent = request.parents[0].candidate.source if request.parents else None
    try:
        source = extract_model_new(reply, parent)
    except MutationError as e:
        return Verdict(None, NO_CODE, str(e))
    if parent is not None and source.strip() == parent.strip():
        return Verdict(None, DUPLICATE, "the code is the current implementation, unchanged")
    digest = source_hash(source)
    if digest in request.avoid:
        twin = next((sc for sc in request.history if sc.candidate.source_hash == digest), None)
        which = f" (candidate #{twin.candidate.id}: {describe_outcome(twin)})" if twin is not None else ""
        return Verdict(
            None, DUPLICATE, f"the code is identical to an implementation already evaluated{which}"
        )
    return Verdict(source)


def repair_message(verdict: Verdict) -> str:
    """The user turn that asks for a usable reply after ``verdict``."""
    hint = _HINTS.get(verdict.outcome, "")
    return load_template("repair").substitute(problem=verdict.problem, hint=hint).strip()
