"""The supervisor's way to the Ray build pool (issue 37): a build job over its actor's socket.

The supervisor has no Ray connection (it is forked from the actor's fork-server, and a candidate
beside it must not reach the cluster either), so its :class:`~evokernel.evaluation.object_cache.ObjectCache`
hands a miss to its evaluator actor over a unix socket that a thread of the actor serves
(:mod:`evokernel.pool.build_service`); the actor submits it to the build pool and streams the
object back. Everything on this link is trusted: the supervisor, the actor and the pool's build
tasks run evokernel's code only. The worker cannot connect (seccomp refuses ``connect`` to every
candidate process) and could gain nothing if it could: a job only names the files the
supervisor's torch wrote for a call, and whatever comes back is stored under the key the
supervisor computed from those files itself.

A job (:class:`BuildJob`) is the staging directory as text, with the staging path replaced by a
placeholder so the build node writes it into a staging directory of its own: ``build.ninja``
keeps its absolute include paths, which are the same on every node of the same toolchain
(torch's install path, Python, compiler and CUDA home are in the cache root's key, checked on
the build node). The reply (:class:`BuildReply`) carries the object's bytes as the frame's blob.

A build the supervisor makes itself (``evaluation.builds=local``, or the pool's fallback) uses the
same socket to step out of the actor's active gate for its duration (:func:`stepped_out`,
pool/active_gate.py): a candidate compiling on the node's cores is not one of the node's active
evaluations, so the actor can start another one's correctness and timing meanwhile.
"""

from __future__ import annotations

import socket
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from evokernel.evaluation import channel
from evokernel.exceptions import EvaluationError

# The build node gets this much less time than the supervisor has: the object still has to come
# back (a 20 MB object over the object store and this socket: well under a second).
RETURN_MARGIN_S = 2.0


STATUSES = ("built", "failed", "timeout", "unavailable")


class BuildPoolUnavailable(EvaluationError):
    """No answer from the pool (no actor socket, a broken link): the supervisor builds locally."""


@dataclass(frozen=True)
class BuildJob:
    """One object build: the staging directory's files, its object's name and cache key, the
    toolchain (cache root) key the build node must share, and the seconds it may take."""

    key: str
    so_name: str
    root_key: str
    files: dict[str, str]
    timeout_s: float
    # The SHA-256 of the host binding's inputs (main.cpp and its flags): the pool sends builds of
    # one binding to the same node where it can, so its compiled main.o is reused there.
    host_key: str = ""
    # Seconds of the pool's doing the build may take beyond ``timeout_s`` (waiting for a build
    # slot, a lost node's attempt, the build node holding its compilers back): credited to the
    # evaluation as a local build's holds are (build_clock.py), never the candidate's time.
    max_held_s: float = 0.0

    def to_json(self) -> dict[str, Any]:
        return asdict(self)

    @classmethod
    def from_json(cls, data: Any) -> BuildJob:
        if not isinstance(data, dict) or not isinstance(data.get("files"), dict):
            raise ValueError("a build job is a JSON object with files")
        files = data["files"]
        if not all(isinstance(k, str) and "/" not in k and isinstance(v, str) for k, v in files.items()):
            raise ValueError("a build job's files are {plain name: text}")
        return cls(
            key=str(data["key"]),
            so_name=str(data["so_name"]),
            root_key=str(data["root_key"]),
            files=dict(files),
            timeout_s=float(data["timeout_s"]),
            host_key=str(data.get("host_key", "")),
            max_held_s=float(data.get("max_held_s", 0.0)),
        )


@dataclass(frozen=True)
class BuildReply:
    """``status``: ``built`` (the object is the blob), ``failed`` (``output`` is the compiler's),
    ``timeout`` (the build outlived the job's seconds) or ``unavailable`` (``output`` says why;
    the supervisor builds locally). ``node``: where it
    was built; ``retried``: builds lost with their node and run again elsewhere first;
    ``held_s``: of the job's ``max_held_s``, the seconds the pool took (its queue, lost nodes,
    the build node's holds), by which the evaluation's deadline moves."""

    status: str
    output: str = ""
    node: str = ""
    seconds: float = 0.0
    cpu_s: float = 0.0
    retried: int = 0
    host_reused: bool = False
    details: dict[str, Any] = field(default_factory=dict)
    held_s: float = 0.0

    def to_json(self) -> dict[str, Any]:
        return asdict(self)

    @classmethod
    def from_json(cls, data: Any) -> BuildReply:
        if not isinstance(data, dict) or data.get("status") not in STATUSES:
            raise ValueError(f"not a build reply: {str(data)[:200]}")
        return cls(
            status=str(data["status"]),
            output=str(data.get("output", "")),
            node=str(data.get("node", "")),
            seconds=float(data.get("seconds", 0.0)),
            cpu_s=float(data.get("cpu_s", 0.0)),
            retried=int(data.get("retried", 0)),
            host_reused=bool(data.get("host_reused", False)),
            details=dict(data.get("details") or {}),
            held_s=float(data.get("held_s", 0.0)),
        )


def ask_pool(path: str, job: BuildJob, deadline: float) -> tuple[BuildReply, bytes]:
    """Send ``job`` to the actor's build service at ``path`` and wait for the reply until
    ``deadline`` (``time.perf_counter``). Raises ``TimeoutError`` past it and
    :class:`BuildPoolUnavailable` when the service cannot be reached or breaks the link."""
    if deadline <= time.perf_counter():
        raise TimeoutError("no time left for the extension build")
    sock = _connect(path, deadline)
    try:
        sock.settimeout(max(0.001, deadline - time.perf_counter()))
        try:
            channel.send(sock, {"op": "build", "job": job.to_json()})
            header, blob = channel.recv(sock)
        except (channel.ChannelError, ConnectionError, BrokenPipeError) as exc:
            raise BuildPoolUnavailable(f"the build service broke the link: {exc}") from exc
        try:
            return BuildReply.from_json(header), bytes(blob)
        except (ValueError, TypeError, KeyError) as exc:
            raise BuildPoolUnavailable(str(exc)) from exc
    finally:
        sock.close()


@contextmanager
def stepped_out(path: str | None, deadline: float) -> Iterator[dict[str, float]]:
    """Around a build this supervisor makes itself: the actor's gate counts the evaluation as not
    active until the body ends and then waits (at most until ``deadline``, ``time.perf_counter``)
    for an active place again. Yields a dict that gets ``back_wait_s``, the seconds that wait
    took. Fails open: without a service (``path`` None or gone) or on a broken link the body just
    runs, and the gate's count is what it was (an evaluation the actor counts as active)."""
    timing: dict[str, float] = {}
    sock = _step_out(path, deadline)
    try:
        yield timing
    finally:
        if sock is not None:
            started = time.perf_counter()
            try:
                sock.settimeout(max(0.001, deadline - time.perf_counter()) + RETURN_MARGIN_S)
                channel.send(sock, {"op": "back"})
                channel.recv(sock)  # "in": the gate has room for this evaluation again
                timing["back_wait_s"] = time.perf_counter() - started
            except (channel.ChannelError, OSError):
                pass  # the actor re-enters on its own at the deadline or when the link closes
            finally:
                sock.close()


def _connect(path: str, deadline: float) -> socket.socket:
    """A connection to the actor's build service (10 s at most to connect); raises
    :class:`BuildPoolUnavailable` when there is none or it does not answer."""
    if not Path(path).exists():
        raise BuildPoolUnavailable(f"no build service at {path}")
    sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    try:
        sock.settimeout(max(0.001, min(deadline - time.perf_counter(), 10.0)))
        sock.connect(path)
    except OSError as exc:
        sock.close()
        raise BuildPoolUnavailable(f"the actor's build service did not answer: {exc}") from exc
    return sock


def _step_out(path: str | None, deadline: float) -> socket.socket | None:
    """A connection on which the actor has stepped this evaluation out of its gate, or None."""
    remaining = deadline - time.perf_counter()
    if path is None or remaining <= 0:
        return None
    try:
        sock = _connect(path, deadline)
    except BuildPoolUnavailable:
        return None
    try:
        channel.send(sock, {"op": "step_out", "timeout_s": remaining})
        channel.recv(sock)  # "out"
    except (channel.ChannelError, OSError):
        sock.close()
        return None
    return sock
