"""Host-side TMA descriptors: `cuTensorMapEncodeTiled` for each TMA descriptor of a kernel.

The launcher calls `TmaEncoder.encode(index, arrays)` per launch and copies the 16 returned
words into the kernel's 128-byte, 64-byte aligned descriptor parameter. Encoding costs a few
microseconds, so descriptors are cached on (descriptor, base address): the shape, strides, box
and swizzle are fixed per descriptor, so a later call with an array at the same address reuses
the words.

The encode goes straight to libcuda's `cuTensorMapEncodeTiled` through ctypes with argument
arrays built once per descriptor (about a microsecond); cuda-bindings' wrapper, which builds its
argument objects on every call, costs tens of microseconds, which a decode loop (new activation
and output addresses on every call) pays per descriptor per launch. cuda-bindings stays the
fallback where libcuda cannot be opened, and explains a failed encode.

This file is copied verbatim into exported kernels: it imports only the standard library, numpy
and cuda-bindings.
"""

from __future__ import annotations

import ctypes
import functools
import os
from collections import OrderedDict
from collections.abc import Sequence
from typing import Any

import numpy as np

TMA_DESCRIPTOR_WORDS = 16
_TMA_CACHE_ENTRIES = 1024
_TMA_DATA_TYPES = {
    "uint8": "UINT8", "int8": "UINT8", "bool": "UINT8", "float8_e4m3fn": "UINT8", "float8_e5m2": "UINT8",
    "uint16": "UINT16", "int16": "UINT16", "float16": "FLOAT16", "bfloat16": "BFLOAT16",
    "uint32": "UINT32", "int32": "INT32", "float32": "FLOAT32",
    "uint64": "UINT64", "int64": "INT64", "float64": "FLOAT64",
}
_TMA_SWIZZLES = {0: "NONE", 32: "32B", 64: "64B", 128: "128B"}
# How much L2 fetches around a TMA load's miss. 128 bytes, as CUTLASS: on an H200, bf16 GEMMs whose
# rows are off the 128-byte line ran 8-17% faster than with 256 (aligned ones the same; records
# gemm_options_2026-12-05T0558*_04f6125). The variable is for probes that compare the settings
# (benchmarks/probe_gemm_alignment.py), not a user knob.
L2_PROMOTIONS = ("NONE", "L2_64B", "L2_128B", "L2_256B")
_L2_PROMOTION = os.environ.get("MGPU_LAB_TMA_L2_PROMOTION", "L2_128B")


def l2_promotion() -> str:
    """The L2 promotion this process's TMA descriptors ask for (benchmark records name it: the
    GEMM model's fit counts times off the 128-byte line only at the promotion they ran with)."""
    return _L2_PROMOTION


_TMA_FIELDS = ("array", "dtype", "global_shape", "global_strides_bytes", "box_shape", "swizzle")


def _tma_field(spec: Any, name: str) -> Any:
    return spec[name] if isinstance(spec, dict) else getattr(spec, name)


def check_tma_spec(spec: Any) -> None:
    """Hopper's TMA rules on one descriptor (shapes innermost first); ValueError names the rule."""
    array = _tma_field(spec, "array")
    shape, strides = tuple(_tma_field(spec, "global_shape")), tuple(_tma_field(spec, "global_strides_bytes"))
    box, swizzle, dtype = tuple(_tma_field(spec, "box_shape")), _tma_field(spec, "swizzle"), _tma_field(spec, "dtype")
    where = f"TMA descriptor of array {array}"
    if dtype not in _TMA_DATA_TYPES:
        raise ValueError(f"{where}: dtype {dtype!r} is not supported by TMA")
    if not 1 <= len(shape) <= 5:
        raise ValueError(f"{where}: rank must be 1 to 5, got {len(shape)} (shape {shape})")
    if len(strides) != len(shape) - 1 or len(box) != len(shape):
        raise ValueError(f"{where}: a rank-{len(shape)} tensor needs {len(shape) - 1} strides and {len(shape)} "
                         f"box dims, got strides {strides} and box {box}")
    if any(s % 16 for s in strides):
        raise ValueError(f"{where}: global strides must be multiples of 16 bytes, got {strides} bytes")
    if any(not 1 <= b <= 256 for b in box):
        raise ValueError(f"{where}: box dims must be in [1, 256], got {box}")
    if swizzle not in _TMA_SWIZZLES:
        raise ValueError(f"{where}: swizzle must be 0, 32, 64 or 128 bytes, got {swizzle!r}")


@functools.cache
def _libcuda_encode_tiled() -> Any:
    """libcuda's cuTensorMapEncodeTiled as a ctypes function, or None where it cannot be opened."""
    try:
        fn = ctypes.CDLL("libcuda.so.1").cuTensorMapEncodeTiled
    except (OSError, AttributeError):
        return None
    u32, u64p, u32p = ctypes.c_uint32, ctypes.POINTER(ctypes.c_uint64), ctypes.POINTER(ctypes.c_uint32)
    fn.restype = ctypes.c_int
    fn.argtypes = [ctypes.c_void_p, ctypes.c_int, u32, ctypes.c_void_p, u64p, u64p, u32p, u32p,
                   ctypes.c_int, ctypes.c_int, ctypes.c_int, ctypes.c_int]
    return fn


class _DirectEncode:
    """One descriptor's cuTensorMapEncodeTiled call with every argument but the address bound."""

    def __init__(self, fn: Any, static: tuple):
        dtype, rank, shape, strides, box, elem, interleave, swizzle, l2, oob = static
        self._fn = fn
        self._shape = (ctypes.c_uint64 * rank)(*(int(x) for x in shape))
        self._strides = (ctypes.c_uint64 * max(rank - 1, 1))(*(int(x) for x in strides))
        self._box = (ctypes.c_uint32 * rank)(*(int(x) for x in box))
        self._elem = (ctypes.c_uint32 * rank)(*(int(x) for x in elem))
        self._enums = [int(dtype), int(rank)], [int(interleave), int(swizzle), int(l2), int(oob)]

    def __call__(self, ptr: int) -> np.ndarray | None:
        """The 16 words for a tensor at `ptr`, or None when the driver refuses (the caller explains)."""
        (dtype, rank), tail = self._enums
        # A buffer per call (threads may encode at once; ctypes lets go of the GIL), 64-byte aligned
        # as CUtensorMap is.
        raw = np.zeros(TMA_DESCRIPTOR_WORDS + 8, dtype=np.uint64)
        address = raw.ctypes.data
        shift = (-address % 64) // 8
        err = self._fn(address + shift * 8, dtype, rank, ptr, self._shape, self._strides, self._box, self._elem, *tail)
        return None if err else raw[shift: shift + TMA_DESCRIPTOR_WORDS].copy()


class TmaEncoder:
    """Encodes (and caches) the TMA descriptors of one kernel.

    specs: objects with the fields of `TmaDescriptorSpec` (array, dtype, global_shape,
    global_strides_bytes, box_shape, swizzle; shapes innermost first), or dicts of them.
    """

    def __init__(self, specs: Sequence[Any]):
        from cuda.bindings import driver

        self._driver = driver
        self.specs = tuple(specs)
        for spec in self.specs:
            check_tma_spec(spec)
        self._static = [self._static_args(s) for s in self.specs]
        fn = _libcuda_encode_tiled()
        self._direct = [_DirectEncode(fn, static) for static in self._static] if fn is not None else None
        self._cache: OrderedDict[tuple[int, int], np.ndarray] = OrderedDict()

    @classmethod
    def from_dicts(cls, specs: Sequence[dict]) -> TmaEncoder:
        return cls([{k: d[k] for k in _TMA_FIELDS} for d in specs])

    def _static_args(self, spec: Any) -> tuple:
        d = self._driver
        if _L2_PROMOTION not in L2_PROMOTIONS:
            raise ValueError(f"MGPU_LAB_TMA_L2_PROMOTION must be one of {', '.join(L2_PROMOTIONS)}, "
                             f"got {_L2_PROMOTION!r}")
        shape = [int(x) for x in _tma_field(spec, "global_shape")]
        rank = len(shape)
        return (
            getattr(d.CUtensorMapDataType, "CU_TENSOR_MAP_DATA_TYPE_" + _TMA_DATA_TYPES[_tma_field(spec, "dtype")]),
            rank,
            [d.cuuint64_t(x) for x in shape],
            [d.cuuint64_t(int(x)) for x in _tma_field(spec, "global_strides_bytes")],
            [d.cuuint32_t(int(x)) for x in _tma_field(spec, "box_shape")],
            [d.cuuint32_t(1)] * rank,
            d.CUtensorMapInterleave.CU_TENSOR_MAP_INTERLEAVE_NONE,
            getattr(d.CUtensorMapSwizzle, "CU_TENSOR_MAP_SWIZZLE_" + _TMA_SWIZZLES[_tma_field(spec, "swizzle")]),
            getattr(d.CUtensorMapL2promotion, "CU_TENSOR_MAP_L2_PROMOTION_" + _L2_PROMOTION),
            d.CUtensorMapFloatOOBfill.CU_TENSOR_MAP_FLOAT_OOB_FILL_NONE,
        )

    def encode(self, index: int, arrays: Sequence[Any]) -> np.ndarray:
        """The 16 uint64 words of descriptor `index` for a launch on `arrays` (inputs, then outputs)."""
        array = arrays[_tma_field(self.specs[index], "array")]
        data = getattr(array, "data", None)
        ptr = int(data.ptr) if data is not None and hasattr(data, "ptr") else int(array)
        key = (index, ptr)
        words = self._cache.get(key)
        if words is None:
            words = self._cache[key] = self._encode(index, ptr)
            if len(self._cache) > _TMA_CACHE_ENTRIES:
                self._cache.popitem(last=False)
        return words

    def _encode(self, index: int, ptr: int) -> np.ndarray:
        array = _tma_field(self.specs[index], "array")
        if ptr % 16:
            raise ValueError(f"array {array}: TMA needs a 16-byte aligned base address, got {ptr:#x}; pass a copy")
        if self._direct is not None:
            words = self._direct[index](ptr)
            if words is not None:
                return words
        return self._encode_with_bindings(index, ptr)  # also explains a refused encode

    def _encode_with_bindings(self, index: int, ptr: int) -> np.ndarray:
        d, spec = self._driver, self.specs[index]
        array = _tma_field(spec, "array")
        dtype, rank, shape, strides, box, elem, interleave, swizzle, l2, oob = self._static[index]
        err, tmap = d.cuTensorMapEncodeTiled(dtype, rank, ptr, shape, strides, box, elem, interleave,
                                             swizzle, l2, oob)
        if err != d.CUresult.CUDA_SUCCESS:
            _, name = d.cuGetErrorName(err)
            name = name.decode() if isinstance(name, bytes) else name
            raise ValueError(
                f"cuTensorMapEncodeTiled failed ({name}) for array {array}: dtype {_tma_field(spec, 'dtype')}, "
                f"shape {tuple(_tma_field(spec, 'global_shape'))} (innermost first), strides "
                f"{tuple(_tma_field(spec, 'global_strides_bytes'))} bytes, box {tuple(_tma_field(spec, 'box_shape'))}, "
                f"swizzle {_tma_field(spec, 'swizzle')}, address {ptr:#x}")
        return np.array([int(w) for w in tmap.opaque], dtype=np.uint64)
