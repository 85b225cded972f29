"""configs' device queries (the GPU's name and SM count, which key the model's calibration and
ranking cache) follow the current CUDA device, asked of the driver once per device: a process may
hold GPUs of unlike models. Here the driver is a stand-in with two devices."""

from __future__ import annotations

import sys
from types import SimpleNamespace

from mgpu_lab.compiler import target
from mgpu_lab.kernels.gemm import configs

REAL_DEVICE_NAME = configs.device_name  # (conftest pins configs.device_name for CPU tests)
NAMES = {0: "NVIDIA H200", 1: "NVIDIA H100 PCIe"}
SMS = {0: 132, 1: 114}


def _driver(current: list[int], calls: list[str]) -> SimpleNamespace:
    success = object()

    def get_name(length, dev):
        calls.append(f"name {int(dev)}")
        return success, NAMES[int(dev)].encode() + b"\0" * (length - len(NAMES[int(dev)]))

    def get_attribute(attribute, dev):
        calls.append(f"sms {int(dev)}")
        return success, SMS[int(dev)]

    return SimpleNamespace(
        CUresult=SimpleNamespace(CUDA_SUCCESS=success), CUdevice=int,
        CUdevice_attribute=SimpleNamespace(CU_DEVICE_ATTRIBUTE_MULTIPROCESSOR_COUNT="sms"),
        cuCtxGetDevice=lambda: (success, current[0]), cuDeviceGet=lambda ordinal: (success, ordinal),
        cuDeviceGetName=get_name, cuDeviceGetAttribute=get_attribute)


def test_name_and_sm_count_follow_the_current_device(monkeypatch):
    current, calls = [0], []
    monkeypatch.setitem(sys.modules, "cuda.bindings", SimpleNamespace(driver=_driver(current, calls)))
    monkeypatch.setattr(target, "device_capability", lambda: (9, 0))
    monkeypatch.setattr(configs, "device_name", REAL_DEVICE_NAME)
    configs._device_name.cache_clear()
    configs._device_sms.cache_clear()
    try:
        assert (configs.device_name(), configs.device_sms()) == ("NVIDIA H200", 132)
        current[0] = 1
        assert (configs.device_name(), configs.device_sms()) == ("NVIDIA H100 PCIe", 114)
        current[0] = 0
        assert (configs.device_name(), configs.device_sms()) == ("NVIDIA H200", 132)
        assert sorted(calls) == ["name 0", "name 1", "sms 0", "sms 1"]  # once per device
    finally:
        configs._device_name.cache_clear()
        configs._device_sms.cache_clear()


def test_without_a_gpu_the_default_device(monkeypatch):
    monkeypatch.setattr(target, "device_capability", lambda: None)
    monkeypatch.setattr(configs, "device_name", REAL_DEVICE_NAME)
    assert configs.device_name() == configs.DEFAULT_DEVICE and configs.device_sms() == configs.SMS
