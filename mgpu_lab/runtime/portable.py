"""The launcher core: argument checks, module loading, the launch. Self-contained on purpose.

This file imports only the standard library, numpy, CuPy and cuda-bindings, because
`mgpu_lab.exporter` copies its source verbatim into exported modules: the exported launcher is
the same tested code that `Kernel.__call__` runs. Keep it free of mgpu_lab imports.

A kernel is described by a plain dict (see `PortableLauncher.__init__`). The call path is lean:
modules load once per device, pointer-only kernels launch through CuPy's Cython `Function`
(the path a RawKernel takes), and kernels with TMA descriptors or clusters write preallocated
parameter slots and call `cuLaunchKernel(Ex)` directly.
"""

from __future__ import annotations

import ctypes
import functools
import threading
from typing import Any

import numpy as np

_SLOT_BYTES = 128  # a TMA descriptor, the largest parameter
_SLOT_WORDS = _SLOT_BYTES // 8
_DEFAULT_DYNAMIC_SMEM_LIMIT = 48 * 1024  # above this the function attribute must be raised
_ML_DTYPES = ("bfloat16", "float8_e4m3fn", "float8_e5m2")


class PortableLaunchError(ValueError):
    """Raised for bad kernel arguments when no error class is injected."""


def dtype_from_name(name: str) -> np.dtype:
    """numpy dtype for a name, with ml_dtypes for bfloat16 and float8."""
    if name in _ML_DTYPES:
        import ml_dtypes

        return np.dtype(getattr(ml_dtypes, name))
    return np.dtype(name)


# CuPy has no float8 types: such arrays live on the device as uint8 arrays of their bytes.
BYTES_ON_DEVICE = ("float8_e4m3fn", "float8_e5m2")


def device_dtype(name: str) -> np.dtype:
    """The dtype a CuPy array for a kernel array of dtype `name` has (uint8 for float8)."""
    return np.dtype(np.uint8) if name in BYTES_ON_DEVICE else dtype_from_name(name)


def cuda_check(result: tuple, what: str) -> Any:
    """Unpack a cuda-bindings result tuple, raising RuntimeError with the CUDA error name."""
    from cuda.bindings import driver

    err, *rest = result
    if err != driver.CUresult.CUDA_SUCCESS:
        _, name = driver.cuGetErrorName(err)
        name = name.decode() if isinstance(name, bytes) else name
        raise RuntimeError(f"{what} failed: {name}")
    if not rest:
        return None
    return rest[0] if len(rest) == 1 else tuple(rest)


@functools.cache
def _cu_launch_kernel() -> Any:
    lib = ctypes.CDLL("libcuda.so.1")
    fn = lib.cuLaunchKernel
    u = ctypes.c_uint
    fn.argtypes = [ctypes.c_void_p, u, u, u, u, u, u, u, ctypes.c_void_p, ctypes.c_void_p, ctypes.c_void_p]
    fn.restype = ctypes.c_int
    return fn


def device_smem_limit(device: int) -> int:
    """The device's per-block opt-in shared-memory limit, in bytes."""
    from cuda.bindings import driver

    attr = driver.CUdevice_attribute.CU_DEVICE_ATTRIBUTE_MAX_SHARED_MEMORY_PER_BLOCK_OPTIN
    return int(cuda_check(driver.cuDeviceGetAttribute(attr, device), "cuDeviceGetAttribute"))


class _ParamStorage(threading.local):
    """Per-thread parameter slots (64-byte aligned, as byval TMA descriptors need) and argv."""

    def __init__(self, count: int):
        raw = np.zeros(max(count, 1) * _SLOT_WORDS + 8, dtype=np.uint64)
        shift = (-raw.ctypes.data % 64) // 8
        self.raw = raw
        self.words = raw[shift: shift + max(count, 1) * _SLOT_WORDS]
        base = self.words.ctypes.data
        self.argv = np.array([base + i * _SLOT_BYTES for i in range(count)] or [0], dtype=np.uint64)
        self.argv_address = int(self.argv.ctypes.data)


class LoadedFunction:
    """The kernel loaded on one device, with its launch configuration baked in."""

    def __init__(self, spec: dict, device: int, resource_error: type[Exception]):
        import cupy
        from cuda.bindings import driver

        self._driver = driver
        name = spec["name"]
        total = spec["dynamic_smem"] + spec.get("static_smem", 0)
        limit = device_smem_limit(device)
        if total > limit:
            raise resource_error(
                f"smem: kernel {name} needs {total} bytes of shared memory ({spec['dynamic_smem']} dynamic "
                f"+ {spec.get('static_smem', 0)} static) but the device allows at most {limit} bytes per block")
        self.module = self._load(spec, driver)
        self.function = cuda_check(driver.cuModuleGetFunction(self.module, name.encode()),
                                   f"cuModuleGetFunction({name})")
        self.handle = int(self.function)
        self.smem = spec["dynamic_smem"]
        if self.smem > _DEFAULT_DYNAMIC_SMEM_LIMIT:
            attr = driver.CUfunction_attribute.CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES
            cuda_check(driver.cuFuncSetAttribute(self.function, attr, self.smem), "raising the dynamic smem limit")
        self.grid, self.block, cluster = tuple(spec["grid"]), tuple(spec["block"]), tuple(spec["cluster"])
        self.config = self._cluster_config(cluster) if cluster != (1, 1, 1) else None
        self.cupy_function = None
        if self.config is None and self._cubin_loaded and all(kind != "tma" for kind, _ in spec["params"]):
            # The same Cython launch path a CuPy RawKernel takes.
            self._cupy_module = cupy.cuda.function.Module()
            self._cupy_module.load(spec["cubin"])
            self.cupy_function = self._cupy_module.get_function(name)
            if self.smem > _DEFAULT_DYNAMIC_SMEM_LIMIT:
                attr = driver.CUfunction_attribute.CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES
                cuda_check(driver.cuFuncSetAttribute(driver.CUfunction(self.cupy_function.ptr), attr, self.smem),
                           "raising the dynamic smem limit")

    def _load(self, spec: dict, driver: Any) -> Any:
        err, module = driver.cuModuleLoadData(spec["cubin"])
        self._cubin_loaded = err == driver.CUresult.CUDA_SUCCESS
        if self._cubin_loaded:
            return module
        if spec.get("ptx") and err == driver.CUresult.CUDA_ERROR_NO_BINARY_FOR_GPU:
            # A newer GPU than the cubin's: let the driver compile the embedded PTX.
            return cuda_check(driver.cuModuleLoadData(spec["ptx"].encode() + b"\0"), f"JIT-loading {spec['name']}'s PTX")
        return cuda_check((err, module), f"loading {spec['name']}'s cubin")

    def _cluster_config(self, cluster: tuple) -> Any:
        driver = self._driver
        config = driver.CUlaunchConfig()
        config.gridDimX, config.gridDimY, config.gridDimZ = self.grid
        config.blockDimX, config.blockDimY, config.blockDimZ = self.block
        config.sharedMemBytes = self.smem
        attr = driver.CUlaunchAttribute()
        attr.id = driver.CUlaunchAttributeID.CU_LAUNCH_ATTRIBUTE_CLUSTER_DIMENSION
        attr.value.clusterDim.x, attr.value.clusterDim.y, attr.value.clusterDim.z = cluster
        config.attrs = [attr]
        config.numAttrs = 1
        return config

    def launch(self, stream: int, argv_address: int) -> None:
        if self.config is None:
            err = _cu_launch_kernel()(self.handle, *self.grid, *self.block, self.smem, stream, argv_address, None)
        else:
            self.config.hStream = stream
            (err,) = self._driver.cuLaunchKernelEx(self.config, self.function, argv_address, 0)
        if err:
            cuda_check((self._driver.CUresult(int(err)),), "cuLaunchKernel")


def _torch_view(x: Any, cupy: Any) -> Any:
    """A CuPy array over a CUDA torch tensor's memory, for dtypes DLPack cannot carry into
    CuPy (bfloat16, float8). None when `x` is not such a tensor."""
    if not (hasattr(x, "data_ptr") and hasattr(x, "element_size") and getattr(x, "is_cuda", False)):
        return None
    try:
        dtype = device_dtype(str(x.dtype).removeprefix("torch."))
    except (TypeError, AttributeError):
        return None
    if not x.is_contiguous():
        return None
    memory = cupy.cuda.UnownedMemory(x.data_ptr(), x.numel() * x.element_size(), x, device_id=x.device.index)
    return cupy.ndarray(tuple(x.shape), dtype, cupy.cuda.MemoryPointer(memory, 0))


def _describe(x: Any) -> str:
    return f"{type(x).__module__}.{type(x).__name__}"


class PortableLauncher:
    """Checks arguments and launches one kernel on CuPy's current stream.

    spec keys: name, grid, block, cluster, dynamic_smem, static_smem, inputs and outputs
    ([(shape, dtype name)]), params ([(kind, index)] with kind "array"|"tma"|"profile"),
    cubin (bytes), ptx (str, optional fallback), profile_words (words per block, or None).
    tma_encoder: object with encode(index, arrays) -> np.uint64[16], for "tma" params.
    """

    def __init__(self, spec: dict, *, error: type[Exception] = PortableLaunchError,
                 resource_error: type[Exception] = ValueError, tma_encoder: Any = None):
        import cupy

        self._cupy = cupy
        self._ndarray = cupy.ndarray
        self.spec = spec
        self._profiled = spec.get("profile_words") is not None
        self.name = spec["name"]
        self._error, self._resource_error = error, resource_error
        self.n_in = len(spec["inputs"])
        self.in_specs = [(tuple(s), device_dtype(d)) for s, d in spec["inputs"]]
        self.out_specs = [(tuple(s), device_dtype(d)) for s, d in spec["outputs"]]
        self._declared = [d for _, d in spec["inputs"]] + [d for _, d in spec["outputs"]]
        self.param_kinds = [tuple(p) for p in spec["params"]]
        self.num_blocks = int(np.prod(spec["grid"]))
        self._storage = _ParamStorage(len(self.param_kinds))
        self._functions: dict[int, LoadedFunction] = {}
        self._tma = tma_encoder
        self._profile_buffer = None
        self.last_profile = None

    # -- arguments -----------------------------------------------------------------------
    def _as_device_array(self, x: Any, position: int, what: str, spec: tuple) -> Any:
        cupy, err, name = self._cupy, self._error, self.name
        if not isinstance(x, cupy.ndarray):
            if isinstance(x, np.ndarray):
                raise err(f"{what} {position} of {name}: expected a device array (CuPy, or anything with "
                          f"DLPack / __cuda_array_interface__), got a host numpy.ndarray; move it with cupy.asarray(x)")
            try:
                x = cupy.from_dlpack(x) if hasattr(x, "__dlpack__") else cupy.asarray(x)
            except Exception as e:  # noqa: BLE001 - report any conversion failure the same way
                view = _torch_view(x, cupy)
                if view is None:
                    raise err(f"{what} {position} of {name}: expected a device array, got {_describe(x)} ({e})") from None
                x = view
        shape, dtype = spec
        if x.shape != shape:
            raise err(f"{what} {position} of {name}: expected shape {shape}, got {x.shape}")
        if x.dtype != dtype:
            declared = self._declared[position if what == "input" else self.n_in + position]
            note = f" (the bytes of {declared}: CuPy has no float8 type)" if declared in BYTES_ON_DEVICE else ""
            raise err(f"{what} {position} of {name}: expected dtype {dtype.name}{note}, got {x.dtype.name}")
        if not x.flags.c_contiguous:
            raise err(f"{what} {position} of {name}: expected a C-contiguous array, got strides {x.strides} for "
                      f"shape {x.shape}; pass cupy.ascontiguousarray(x)")
        if x.data.ptr % 16:
            raise err(f"{what} {position} of {name}: expected a 16-byte aligned array (kernels use 16-byte "
                      f"accesses), got address {x.data.ptr:#x}; pass a copy")
        device = cupy.cuda.runtime.getDevice()
        if x.device.id != device:
            raise err(f"{what} {position} of {name}: expected an array on the current device {device}, "
                      f"got one on device {x.device.id}")
        return x

    def _array(self, x: Any, position: int, what: str, spec: tuple, device: int) -> Any:
        # Fast path: a CuPy array that already matches in every respect; else check and explain.
        if type(x) is self._ndarray and x.shape == spec[0] and (x.dtype is spec[1] or x.dtype == spec[1]) \
                and x._c_contiguous:
            data = x.data
            if data.device_id == device and not data.ptr % 16:
                return x
        return self._as_device_array(x, position, what, spec)

    def _checked_arrays(self, args: tuple, out: Any, device: int) -> list[Any]:
        arrays = [self._array(x, i, "input", spec, device) for i, (x, spec) in enumerate(zip(args, self.in_specs))]
        if out is None:
            return arrays + [self._cupy.empty(shape, dtype) for shape, dtype in self.out_specs]
        outs = list(out) if isinstance(out, (tuple, list)) else [out]
        if len(outs) != len(self.out_specs):
            raise self._error(f"out of {self.name}: expected {len(self.out_specs)} output arrays, got {len(outs)}")
        return arrays + [self._array(o, i, "output", spec, device)
                         for i, (o, spec) in enumerate(zip(outs, self.out_specs))]

    # -- launching -----------------------------------------------------------------------
    def _function(self, device: int) -> LoadedFunction:
        # CuPy (and torch) run on each device's primary context, so a device id names the
        # context a module was loaded into.
        fn = self._functions.get(device)
        if fn is None:
            self._cupy.cuda.runtime.free(0)  # makes sure the primary context exists and is current
            fn = self._functions[device] = LoadedFunction(self.spec, device, self._resource_error)
        return fn

    def __call__(self, *args: Any, out: Any = None, stream: Any = None) -> Any:
        if len(args) != self.n_in:
            raise self._error(f"{self.name} takes {self.n_in} input array(s) "
                              f"{[f'{s}:{d.name}' for s, d in self.in_specs]}, got {len(args)}")
        device = self._cupy.cuda.runtime.getDevice()
        return self._launch(self._checked_arrays(args, out, device), device, stream)

    def launch_unchecked(self, *arrays: Any, stream: Any = None) -> None:
        """Launch on CuPy arrays (inputs then outputs) without any argument check.

        For hot loops whose arguments were validated once by a normal call: a wrong shape,
        dtype, device or alignment here is undefined behaviour on the GPU, not an error."""
        self._launch(list(arrays), self._cupy.cuda.runtime.getDevice(), stream)

    def _launch(self, arrays: list, device: int, stream: Any) -> Any:
        cupy = self._cupy
        fn = self._function(device)
        profiled = self._profiled
        if fn.cupy_function is not None:
            params = arrays + [self._new_profile_buffer()] if profiled else arrays
            if stream is not None and not hasattr(stream, "ptr"):
                stream = cupy.cuda.ExternalStream(stream)
            fn.cupy_function(fn.grid, fn.block, params, shared_mem=fn.smem, stream=stream)
        else:
            storage = self._storage
            words = storage.words
            for slot, (kind, index) in enumerate(self.param_kinds):
                if kind == "array":
                    words[slot * _SLOT_WORDS] = arrays[index].data.ptr
                elif kind == "tma":
                    words[slot * _SLOT_WORDS: (slot + 1) * _SLOT_WORDS] = self._tma.encode(index, arrays)
                else:
                    words[slot * _SLOT_WORDS] = self._new_profile_buffer().data.ptr
            handle = cupy.cuda.get_current_stream().ptr if stream is None else getattr(stream, "ptr", stream)
            fn.launch(handle, storage.argv_address)
        if profiled:
            self.last_profile = self._profile_buffer
        outs = arrays[self.n_in:]
        return outs[0] if len(outs) == 1 else tuple(outs)

    def _new_profile_buffer(self) -> Any:
        self._profile_buffer = self._cupy.empty((self.num_blocks, self.spec["profile_words"]), np.uint32)
        return self._profile_buffer
