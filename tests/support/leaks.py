"""What a run may leave behind under its TMPDIR: evokernel's scratch directories and live processes.

Every process of a run inherits TMPDIR (sandboxed candidates get a TMPDIR below it), so a process
whose environment or command line names the directory belongs to that run, and runs of other
suites or users on the same machine are told apart. Ray's session logs (``<tmp>/ray``), pytest's
own folders and the precompiled-header cache (``evokernel-pch-<uid>``, kept on purpose) are not
evokernel's leftovers.
"""

from __future__ import annotations

import os
import time
from pathlib import Path


def processes_using(tmp: Path) -> list[int]:
    """Live, non-zombie processes (other than this one) whose environment or command line names ``tmp``."""
    needle = str(tmp).encode()
    found = []
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit() or int(entry.name) == os.getpid():
            continue
        try:
            state = (entry / "stat").read_text().split(") ", 1)[1].split()[0]
            if state == "Z":  # a zombie holds nothing; its parent reaps it
                continue
            if needle in (entry / "environ").read_bytes() or needle in (entry / "cmdline").read_bytes():
                found.append(int(entry.name))
        except (OSError, IndexError):  # gone meanwhile, or not ours to read
            continue
    return found


def wait_for_no_processes(tmp: Path, timeout_s: float = 60.0) -> list[int]:
    """The processes still using ``tmp`` after up to ``timeout_s`` (they may be exiting)."""
    deadline = time.monotonic() + timeout_s
    while (procs := processes_using(tmp)) and time.monotonic() < deadline:
        time.sleep(0.5)
    return procs


def scratch_left(tmp: Path) -> list[Path]:
    """evokernel's directories under ``tmp``: actors' scratch roots and stray candidate dirs."""
    base = tmp / f"evokernel-{os.getuid()}"
    left = sorted(base.iterdir()) if base.exists() else []
    return left + sorted(p for p in tmp.iterdir() if p.name.startswith(("evk-", "evokernel-pg-")))


def describe(pids: list[int]) -> str:
    out = []
    for pid in pids:
        try:
            cmdline = Path(f"/proc/{pid}/cmdline").read_bytes().replace(b"\0", b" ")[:160]
            out.append(f"  {pid}: {cmdline.decode(errors='replace')}")
        except OSError:
            out.append(f"  {pid}: (gone)")
    return "\n".join(out)
