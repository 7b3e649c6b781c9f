"""The supervisor's hold on its forked worker process: reap it, kill it, ask it to exit, and say
why it died (its signal or exit code) when the channel to it broke."""

from __future__ import annotations

import contextlib
import os
import signal
import socket

from evokernel.evaluation import channel


class WorkerProcess:
    """The worker ``pid`` (a child of this process) and the socket it answers on."""

    def __init__(self, sock: socket.socket, pid: int) -> None:
        self.sock, self.pid = sock, pid
        self.status: int | None = None

    def reap(self, wait: bool) -> int | None:
        if self.status is None:
            pid, status = os.waitpid(self.pid, 0 if wait else os.WNOHANG)
            if pid:
                self.status = status
        return self.status

    def kill(self) -> None:
        if self.status is None:
            with contextlib.suppress(ProcessLookupError):
                os.kill(self.pid, signal.SIGKILL)
            self.reap(wait=True)

    def stop(self) -> None:
        if self.status is None:
            try:
                self.sock.settimeout(5)
                channel.send(self.sock, {"op": "exit"})
                channel.recv(self.sock)
            except (TimeoutError, channel.ChannelError, OSError):
                pass  # it is killed next either way
            self.kill()

    def death_reason(self, exc: BaseException, stage: str) -> str:
        code = self.reap(wait=True)
        if code is None:
            return f"worker broke the protocol: {exc}"
        if os.WIFSIGNALED(code):
            return f"worker killed by signal {signal.Signals(os.WTERMSIG(code)).name} during {stage}"
        return f"worker exited with code {os.WEXITSTATUS(code)} during {stage} without a result"
