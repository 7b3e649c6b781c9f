"""Quiet windows: while a candidate is timed, the rest of the node stops (issue 35).

Two identical runs of the published level-3 corpus (16 in flight on an H100) disagreed on a
kernel's paired speedup by a median 4.6 % and up to 2.5x with only the compilers stopped: both
sides of a pair ran up to 2x slower in one run than the other (ResNet-101's eager reference 18.8 ms
against 10.7 ms), the mark of another CUDA context time-slicing the GPU in the window (another
candidate's warm-up call, which takes no lock), and host-bound eager references moved with the
host's load (other candidates' imports, Triton compiles, correctness checks). So while a
supervisor holds the GPU lock exclusively, every *other evaluation* of the node (its supervisor,
worker and everything they started) and every compiler under the node's evaluator actors is
stopped (SIGSTOP) and continued (SIGCONT) right after; the timing then waits for work those
processes had already queued on the GPU to drain, and for no process outside the window to be
running kernels (clocks.wait_gpu_alone). SIGSTOP stops a process, not the kernels it queued: in 9
of 41 windows of a 16-in-flight H200 run a stopped process's kernels ran through the window at
20-87 % of the SMs (clocks.gpu_users); and a process that is not an evaluation is never stopped.
So a window whose GPU will not drain is given up and asked for again (timing_window.quiet_window).

Nothing may stay stopped when the one who asked dies, so the stopping is done by a *keeper*, one
small process per evaluator actor in a session of its own, not by the supervisor (a timeout kills
the supervisor's whole session) nor by the actor (Ray may kill it):

* every supervisor keeps one connection to its actor's keeper for its life (quiet_link.QuietLink):
  ``hello`` registers its session as an evaluation of the node (a file per session in the node's
  registry, so every actor's keeper sees it), ``pause`` asks for a window (answered ``paused N``),
  ``resume`` ends it; a connection that closes, which the kernel does when the supervisor dies
  however it dies, ends its window and its registration;
* the keeper continues everything it stopped after ``max_hold_s`` whatever the supervisor does,
  and when its lifeline (its stdin, a pipe from the actor) closes: the actor died;
* what a window stops: the members of every registered session but the asker's, and compilers
  (COMPILERS) below any evaluator actor registered in the registry (object-cache builds run in
  sessions of their own);
* windows stop the node at most ``MAX_DUTY`` of any ``DUTY_WINDOW_S``: timings back to back would
  otherwise starve the evaluations that feed them (a window past that is granted without stopping
  anything and says so in ``details["gpu_lock"]["quiet"]``, ``over_duty``; the timing gives it
  up and asks again later, timing_window.quiet_window, keeping only its last); a window with
  nothing to stop (one evaluation on the node) spends no duty and says nothing of it.

Two timings on two GPUs of one node may overlap: the first to end continues the others while the
second is still timing. Each keeper records only what it stopped, so nothing is continued twice
nor left stopped.
"""

from __future__ import annotations

import contextlib
import math
import os
import selectors
import signal
import socket
import struct
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from evokernel.evaluation import quiet_stops
from evokernel.evaluation.quiet_stops import signal_all, stat
from evokernel.exceptions import EvoKernelError


class QuietKeeperError(EvoKernelError):
    """The keeper process could not be started."""


# /proc/<pid>/comm is cut at 15 characters.
COMPILERS = frozenset(
    {
        "nvcc", "cicc", "ptxas", "cudafe++", "fatbinary", "nvlink", "nvptxcompiler",
        "cc1plus", "cc1", "g++", "gcc", "c++", "cc", "as", "ld", "ld.bfd", "ld.gold", "collect2",
        "x86_64-linux-gn", "ninja",
    }
)  # fmt: skip
# A window lasts a timing (capped near 2 x max_ms, 2 s by default) plus its warm-ups.
MAX_HOLD_S = 8.0
# Back-to-back timings would starve the builds that feed them: over any DUTY_WINDOW_S the builds
# are stopped at most MAX_DUTY of the time; a window asked for beyond that is granted without
# pausing (and says so: the timing gives it up and asks again), so builds keep half the node's time.
MAX_DUTY = 0.5
DUTY_WINDOW_S = 10.0


def node_quiet_targets(roots: set[int], sessions: set[int], exclude_session: int) -> list[tuple[int, int]]:
    """(pid, start time) of every process of the registered evaluation ``sessions`` and every
    compiler below one of ``roots``, outside ``exclude_session`` (the asker's)."""
    table = {name: stat(name) for name in os.listdir("/proc") if name.isdigit()}
    parent = {int(pid): info[1] for pid, info in table.items() if info}
    found = []
    for pid, info in table.items():
        if not info or info[2] == exclude_session or int(pid) == os.getpid():
            continue
        if info[2] in sessions:
            found.append((int(pid), info[3]))
            continue
        if info[0] not in COMPILERS:
            continue
        ancestor, hops = int(pid), 0
        while ancestor > 1 and ancestor not in roots and hops < 64:
            ancestor, hops = parent.get(ancestor, 0), hops + 1
        if ancestor in roots:
            found.append((int(pid), info[3]))
    return found


def registered_roots(registry: Path) -> set[int]:
    roots = set()
    for entry in registry.iterdir() if registry.is_dir() else ():
        if entry.name.isdigit() and Path(f"/proc/{entry.name}").exists():
            roots.add(int(entry.name))
    return roots


def registered_sessions(registry: Path) -> set[int]:
    """Evaluation sessions registered by any keeper of the node whose leader still lives (a
    keeper killed with its files left behind leaves nothing that matches a live session)."""
    sessions = set()
    for entry in (registry / "sessions").iterdir() if (registry / "sessions").is_dir() else ():
        info = stat(entry.name) if entry.name.isdigit() else None
        if info is not None and info[2] == int(entry.name):
            sessions.add(int(entry.name))
    return sessions


class Keeper:
    """The keeper's loop (``python -m evokernel.evaluation.quiet``)."""

    def __init__(self, sock_path: Path, registry: Path, max_hold_s: float) -> None:
        self.registry, self.max_hold_s = registry, max_hold_s
        self.server = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        self.server.bind(str(sock_path))
        os.chmod(sock_path, 0o600)
        self.server.listen(16)
        self.selector = selectors.DefaultSelector()
        self.selector.register(self.server, selectors.EVENT_READ, "accept")
        self.selector.register(sys.stdin.buffer, selectors.EVENT_READ, "lifeline")
        # Per open connection: what it stopped and when that must end.
        self.windows: dict[socket.socket, tuple[list[tuple[int, int]], float]] = {}
        # Per open connection that said hello: its session, registered while it lasts; and while
        # it has a window, the marker that keeps other GPUs' windows from stopping it.
        self.sessions: dict[socket.socket, Path] = {}
        self.timing: dict[socket.socket, Path] = {}
        for part in ("sessions", "timing"):
            (registry / part).mkdir(parents=True, exist_ok=True, mode=0o700)
        # (start, end) of recent pauses, for the duty limit; end None while it lasts.
        self.pauses: list[list[float | None]] = []
        # Per open window: its list on disk, so another keeper continues it should this one die.
        self.lists: dict[socket.socket, Path] = {}
        quiet_stops.continue_orphans(registry)

    def serve(self) -> None:
        try:
            while True:
                timeout = min((end for _, end in self.windows.values()), default=math.inf)
                wait = min(quiet_stops.SWEEP_S, max(0.0, timeout - time.monotonic()))
                for key, _ in self.selector.select(wait):
                    if key.data == "lifeline":
                        if not os.read(sys.stdin.fileno(), 4096):
                            return  # the actor is gone
                    elif key.data == "accept":
                        conn, _ = self.server.accept()
                        self.selector.register(conn, selectors.EVENT_READ, "client")
                    else:
                        self._client(key.fileobj)  # type: ignore[arg-type]
                for conn, (_, end) in list(self.windows.items()):
                    if time.monotonic() >= end:
                        self._resume(conn)
                quiet_stops.continue_orphans(self.registry)  # what a killed keeper left stopped
        finally:
            for conn in list(self.windows):
                self._resume(conn)
            for marker in self.sessions.values():
                marker.unlink(missing_ok=True)

    def _client(self, conn: socket.socket) -> None:
        try:
            data = conn.recv(64)
        except OSError:
            data = b""
        if data.startswith(b"hello"):
            marker = self.registry / "sessions" / str(os.getsid(_peer(conn)))
            marker.touch()
            self.sessions[conn] = marker
            self._answer(conn, "registered")
        elif data.startswith(b"pause") and conn not in self.windows:
            # Timings on the node's other GPUs are never stopped: their sessions are marked.
            asker = os.getsid(_peer(conn))
            (self.registry / "timing" / str(asker)).touch()
            timing = {int(m.name) for m in (self.registry / "timing").iterdir() if m.name.isdigit()}
            sessions = registered_sessions(self.registry) - timing
            stopped = node_quiet_targets(registered_roots(self.registry), sessions, asker)
            if not stopped:  # a node with nothing beside the timing: quiet already, no duty spent
                answer = "paused 0"
            elif self._duty() > MAX_DUTY * DUTY_WINDOW_S:
                answer, stopped = "paused 0 duty", []
            else:
                self.lists[conn] = quiet_stops.record(self.registry, stopped)
                answer = f"paused {signal_all(stopped, signal.SIGSTOP)}"
                self.pauses.append([time.monotonic(), None])
            self.windows[conn] = (stopped, time.monotonic() + self.max_hold_s)
            self.timing[conn] = self.registry / "timing" / str(os.getsid(_peer(conn)))
            self._answer(conn, answer)
        elif data:  # "resume": the window ended, the connection stays for the next
            self._resume(conn)
            self._answer(conn, "resumed")
        else:
            self._resume(conn)
            if conn in self.sessions:
                self.sessions.pop(conn).unlink(missing_ok=True)
            self.selector.unregister(conn)
            conn.close()

    @staticmethod
    def _answer(conn: socket.socket, text: str) -> None:
        with contextlib.suppress(OSError):
            conn.sendall(f"{text}\n".encode())

    def _resume(self, conn: socket.socket) -> None:
        if conn not in self.windows:
            return
        marker = self.timing.pop(conn, None)
        if marker is not None:
            marker.unlink(missing_ok=True)
        builds, _ = self.windows.pop(conn)
        signal_all(builds, signal.SIGCONT)
        if conn in self.lists:
            self.lists.pop(conn).unlink(missing_ok=True)
        for pause in self.pauses:  # one window at a time: the GPU lock is exclusive
            pause[1] = pause[1] or time.monotonic()

    def _duty(self) -> float:
        """Seconds of the last DUTY_WINDOW_S during which builds were stopped."""
        now = time.monotonic()
        since = now - DUTY_WINDOW_S
        self.pauses = [p for p in self.pauses if p[1] is None or p[1] > since]
        return sum(min(now, p[1] or now) - max(since, p[0] or now) for p in self.pauses)


def _peer(conn: socket.socket) -> int:
    creds = conn.getsockopt(socket.SOL_SOCKET, socket.SO_PEERCRED, struct.calcsize("3i"))
    return int(struct.unpack("3i", creds)[0])


# The node's registry as the process that started a supervisor saw it (launcher.sandbox_env): a
# supervisor's own TMPDIR is its own directory, where no other window would find its CPU claims
# (session 27: every window's claim went there and was swept with it).
REGISTRY_VAR = "EVOKERNEL_NODE_REGISTRY"


def node_registry() -> Path:
    """The node's registry (one per user and temporary directory): the evaluator actors and build
    processes whose compilers a window stops, ``sessions/``, the evaluations it stops, and the
    timing windows' CPU claims."""
    inherited = os.environ.get(REGISTRY_VAR)
    if inherited:
        return Path(inherited)
    return Path(tempfile.gettempdir()) / f"evokernel-quiet-{os.getuid()}"


def register_builder(registry: Path | None = None) -> None:
    """Register the calling process: compilers below it are stopped by the node's windows like an
    evaluator actor's. Pooled builds (pool/build_task.py) do, since on a GPU node they share the
    host with the timings; on a CPU-only node no keeper reads the file."""
    registry = node_registry() if registry is None else registry
    registry.mkdir(parents=True, exist_ok=True, mode=0o700)
    (registry / str(os.getpid())).touch()


def start_keeper(
    directory: Path, registry: Path, max_hold_s: float = MAX_HOLD_S
) -> tuple[subprocess.Popen[bytes], Path]:
    """Start a keeper for the calling actor (registered in ``registry``); returns (process, socket
    path). Its stdin is the lifeline: it ends, and continues every build, when this process dies."""
    register_builder(registry)
    sock_path = directory / "quiet.sock"
    argv = ["-P", "-m", "evokernel.evaluation.quiet", str(sock_path), str(registry), str(max_hold_s)]
    proc = subprocess.Popen([sys.executable, *argv], stdin=subprocess.PIPE, start_new_session=True)
    deadline = time.monotonic() + 10.0
    while not sock_path.exists() and proc.poll() is None and time.monotonic() < deadline:
        time.sleep(0.01)
    if not sock_path.exists():
        proc.kill()
        raise QuietKeeperError(f"the quiet-window keeper did not start (exit code {proc.poll()})")
    return proc, sock_path


def stop_keeper(proc: subprocess.Popen[bytes]) -> None:
    """End the keeper as the actor's death would: its lifeline closes, it continues what it stopped."""
    if proc.stdin is not None:
        proc.stdin.close()
    try:
        proc.wait(timeout=5)
    except subprocess.TimeoutExpired:
        proc.kill()


if __name__ == "__main__":
    Keeper(Path(sys.argv[1]), Path(sys.argv[2]), float(sys.argv[3])).serve()
