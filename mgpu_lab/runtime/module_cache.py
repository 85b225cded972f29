"""Loads a cubin into the current CUDA context and prepares its launch configuration."""

from __future__ import annotations

import ctypes
import functools
from typing import Any

from ..compiler.compiled_kernel import CompiledKernel
from .device import check, current_device, max_dynamic_smem_bytes

_DEFAULT_DYNAMIC_SMEM_LIMIT = 48 * 1024  # above this the function attribute must be raised


class LoadedFunction:
    """A CUfunction with its grid, block, cluster and smem baked in."""

    def __init__(self, compiled: CompiledKernel):
        from cuda.bindings import driver

        from .launcher import check_smem_fits

        self._driver = driver
        self.module = check(driver.cuModuleLoadData(compiled.cubin), f"loading {compiled.name}'s cubin")
        self.function = check(driver.cuModuleGetFunction(self.module, compiled.name.encode()),
                              f"cuModuleGetFunction({compiled.name})")
        limit = max_dynamic_smem_bytes(current_device())
        check_smem_fits(compiled, limit)
        self.smem = compiled.dynamic_smem_bytes
        if self.smem > _DEFAULT_DYNAMIC_SMEM_LIMIT:
            attr = driver.CUfunction_attribute.CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES
            check(driver.cuFuncSetAttribute(self.function, attr, self.smem), "raising the dynamic smem limit")
        self.grid, self.block = compiled.grid, compiled.block
        self.handle = int(self.function)
        self.config = None
        if compiled.cluster != (1, 1, 1):
            self.config = self._cluster_config(compiled)
        # Kernels whose parameters are all pointers launch through CuPy's Cython path, the same
        # one a RawKernel takes; TMA descriptors (128-byte by-value) and clusters take ours.
        self.cupy_function = None
        if self.config is None and all(p.kind != "tma" for p in compiled.params):
            import cupy

            self._cupy_module = cupy.cuda.function.Module()
            self._cupy_module.load(compiled.cubin)
            self.cupy_function = self._cupy_module.get_function(compiled.name)
            if self.smem > _DEFAULT_DYNAMIC_SMEM_LIMIT:
                attr = driver.CUfunction_attribute.CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES
                check(driver.cuFuncSetAttribute(driver.CUfunction(self.cupy_function.ptr), attr, self.smem),
                      "raising the dynamic smem limit")

    def _cluster_config(self, compiled: CompiledKernel) -> Any:
        driver = self._driver
        config = driver.CUlaunchConfig()
        config.gridDimX, config.gridDimY, config.gridDimZ = compiled.grid
        config.blockDimX, config.blockDimY, config.blockDimZ = compiled.block
        config.sharedMemBytes = self.smem
        attr = driver.CUlaunchAttribute()
        attr.id = driver.CUlaunchAttributeID.CU_LAUNCH_ATTRIBUTE_CLUSTER_DIMENSION
        attr.value.clusterDim.x, attr.value.clusterDim.y, attr.value.clusterDim.z = compiled.cluster
        config.attrs = [attr]
        config.numAttrs = 1
        return config

    def launch(self, stream: int, argv_address: int) -> None:
        if self.config is None:
            # ctypes straight into libcuda: a third of cuda-bindings' per-call cost.
            err = _cu_launch_kernel()(self.handle, *self.grid, *self.block, self.smem, stream, argv_address, None)
        else:
            self.config.hStream = stream
            (err,) = self._driver.cuLaunchKernelEx(self.config, self.function, argv_address, 0)
        if err:
            check((self._driver.CUresult(int(err)),), "cuLaunchKernel")


@functools.cache
def _cu_launch_kernel() -> Any:
    lib = ctypes.CDLL("libcuda.so.1")
    fn = lib.cuLaunchKernel
    u = ctypes.c_uint
    fn.argtypes = [ctypes.c_void_p, u, u, u, u, u, u, u, ctypes.c_void_p, ctypes.c_void_p, ctypes.c_void_p]
    fn.restype = ctypes.c_int
    return fn


def load_function(compiled: CompiledKernel) -> LoadedFunction:
    """Load `compiled` into the current context (the Launcher caches one per context)."""
    return LoadedFunction(compiled)
