"""A CPU stand-in for the few CuPy entry points the launcher core uses, and device-array stand-ins.

The launcher's argument checks and parameter packing are plain Python over array metadata
(shape, dtype, strides, pointer, device); with these stand-ins they run on a machine without a
GPU. `DeviceArray` exposes only `__cuda_array_interface__`, as a foreign library's array would;
`install(monkeypatch)` puts the fake `cupy` module in sys.modules and replaces the launcher's
`LoadedFunction` with a recorder of what would have been launched.
"""

from __future__ import annotations

import ctypes
import itertools
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


@dataclass
class _Memory:
    ptr: int
    device_id: int


@dataclass
class FakeNdarray:
    """What `cupy.asarray` makes of an array interface: metadata only, no memory."""

    shape: tuple
    dtype: np.dtype
    data: _Memory
    strides: tuple
    flags: types.SimpleNamespace = field(init=False)

    def __post_init__(self):
        contiguous = self.strides == _c_strides(self.shape, self.dtype.itemsize)
        self.flags = types.SimpleNamespace(c_contiguous=contiguous)
        self._c_contiguous = contiguous
        self.device = types.SimpleNamespace(id=self.data.device_id)

    @property
    def size(self) -> int:
        return int(np.prod(self.shape))


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


def _empty(shape, dtype):
    shape = tuple(shape) if isinstance(shape, (tuple, list)) else (shape,)
    dtype = np.dtype(dtype)
    return FakeNdarray(shape, dtype, _Memory(next(_next_pointer), _state.device), _c_strides(shape, dtype.itemsize))


class _State:
    device = 0


_state = _State()


def fake_cupy() -> types.ModuleType:
    """A module named cupy with ndarray, asarray, empty, cuda.runtime.getDevice/free, streams."""
    cupy = types.ModuleType("cupy")
    cupy.ndarray = FakeNdarray
    cupy.asarray = _asarray
    cupy.empty = _empty
    runtime = types.SimpleNamespace(getDevice=lambda: _state.device, free=lambda ptr: None)
    stream = types.SimpleNamespace(ptr=0)
    cupy.cuda = types.SimpleNamespace(runtime=runtime, get_current_stream=lambda: stream,
                                      ExternalStream=lambda ptr: types.SimpleNamespace(ptr=ptr))
    return cupy


@dataclass
class Launch:
    """One recorded launch: the 128-byte parameter slots the kernel would receive."""

    grid: tuple
    block: tuple
    smem: int
    params: list[bytes] = field(default_factory=list)
    stream: int | None = None

    @property
    def pointers(self) -> list[int]:
        """The first 8 bytes of each slot: an array parameter's device pointer."""
        return [int(np.frombuffer(p[:8], np.uint64)[0]) for p in self.params]


class RecordingFunction:
    """Replaces LoadedFunction: records each launch's parameter slots instead of loading a cubin.

    Offers what the launcher calls: `launch_kernel(handle, gx, gy, gz, bx, by, bz, smem, stream,
    argv, extra)` (cuLaunchKernel's signature) and `launch(stream, argv)` for cluster launches."""

    launches: list[Launch] = []

    def __init__(self, spec: dict, device: int, resource_error):
        self.grid, self.block = tuple(spec["grid"]), tuple(spec["block"])
        self.smem = spec["dynamic_smem"]
        self.param_count = len(spec["params"])
        self.config = None if tuple(spec["cluster"]) == (1, 1, 1) else tuple(spec["cluster"])
        self.handle_pointer = ctypes.c_void_p(0x1000)
        self.dims = (*self.grid, *self.block, self.smem)
        self.cupy_function = None

    def launch_kernel(self, handle, gx, gy, gz, bx, by, bz, smem, stream, argv, extra) -> int:
        self._record((gx, gy, gz), (bx, by, bz), smem, stream, argv)
        return 0

    def launch(self, stream, argv) -> None:
        self._record(self.grid, self.block, self.smem, stream, argv)

    def recover(self, err, stream, argv) -> None:
        raise AssertionError(f"the recorder never fails, got error {err}")

    def _record(self, grid, block, smem, stream, argv) -> None:
        address = argv.value if isinstance(argv, ctypes.c_void_p) else int(argv)
        slots = (ctypes.c_uint64 * self.param_count).from_address(address)
        params = [ctypes.string_at(slots[i], 128) for i in range(self.param_count)]
        stream = stream.value if isinstance(stream, ctypes.c_void_p) else stream
        self.launches.append(Launch(tuple(grid), tuple(block), smem, params=params, stream=stream or 0))


def install(monkeypatch, portable_module=None) -> type[RecordingFunction]:
    """Fake cupy in sys.modules; the launcher (or an exported module) launches into a recorder."""
    monkeypatch.setitem(sys.modules, "cupy", fake_cupy())
    _state.device = 0

    class Recorder(RecordingFunction):
        launches: list[Launch] = []

    if portable_module is None:
        from mgpu_lab.runtime import portable as portable_module
    monkeypatch.setattr(portable_module, "LoadedFunction", Recorder)
    return Recorder


def set_current_device(device: int) -> None:
    _state.device = device
