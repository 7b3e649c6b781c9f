"""Quiet windows: the node's builds are paused while a candidate is timed (issue 35).

Host-bound calls (level-3 models launching hundreds of small kernels) ran 1.5-2.8x slower while 16
compiles ran beside them (experiments/bench/timing_under_load.py), and an eager reference is
host-bound more often than a fused candidate, so a ratio timed beside compiles is inflated even
when both sides are timed in one window. So while a supervisor holds the GPU lock exclusively, the
compiler processes (COMPILERS: nvcc and its stages, g++ and its stages, ninja) of every evaluator on
the node are stopped (SIGSTOP) and continued (SIGCONT) right after.

Nothing may stay stopped when the one who asked dies, so the stopping is done by a *keeper*, one
small process per evaluator actor in a session of its own, not by the supervisor (a timeout kills
the supervisor's whole session) nor by the actor (Ray may kill it):

* a supervisor connects to the keeper's unix socket and sends ``pause``; the keeper stops the
  builds and answers ``paused N``; the window ends when the supervisor sends ``resume`` or its end
  of the socket closes, which the kernel does when it dies, however it dies;
* the keeper continues everything it stopped after ``max_hold_s`` whatever the supervisor does,
  and when its lifeline (its stdin, a pipe from the actor) closes: the actor died;
* which processes are the node's builds: descendants of any evaluator actor registered in the
  node's registry directory (a file per actor pid), never the asking supervisor's own session;
* builds are stopped at most ``MAX_DUTY`` of any ``DUTY_WINDOW_S``: timings back to back would
  otherwise starve the builds that feed them (a window past that is timed without pausing and
  says so in ``details["gpu_lock"]["quiet"]``).

Two timings on two GPUs of one node may overlap: the first to end continues the builds while the
second is still timing. Each keeper records only what it stopped, so nothing is continued twice
nor left stopped.
"""

from __future__ import annotations

import contextlib
import os
import selectors
import signal
import socket
import struct
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

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
# pausing (and says so), so builds always keep half the node's time.
MAX_DUTY = 0.5
DUTY_WINDOW_S = 10.0
CONNECT_TIMEOUT_S = 1.0


def _stat(pid: str) -> tuple[str, int, int, int] | None:
    """(comm, ppid, session, start time) of ``pid``, or None when it is gone."""
    try:
        with open(f"/proc/{pid}/stat", "rb") as f:
            stat = f.read()
    except OSError:
        return None
    comm = stat[stat.index(b"(") + 1 : stat.rindex(b")")].decode(errors="replace")
    fields = stat[stat.rindex(b")") + 2 :].split()
    return comm, int(fields[1]), int(fields[3]), int(fields[19])


def node_builds(roots: set[int], exclude_session: int) -> list[tuple[int, int]]:
    """(pid, start time) of every compiler process below one of ``roots`` and outside
    ``exclude_session``."""
    table = {name: _stat(name) for name in os.listdir("/proc") if name.isdigit()}
    parent = {int(pid): info[1] for pid, info in table.items() if info}
    found = []
    for pid, info in table.items():
        if not info or info[0] not in COMPILERS or info[2] == exclude_session:
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


def _signal_all(pids: list[tuple[int, int]], sig: int) -> int:
    done = 0
    for pid, started in pids:
        info = _stat(str(pid))
        if info is None or info[3] != started:  # gone, or the pid was reused
            continue
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.kill(pid, sig)
            done += 1
    return done


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
        # (start, end) of recent pauses, for the duty limit; end None while it lasts.
        self.pauses: list[list[float | None]] = []

    def serve(self) -> None:
        try:
            while True:
                timeout = min((end for _, end in self.windows.values()), default=None)
                wait = None if timeout is None else max(0.0, timeout - time.monotonic())
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
        finally:
            for conn in list(self.windows):
                self._resume(conn)

    def _client(self, conn: socket.socket) -> None:
        try:
            data = conn.recv(64)
        except OSError:
            data = b""
        if data.startswith(b"pause") and conn not in self.windows:
            if self._duty() > MAX_DUTY * DUTY_WINDOW_S:
                answer, builds = "paused 0 duty", []
            else:
                creds = conn.getsockopt(socket.SOL_SOCKET, socket.SO_PEERCRED, struct.calcsize("3i"))
                peer = struct.unpack("3i", creds)[0]
                builds = node_builds(registered_roots(self.registry), os.getsid(peer))
                answer = f"paused {_signal_all(builds, signal.SIGSTOP)}"
                self.pauses.append([time.monotonic(), None])
            self.windows[conn] = (builds, time.monotonic() + self.max_hold_s)
            with contextlib.suppress(OSError):
                conn.sendall(f"{answer}\n".encode())
            return
        self._resume(conn)
        if data:  # "resume": the window ended, the connection may stay for the next
            with contextlib.suppress(OSError):
                conn.sendall(b"resumed\n")
            return
        self.selector.unregister(conn)
        conn.close()

    def _resume(self, conn: socket.socket) -> None:
        if conn not in self.windows:
            return
        builds, _ = self.windows.pop(conn)
        _signal_all(builds, signal.SIGCONT)
        for pause in self.pauses:  # one window at a time: the GPU lock is exclusive
            pause[1] = pause[1] or time.monotonic()

    def _duty(self) -> float:
        """Seconds of the last DUTY_WINDOW_S during which builds were stopped."""
        now = time.monotonic()
        since = now - DUTY_WINDOW_S
        self.pauses = [p for p in self.pauses if p[1] is None or p[1] > since]
        return sum(min(now, p[1] or now) - max(since, p[0] or now) for p in self.pauses)


@contextlib.contextmanager
def quiet_window(sock_path: str | None, record: dict[str, Any]) -> Iterator[None]:
    """Ask the keeper at ``sock_path`` to pause the node's builds for the block. A keeper that
    cannot be reached costs the timing its quiet, never its verdict: ``record`` says so."""
    if not sock_path:
        yield
        return
    conn = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    started = time.perf_counter()
    try:
        conn.settimeout(CONNECT_TIMEOUT_S)
        conn.connect(sock_path)
        conn.sendall(b"pause\n")
        answer = conn.recv(64).decode().split()
        record["windows"] = record.get("windows", 0) + 1
        record["paused"] = record.get("paused", 0) + int(answer[1])
        if answer[2:] == ["duty"]:
            record["over_duty"] = record.get("over_duty", 0) + 1
        record["pause_ms"] = round(record.get("pause_ms", 0.0) + (time.perf_counter() - started) * 1e3, 3)
    except (OSError, IndexError, ValueError) as exc:
        record["unavailable"] = f"{type(exc).__name__}: {exc}"[:200]
        conn.close()
        yield
        return
    try:
        yield
    finally:
        conn.close()  # the keeper continues what it stopped


def start_keeper(
    directory: Path, registry: Path, max_hold_s: float = MAX_HOLD_S
) -> tuple[subprocess.Popen[bytes], Path]:
    """Start a keeper for the calling actor (registered in ``registry``); returns (process, socket
    path). Its stdin is the lifeline: it ends, and continues every build, when this process dies."""
    registry.mkdir(parents=True, exist_ok=True, mode=0o700)
    (registry / str(os.getpid())).touch()
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
