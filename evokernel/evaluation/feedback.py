"""Short texts for the next prompt: an error trimmed to what a model can act on."""

from __future__ import annotations

import errno
import re
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


# A compiler's diagnostic: gcc/clang "file:12:5: error: ...", nvcc "file(12): error: ...", "nvcc
# fatal   : Unsupported gpu architecture 'sm_70'", ptxas "ptxas error   : ...", the linker's
# "undefined reference". Command lines and ninja's summary ("FAILED:", "ninja: build stopped")
# quote flags, not the fault.
_DIAGNOSTIC = re.compile(r"(\berror\s*:|\bfatal\s*:|ptxas (fatal|error)|undefined (reference|symbol))", re.I)
_NOT_DIAGNOSTIC = re.compile(r"^(\[\d+/\d+\]|FAILED:|ninja: |subprocess\.CalledProcessError)")
MAX_ERROR_LINES = 8


def compiler_errors(text: str, limit: int = MAX_ERROR_LINES) -> list[str]:
    """The compiler's ``error:`` lines of a failed build's output, paths cut to the file name,
    each once, in order; [] when the text holds none (a Python error, not a build's)."""
    out: list[str] = []
    for raw in text.splitlines():
        line = raw.strip()
        if not line or _NOT_DIAGNOSTIC.match(line) or not _DIAGNOSTIC.search(line):
            continue
        # /tmp/evk-cand-x/torch_extensions/k/main.cpp -> main.cpp
        line = re.sub(r"(?:/[^\s/:()]+)+/([^\s/:()]+)", r"\1", line)
        if line not in out:
            out.append(line[:300])
        if len(out) >= limit:
            break
    return out


# What the worker's confinement allows (isolation.py), for a refusal's reason.
SANDBOX_ALLOWS = (
    "a candidate may write only beneath its own directory (its cwd, HOME, TMPDIR and "
    "TORCH_EXTENSIONS_DIR; a load_inline/load build_directory elsewhere is moved there) and /dev/shm, "
    "and read only the system, Python, torch and CUDA directories; no network, no new processes"
)


def sandbox_denial(exc: BaseException) -> str:
    """What the sandbox forbade, when ``exc`` or an exception it came from is a refused access
    (``EACCES``/``EPERM``, which Landlock and seccomp return); "" otherwise."""
    seen: BaseException | None = exc
    for _ in range(8):
        if seen is None:
            break
        if isinstance(seen, PermissionError) and seen.errno in (errno.EACCES, errno.EPERM):
            what = f"access to {seen.filename}" if seen.filename else "this operation"
            return f"the sandbox forbade {what}: {SANDBOX_ALLOWS}"
        seen = seen.__cause__ or seen.__context__
    return ""


def failure_text(exc: BaseException, what: str) -> tuple[str, str]:
    """(reason, feedback) for an exception raised by candidate code. A failed build's reason and
    feedback carry the compiler's error lines, not the start of the nvcc command line; a refused
    access says what the sandbox forbade."""
    errors = compiler_errors(str(exc))
    if not errors:
        reason = f"{what}{type(exc).__name__}: {str(exc)[:300]}"
        denial = sandbox_denial(exc)
        if denial:
            return f"{reason}; {denial}", f"{denial}\n{trim_traceback(exc)}"
        return reason, trim_traceback(exc)
    reason = f"{what}{type(exc).__name__}: build failed: " + " | ".join(errors[:3])
    return reason[:700], "compiler errors:\n" + "\n".join(errors) + "\n" + trim_traceback(exc, 600)


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
