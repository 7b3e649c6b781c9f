"""An evaluation in the words a prompt uses: one line for a list of attempts, or the full "How it
did" block for a parent, each figure stated once (the verdict's feedback text repeats the timing
figures, so a correct candidate's block is built from the fields, not from that text)."""

from __future__ import annotations

from evokernel.types import Evaluation, Scored, Status


def one_line(text: str, limit: int) -> str:
    flat = " ".join(text.split())
    return flat if len(flat) <= limit else flat[: limit - 3].rstrip() + "..."


def speedup_text(value: float) -> str:
    """``1.42x``, ``0.0031x``: three significant figures, never a rounded-away ``0.000x``."""
    return f"{value:.3g}x"


def spread(ev: Evaluation) -> str:
    """The runtime's interquartile range as a share of its median: ``±3 %`` ("" when unknown)."""
    if ev.runtime_iqr_ms is None or not ev.runtime_ms:
        return ""
    share = 50 * ev.runtime_iqr_ms / ev.runtime_ms
    return f" (IQR ±{share:.0f} %)" if share >= 10 else f" (IQR ±{share:.2g} %)"


def describe_outcome(sc: Scored) -> str:
    """One line: ``correct, 1.42x eager (IQR ±3 %)`` or ``incorrect: max abs error 2.1 ...``."""
    ev = sc.evaluation
    if ev is None:
        return "not evaluated"
    if ev.status is Status.CORRECT:
        if ev.speedup_eager is None:
            return "correct"
        return f"correct, {speedup_text(ev.speedup_eager)} eager{spread(ev)}"
    why = ev.reason or ev.feedback or ""
    return f"{ev.status.value}" + (f": {one_line(why, 160)}" if why else "")
