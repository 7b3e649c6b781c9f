"""The grouping key of a failure reason, stored with every candidate (``candidates.reason_key``).

Reasons carry specifics (line numbers, tensor sizes); the verifier writes the rule or error class
first, so the first line cut to ``REASON_CHARS`` keeps groups few. The library stores the key when
it records an evaluation, so "why it failed" groups a run's failures in one index-only query
(ix_candidates_run_task_failures) instead of reading every failed candidate's reason. Changing
the rule needs a migration that recomputes the column, as 0005 computed it for older rows.
"""

from __future__ import annotations

REASON_CHARS = 100


def reason_key(reason: str | None) -> str:
    """The first non-blank line of ``reason`` (leading/trailing whitespace stripped), cut to
    ``REASON_CHARS``; "" for no reason."""
    text = (reason or "").strip()
    return text.splitlines()[0][:REASON_CHARS] if text else ""
