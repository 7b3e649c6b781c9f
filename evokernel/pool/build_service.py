"""The evaluator actor's build service (issue 37): the supervisors' way into the Ray build pool.

A supervisor is forked from the actor's fork-server and holds no Ray connection (nor should it:
its worker runs candidate code beside it). So the actor listens on a unix socket in its own
scratch root (mode 0600; the candidates' seccomp filter refuses ``connect`` anyway), one thread
per connection: it reads one :class:`~evokernel.evaluation.build_client.BuildJob`, hands it to
the pool's dispatcher (:mod:`.build_pool`), fetches the object's bytes from the build node's
object store and writes reply and bytes back. Every wait is bounded by the job's own seconds,
its credit for the pool's delays (``max_held_s``) and a margin, so a lost pool costs a build its
deadline at most, never a hung actor; a
dispatcher that cannot be reached is an ``unavailable`` reply and the supervisor builds locally.
"""

from __future__ import annotations

import contextlib
import logging
import socket
import threading
import time
from pathlib import Path
from typing import Any

import ray
from ray.exceptions import GetTimeoutError, RayError

from evokernel.evaluation import channel
from evokernel.evaluation.build_client import RETURN_MARGIN_S, BuildJob, BuildReply
from evokernel.pool.active_gate import ActiveGate

log = logging.getLogger(__name__)
# A supervisor sends its job at once after connecting; one that does not is dropped.
REQUEST_TIMEOUT_S = 30.0
# Jobs a build service takes at once: every candidate of the actor (at most 8) has 1-4 calls.
BACKLOG = 64


class BuildService:
    """Serves build jobs on ``path`` until :meth:`close`; ``dispatcher`` is the pool's actor."""

    def __init__(self, path: Path, dispatcher: Any | None, gate: ActiveGate | None = None) -> None:
        self.path, self.dispatcher = path, dispatcher
        # The actor's gate (pool/active_gate.py): a candidate waiting on its build here is not
        # active on this node.
        self.gate = gate
        self.served = self.failed = self.stepped_out = 0
        self._sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        path.unlink(missing_ok=True)
        self._sock.bind(str(path))
        path.chmod(0o600)
        self._sock.listen(BACKLOG)
        self._closed = False
        self._thread = threading.Thread(target=self._accept, name="evk-build-service", daemon=True)
        self._thread.start()

    def _accept(self) -> None:
        while not self._closed:
            try:
                conn, _ = self._sock.accept()
            except OSError:
                return  # closed
            threading.Thread(target=self._serve, args=(conn,), name="evk-build-job", daemon=True).start()

    def _serve(self, conn: socket.socket) -> None:
        with conn:
            try:
                conn.settimeout(REQUEST_TIMEOUT_S)
                header, _ = channel.recv(conn)
                if header.get("op") == "step_out":
                    self._step_out(conn, float(header["timeout_s"]))
                    return
                job = BuildJob.from_json(header.get("job"))
            except (channel.ChannelError, OSError, ValueError, TypeError, KeyError) as exc:
                log.warning("a malformed build request: %s", exc)
                return
            if self.gate is None:
                reply, blob = self.build(job)
            else:
                with self.gate.step_out(time.monotonic() + job.timeout_s + job.max_held_s):
                    reply, blob = self.build(job)
            self.served += 1
            try:
                conn.settimeout(REQUEST_TIMEOUT_S)
                channel.send(conn, reply.to_json(), blob)
            except OSError as exc:  # the supervisor is gone (killed at its timeout): nothing to do
                self.failed += 1
                log.info("a build's supervisor left before its reply: %s", exc)

    def _step_out(self, conn: socket.socket, timeout_s: float) -> None:
        """Out of the gate until the supervisor's ``back`` (or EOF, or ``timeout_s``), then in
        again, then ``in`` to the supervisor, which waits for it before it goes on."""
        until = time.monotonic() + timeout_s
        self.stepped_out += 1
        out = self.gate.step_out(until) if self.gate is not None else contextlib.nullcontext()
        try:
            with out:
                channel.send(conn, {"op": "out"})
                back = self._await_back(conn, until)
            if back:
                channel.send(conn, {"op": "in"})
        except OSError as exc:  # the supervisor is gone: the gate's count is right either way
            log.info("a stepped-out build's supervisor left: %s", exc)

    @staticmethod
    def _await_back(conn: socket.socket, until: float) -> bool:
        """Whether the supervisor said ``back`` before ``until``; False when it left or ran out."""
        try:
            conn.settimeout(max(0.001, until - time.monotonic()))
            channel.recv(conn)
        except (channel.ChannelError, OSError):
            return False
        return True

    def build(self, job: BuildJob) -> tuple[BuildReply, bytes]:
        """``job`` on the pool: the reply, and the object's bytes when it was built."""
        if self.dispatcher is None:
            return BuildReply("unavailable", "builds are local (evaluation.builds=local)"), b""
        limit = job.timeout_s + job.max_held_s + RETURN_MARGIN_S
        try:
            answer = ray.get(self.dispatcher.build.remote(job.to_json()), timeout=limit)
            reply = BuildReply.from_json(answer["reply"])
            blob = b""
            if reply.status == "built":
                blob = bytes(ray.get(answer["blob"][0], timeout=limit))
        except GetTimeoutError:
            return BuildReply("timeout", "the build pool did not answer within the evaluation's timeout"), b""
        except (RayError, ValueError, TypeError, KeyError) as exc:
            return BuildReply("unavailable", f"the build pool is unavailable: {exc}"[:600]), b""
        return reply, blob

    def close(self) -> None:
        self._closed = True
        with contextlib.suppress(OSError):
            self._sock.shutdown(socket.SHUT_RDWR)
        self._sock.close()
        self.path.unlink(missing_ok=True)
