"""A CPU stand-in for the few CuPy entry points the launcher core uses, and device-array stand-ins.

The launcher's argument checks and parameter packing are plain Python over array metadata
(shape, dtype, strides, pointer, device); with these stand-ins they run on a machine without a
GPU. `DeviceArray` exposes only `__cuda_array_interface__`, as a foreign library's array would;
`install(monkeypatch)` puts the fake `cupy` module in sys.modules and replaces the launcher's
`LoadedFunction` with a recorder of what would have been launched.

The launch itself is the launcher's own code: its generated call (and `LoadedFunction.launch`)
calls what `_driver_launch()` returns, CuPy's Cython `cupy.cuda.driver.launchKernel`, which the
fake cupy provides as a recorder of its integer arguments; cluster launches go through the real
`LoadedFunction.launch` and its `cuLaunchKernelEx` call, recorded from the CUlaunchConfig it built.
"""

from __future__ import annotations

import ctypes
import functools
import itertools
import operator
import sys
import types
from dataclasses import dataclass, field

import numpy as np

DEVICE_1_BASE = 1 << 44  # pointers at or above this belong to device 1 (the fake pointer attributes)
_next_pointer = itertools.count(1 << 32, 1 << 20)


class DeviceArray:
    """An array of another library: only `__cuda_array_interface__` (version 3) and nothing else."""

    def __init__(self, shape, dtype, *, ptr=None, strides=None, device=0, typestr=None):
        self.shape, self.dtype = tuple(shape), np.dtype(dtype)
        base = next(_next_pointer) + (DEVICE_1_BASE if device == 1 else 0)
        self.ptr = base if ptr is None else ptr
        self.strides = strides
        self.typestr = typestr or self.dtype.str

    @property
    def __cuda_array_interface__(self) -> dict:
        return {"shape": self.shape, "typestr": self.typestr, "data": (self.ptr, False),
                "strides": self.strides, "version": 3}


class TorchTensor:
    """A CUDA torch tensor as the launcher sees one: data_ptr(), element_size(), numel(), shape,
    dtype (str() gives "torch.bfloat16"), device.index, is_contiguous() and DLPack."""

    is_cuda = True

    def __init__(self, shape, dtype: str, *, ptr=None, device=0, contiguous=True):
        import ml_dtypes

        self.shape, self.dtype = tuple(shape), f"torch.{dtype}"
        self._itemsize = np.dtype(getattr(ml_dtypes, dtype, None) or dtype).itemsize
        self._ptr = next(_next_pointer) + (DEVICE_1_BASE if device == 1 else 0) if ptr is None else ptr
        self._contiguous = contiguous
        self.device = types.SimpleNamespace(index=device)

    def data_ptr(self) -> int:
        return self._ptr

    def element_size(self) -> int:
        return self._itemsize

    def numel(self) -> int:
        return int(np.prod(self.shape))

    def is_contiguous(self) -> bool:
        return self._contiguous

    def __dlpack__(self, stream=None):
        raise AssertionError("the stand-in cupy.from_dlpack does not read capsules")

    def __dlpack_device__(self):
        return (2, self.device.index)  # kDLCUDA


@dataclass
class _Memory:
    ptr: int
    device_id: int
    mem: types.SimpleNamespace | None = None  # a MemoryPointer's memory (ptr, size, device_id), as CuPy's `.mem`


@dataclass
class FakeNdarray:
    """What `cupy.asarray` makes of an array interface: metadata only, no memory."""

    shape: tuple
    dtype: np.dtype
    data: _Memory
    strides: tuple | None = None  # None: C-contiguous, as cupy.ndarray(shape, dtype, memptr) makes
    flags: types.SimpleNamespace = field(init=False)

    def __post_init__(self):
        if self.strides is None:
            self.strides = _c_strides(self.shape, self.dtype.itemsize)
        contiguous = self.strides == _c_strides(self.shape, self.dtype.itemsize)
        self.flags = types.SimpleNamespace(c_contiguous=contiguous)
        self._c_contiguous = contiguous
        self.device = types.SimpleNamespace(id=self.data.device_id)

    @property
    def size(self) -> int:
        return int(np.prod(self.shape))

    @property
    def ndim(self) -> int:
        return len(self.shape)

    def __len__(self) -> int:
        if not self.shape:
            raise TypeError("len() of unsized object")
        return self.shape[0]


def _c_strides(shape: tuple, itemsize: int) -> tuple:
    strides, step = [], itemsize
    for n in reversed(shape):
        strides.append(step)
        step *= n
    return tuple(reversed(strides))


def _asarray(x):
    if isinstance(x, FakeNdarray):
        return x
    if isinstance(x, np.ndarray):
        raise TypeError("numpy arrays are host arrays")
    cai = getattr(x, "__cuda_array_interface__", None)
    if cai is None:
        raise ValueError(f"Unsupported type {type(x)}")
    dtype = np.dtype(cai["typestr"])
    shape = tuple(cai["shape"])
    strides = tuple(cai["strides"]) if cai.get("strides") else _c_strides(shape, dtype.itemsize)
    ptr = cai["data"][0]
    return FakeNdarray(shape, dtype, _Memory(ptr, 1 if ptr >= DEVICE_1_BASE else 0), strides)


def _from_dlpack(x):
    """cupy.from_dlpack: refuses what CuPy cannot import through DLPack (torch's bfloat16 and
    float8 tensors, whose memory the launcher then views through data_ptr()); the stand-in's other
    DLPack objects convert through their array interface."""
    dtype = str(getattr(x, "dtype", "")).removeprefix("torch.")
    if dtype in ("bfloat16", "float8_e4m3fn", "float8_e5m2"):
        raise TypeError(f"CuPy does not support the DLPack dtype {dtype}")
    return _asarray(x)


def _empty(shape, dtype):
    shape = tuple(shape) if isinstance(shape, (tuple, list)) else (shape,)
    dtype = np.dtype(dtype)
    return FakeNdarray(shape, dtype, _Memory(next(_next_pointer), _state.device), _c_strides(shape, dtype.itemsize))


class _State:
    device = 0


_state = _State()


class CUDADriverError(RuntimeError):
    """cupy.cuda.driver.CUDADriverError: a failed driver call, with its CUresult as `status`."""

    def __init__(self, status: int):
        super().__init__(f"CUDA driver error {status}")
        self.status = status


def _unrecorded_launch(*args) -> None:
    raise AssertionError("no launch recorder installed: use install(monkeypatch) or pass launch_kernel")


def fake_cupy(launch_kernel=_unrecorded_launch) -> types.ModuleType:
    """A module named cupy with ndarray, asarray, empty, cuda.runtime.getDevice/free, streams and
    cuda.driver.launchKernel (`launch_kernel`) / CUDADriverError."""
    cupy = types.ModuleType("cupy")
    cupy.ndarray = FakeNdarray
    cupy.asarray = _asarray
    cupy.empty = _empty
    cupy.zeros = _empty  # (no memory behind the stand-ins: zero-filling is a no-op)
    cupy.from_dlpack = _from_dlpack
    runtime = types.SimpleNamespace(getDevice=lambda: _state.device, getDeviceCount=lambda: 2,  # devices 0 and 1
                                      free=lambda ptr: None)
    driver = types.SimpleNamespace(launchKernel=launch_kernel, CUDADriverError=CUDADriverError)
    stream = types.SimpleNamespace(ptr=0, synchronize=lambda: None)
    cupy.cuda = types.SimpleNamespace(runtime=runtime, driver=driver, get_current_stream=lambda device_id=-1: stream,
                                      ExternalStream=lambda ptr: types.SimpleNamespace(ptr=ptr),
                                      UnownedMemory=lambda ptr, size, owner, device_id: types.SimpleNamespace(
                                          ptr=ptr, size=size, device_id=device_id),
                                      MemoryPointer=lambda memory, offset: _Memory(memory.ptr + offset,
                                                                                   memory.device_id, memory))
    return cupy


def launch_kernel_arguments(args: tuple) -> tuple[int, ...]:
    """cuLaunchKernel's 11 arguments as CuPy's Cython `launchKernel` converts them: intptr_t
    function, 7 unsigned ints (grid, block, smem), intptr_t stream, kernelParams and extra.
    Anything else raises as Cython would (TypeError for a ctypes pointer, OverflowError)."""
    if len(args) != 11:
        raise TypeError(f"launchKernel() takes exactly 11 positional arguments ({len(args)} given)")
    ints = tuple(operator.index(a) for a in args)  # TypeError for objects that are not integers
    if any(not 0 <= d < 1 << 32 for d in ints[1:8]):
        raise OverflowError(f"launchKernel: grid, block and smem must be unsigned 32-bit ints, got {ints[1:8]}")
    return ints


def reread_driver_launch(monkeypatch, portable_module) -> None:
    """Let `portable_module._driver_launch()` read the cupy now in sys.modules: it caches its
    answer for the process, so it is replaced by a fresh cached copy of the same code, and
    monkeypatch puts the original (with whatever it cached) back after the test."""
    monkeypatch.setattr(portable_module, "_driver_launch", functools.cache(portable_module._driver_launch.__wrapped__))


@dataclass
class Launch:
    """One recorded launch: the 128-byte parameter slots the kernel would receive."""

    grid: tuple
    block: tuple
    smem: int
    params: list[bytes] = field(default_factory=list)
    stream: int = 0
    handle: int = 0
    cluster: tuple | None = None  # the cluster dimensions of a cuLaunchKernelEx launch

    @property
    def pointers(self) -> list[int]:
        """The first 8 bytes of each slot: an array parameter's device pointer."""
        return [int(np.frombuffer(p[:8], np.uint64)[0]) for p in self.params]


_handles = itertools.count(0x1000, 0x10)


class _ClusterLaunchDriver:
    """cuda-bindings' driver module for one RecordingFunction: its types as they are (the real
    `_cluster_config` builds a real CUlaunchConfig), cuLaunchKernelEx recording the launch."""

    def __init__(self, fn: RecordingFunction):
        from cuda.bindings import driver

        self._real, self._fn = driver, fn

    def __getattr__(self, name: str):
        return getattr(self._real, name)

    def cuLaunchKernelEx(self, config, function, argv, extra):
        d, fn = self._real, self._fn
        assert function == fn.function and extra == 0, (function, extra)
        [cluster] = [a.value.clusterDim for a in config.attrs[:int(config.numAttrs)]
                     if a.id == d.CUlaunchAttributeID.CU_LAUNCH_ATTRIBUTE_CLUSTER_DIMENSION]
        fn._record((config.gridDimX, config.gridDimY, config.gridDimZ),
                   (config.blockDimX, config.blockDimY, config.blockDimZ), config.sharedMemBytes,
                   int(config.hStream), operator.index(argv), cluster=(cluster.x, cluster.y, cluster.z))
        return (d.CUresult.CUDA_SUCCESS,)


class RecordingFunction:
    """Mixed into the launcher's LoadedFunction by `install`: loads nothing (a made-up handle, no
    cubin, no smem query) but keeps the real `launch`, `recover` and cluster configuration, so a
    launch goes through the same code as on a GPU and is recorded at the driver call.

    `cu_launch_kernel` is the fake `cupy.cuda.driver.launchKernel`: it finds the function by its
    handle and records the slots `argv` points at. `failures` (CUresult ints) make the next
    launchKernel calls raise CUDADriverError, as CuPy's does, instead of launching."""

    launches: list[Launch]
    loaded: dict[int, RecordingFunction]  # handle -> function
    failures: list[int]
    portable: types.ModuleType  # the launcher module whose LoadedFunction this replaces

    def __init__(self, spec: dict, device: int, resource_error):
        self._driver = _ClusterLaunchDriver(self)
        self.device, self.param_count = device, len(spec["params"])
        self.handle = self.function = next(_handles)
        self.grid, self.block, self.smem = tuple(spec["grid"]), tuple(spec["block"]), spec["dynamic_smem"]
        cluster = tuple(spec["cluster"])
        self.config = self._cluster_config(cluster) if cluster != (1, 1, 1) else None
        self.dims = (*self.grid, *self.block, self.smem)
        self.launch_kernel, self.launch_error = self.portable._driver_launch()
        self.loaded[self.handle] = self

    @classmethod
    def cu_launch_kernel(cls, *args) -> None:
        handle, gx, gy, gz, bx, by, bz, smem, stream, argv, extra = launch_kernel_arguments(args)
        assert handle in cls.loaded, f"launchKernel on {handle:#x}, not the handle of a loaded function"
        assert extra == 0, extra
        if cls.failures:
            raise CUDADriverError(cls.failures.pop(0))
        cls.loaded[handle]._record((gx, gy, gz), (bx, by, bz), smem, stream, argv)

    def _record(self, grid, block, smem, stream, argv, cluster=None) -> None:
        slots = (ctypes.c_uint64 * self.param_count).from_address(argv)
        params = [ctypes.string_at(slots[i], 128) for i in range(self.param_count)]
        self.launches.append(Launch(tuple(grid), tuple(block), smem, params=params, stream=stream,
                                    handle=self.handle, cluster=cluster))


def install(monkeypatch, portable_module=None) -> type[RecordingFunction]:
    """Fake cupy in sys.modules; the launcher (or an exported module) launches into a recorder."""
    if portable_module is None:
        from mgpu_lab.runtime import portable as portable_module

    class Recorder(RecordingFunction, portable_module.LoadedFunction):
        launches: list[Launch] = []
        loaded: dict[int, RecordingFunction] = {}
        failures: list[int] = []
        portable = portable_module

    monkeypatch.setitem(sys.modules, "cupy", fake_cupy(launch_kernel=Recorder.cu_launch_kernel))
    _state.device = 0
    monkeypatch.setattr(portable_module, "LoadedFunction", Recorder)
    reread_driver_launch(monkeypatch, portable_module)
    return Recorder


def set_current_device(device: int) -> None:
    _state.device = device
