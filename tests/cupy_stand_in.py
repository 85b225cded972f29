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
    """One recorded launch: the pointer-only path's arguments, or the parameter slots' bytes."""

    grid: tuple
    block: tuple
    args: list | None = None  # CuPy Function path: the arrays
    params: list[bytes] = field(default_factory=list)  # slot path: 128 bytes per parameter
    stream: int | None = None


class RecordingFunction:
    """Replaces LoadedFunction: records the launch instead of loading a cubin on a device."""

    launches: list[Launch] = []
    force_slots = False  # True: take the parameter-slot path even for pointer-only kernels

    def __init__(self, spec: dict, device: int, resource_error):
        self.grid, self.block = tuple(spec["grid"]), tuple(spec["block"])
        self.smem = spec["dynamic_smem"]
        self.param_count = len(spec["params"])
        pointer_only = all(kind != "tma" for kind, _ in spec["params"]) and tuple(spec["cluster"]) == (1, 1, 1)
        self.cupy_function = self._record_args if pointer_only and not self.force_slots else None

    def _record_args(self, grid, block, params, shared_mem=0, stream=None):
        self.launches.append(Launch(tuple(grid), tuple(block), args=list(params)))

    def launch(self, stream: int, argv_address: int) -> None:
        argv = (ctypes.c_uint64 * self.param_count).from_address(argv_address)
        params = [ctypes.string_at(argv[i], 128) for i in range(self.param_count)]
        self.launches.append(Launch(self.grid, self.block, params=params, stream=stream))


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
