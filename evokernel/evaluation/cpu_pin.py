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

The window's CPU is the fastest it can claim, and it moves to another when its own slows down
or a round finds the window's threads waiting on its run queue (host_speed.py,
``slowdown_limit``); the record says how often and by how much.
"""

from __future__ import annotations

import contextlib
import fcntl
import math
import os
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from evokernel.evaluation.host_speed import MAX_MOVES, Spin, schedstat, settled_spin_us


def current_cpu() -> int:
    """The CPU the calling thread runs on (field 39 of /proc/thread-self/stat)."""
    stat = Path("/proc/thread-self/stat").read_text()
    return int(stat.rsplit(")", 1)[1].split()[36])


def threads_of(pid: int) -> list[int]:
    try:
        return [int(tid) for tid in os.listdir(f"/proc/{pid}/task")]
    except FileNotFoundError:
        return []


class ThreadWait:
    """How long the main thread of ``pid`` (the thread that runs a worker's timed calls) waited
    on a run queue between :meth:`begin` and :meth:`end`, read on the trusted side from /proc
    (host_speed.schedstat), never the worker's word.

    Only that thread, during its own block: the window's other threads (a worker's
    ``cuda-EvtHandlr``, the supervisor's between its requests) wake while a side spins in a CUDA
    synchronize on the window's one CPU and queue behind it, which slows nothing timed; summed with
    them, 26-73 rounds of windows whose reference ran 99.8 % of its wall time on the CPU read as
    contended (H200, session 19)."""

    def __init__(self, pid: int) -> None:
        self.path = f"/proc/{pid}/task/{pid}/schedstat"
        self._mark = (0, 0)
        self.last = (0, 0)  # the last block's (wall ns, wait ns), as :meth:`end` found them

    def begin(self) -> None:
        self._mark = (time.perf_counter_ns(), schedstat(self.path)[1])

    def end(self) -> tuple[int, int]:
        """``(wall ns, run-queue wait ns)`` since :meth:`begin`, kept as ``last``."""
        self.last = (time.perf_counter_ns() - self._mark[0], schedstat(self.path)[1] - self._mark[1])
        return self.last


class WindowCpu:
    """The CPU of one timing window: claimed in ``claims``, the calling thread and every thread of
    ``pids`` pinned to it; :meth:`fast` checks its speed before a round and moves the window to a
    faster CPU when it slowed. ``record``: ``cpu``, ``claimed``, ``threads``, ``moved`` (threads
    found off the CPU at the end), ``error`` where a thread could not be pinned, and with a
    ``slowdown_limit``: ``spin_us`` (the fastest spin seen), ``slow_rounds`` (slow by spin or by
    contention), ``moves``, ``contended_rounds`` (a worker's calling thread waited on the run
    queue past the limit), ``lost_rounds`` (the reference's calls off the CPU past it) and
    ``wait_ms`` (the workers' calling threads' run-queue wait in their blocks: :meth:`undisturbed`);
    at the end, ``busiest`` (:meth:`_busiest`)."""

    def __init__(
        self, pids: list[int], claims: Path | None, slowdown_limit: float = 0.0, spin: Spin = settled_spin_us
    ) -> None:
        self.pids, self.claims, self.limit, self.spin = pids, claims, slowdown_limit, spin
        self.mine = os.sched_getaffinity(0)
        self.cpu = -1
        self.record: dict[str, Any] = {"cpu": -1, "claimed": False, "threads": 0, "moved": 0}
        self._fd: int | None = None
        self._saved: dict[int, set[int]] = {}
        self._by_process: dict[int, set[int]] = {}
        self._cpu_at_pin: dict[int, int] = {}  # ns on a CPU of each pinned thread as it was pinned
        self._best = math.inf
        self._contended = False

    def start(self) -> None:
        if self.limit > 0:
            self.record.update(
                spin_us=0.0, slow_rounds=0, moves=0, contended_rounds=0, lost_rounds=0, wait_ms=0.0
            )
        here = current_cpu()
        order = [here, *sorted(self.mine - {here})] if here in self.mine else sorted(self.mine)
        speeds = self._scan(order) if self.limit > 0 else {}
        cpu, fd = self._claim_first(sorted(order, key=lambda c: speeds.get(c, 0.0)))
        self._move_to(cpu, fd)

    def fast(self) -> bool:
        """Whether the next round runs at full host speed: a spin on the window's CPU within
        ``slowdown_limit`` of the fastest seen, or, after a move, the new CPU's; a CPU the last
        round found contended (:meth:`undisturbed`) is left as a slow one is. Always true
        without a limit; after ``MAX_MOVES`` moves a slow CPU stays and its rounds are slow."""
        if self.limit <= 0:
            return True
        return self._check()

    def undisturbed(self, lost: bool = False, contended: bool = False, waited_ns: int = 0) -> bool:
        """Whether the round since :meth:`fast` ran with each side's calls on the CPU: ``lost``,
        the eager reference's own finding that its calls ran off the CPU past ``slowdown_limit``
        (block_timer.BlockTimer.disturbed: on a run queue, or stolen below the VM, which no run
        queue shows); ``contended``, a worker's calling thread waited on the run queue past
        ``slowdown_limit - 1`` of its block (:class:`ThreadWait`; ``waited_ns`` in all). The
        next :meth:`fast` moves off a CPU that was either. Always true without a limit."""
        if self.limit <= 0:
            return True
        self.record["wait_ms"] = round(self.record["wait_ms"] + waited_ns / 1e6, 3)
        self.record["contended_rounds"] += int(contended)
        self.record["lost_rounds"] += int(lost)
        if not (contended or lost):
            return True
        self._contended = True
        return False

    def _check(self) -> bool:
        contended, self._contended = self._contended, False
        spin = self.spin()
        self._best = min(self._best, spin)
        if spin <= self.limit * self._best and not contended:
            return True
        self.record["slow_rounds"] += 1
        if self.record["moves"] >= MAX_MOVES:
            return False
        speeds = self._scan(sorted(self.mine - {self.cpu}))
        # Off a slow CPU to a faster one; off a contended one to the fastest other (its own spin
        # ran in the first slice of its time and may look fast).
        faster = sorted((c for c in speeds if contended or speeds[c] < spin), key=speeds.__getitem__)
        cpu, fd = self._claim_first(faster) if faster else (self.cpu, None)
        if cpu == self.cpu or (fd is None and self._fd is not None):
            if fd is not None:
                os.close(fd)
            os.sched_setaffinity(0, {self.cpu})
            return False
        self.record["moves"] += 1
        self._move_to(cpu, fd)
        return speeds[cpu] <= self.limit * self._best

    def close(self) -> None:
        self.record["busiest"] = self._busiest()
        for pid, mask in self._by_process.items():
            for tid in threads_of(pid):
                with contextlib.suppress(OSError):
                    if os.sched_getaffinity(tid) != {self.cpu}:
                        self.record["moved"] += int(tid in self._saved)
                    os.sched_setaffinity(tid, self._saved.get(tid, mask))
        with contextlib.suppress(OSError):
            os.sched_setaffinity(0, self.mine)
        if self._fd is not None:
            os.close(self._fd)  # releases the claim
            self._fd = None

    def _busiest(self, top: int = 4) -> list[list[Any]]:
        """The pinned threads that ran most during the window, ``[name, ms on a CPU]``, 0.5 ms or
        more: the worker's main thread runs the candidate's calls; any other busy thread shared
        the window's CPU with both sides (a thread started in the window counts from 0)."""
        ran: list[tuple[str, float]] = []
        for pid in self._by_process:
            for tid in threads_of(pid):
                base = f"/proc/{pid}/task/{tid}"
                ms = (schedstat(f"{base}/schedstat")[0] - self._cpu_at_pin.get(tid, 0)) / 1e6
                if ms >= 0.5:
                    try:
                        name = Path(f"{base}/comm").read_text().strip()
                    except OSError:
                        continue
                    ran.append((f"{name} ({'main' if tid == pid else 'thread'})", round(ms, 1)))
        return [list(x) for x in sorted(ran, key=lambda x: -x[1])[:top]]

    def _scan(self, cpus: list[int]) -> dict[int, float]:
        """Each CPU's settled spin, the calling thread moved to it in turn (~1 ms a CPU)."""
        speeds: dict[int, float] = {}
        for cpu in cpus:
            try:
                os.sched_setaffinity(0, {cpu})
            except OSError:
                continue
            speeds[cpu] = self.spin()
        if speeds:
            self._best = min(self._best, *speeds.values())
            self.record["spin_us"] = round(self._best, 1)
        return speeds

    def _claim_first(self, order: list[int]) -> tuple[int, int | None]:
        """The first CPU of ``order`` no other window holds, with its lock; the first of all, and
        no lock, when there are no claims or every CPU is held."""
        if self.claims is None or not order:
            return (order[0] if order else self.cpu), None
        self.claims.mkdir(parents=True, exist_ok=True, mode=0o700)
        for cpu in order:
            fd = os.open(self.claims / str(cpu), os.O_CREAT | os.O_RDWR, 0o600)
            try:
                fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
            except BlockingIOError:
                os.close(fd)
                continue
            return cpu, fd
        return order[0], None

    def _move_to(self, cpu: int, fd: int | None) -> None:
        first = self.cpu < 0
        if self._fd is not None:
            os.close(self._fd)
        self._fd, self.cpu = fd, cpu
        self.record.update(cpu=cpu, claimed=fd is not None, threads=0)
        os.sched_setaffinity(0, {cpu})
        for pid in self.pids:
            for tid in threads_of(pid):
                try:
                    if first:  # a thread started later gets its process's set back (close)
                        self._saved[tid] = os.sched_getaffinity(tid)
                        self._by_process.setdefault(pid, self._saved[tid])
                        self._cpu_at_pin[tid] = schedstat(f"/proc/{pid}/task/{tid}/schedstat")[0]
                    os.sched_setaffinity(tid, {cpu})
                    self.record["threads"] += 1
                except ProcessLookupError:  # the thread ended between listing and pinning
                    self._saved.pop(tid, None)
                except OSError as exc:  # EPERM, or a cpuset without this CPU
                    self._saved.pop(tid, None)
                    self.record["error"] = f"thread {tid}: {exc.strerror}"


@contextlib.contextmanager
def one_cpu(
    pids: list[int], claims: Path | None = None, slowdown_limit: float = 0.0, spin: Spin = settled_spin_us
) -> Iterator[WindowCpu]:
    """The :class:`WindowCpu` of ``pids`` and the calling thread for the ``with`` block. On exit
    every thread gets back the CPU set it had; a thread started inside the window its process's.
    ``spin``: how the host's speed is measured (host_speed.py)."""
    window = WindowCpu(pids, claims, slowdown_limit, spin)
    try:
        window.start()
        yield window
    finally:
        window.close()
