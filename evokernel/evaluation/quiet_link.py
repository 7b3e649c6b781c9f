"""A supervisor's end of the quiet windows (evaluation/quiet.py, whose keeper it talks to): one
connection for the supervisor's life, a window per timing. The keeper's side of the protocol is
``Keeper._client``: ``hello`` -> ``registered``, ``pause`` -> ``paused N`` (``paused 0 duty``
past the duty limit), ``resume`` -> ``resumed``."""

from __future__ import annotations

import contextlib
import socket
import time
from collections.abc import Iterator
from typing import Any

CONNECT_TIMEOUT_S = 1.0


class QuietLink:
    """A supervisor's connection to its actor's keeper, for the supervisor's life: registers its
    evaluation as one a window stops, and asks for windows. A keeper that cannot be reached costs
    the timings their quiet, never a verdict: ``record`` says so."""

    def __init__(self, sock_path: str | None) -> None:
        self.record: dict[str, Any] = {}
        self.conn: socket.socket | None = None
        # Whether the last window stopped the node: False when the keeper granted it over the duty
        # limit (nothing stopped), None where there is no keeper (nothing to stop).
        self.stopped_node: bool | None = None
        if not sock_path:
            return
        conn = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        try:
            conn.settimeout(CONNECT_TIMEOUT_S)
            conn.connect(sock_path)
            self._say(conn, "hello")
            self.conn = conn
        except (OSError, IndexError) as exc:
            self.record["unavailable"] = f"{type(exc).__name__}: {exc}"[:200]
            conn.close()

    @staticmethod
    def _say(conn: socket.socket, text: str) -> list[str]:
        conn.sendall(f"{text}\n".encode())
        answer = conn.recv(64).decode().split()
        if not answer:
            raise ConnectionResetError("the keeper closed the connection")
        return answer

    @contextlib.contextmanager
    def window(self) -> Iterator[None]:
        """The block runs with the rest of the node stopped (when the keeper grants it)."""
        self.stopped_node = None  # this window's answer, never an earlier one's
        if self.conn is None:
            yield
            return
        started = time.perf_counter()
        try:
            answer = self._say(self.conn, "pause")
            record = self.record
            record["windows"] = record.get("windows", 0) + 1
            record["paused"] = record.get("paused", 0) + int(answer[1])
            self.stopped_node = answer[2:] != ["duty"]
            if not self.stopped_node:
                record["over_duty"] = record.get("over_duty", 0) + 1
            record["pause_ms"] = round(record.get("pause_ms", 0.0) + (time.perf_counter() - started) * 1e3, 3)
        except (OSError, IndexError, ValueError) as exc:
            self.record["unavailable"] = f"{type(exc).__name__}: {exc}"[:200]
            self.close()
            yield
            return
        try:
            yield
        finally:
            try:
                self._say(self.conn, "resume")
            except OSError:
                self.close()  # the keeper continues what it stopped when the connection closes

    def close(self) -> None:
        if self.conn is not None:
            self.conn.close()
            self.conn = None
