"""``export --verify``: re-verify every exported kernel in a fresh process and record the new
figures beside the recorded ones in the manifest (``verified``), so a reader sees both."""

from __future__ import annotations

import json
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from evokernel.exceptions import ExportError
from evokernel.export.kernels import MANIFEST
from evokernel.types import format_speedup

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


def verify_export(
    out: str | Path, device: str = "auto", say: Callable[[str], None] | None = None
) -> list[dict[str, Any]]:
    """Verify every kernel of the manifest in ``out`` and write the manifest back.

    Each distinct kernel (task and ``candidate_hash``) is verified once: the same candidate is often
    the best of several runs of a sweep, and a verify takes tens of seconds on a CPU. ``say`` gets
    one line before and after each verification, so a long export says what it is waiting on."""
    out = Path(out)
    say = say or (lambda _line: None)
    entries: list[dict[str, Any]] = json.loads((out / MANIFEST).read_text())
    done: dict[tuple[str, str], dict[str, Any]] = {}
    distinct = len({(e["reference"], e["candidate_hash"]) for e in entries})
    for entry in entries:
        key = (entry["reference"], entry["candidate_hash"])
        if key in done:
            entry["verified"] = {**done[key], "same_kernel_as": done[key]["file"]}
            say(f"  {entry['file']}: the same kernel as {done[key]['file']}, not verified again")
        else:
            say(f"verifying {len(done) + 1}/{distinct}: {entry['file']} ...")
            started = time.monotonic()
            result = verify_file(out / entry["reference"], out / entry["file"], device)
            entry["verified"] = result
            done[key] = {**result, "file": entry["file"]}
            now = result.get("speedup_eager")
            interval = (result.get("speedup_low"), result.get("speedup_high"))
            figure = (
                f", {format_speedup(now, *interval)} eager"
                if now
                else f": {result.get('reason') or ''}".rstrip(": ")
            )
            say(f"  {result.get('status')}{figure} ({time.monotonic() - started:.0f} s)")
        entry["verified"].pop("file", None)
        recorded, now = entry["speedup_eager"], entry["verified"].get("speedup_eager")
        entry["verified"]["ratio_to_recorded"] = now / recorded if recorded and now else None
    (out / MANIFEST).write_text(json.dumps(entries, indent=2) + "\n", encoding="utf-8")
    return entries
