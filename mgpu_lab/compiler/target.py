"""Which GPU architecture to compile for."""

from __future__ import annotations

import functools


def arch_for_capability(major: int, minor: int) -> str:
    """sm_XY, with the 'a' suffix from Hopper on (wgmma and setmaxnreg need sm_90a)."""
    return f"sm_{major}{minor}" + ("a" if major >= 9 else "")


@functools.cache
def device_capability() -> tuple[int, int] | None:
    """Compute capability of the current CUDA device, or None when there is no usable GPU."""
    try:
        from cuda.bindings import driver
    except ImportError:
        return None
    try:
        (err,) = driver.cuInit(0)
    except Exception:  # noqa: BLE001 - no libcuda.so on this machine: no GPU
        return None
    if err != driver.CUresult.CUDA_SUCCESS:
        return None
    err, dev = driver.cuCtxGetDevice()
    if err != driver.CUresult.CUDA_SUCCESS:
        err, dev = driver.cuDeviceGet(0)
        if err != driver.CUresult.CUDA_SUCCESS:
            return None
    attr = driver.CUdevice_attribute
    _, major = driver.cuDeviceGetAttribute(attr.CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MAJOR, dev)
    _, minor = driver.cuDeviceGetAttribute(attr.CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MINOR, dev)
    return int(major), int(minor)


def default_target() -> str:
    """The current device's architecture, or sm_90a (Hopper) when there is no GPU."""
    cap = device_capability()
    return arch_for_capability(*cap) if cap else "sm_90a"
