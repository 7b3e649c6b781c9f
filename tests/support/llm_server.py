"""A real OpenAI-compatible HTTP server for tests, scripted by a queue of responses.

Tests talk to it over HTTP through litellm exactly as a run talks to vLLM or a hosted API, so the
client's retry, timeout and usage handling is exercised for real. It runs ``ThreadingHTTPServer``
in a background thread on an ephemeral 127.0.0.1 port (stdlib only). Each ``POST
/v1/chat/completions`` pops the next scripted response; every request is recorded (path, headers,
parsed body) so tests can assert on prompts and headers. ``GET /v1/models`` lists ``model_id``.

    with LLMServer() as server:
        server.push(Reply("```python\\n...\\n```", prompt_tokens=100), HttpError(429, retry_after=0))
        ... LLMConfig(model="openai/test-model", api_base=server.url) ...
        assert server.requests[0].body["messages"][1]["content"] ...
"""

from __future__ import annotations

import json
import threading
import time
from collections import deque
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any


@dataclass(frozen=True)
class Reply:
    """A normal completion; streamed as SSE chunks when the request says ``stream: true``."""

    text: str
    prompt_tokens: int = 10
    completion_tokens: int = 20
    finish_reason: str = "stop"
    # A reasoning model's thoughts, sent as the message's ``reasoning_content`` (DeepSeek's field).
    reasoning: str = ""


@dataclass(frozen=True)
class HttpError:
    """An error status with an OpenAI-style JSON error body (429 carries ``Retry-After``)."""

    status: int
    message: str = "scripted error"
    retry_after: float | None = None


@dataclass(frozen=True)
class Hang:
    """Sleep before answering (longer than the client's timeout), then send ``then`` if still connected.
    With ``until_in_flight``, stop sleeping once that many completion requests have been in flight
    at once since the last reset: a gate that shows concurrency by the event, not by a clock."""

    seconds: float
    then: Reply | None = None
    until_in_flight: int | None = None


@dataclass(frozen=True)
class BadBody:
    """A 200 response whose body is not valid completion JSON (e.g. truncated mid-object)."""

    body: str = '{"id": "chatcmpl-x", "choices": [{"index": 0, "message": {"role": "assis'


@dataclass(frozen=True)
class CutStream:
    """A streamed reply that stops mid-way: some SSE chunks, then the connection closes (no [DONE])."""

    text: str


Scripted = Reply | HttpError | Hang | BadBody | CutStream


@dataclass(frozen=True)
class RecordedRequest:
    method: str
    path: str
    headers: dict[str, str]
    body: dict[str, Any] | None = None
    # time.monotonic() when the request arrived, to check how many were in flight at once.
    received_at: float = 0.0


@dataclass
class _State:
    script: deque[Scripted] = field(default_factory=deque)
    requests: list[RecordedRequest] = field(default_factory=list)
    lock: threading.Lock = field(default_factory=threading.Lock)
    # Set on stop so a Hang wakes at once instead of holding the test for its full duration.
    stopping: threading.Event = field(default_factory=threading.Event)
    model_id: str = "test-model"
    # Completion requests received and not yet answered (counted down before the first byte of the
    # answer goes out, so a client that sends its next request on reading a reply never overlaps).
    in_flight: int = 0
    max_in_flight: int = 0


def _completion(reply: Reply, model: str) -> dict[str, Any]:
    return {
        "id": "chatcmpl-test",
        "object": "chat.completion",
        "created": int(time.time()),
        "model": model,
        "choices": [
            {
                "index": 0,
                "message": {
                    "role": "assistant",
                    "content": reply.text,
                    **({"reasoning_content": reply.reasoning} if reply.reasoning else {}),
                },
                "finish_reason": reply.finish_reason,
            }
        ],
        "usage": {
            "prompt_tokens": reply.prompt_tokens,
            "completion_tokens": reply.completion_tokens,
            "total_tokens": reply.prompt_tokens + reply.completion_tokens,
        },
    }


def _chunks(reply: Reply, model: str, include_usage: bool) -> list[dict[str, Any]]:
    base = {
        "id": "chatcmpl-test",
        "object": "chat.completion.chunk",
        "created": int(time.time()),
        "model": model,
    }
    # Three content pieces are enough to prove the client reassembles deltas.
    step = max(1, len(reply.text) // 3 + 1)
    pieces = [reply.text[i : i + step] for i in range(0, len(reply.text), step)] or [""]
    out = [{**base, "choices": [{"index": 0, "delta": {"role": "assistant", "content": ""}}]}]
    out += [
        {**base, "choices": [{"index": 0, "delta": {"content": p}, "finish_reason": None}]} for p in pieces
    ]
    out.append({**base, "choices": [{"index": 0, "delta": {}, "finish_reason": reply.finish_reason}]})
    if include_usage:
        usage = _completion(reply, model)["usage"]
        out.append({**base, "choices": [], "usage": usage})
    return out


class _Handler(BaseHTTPRequestHandler):
    server: _Server
    protocol_version = "HTTP/1.1"
    _counted_down = False

    def log_message(self, format: str, *args: Any) -> None:
        """Silence the per-request stderr line; tests read ``requests`` instead."""

    def _send_json(self, status: int, payload: Any, extra: dict[str, str] | None = None) -> None:
        data = json.dumps(payload).encode()
        self._send_raw(status, data, "application/json", extra)

    def _send_raw(self, status: int, data: bytes, ctype: str, extra: dict[str, str] | None = None) -> None:
        self.send_response(status)
        self.send_header("Content-Type", ctype)
        self.send_header("Content-Length", str(len(data)))
        for k, v in (extra or {}).items():
            self.send_header(k, v)
        self.end_headers()
        self.wfile.write(data)

    def _record(self, body: dict[str, Any] | None) -> None:
        state = self.server.state
        with state.lock:
            headers = {
                k.lower(): v for k, v in self.headers.items()
            }  # HTTP header names are case-insensitive
            state.requests.append(RecordedRequest(self.command, self.path, headers, body, time.monotonic()))

    def do_GET(self) -> None:
        self._record(None)
        if self.path.rstrip("/") in ("/v1/models", "/models"):
            model = {"id": self.server.state.model_id, "object": "model", "owned_by": "tests"}
            self._send_json(200, {"object": "list", "data": [model]})
        else:
            self._send_json(404, {"error": {"message": f"no route {self.path}", "type": "not_found"}})

    def do_POST(self) -> None:
        raw = self.rfile.read(int(self.headers.get("Content-Length") or 0))
        try:
            body = json.loads(raw or b"{}")
        except json.JSONDecodeError:
            body = {"_unparsed": raw.decode(errors="replace")}
        self._record(body)
        if self.path.rstrip("/") not in ("/v1/chat/completions", "/chat/completions"):
            self._send_json(404, {"error": {"message": f"no route {self.path}", "type": "not_found"}})
            return
        state = self.server.state
        self._counted_down = False  # one handler serves every request of a keep-alive connection
        with state.lock:
            item = state.script.popleft() if state.script else None
            state.in_flight += 1
            state.max_in_flight = max(state.max_in_flight, state.in_flight)
        try:
            self._respond(item, body)
        finally:
            self._answering()

    def _answering(self) -> None:
        """The request stops counting as in flight (idempotent per request)."""
        if self._counted_down:
            return
        self._counted_down = True
        with self.server.state.lock:
            self.server.state.in_flight -= 1

    def _hold(self, hang: Hang) -> bool:
        """Sleep out ``hang``; True if the server is stopping."""
        state = self.server.state
        if hang.until_in_flight is None:
            return state.stopping.wait(hang.seconds)
        deadline = time.monotonic() + hang.seconds
        while time.monotonic() < deadline:
            with state.lock:
                if state.max_in_flight >= hang.until_in_flight:  # a latch, seen by every holder
                    return False
            if state.stopping.wait(0.01):
                return True
        return False

    def _respond(self, item: Scripted | None, body: dict[str, Any]) -> None:
        if item is None:
            # An unscripted request is a test bug; 400 is not retried so it shows up as one call.
            self._answering()
            self._send_json(400, {"error": {"message": "LLMServer script is empty", "type": "test_error"}})
            return
        model = str(body.get("model", self.server.state.model_id))
        if isinstance(item, Hang):
            if self._hold(item) or item.then is None:
                self.close_connection = True
                return
            item = item.then
        self._answering()
        if isinstance(item, HttpError):
            extra = {} if item.retry_after is None else {"Retry-After": f"{item.retry_after:g}"}
            err = {"error": {"message": item.message, "type": "scripted", "code": str(item.status)}}
            self._send_json(item.status, err, extra)
        elif isinstance(item, BadBody):
            self._send_raw(200, item.body.encode(), "application/json")
        elif isinstance(item, CutStream):
            chunks = _chunks(Reply(item.text), model, include_usage=False)[:2]
            partial = "".join(f"data: {json.dumps(c)}\n\n" for c in chunks).encode()
            # Promise more bytes than are sent, then hang up: the client sees a broken stream.
            self.send_response(200)
            self.send_header("Content-Type", "text/event-stream")
            self.send_header("Content-Length", str(len(partial) + 1000))
            self.end_headers()
            self.wfile.write(partial)
            self.wfile.flush()
            self.close_connection = True
        elif body.get("stream"):
            include_usage = bool((body.get("stream_options") or {}).get("include_usage"))
            sse = "".join(f"data: {json.dumps(c)}\n\n" for c in _chunks(item, model, include_usage))
            self._send_raw(200, (sse + "data: [DONE]\n\n").encode(), "text/event-stream")
        else:
            self._send_json(200, _completion(item, model))


class _Server(ThreadingHTTPServer):
    daemon_threads = True
    # Do not join handler threads on close: a client that gave up on a Hang must not block stop().
    block_on_close = False

    def __init__(self, state: _State) -> None:
        super().__init__(("127.0.0.1", 0), _Handler)
        self.state = state


class LLMServer:
    """Start with :meth:`start` (or ``with``); ``url`` is the ``api_base`` to give litellm."""

    def __init__(self, model_id: str = "test-model") -> None:
        self._state = _State(model_id=model_id)
        self._server: _Server | None = None
        self._thread: threading.Thread | None = None

    @property
    def url(self) -> str:
        if self._server is None:
            raise RuntimeError("LLMServer is not started")
        return f"http://127.0.0.1:{self._server.server_address[1]}/v1"

    @property
    def requests(self) -> list[RecordedRequest]:
        """Requests received so far, oldest first (a copy)."""
        with self._state.lock:
            return list(self._state.requests)

    @property
    def completions(self) -> list[RecordedRequest]:
        return [r for r in self.requests if r.method == "POST"]

    @property
    def max_in_flight(self) -> int:
        """The most completion requests the server held unanswered at one time."""
        with self._state.lock:
            return self._state.max_in_flight

    @property
    def pending(self) -> int:
        """Scripted responses not consumed yet."""
        with self._state.lock:
            return len(self._state.script)

    def push(self, *items: Scripted) -> None:
        with self._state.lock:
            self._state.script.extend(items)

    def reset(self) -> None:
        """Forget the script and the recorded requests (between tests sharing one server)."""
        with self._state.lock:
            self._state.script.clear()
            self._state.requests.clear()
            self._state.max_in_flight = self._state.in_flight

    def start(self) -> LLMServer:
        if self._server is not None:
            return self
        self._state.stopping.clear()
        self._server = _Server(self._state)
        self._thread = threading.Thread(
            target=self._server.serve_forever, kwargs={"poll_interval": 0.05}, name="llm-server", daemon=True
        )
        self._thread.start()
        return self

    def stop(self) -> None:
        if self._server is None:
            return
        self._state.stopping.set()
        self._server.shutdown()
        self._server.server_close()
        if self._thread is not None:
            self._thread.join(timeout=5)
        self._server = None
        self._thread = None

    def __enter__(self) -> LLMServer:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()
