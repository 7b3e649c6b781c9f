"""GPU facts for prompts: collection from device properties, nominal bandwidth, one-line format."""

from __future__ import annotations

from types import SimpleNamespace

import pytest
import torch

from evokernel.pool.hardware import dense_tflops, device_facts, format_hardware, nominal_bandwidth_gbps

# The values torch 2.x reports for an H100 SXM (torch.cuda.get_device_properties(0)).
H100 = SimpleNamespace(
    name="NVIDIA H100 80GB HBM3",
    major=9,
    minor=0,
    multi_processor_count=132,
    total_memory=85_029_158_912,
    shared_memory_per_block=49_152,
    shared_memory_per_block_optin=232_448,
    L2_cache_size=52_428_800,
)


def test_nominal_bandwidth_matches_the_most_specific_name() -> None:
    assert nominal_bandwidth_gbps("NVIDIA H100 80GB HBM3") == 3350.0
    assert nominal_bandwidth_gbps("NVIDIA H100 PCIe") == 2000.0
    assert nominal_bandwidth_gbps("NVIDIA H200") == 4800.0
    assert nominal_bandwidth_gbps("NVIDIA A100-SXM4-80GB") == 2039.0
    assert nominal_bandwidth_gbps("NVIDIA A100-PCIE-40GB") == 1555.0
    assert nominal_bandwidth_gbps("Some Future Accelerator") is None


def test_a_gh200_is_not_read_as_the_h200_it_contains() -> None:
    # "GH200" contains "H200": the longest matching name wins, whatever the table's order.
    assert nominal_bandwidth_gbps("NVIDIA GH200 480GB") == 4000.0
    assert nominal_bandwidth_gbps("NVIDIA H200") == 4800.0
    assert nominal_bandwidth_gbps("NVIDIA L40S") == 864.0
    assert nominal_bandwidth_gbps("NVIDIA L4") == 300.0


def test_dense_peaks_per_dtype() -> None:
    assert dense_tflops("NVIDIA H200", "float16") == 989.0
    assert dense_tflops("NVIDIA H200", "float32") == 67.0  # CUDA cores: the evaluator turns TF32 off
    assert dense_tflops("NVIDIA H100 PCIe", "bfloat16") == 756.0
    assert dense_tflops("NVIDIA A100-SXM4-80GB", "float16") == 312.0
    assert dense_tflops("NVIDIA T4", "bfloat16") is None
    assert dense_tflops("Some Future Accelerator", "float16") is None


def test_h100_facts_format_as_one_line() -> None:
    facts = device_facts(H100)
    assert facts == {
        "name": "NVIDIA H100 80GB HBM3",
        "compute_capability": "9.0",
        "sm_count": 132,
        "memory_gib": 79,
        "shared_memory_per_block_kib": 227,
        "l2_cache_mib": 50,
        "memory_bandwidth_gbps": 3350.0,
    }
    assert format_hardware(facts) == (
        "NVIDIA H100 80GB HBM3: compute capability 9.0 (sm_90), 132 SMs, 79 GiB memory, "
        "3350 GB/s memory bandwidth (nominal), 227 KiB shared memory per block, 50 MiB L2 cache"
    )


def test_partial_and_extra_facts() -> None:
    assert (
        format_hardware({"name": "CPU (Triton interpreter)", "cores": 2})
        == "CPU (Triton interpreter): cores: 2"
    )
    assert format_hardware({}) == "unknown device"
    unknown_gpu = SimpleNamespace(**{**vars(H100), "name": "Prototype X", "L2_cache_size": 0})
    facts = device_facts(unknown_gpu)
    assert "memory_bandwidth_gbps" not in facts and "l2_cache_mib" not in facts
    assert "bandwidth" not in format_hardware(facts)


@pytest.mark.gpu
@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA GPU")
def test_facts_of_the_real_gpu() -> None:
    facts = device_facts(torch.cuda.get_device_properties(0))
    assert facts["sm_count"] > 0 and facts["shared_memory_per_block_kib"] >= 48
    line = format_hardware(facts)
    assert line.startswith(torch.cuda.get_device_name(0)) and "SMs" in line
