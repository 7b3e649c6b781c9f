"""Short texts for the next prompt: an error trimmed to what a model can act on."""

from __future__ import annotations

import traceback
from typing import Any

from evokernel.evaluation.timing import comparable

# A prompt needs the failing line of the candidate and the error, not 200 lines of Triton
# internals; 1,500 characters keeps the lines that matter in every case seen so far.
MAX_FEEDBACK_CHARS = 1500


def trim_traceback(exc: BaseException, limit: int = MAX_FEEDBACK_CHARS) -> str:
    """The candidate's own frames plus the final error lines, at most ``limit`` characters."""
    frames = traceback.extract_tb(exc.__traceback__)
    own = [f for f in frames if f.filename.endswith("candidate.py")]
    lines = [f"  candidate.py line {f.lineno}, in {f.name}: {(f.line or '').strip()}" for f in own[-4:]]
    message = "".join(traceback.format_exception_only(type(exc), exc)).strip()
    text = "\n".join([*lines, message]) if lines else message
    if len(text) > limit:
        text = text[: limit // 3] + "\n...\n" + text[-(2 * limit) // 3 :]
    return text


def tail(text: str, limit: int = MAX_FEEDBACK_CHARS) -> str:
    return text if len(text) <= limit else "..." + text[-limit:]


def timing_feedback(
    candidate: dict[str, Any],
    eager: dict[str, Any] | None,
    compiled: dict[str, Any] | None,
    max_abs_error: float,
    interpreter: bool,
) -> str:
    """The speedup and the breakdown a model can act on: medians, spread, launch-bound hints."""
    new = candidate["median_ms"]
    parts = [f"correct; {new:.4g} ms (IQR {candidate['iqr_ms']:.2g} ms, CV {candidate['cv']:.1%})"]
    for label, baseline in (("eager", eager), ("torch.compile", compiled)):
        mine, theirs, method = comparable(candidate, baseline)
        if theirs:
            how = " (per call in CUDA graphs: launch-bound)" if method == "cuda_graph" else ""
            parts.append(f"{label} {theirs:.4g} ms vs {mine:.4g} ms = {theirs / mine:.3f}x{how}")
    graph = candidate.get("graph_median_ms")
    if graph:
        parts.append(f"as a CUDA graph {graph:.4g} ms (launch overhead {max(new - graph, 0):.3g} ms)")
    parts.append(f"max abs error {max_abs_error:.2g}")
    note = "; Triton interpreter on CPU: not GPU performance" if interpreter else ""
    return "; ".join(parts) + note
