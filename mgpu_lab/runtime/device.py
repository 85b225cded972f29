"""Queries of the current CUDA device (None when there is no GPU)."""

from __future__ import annotations

import functools

from ..compiler.target import device_capability
from .portable import cuda_check, device_smem_limit


def has_gpu() -> bool:
    return device_capability() is not None


def current_device() -> int:
    import cupy

    return cupy.cuda.runtime.getDevice()


@functools.cache
def _smem_limit(dev: int) -> int:
    return device_smem_limit(dev)


def max_dynamic_smem_bytes(dev: int | None = None) -> int | None:
    """The per-block opt-in shared-memory limit of the device, or None without a GPU."""
    if not has_gpu():
        return None
    return _smem_limit(current_device() if dev is None else dev)


def sm_count(dev: int | None = None) -> int | None:
    """Multiprocessors on the device, or None without a GPU."""
    if not has_gpu():
        return None
    from cuda.bindings import driver

    attr = driver.CUdevice_attribute.CU_DEVICE_ATTRIBUTE_MULTIPROCESSOR_COUNT
    return int(cuda_check(driver.cuDeviceGetAttribute(attr, current_device() if dev is None else dev),
                          "cuDeviceGetAttribute"))
