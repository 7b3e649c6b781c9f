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

# Ray's per-node agents. When their raylet ends without "Raylet received SIGTERM" in its log (a
# killed cluster, and now and then a ray.shutdown on a loaded machine), each reports the raylet's
# death to the GCS with a fixed 60 s timeout before it exits (ray/_private/process_watcher.py,
# Ray 2.60), and the GCS is gone: 50-60 s of an orphan that holds nothing and cannot be shortened.
RAY_AGENTS = (b"ray::DashboardAgent", b"ray::RuntimeEnvAgent")


def _stat(pid: int | str) -> tuple[str, int]:
    """``(state letter, parent pid)`` from /proc/<pid>/stat."""
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(") ", 1)[1].split()
    return fields[0], int(fields[1])


def orphaned_ray_agent(pid: int | str) -> bool:
    """A Ray agent whose raylet is gone (its parent is no longer a raylet): it is on its way out."""
    try:
        if not Path(f"/proc/{pid}/cmdline").read_bytes().startswith(RAY_AGENTS):
            return False
        parent = _stat(pid)[1]
        return b"raylet" not in Path(f"/proc/{parent}/cmdline").read_bytes()
    except (OSError, IndexError, ValueError):  # gone meanwhile
        return True


def processes_using(tmp: Path, exiting_agents: bool = False) -> list[int]:
    """Live, non-zombie processes (other than this one) whose environment or command line names
    ``tmp``; ``exiting_agents``: orphaned Ray agents too (:func:`orphaned_ray_agent`)."""
    needle = str(tmp).encode()
    found = []
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit() or int(entry.name) == os.getpid():
            continue
        try:
            if _stat(entry.name)[0] == "Z":  # a zombie holds nothing; its parent reaps it
                continue
            named = needle in (entry / "environ").read_bytes() or needle in (entry / "cmdline").read_bytes()
            if named and (exiting_agents or not orphaned_ray_agent(entry.name)):
                found.append(int(entry.name))
        except (OSError, IndexError, ValueError):  # gone meanwhile, or not ours to read
            continue
    return found


def wait_for_no_processes(tmp: Path, timeout_s: float = 60.0) -> list[int]:
    """The processes still using ``tmp`` after up to ``timeout_s`` (they may be exiting), orphaned
    Ray agents aside: a raylet still alive, or an agent whose raylet is, counts."""
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
