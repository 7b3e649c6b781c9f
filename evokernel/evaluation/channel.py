"""Byte-level messages between the evaluation processes, with no pickle on any trusted side.

Two links use this module:

* supervisor <-> worker: a socketpair; each frame is a JSON header plus an optional blob of raw
  tensor bytes. The supervisor decodes the worker's tensors from (dtype, shape, bytes) itself, so
  a hostile worker can send wrong numbers but never objects or code.
  On a GPU the worker may instead describe a CUDA output by a CUDA IPC handle
  (:func:`share_cuda`); the supervisor maps it, copies the bytes into its own memory and lets the
  mapping go before it sends the next command (the worker keeps the tensor alive until then). A
  128 MiB output then costs a device-to-device copy instead of ~0.2 s of device -> host -> socket
  -> host -> device (H100, 2026-11-23). The worker can still only send numbers: the handle opens
  memory it allocated, never an object.
* supervisor -> sandbox: one JSON result signed with HMAC-SHA256 under a per-evaluation key that
  only the sandbox and the supervisor hold (see :mod:`evokernel.evaluation.harness` for why the
  worker cannot learn it). An unsigned or mis-signed result is never believed.
"""

from __future__ import annotations

import hashlib
import hmac
import json
import re
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


class SharingError(ChannelError):
    """A CUDA IPC description could not be opened (a forged handle, or IPC unavailable here, e.g.
    under expandable segments); the caller asks for the bytes instead."""


class RefusedDescription(SharingError):
    """A CUDA IPC description refused by this process's own checks, before any CUDA call saw it."""


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


def encode_tensors(
    values: list[Any], shared: list[torch.Tensor] | None = None
) -> tuple[list[dict[str, Any]], bytes]:
    """(per-value metadata, concatenated raw bytes). Tensors are described by the worker's view of
    them: a tensor subclass is reported by name and its data is not sent. With ``shared`` (a list
    the caller keeps alive until the peer has copied them), CUDA tensors travel as IPC handles and
    are appended to it; a tensor that cannot be shared is sent as bytes."""
    meta: list[dict[str, Any]] = []
    chunks: list[bytes] = []
    for v in values:
        if isinstance(v, torch.Tensor) and type(v) is not torch.Tensor:
            # A subclass may compute lazily or lie about its values: report it, send nothing.
            meta.append({"kind": "tensor", "plain": False, "type": type(v).__name__, "nbytes": 0})
        elif isinstance(v, torch.Tensor):
            t = v.detach().contiguous()
            entry = {
                "kind": "tensor",
                "plain": True,
                "type": "Tensor",
                "dtype": str(t.dtype).removeprefix("torch."),
                "shape": list(t.shape),
                "device": str(v.device),
                "nbytes": t.numel() * t.element_size(),
            }
            ipc = share_cuda(t) if shared is not None and t.is_cuda and t.numel() else None
            if ipc is not None and shared is not None:
                shared.append(t)
                entry["ipc"] = ipc
            else:
                chunks.append(t.cpu().reshape(-1).view(torch.uint8).numpy().tobytes())
            meta.append(entry)
        elif v is None or isinstance(v, bool | int | float | str):
            meta.append({"kind": "value", "value": v})
        else:
            meta.append({"kind": "other", "type": type(v).__name__})
    return meta, b"".join(chunks)


def decode_tensors(
    meta: list[dict[str, Any]], blob: bytearray, device: torch.device | None = None
) -> list[Any]:
    """Inverse of :func:`encode_tensors`; a tensor becomes a plain CPU tensor (a shared one: a
    copy on ``device``, required for those), anything that was not a tensor or a simple value
    becomes a :class:`Foreign` marker that never compares equal. Raises :class:`SharingError`
    when a handle does not open, :class:`ChannelError` for any other bad description."""
    out: list[Any] = []
    offset = 0
    for m in meta:
        kind = m.get("kind")
        if kind == "tensor" and not m.get("plain"):
            out.append(Foreign(str(m.get("type"))))
        elif kind == "tensor":
            dtype = getattr(torch, str(m["dtype"]), None)
            nbytes = int(m["nbytes"])
            shape = [int(x) for x in m["shape"]]
            if not isinstance(dtype, torch.dtype) or nbytes < 0:
                raise ChannelError(f"bad tensor description {m!r}")
            if not nbytes:
                out.append(torch.empty(shape, dtype=dtype))
                continue
            if "ipc" in m:
                if device is None or device.type != "cuda":
                    raise ChannelError("a CUDA IPC handle where none was asked for")
                raw = open_shared(m["ipc"], nbytes, device)
            elif offset + nbytes > len(blob):
                raise ChannelError(f"bad tensor description {m!r}")
            else:
                raw = torch.frombuffer(blob, dtype=torch.uint8, count=nbytes, offset=offset)
                offset += nbytes
            out.append(raw.view(dtype).reshape(shape))
        elif kind == "value":
            out.append(m.get("value"))
        else:
            out.append(Foreign(str(m.get("type"))))
    return out


# CUDA IPC handles (cudaIpcMemHandle_t, cudaIpcEventHandle_t) are 64 bytes. torch's caching
# allocator prefixes a memory handle with its format version and a type byte: b"c" for a cudaMalloc
# block (the only type accepted here; b"e", an expandable segment, would have this process import
# descriptors from a pid the worker names). torch names its shared reference counters
# "/torch_<pid>_<random>_<n>" (ATen's NewProcessWideShmHandle).
_IPC_HANDLE_BYTES = 64
_CUDA_MALLOC_HANDLE = re.compile(rb"[\x01-\x09]c.{64}", re.DOTALL)
_REF_COUNTER_NAME = re.compile(rb"/torch_[0-9]+_[0-9]+_[0-9]+")
# Slots in one such counter file (CUDA_IPC_REF_COUNTER_FILE_SIZE in torch's CudaIPCTypes.h). torch
# decrements slot ``counter_offset`` unchecked when the mapping is released, so it is bounded here.
_REF_COUNTER_SLOTS = 10_000


def share_cuda(t: torch.Tensor) -> dict[str, Any] | None:
    """The CUDA IPC description of contiguous ``t``'s storage (torch.multiprocessing's own
    mechanism, without pickle), or None where the allocator cannot share it."""
    try:
        device, handle, size, offset, counter, counter_offset, event, event_sync = (
            t.untyped_storage()._share_cuda_()
        )
    except RuntimeError:
        return None
    return {
        "device": int(device),
        "handle": bytes(handle).hex(),
        "storage_bytes": int(size),
        "storage_offset": int(offset),
        "counter": bytes(counter).hex(),
        "counter_offset": int(counter_offset),
        "event": bytes(event).hex() if event else "",
        "event_sync": bool(event_sync),
        "tensor_offset": t.storage_offset() * t.element_size(),
    }


def open_shared(ipc: Any, nbytes: int, device: torch.device) -> torch.Tensor:
    """A uint8 copy on ``device`` of the ``nbytes`` a worker shared; the mapping is released
    before returning (its reference counter tells the worker's allocator it may reuse the block).
    Every field is checked before any CUDA call sees it: a description those checks refuse raises
    :class:`RefusedDescription`, one the driver refuses the plain :class:`SharingError`."""
    try:
        handle, counter = bytes.fromhex(ipc["handle"]), bytes.fromhex(ipc["counter"])
        event = bytes.fromhex(ipc["event"])
        size, offset = int(ipc["storage_bytes"]), int(ipc["storage_offset"])
        counter_offset, tensor_offset = int(ipc["counter_offset"]), int(ipc["tensor_offset"])
        event_sync, index = bool(ipc["event_sync"]), int(ipc["device"])
    except (KeyError, TypeError, ValueError) as exc:
        raise ChannelError(f"bad CUDA IPC description: {exc}") from exc
    if (
        not _CUDA_MALLOC_HANDLE.fullmatch(handle)
        or len(event) not in ((_IPC_HANDLE_BYTES,) if event_sync else (0, _IPC_HANDLE_BYTES))
        or not _REF_COUNTER_NAME.fullmatch(counter)
        or index != (device.index if device.index is not None else torch.cuda.current_device())
        or min(size, offset, counter_offset, tensor_offset) < 0
        or counter_offset >= _REF_COUNTER_SLOTS
        or tensor_offset + nbytes > size
    ):
        raise RefusedDescription("a CUDA IPC description this process does not open")
    try:
        storage = torch.UntypedStorage._new_shared_cuda(
            index, handle, size, offset, counter, counter_offset, event, event_sync
        )
        view = torch.empty(0, dtype=torch.uint8, device=device).set_(storage, tensor_offset, (nbytes,), (1,))
        copy = view.clone()
    except RuntimeError as exc:
        raise SharingError(f"CUDA IPC handle did not open: {exc}") from exc
    # Dropping the storage synchronises this stream before it releases the worker's block
    # (torch's StorageSharing), so the copy is complete before the worker may reuse it.
    del view, storage
    return copy


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
