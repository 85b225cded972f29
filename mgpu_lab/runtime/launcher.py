"""Launches a CompiledKernel on CuPy arrays: argument checks, output allocation, the launch.

The call path is kept lean: the module is loaded once per CUDA context, parameter storage is
preallocated, and each call writes only the new pointers before `cuLaunchKernel`.
"""

from __future__ import annotations

import threading
from typing import Any

import numpy as np

from ..builder.dtypes import numpy_dtype
from ..compiler.compiled_kernel import CompiledKernel
from ..errors import LaunchArgumentError, ResourceLimitError
from .device import check
from .module_cache import load_function

_SLOT_BYTES = 128  # a TMA descriptor is the largest parameter
_SLOT_WORDS = _SLOT_BYTES // 8


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


def _describe(x: Any) -> str:
    return f"{type(x).__module__}.{type(x).__name__}"


class Launcher:
    """Callable wrapper of one CompiledKernel for the current CUDA context."""

    def __init__(self, compiled: CompiledKernel):
        import cupy

        self._cupy = cupy
        self.compiled = compiled
        self.n_in = len(compiled.inputs)
        self.in_specs = [(tuple(s.shape), numpy_dtype(s.dtype)) for s in compiled.inputs]
        self.out_specs = [(tuple(s.shape), numpy_dtype(s.dtype)) for s in compiled.outputs]
        self.param_kinds = [(p.kind, p.index) for p in compiled.params]
        self._storage = _ParamStorage(len(compiled.params))
        self._functions: dict[int, Any] = {}
        self._tma = None
        if compiled.tma_descriptors:
            from .tma_descriptor import TmaEncoder

            self._tma = TmaEncoder(compiled.tma_descriptors)
        self._profile_buffer = None
        self.last_profile = None

    # -- argument handling -------------------------------------------------------------
    def _as_device_array(self, x: Any, position: int, what: str, spec: tuple) -> Any:
        cupy = self._cupy
        if not isinstance(x, cupy.ndarray):
            if isinstance(x, np.ndarray):
                raise LaunchArgumentError(
                    f"{what} {position} of {self.compiled.name}: expected a device array (CuPy, or "
                    f"anything with DLPack / __cuda_array_interface__), got a host numpy.ndarray; "
                    f"move it with cupy.asarray(x)")
            try:
                x = cupy.from_dlpack(x) if hasattr(x, "__dlpack__") else cupy.asarray(x)
            except Exception as e:  # noqa: BLE001 - report any conversion failure the same way
                raise LaunchArgumentError(
                    f"{what} {position} of {self.compiled.name}: expected a device array, got "
                    f"{_describe(x)} ({e})") from None
        shape, dtype = spec
        if x.shape != shape:
            raise LaunchArgumentError(
                f"{what} {position} of {self.compiled.name}: expected shape {shape}, got {x.shape}")
        if x.dtype != dtype:
            raise LaunchArgumentError(
                f"{what} {position} of {self.compiled.name}: expected dtype {dtype.name}, got {x.dtype.name}")
        if not x.flags.c_contiguous:
            raise LaunchArgumentError(
                f"{what} {position} of {self.compiled.name}: expected a C-contiguous array, got "
                f"strides {x.strides} for shape {x.shape}; pass cupy.ascontiguousarray(x)")
        if x.data.ptr % 16:
            raise LaunchArgumentError(
                f"{what} {position} of {self.compiled.name}: expected a 16-byte aligned array (kernels "
                f"use 16-byte accesses), got address {x.data.ptr:#x}; pass a copy")
        device = cupy.cuda.runtime.getDevice()
        if x.device.id != device:
            raise LaunchArgumentError(
                f"{what} {position} of {self.compiled.name}: expected an array on the current device "
                f"{device}, got one on device {x.device.id}")
        return x

    # -- launching ---------------------------------------------------------------------
    def _function(self, device: int) -> Any:
        # CuPy (and torch) run on each device's primary context, so a device id names the
        # context a module was loaded into.
        fn = self._functions.get(device)
        if fn is None:
            self._cupy.cuda.runtime.free(0)  # makes sure the primary context exists and is current
            fn = self._functions[device] = load_function(self.compiled)
        return fn

    def _array(self, x: Any, position: int, what: str, spec: tuple, device: int) -> Any:
        # Fast path: a CuPy array that already matches in every respect; else check and explain.
        if (type(x) is self._cupy.ndarray and x.shape == spec[0] and x.dtype == spec[1] and x._c_contiguous
                and x.data.device_id == device and not x.data.ptr % 16):
            return x
        return self._as_device_array(x, position, what, spec)

    def _checked_arrays(self, args: tuple, out: Any, device: int) -> list[Any]:
        arrays = [self._array(x, i, "input", spec, device) for i, (x, spec) in enumerate(zip(args, self.in_specs))]
        if out is None:
            return arrays + [self._cupy.empty(shape, dtype) for shape, dtype in self.out_specs]
        outs = list(out) if isinstance(out, (tuple, list)) else [out]
        if len(outs) != len(self.out_specs):
            raise LaunchArgumentError(
                f"out of {self.compiled.name}: expected {len(self.out_specs)} output arrays, got {len(outs)}")
        return arrays + [self._array(o, i, "output", spec, device)
                         for i, (o, spec) in enumerate(zip(outs, self.out_specs))]

    def __call__(self, *args: Any, out: Any = None, stream: Any = None) -> Any:
        if len(args) != self.n_in:
            raise LaunchArgumentError(
                f"{self.compiled.name} takes {self.n_in} input array(s) "
                f"{[f'{s}:{d.name}' for s, d in self.in_specs]}, got {len(args)}")
        cupy = self._cupy
        device = cupy.cuda.runtime.getDevice()
        arrays = self._checked_arrays(args, out, device)
        fn = self._function(device)
        if fn.cupy_function is not None:
            params = arrays if self.compiled.profiler is None else arrays + [self._new_profile_buffer()]
            fn.cupy_function(self.compiled.grid, self.compiled.block, params, shared_mem=fn.smem,
                             stream=stream if stream is None or hasattr(stream, "ptr") else cupy.cuda.ExternalStream(stream))
            return self._finish(arrays)
        storage = self._storage
        words = storage.words
        for slot, (kind, index) in enumerate(self.param_kinds):
            if kind == "array":
                words[slot * _SLOT_WORDS] = arrays[index].data.ptr
            elif kind == "tma":
                words[slot * _SLOT_WORDS: (slot + 1) * _SLOT_WORDS] = self._tma.encode(index, arrays)
            else:  # profile buffer
                words[slot * _SLOT_WORDS] = self._new_profile_buffer().data.ptr
        stream_handle = cupy.cuda.get_current_stream().ptr if stream is None else getattr(stream, "ptr", stream)
        fn.launch(stream_handle, storage.argv_address)
        return self._finish(arrays)

    def _finish(self, arrays: list[Any]) -> Any:
        if self.compiled.profiler is not None:
            self.last_profile = self._profile_buffer
        outs = arrays[self.n_in:]
        return outs[0] if len(outs) == 1 else tuple(outs)

    def _new_profile_buffer(self) -> Any:
        spec = self.compiled.profiler
        self._profile_buffer = self._cupy.empty((self.compiled.num_blocks, spec.words_per_block), np.uint32)
        return self._profile_buffer

    @property
    def last_trace(self) -> Any:
        """The decoded profiler Trace of the last call (synchronizes with its stream)."""
        if self.last_profile is None:
            return None
        from ..profiler.decode import decode_buffer

        return decode_buffer(self.last_profile.get(), self.compiled.profiler, self.compiled.name)


def check_smem_fits(compiled: CompiledKernel, limit: int) -> None:
    """Raise ResourceLimitError when static + dynamic smem exceeds the device's opt-in limit."""
    total = compiled.resources.static_smem_bytes + compiled.dynamic_smem_bytes
    if total > limit:
        raise ResourceLimitError(
            f"smem: kernel {compiled.name} needs {total} bytes of shared memory "
            f"({compiled.dynamic_smem_bytes} dynamic + {compiled.resources.static_smem_bytes} static) "
            f"but the device allows at most {limit} bytes per block")
