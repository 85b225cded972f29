"""Queries of the current CUDA device (None when there is no GPU)."""

from __future__ import annotations

import functools

from ..compiler.target import device_capability


def check(result: tuple, what: str):
    """Unpack a cuda-bindings result tuple, raising RuntimeError with the CUDA error name."""
    from cuda.bindings import driver

    err, *rest = result
    if err != driver.CUresult.CUDA_SUCCESS:
        _, name = driver.cuGetErrorName(err)
        _, text = driver.cuGetErrorString(err)
        name = name.decode() if isinstance(name, bytes) else name
        text = text.decode() if isinstance(text, bytes) else text
        raise RuntimeError(f"{what} failed: {name}: {text}")
    if not rest:
        return None
    return rest[0] if len(rest) == 1 else tuple(rest)


def has_gpu() -> bool:
    return device_capability() is not None


@functools.cache
def _attribute(dev: int, name: str) -> int:
    from cuda.bindings import driver

    attr = getattr(driver.CUdevice_attribute, name)
    return int(check(driver.cuDeviceGetAttribute(attr, dev), f"cuDeviceGetAttribute({name})"))


def current_device() -> int:
    import cupy

    return cupy.cuda.runtime.getDevice()


def max_dynamic_smem_bytes(dev: int | None = None) -> int | None:
    """The per-block opt-in shared-memory limit of the device, or None without a GPU."""
    if not has_gpu():
        return None
    dev = current_device() if dev is None else dev
    return _attribute(dev, "CU_DEVICE_ATTRIBUTE_MAX_SHARED_MEMORY_PER_BLOCK_OPTIN")


def sm_count(dev: int | None = None) -> int | None:
    if not has_gpu():
        return None
    dev = current_device() if dev is None else dev
    return _attribute(dev, "CU_DEVICE_ATTRIBUTE_MULTIPROCESSOR_COUNT")
