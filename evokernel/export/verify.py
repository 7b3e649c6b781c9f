"""``export --verify``: re-verify every exported kernel in a fresh process and record the new
figures beside the recorded ones in the manifest (``verified``), so a reader sees both."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path
from typing import Any

from evokernel.exceptions import ExportError
from evokernel.export.kernels import MANIFEST

VERIFIED_KEYS = (
    "status",
    "reason",
    "stage",
    "speedup_eager",
    "speedup_compile",
    "runtime_ms",
    "device",
    "interpreter",
)


def verify_file(
    reference: Path, kernel: Path, device: str = "auto", timeout_s: float = 600.0
) -> dict[str, Any]:
    """``evokernel verify --json`` in a new interpreter: nothing of the exporting process (imports,
    CUDA context, caches) can make a kernel pass."""
    cmd = [
        sys.executable,
        "-m",
        "evokernel",
        "verify",
        str(reference),
        str(kernel),
        "--json",
        "--device",
        device,
    ]
    try:
        done = subprocess.run(cmd, capture_output=True, text=True, timeout=timeout_s, check=False)
    except subprocess.TimeoutExpired as exc:
        return {"status": "timeout", "reason": f"verify took over {timeout_s:g} s"} | {"command": exc.cmd}
    lines = [line for line in done.stdout.splitlines() if line.startswith("{")]
    if not lines:
        tail = (done.stderr or done.stdout).strip().splitlines()[-3:]
        raise ExportError(
            f"evokernel verify gave no JSON for {kernel} (exit {done.returncode}): {' / '.join(tail)}"
        )
    result = json.loads(lines[-1])
    picked = {k: result.get(k) for k in VERIFIED_KEYS}
    picked["profile"] = result.get("profile", "strict")
    return picked


def verify_export(out: str | Path, device: str = "auto") -> list[dict[str, Any]]:
    """Verify every kernel of the manifest in ``out`` and write the manifest back."""
    out = Path(out)
    entries: list[dict[str, Any]] = json.loads((out / MANIFEST).read_text())
    for entry in entries:
        entry["verified"] = verify_file(out / entry["reference"], out / entry["file"], device)
        recorded, now = entry["speedup_eager"], entry["verified"].get("speedup_eager")
        entry["verified"]["ratio_to_recorded"] = now / recorded if recorded and now else None
    (out / MANIFEST).write_text(json.dumps(entries, indent=2) + "\n", encoding="utf-8")
    return entries
