"""The worker -> supervisor tensor channel: bytes everywhere, CUDA IPC handles on a GPU, and every
description from the (untrusted) worker checked before anything acts on it."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
import torch

from evokernel.evaluation.channel import (
    ChannelError,
    Foreign,
    RefusedDescription,
    SharingError,
    decode_tensors,
    encode_tensors,
    open_shared,
)

CUDA0 = torch.device("cuda", 0)


def well_formed(**change: Any) -> dict[str, Any]:
    """An IPC description shaped like torch's for a cudaMalloc block (the handle itself forged)."""
    ipc = {
        "device": 0,
        "handle": (b"\x02c" + os.urandom(64)).hex(),
        "storage_bytes": 4096,
        "storage_offset": 0,
        "counter": f"/torch_{os.getpid()}_1_0".encode().hex(),
        "counter_offset": 0,
        "event": "",
        "event_sync": False,
        "tensor_offset": 0,
    }
    return {**ipc, **change}


def test_bytes_round_trip_keeps_values_and_reports_subclasses() -> None:
    class Lazy(torch.Tensor):
        pass

    values: list[Any] = [
        torch.arange(6, dtype=torch.float32).reshape(2, 3),
        torch.empty(0),
        3,
        torch.ones(2).as_subclass(Lazy),
    ]
    meta, blob = encode_tensors(values, shared=[])  # no CUDA tensors: everything goes as bytes
    assert all("ipc" not in m for m in meta)
    got = decode_tensors(meta, bytearray(blob))
    assert torch.equal(got[0], values[0]) and got[1].shape == (0,) and got[2] == 3
    assert isinstance(got[3], Foreign) and got[3].type_name == "Lazy"


def test_a_description_past_the_blob_is_refused() -> None:
    meta, blob = encode_tensors([torch.ones(4)])
    meta[0]["nbytes"] = 1 << 20
    with pytest.raises(ChannelError, match="bad tensor description"):
        decode_tensors(meta, bytearray(blob))


def test_an_ipc_handle_is_refused_where_none_was_asked_for() -> None:
    meta = [
        {
            "kind": "tensor",
            "plain": True,
            "dtype": "float32",
            "shape": [4],
            "nbytes": 16,
            "ipc": well_formed(),
        }
    ]
    with pytest.raises(ChannelError, match="none was asked for"):
        decode_tensors(meta, bytearray(), device=torch.device("cpu"))


@pytest.mark.parametrize(
    "change",
    [
        {"handle": (b"\x02e" + bytes(64)).hex()},  # an expandable segment: imports a named pid's fds
        {"handle": bytes(64).hex()},  # no version and type prefix
        {"counter": b"/etc/passwd".hex()},  # not one of torch's counter files
        {"counter_offset": 10_000},  # torch would decrement past the counter file, unchecked
        {"tensor_offset": 4000},  # past the shared storage
        {"event_sync": True},  # an event to wait on, but no event handle
        {"device": 1},  # another GPU than the supervisor's
        {"tensor_offset": -8},  # before the shared storage
    ],
    ids=[
        "expandable",
        "unprefixed",
        "counter-name",
        "counter-slot",
        "past-storage",
        "no-event",
        "device",
        "negative-offset",
    ],
)
def test_forged_ipc_descriptions_fail_before_any_cuda_call(change: dict[str, Any]) -> None:
    # Runs on a CPU machine too: the checks come before torch touches CUDA. There, the driver would
    # refuse a description too, but with the plain SharingError: only the subclass proves the
    # description was stopped by evokernel's own checks.
    with pytest.raises(RefusedDescription):
        open_shared(well_formed(**change), nbytes=256, device=CUDA0)


def test_a_well_formed_description_passes_the_checks_and_reaches_cuda() -> None:
    # The control of the case above: unchanged, the description passes the checks and fails in
    # torch's CUDA call (no CUDA here). With a GPU the child-process test below checks the same.
    if torch.cuda.is_available():
        pytest.skip("a forged handle may crash the driver: the child-process test below covers it")
    with pytest.raises(SharingError) as info:
        open_shared(well_formed(), nbytes=256, device=CUDA0)
    assert not isinstance(info.value, RefusedDescription)


def test_a_malformed_ipc_description_breaks_the_protocol() -> None:
    with pytest.raises(ChannelError) as info:
        open_shared({"handle": "zz"}, nbytes=16, device=CUDA0)
    assert not isinstance(info.value, SharingError)


@pytest.mark.gpu
@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA GPU")
def test_a_forged_but_well_formed_handle_never_yields_data() -> None:
    # The driver may segfault on a forged handle (it did on the H100 node, driver 580), so it is
    # opened in a child: it must end in SharingError or die; it must never return bytes. In an
    # evaluation a supervisor that dies has no signed result, so the verdict is ``crashed``.
    code = (
        "import torch, tests.core.test_channel as t\n"
        "from evokernel.evaluation.channel import RefusedDescription, SharingError, open_shared\n"
        "try:\n"
        "    open_shared(t.well_formed(), nbytes=256, device=t.CUDA0)\n"
        "    print('OPENED')\n"
        "except RefusedDescription:\n"
        "    print('NEVER REACHED CUDA')\n"
        "except SharingError:\n"
        "    print('REFUSED', float(torch.ones(8, device=t.CUDA0).sum()))\n"
    )
    root = Path(__file__).resolve().parents[2]
    child = subprocess.run(
        [sys.executable, "-c", code], cwd=root, capture_output=True, text=True, timeout=120
    )
    assert "OPENED" not in child.stdout and "NEVER REACHED CUDA" not in child.stdout
    assert "REFUSED 8.0" in child.stdout or child.returncode < 0, child.stderr[-2000:]


@pytest.mark.gpu
@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA GPU")
def test_cuda_outputs_are_described_by_handles_when_asked() -> None:
    out = torch.arange(1024, dtype=torch.float32, device=CUDA0)
    kept: list[torch.Tensor] = []
    meta, blob = encode_tensors([out, out[::2]], shared=kept)
    assert blob == b"" and len(kept) == 2 and all("ipc" in m for m in meta)
    assert meta[1]["nbytes"] == 512 * 4  # the strided view travels as its contiguous copy
