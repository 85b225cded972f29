"""Host-side TMA descriptors: `cuTensorMapEncodeTiled` for each TMA descriptor of a kernel.

The launcher calls `TmaEncoder.encode_into(index, pointers, address, view)` when it fills a parameter
block: the descriptor's 16 words are written straight into the kernel's 128-byte, 64-byte aligned
descriptor parameter (`encode(index, arrays)` returns them as an array instead). Descriptors are
cached on (descriptor, base address): the shape, strides, box and swizzle are fixed per
descriptor, so a later call with an array at the same address (a layer's weight) copies the
cached bytes.

A decode loop gets new activation and output addresses on almost every call, so it encodes two
descriptors per launch, and that path is kept lean: libcuda's `cuTensorMapEncodeTiled` through
ctypes with argument arrays built once per descriptor, no `argtypes` (ctypes' per-call conversion
of 12 declared arguments doubled the call's cost; the process's first encode is checked against
the declared call, `_DirectCheck`) and no temporary buffer (the driver writes into
the parameter slot). cuda-bindings' wrapper, which builds its argument objects on every call,
costs tens of microseconds; it stays the fallback where libcuda cannot be opened, and explains a
failed encode.

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
_DESCRIPTOR_BYTES = TMA_DESCRIPTOR_WORDS * 8
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


def _zeroed_descriptor() -> np.ndarray:
    """16 zeroed uint64 words, 64-byte aligned as a CUtensorMap must be (a view into a larger buffer)."""
    buffer = np.zeros(TMA_DESCRIPTOR_WORDS + 8, dtype=np.uint64)
    shift = (-buffer.ctypes.data % 64) // 8
    return buffer[shift: shift + TMA_DESCRIPTOR_WORDS]


@functools.cache
def _libcuda_encode_tiled() -> Any:
    """libcuda's cuTensorMapEncodeTiled as a ctypes function with no `argtypes`, or None where it
    cannot be opened. `_DirectEncode` passes exactly the C types (pointers as c_void_p or ctypes
    arrays; the enums and the rank as ints, which ctypes passes as C int): an assumption about the
    calling convention that `_DirectCheck` tests once per process."""
    try:
        fn = ctypes.CDLL("libcuda.so.1").cuTensorMapEncodeTiled
    except (OSError, AttributeError):
        return None
    fn.restype = ctypes.c_int
    return fn


@functools.cache
def _declared_encode_tiled() -> Any:
    """The same libcuda function with its argument types declared (ctypes converts and checks each
    argument on every call: slower, and certain): what `_DirectCheck` compares the direct call with."""
    fn = ctypes.CDLL("libcuda.so.1").cuTensorMapEncodeTiled
    u32, u64p, u32p = ctypes.c_uint32, ctypes.POINTER(ctypes.c_uint64), ctypes.POINTER(ctypes.c_uint32)
    fn.restype = ctypes.c_int
    fn.argtypes = [ctypes.c_void_p, ctypes.c_int, u32, ctypes.c_void_p, u64p, u64p, u32p, u32p,
                   ctypes.c_int, ctypes.c_int, ctypes.c_int, ctypes.c_int]
    return fn


class _DirectCheck:
    """Whether the direct call writes what the declared call writes, checked on the process's first
    direct encode (a real tensor's address: the driver may refuse a made-up one). Where they
    differ, or the check cannot run, every later encode goes through cuda-bindings (a
    RuntimeWarning says so)."""

    def __init__(self):
        self.checked, self.ok = False, True

    def check(self, direct: _DirectEncode, ptr: int, words: bytes) -> bool:
        import warnings

        self.checked = True
        reference = _zeroed_descriptor()
        (dtype, rank), (interleave, swizzle, l2, oob) = direct.enums
        try:
            err = _declared_encode_tiled()(ctypes.c_void_p(reference.ctypes.data), dtype, rank, ctypes.c_void_p(ptr),
                                           *direct.arrays, interleave, swizzle, l2, oob)
        except Exception as error:  # any failure: take the slower, sure path
            err = error
        self.ok = not err and reference.tobytes() == words
        if not self.ok:
            warnings.warn(f"TMA descriptors: libcuda's encode called without declared argument types "
                          f"{'wrote other words than' if not err else 'could not be checked against'} the "
                          f"declared call ({err or 'the words differ'}); encoding through cuda-bindings from now on "
                          f"(slower per launch)", RuntimeWarning, stacklevel=3)
        return self.ok


_DIRECT_CHECK = _DirectCheck()


def encode_path() -> str:
    """How this process encodes TMA descriptors, for benchmark records (host times differ by tens
    of us a launch): "direct" (checked on its first encode), "cuda-bindings" (the check failed)
    or "not yet" (no direct encode so far, as where libcuda cannot be opened)."""
    if not _DIRECT_CHECK.checked:
        return "not yet"
    return "direct" if _DIRECT_CHECK.ok else "cuda-bindings"


class _DirectEncode:
    """One descriptor's cuTensorMapEncodeTiled call with every argument but the addresses bound."""

    def __init__(self, fn: Any, static: tuple):
        dtype, rank, shape, strides, box, elem, interleave, swizzle, l2, oob = static
        self._fn = fn
        self._shape = (ctypes.c_uint64 * rank)(*(int(x) for x in shape))
        self._strides = (ctypes.c_uint64 * max(rank - 1, 1))(*(int(x) for x in strides))
        self._box = (ctypes.c_uint32 * rank)(*(int(x) for x in box))
        self._elem = (ctypes.c_uint32 * rank)(*(int(x) for x in elem))
        self.enums = (int(dtype), int(rank)), (int(interleave), int(swizzle), int(l2), int(oob))
        self.arrays = (self._shape, self._strides, self._box, self._elem)

    def into(self, ptr: int, address: int) -> int:
        """Write the 16 words for a tensor at `ptr` at `address` (64-byte aligned, as CUtensorMap
        is). Returns the driver's error code: 0 when written, else the caller explains."""
        (dtype, rank), (interleave, swizzle, l2, oob) = self.enums
        return self._fn(ctypes.c_void_p(address), dtype, rank, ctypes.c_void_p(ptr), self._shape, self._strides,
                        self._box, self._elem, interleave, swizzle, l2, oob)


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
        self._static = [self.static_args(s) for s in self.specs]
        fn = _libcuda_encode_tiled()
        self._direct = [_DirectEncode(fn, static) for static in self._static] if fn is not None else None
        self._arrays = [int(_tma_field(s, "array")) for s in self.specs]  # each descriptor's array
        self._cache: OrderedDict[tuple[int, int], bytes] = OrderedDict()  # (descriptor, address) -> words

    @classmethod
    def from_dicts(cls, specs: Sequence[dict]) -> TmaEncoder:
        return cls([{k: d[k] for k in _TMA_FIELDS} for d in specs])

    @staticmethod
    def static_args(spec: Any) -> tuple:
        """cuTensorMapEncodeTiled's arguments but the address, as cuda-bindings takes them."""
        from cuda.bindings import driver as d

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
        """The 16 uint64 words of descriptor `index` for a launch on `arrays` (inputs, then outputs:
        arrays with `.data.ptr`, or their data pointers as ints)."""
        array = arrays[self._arrays[index]]
        data = getattr(array, "data", None)
        ptr = int(data.ptr) if data is not None and hasattr(data, "ptr") else int(array)
        words = _zeroed_descriptor()
        pointers = [0] * (max(self._arrays) + 1)
        pointers[self._arrays[index]] = ptr
        self.encode_into(index, pointers, words.ctypes.data, memoryview(words).cast("B"))
        return words.copy()

    def encode_into(self, index: int, pointers: Sequence[int], address: int, view: memoryview) -> None:
        """Write descriptor `index`'s 16 words for a launch on `pointers` (the arrays' data
        pointers, inputs then outputs) into a parameter slot: 128 bytes at `address` (64-byte
        aligned), which `view` also covers (a writable byte view: cached words are copied
        through it, ~10x cheaper than ctypes.memmove). Raises ValueError, naming the array, for
        an address TMA cannot use."""
        ptr = pointers[self._arrays[index]]
        key = (index, ptr)
        cache = self._cache
        words = cache.get(key)
        if words is not None:
            view[:] = words
            return
        direct = self._direct
        checking = direct is not None and not _DIRECT_CHECK.checked
        if checking:
            view[:] = bytes(_DESCRIPTOR_BYTES)  # as the check's reference buffer: bytes the driver skips compare equal
        if direct is not None and not ptr % 16 and _DIRECT_CHECK.ok and not direct[index].into(ptr, address):
            words = bytes(view)
            if checking and not _DIRECT_CHECK.check(direct[index], ptr, words):
                words = self._encode(index, ptr).tobytes()
                view[:] = words
        else:
            words = self._encode(index, ptr).tobytes()  # explains, or falls back to cuda-bindings
            view[:] = words
        cache[key] = words
        if len(cache) > _TMA_CACHE_ENTRIES:
            cache.popitem(last=False)

    def _encode(self, index: int, ptr: int) -> np.ndarray:
        """The words by cuda-bindings, after the check a direct encode skips (its error explained)."""
        if ptr % 16:
            raise ValueError(f"array {self._arrays[index]}: TMA needs a 16-byte aligned base address, got "
                             f"{ptr:#x}; pass a copy")
        return self._encode_with_bindings(index, ptr)

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
