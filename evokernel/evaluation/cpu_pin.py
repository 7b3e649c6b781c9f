"""Both sides of a paired timing on one CPU (issue 35).

Level-3 eager references are host-bound: on the H100 ResNet101's call is 3.85 ms of GPU work
(its CUDA graph, the same in every process) but 6-12 ms eager, the host's launch path. That path's
speed comes and goes with the CPU it runs on: pinned to each of the 16 vCPUs in turn, one
process's median of 20 calls was 6.1-6.8 ms on about two thirds of them and 8-13.5 ms on the rest,
and the slow ones were other cores in the next round and in the next process
(``experiments/bench/eager_per_core.py``; the vCPUs have no SMT siblings of their own, so the load
is the hypervisor's, under them). Pairing cancels noise the two sides share; a reference timed on
one core and its candidate on another share none of this. So during the window the supervisor's
timing thread and every thread of the workers it times run on one CPU, in turn (the sides
alternate, never overlap), and each thread gets its own CPU set back afterwards.

Only where the device is a GPU: on the CPU a side's work runs on its intra-op threads, which a
one-CPU pin would serialise for one side and not the other. A worker may move its own threads
back; the record counts threads found off the CPU at the end (``moved``).

Two windows can overlap on a node with several GPUs (quiet.py), and two supervisors may be on
one CPU at that moment: each window claims its CPU with a lock file in ``claims`` (an flock,
which the kernel drops when its holder dies however it dies) and takes the next free CPU when
its own is claimed, so two timings never share a CPU.
"""

from __future__ import annotations

import contextlib
import fcntl
import os
from collections.abc import Iterator
from pathlib import Path
from typing import Any


def current_cpu() -> int:
    """The CPU the calling thread runs on (field 39 of /proc/thread-self/stat)."""
    stat = Path("/proc/thread-self/stat").read_text()
    return int(stat.rsplit(")", 1)[1].split()[36])


def threads_of(pid: int) -> list[int]:
    try:
        return [int(tid) for tid in os.listdir(f"/proc/{pid}/task")]
    except FileNotFoundError:
        return []


@contextlib.contextmanager
def claimed_cpu(mine: set[int], claims: Path | None) -> Iterator[tuple[int, bool]]:
    """(cpu, claimed): the calling thread's CPU, or the next of ``mine`` no other window holds in
    ``claims``; (its CPU, False) when ``claims`` is None or every CPU is held."""
    here = current_cpu()
    first = here if here in mine else min(mine)
    if claims is None:
        yield first, False
        return
    claims.mkdir(parents=True, exist_ok=True, mode=0o700)
    for cpu in [first, *sorted(mine - {first})]:
        fd = os.open(claims / str(cpu), os.O_CREAT | os.O_RDWR, 0o600)
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            os.close(fd)
            continue
        try:
            yield cpu, True
        finally:
            os.close(fd)  # releases the claim
        return
    yield first, False


@contextlib.contextmanager
def one_cpu(pids: list[int], claims: Path | None = None) -> Iterator[dict[str, Any]]:
    """Pins the calling thread and every thread of ``pids`` to one CPU (:func:`claimed_cpu`) and
    yields the record ``{"cpu", "claimed", "threads", "moved"}`` (``error`` where a thread could
    not be pinned: the timing goes on unpinned for it). On exit every thread gets back the CPU
    set it had; a thread started inside the window gets its process's."""
    mine = os.sched_getaffinity(0)
    with claimed_cpu(mine, claims) as (cpu, claimed), _pinned(pids, mine, cpu) as record:
        record["claimed"] = claimed
        yield record


@contextlib.contextmanager
def _pinned(pids: list[int], mine: set[int], cpu: int) -> Iterator[dict[str, Any]]:
    record: dict[str, Any] = {"cpu": cpu, "threads": 0, "moved": 0}
    saved: dict[int, set[int]] = {}
    by_process: dict[int, set[int]] = {}
    try:
        os.sched_setaffinity(0, {cpu})
        for pid in pids:
            for tid in threads_of(pid):
                try:
                    saved[tid] = os.sched_getaffinity(tid)
                    by_process.setdefault(pid, saved[tid])
                    os.sched_setaffinity(tid, {cpu})
                    record["threads"] += 1
                except ProcessLookupError:  # the thread ended between listing and pinning
                    saved.pop(tid, None)
                except OSError as exc:  # EPERM, or a cpuset without this CPU
                    saved.pop(tid, None)
                    record["error"] = f"thread {tid}: {exc.strerror}"
        yield record
    finally:
        for pid, mask in by_process.items():
            for tid in threads_of(pid):
                with contextlib.suppress(OSError):
                    if os.sched_getaffinity(tid) != {cpu}:
                        record["moved"] += int(tid in saved)
                    os.sched_setaffinity(tid, saved.get(tid, mask))
        with contextlib.suppress(OSError):
            os.sched_setaffinity(0, mine)
