"""Byte-level messages between the evaluation processes, with no pickle on any trusted side.

Two links use this module:

* supervisor <-> worker: a socketpair; each frame is a JSON header plus an optional blob of raw
  tensor bytes. The supervisor decodes the worker's tensors from (dtype, shape, bytes) itself, so
  a hostile worker can send wrong numbers but never objects or code.
* supervisor -> sandbox: one JSON result signed with HMAC-SHA256 under a per-evaluation key that
  only the sandbox and the supervisor hold (see :mod:`evokernel.evaluation.harness` for why the
  worker cannot learn it). An unsigned or mis-signed result is never believed.
"""

from __future__ import annotations

import hashlib
import hmac
import json
import socket
import struct
from typing import Any

import torch

# A header is a few KB of facts; 1 MiB bounds what a hostile worker can make the supervisor parse.
MAX_HEADER_BYTES = 1 << 20
# The largest bundled output is 128 MiB (softmax 8192 x 4096 fp32); 16 GiB bounds a runaway worker.
MAX_BLOB_BYTES = 16 << 30
_LEN = struct.Struct("<IQ")


class ChannelError(Exception):
    """The peer closed the link, timed out or broke the framing."""


def send(sock: socket.socket, header: dict[str, Any], blob: bytes | memoryview = b"") -> None:
    head = json.dumps(header).encode()
    sock.sendall(_LEN.pack(len(head), len(blob)) + head)
    if len(blob):
        sock.sendall(blob)


def recv(sock: socket.socket) -> tuple[dict[str, Any], bytearray]:
    """One frame; raises :class:`ChannelError` on EOF, oversize or malformed headers and lets
    ``TimeoutError`` (from the socket's timeout) through for the caller to classify."""
    n_head, n_blob = _LEN.unpack(_recv_exact(sock, _LEN.size))
    if n_head > MAX_HEADER_BYTES or n_blob > MAX_BLOB_BYTES:
        raise ChannelError(f"oversized frame ({n_head} header bytes, {n_blob} blob bytes)")
    try:
        header = json.loads(bytes(_recv_exact(sock, n_head)))
    except ValueError as exc:
        raise ChannelError(f"malformed header: {exc}") from exc
    if not isinstance(header, dict):
        raise ChannelError("header is not a JSON object")
    return header, _recv_exact(sock, n_blob)


def _recv_exact(sock: socket.socket, n: int) -> bytearray:
    buf = bytearray(n)
    view = memoryview(buf)
    got = 0
    while got < n:
        k = sock.recv_into(view[got:], min(n - got, 1 << 24))
        if k == 0:
            raise ChannelError("peer closed the connection")
        got += k
    return buf


def encode_tensors(values: list[Any]) -> tuple[list[dict[str, Any]], bytes]:
    """(per-value metadata, concatenated raw bytes). Tensors are described by the worker's view of
    them: a tensor subclass is reported by name and its data is not sent."""
    meta: list[dict[str, Any]] = []
    chunks: list[bytes] = []
    for v in values:
        if isinstance(v, torch.Tensor) and type(v) is not torch.Tensor:
            # A subclass may compute lazily or lie about its values: report it, send nothing.
            meta.append({"kind": "tensor", "plain": False, "type": type(v).__name__, "nbytes": 0})
        elif isinstance(v, torch.Tensor):
            t = v.detach()
            data = t.contiguous().cpu().reshape(-1).view(torch.uint8).numpy().tobytes()
            meta.append(
                {
                    "kind": "tensor",
                    "plain": True,
                    "type": "Tensor",
                    "dtype": str(t.dtype).removeprefix("torch."),
                    "shape": list(t.shape),
                    "device": str(t.device),
                    "nbytes": len(data),
                }
            )
            chunks.append(data)
        elif v is None or isinstance(v, bool | int | float | str):
            meta.append({"kind": "value", "value": v})
        else:
            meta.append({"kind": "other", "type": type(v).__name__})
    return meta, b"".join(chunks)


def decode_tensors(meta: list[dict[str, Any]], blob: bytearray) -> list[Any]:
    """Inverse of :func:`encode_tensors`; a tensor becomes a plain CPU tensor, anything that was not
    a tensor or a simple value becomes a :class:`Foreign` marker that never compares equal."""
    out: list[Any] = []
    offset = 0
    for m in meta:
        kind = m.get("kind")
        if kind == "tensor" and not m.get("plain"):
            out.append(Foreign(str(m.get("type"))))
        elif kind == "tensor":
            dtype = getattr(torch, str(m["dtype"]), None)
            nbytes = int(m["nbytes"])
            if not isinstance(dtype, torch.dtype) or offset + nbytes > len(blob):
                raise ChannelError(f"bad tensor description {m!r}")
            raw = torch.frombuffer(blob, dtype=torch.uint8, count=nbytes, offset=offset) if nbytes else None
            shape = [int(x) for x in m["shape"]]
            t = raw.view(dtype).reshape(shape) if raw is not None else torch.empty(shape, dtype=dtype)
            offset += nbytes
            out.append(t)
        elif kind == "value":
            out.append(m.get("value"))
        else:
            out.append(Foreign(str(m.get("type"))))
    return out


class Foreign:
    """Stands in for an output the worker could not send as a plain tensor (a subclass, a module)."""

    def __init__(self, type_name: str) -> None:
        self.type_name = type_name

    def __eq__(self, other: object) -> bool:
        return False

    def __hash__(self) -> int:
        return id(self)


def sign(key: bytes, payload: bytes) -> str:
    return hmac.new(key, payload, hashlib.sha256).hexdigest()


def verify_signed(key: bytes, payload: bytes, signature: str) -> bool:
    return hmac.compare_digest(sign(key, payload), signature)
