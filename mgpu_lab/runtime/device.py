"""Queries of the current CUDA device (None when there is no GPU)."""

from __future__ import annotations

import functools

from ..arguments import count
from ..compiler.target import device_capability
from .portable import cluster_launch_config, cuda_check, device_smem_limit


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


# A kernel that does nothing: cuOccupancyMaxActiveClusters needs one, and its answer depends only
# on the block's resources (threads, shared memory), which the query's launch config sets.
_STAND_IN_PTX = b"""
.version 8.0
.target sm_90a
.address_size 64
.visible .entry stand_in() { ret; }
\0"""


@functools.cache
def _stand_in_function(dev: int):
    from cuda.bindings import driver

    import cupy

    with cupy.cuda.Device(dev):
        cupy.cuda.runtime.free(0)  # a current context on dev
        module = cuda_check(driver.cuModuleLoadData(_STAND_IN_PTX), "loading the occupancy stand-in kernel")
        function = cuda_check(driver.cuModuleGetFunction(module, b"stand_in"), "cuModuleGetFunction(stand_in)")
        for key, value in ((driver.CUfunction_attribute.CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES,
                            device_smem_limit(dev)),
                           (driver.CUfunction_attribute.CU_FUNC_ATTRIBUTE_NON_PORTABLE_CLUSTER_SIZE_ALLOWED, 1)):
            cuda_check(driver.cuFuncSetAttribute(function, key, value), "cuFuncSetAttribute")
    return module, function


def resident_clusters(size: int, smem_bytes: int, threads: int = 384, dev: int | None = None) -> int | None:
    """How many clusters of `size` blocks (each `threads` threads and `smem_bytes` of dynamic
    shared memory) the device keeps resident at once (cuOccupancyMaxActiveClusters), or None
    without a GPU. A cluster never straddles a GPC, so for clusters of 3+ this is less than
    SMs / size: an H200 holds 39 clusters of 3 (117 of its 132 SMs)."""
    where = "resident_clusters"
    size = count("size", size, minimum=1, maximum=16, expected="an int from 1 to 16 (blocks per cluster)",
                 where=where)
    smem_bytes = count("smem_bytes", smem_bytes, minimum=0, expected="an int >= 0 (dynamic shared memory per block)",
                       where=where)
    threads = count("threads", threads, minimum=1, maximum=1024, expected="an int from 1 to 1024 (threads per block)",
                    where=where)
    if not has_gpu():
        return None
    from cuda.bindings import driver

    import cupy

    dev = current_device() if dev is None else dev
    _, function = _stand_in_function(dev)
    config = cluster_launch_config(driver, (size * 256, 1, 1), (threads, 1, 1), smem_bytes, (size, 1, 1))
    with cupy.cuda.Device(dev):
        return int(cuda_check(driver.cuOccupancyMaxActiveClusters(function, config),
                              f"cuOccupancyMaxActiveClusters(clusters of {size})"))
