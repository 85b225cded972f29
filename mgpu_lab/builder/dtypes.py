"""Element types: dtype names <-> MLIR types.

One table: names and their numpy dtypes come from `compiler/dtype_names.py` (`runtime/portable.py`,
which exports copy verbatim, keeps a checked copy); this module adds the MLIR type of each name
and the way back.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from .._mlir import ir
from ..compiler.dtype_names import ML_DTYPES, dtype_from_name
_MLIR_FLOAT_CTORS = {
    "float64": ir.F64Type.get, "float32": ir.F32Type.get, "float16": ir.F16Type.get,
    "bfloat16": ir.BF16Type.get, "float8_e4m3fn": ir.Float8E4M3FNType.get,
    "float8_e5m2": ir.Float8E5M2Type.get,
}
_INT_BITS = {"int8": 8, "int16": 16, "int32": 32, "int64": 64,
             "uint8": 8, "uint16": 16, "uint32": 32, "uint64": 64, "bool": 1}
SUPPORTED = tuple(_MLIR_FLOAT_CTORS) + tuple(_INT_BITS)


def dtype_name(dtype: Any) -> str:
    """Canonical name of a dtype given as a string, numpy dtype, type, or ml_dtypes type."""
    name = getattr(dtype, "__name__", None) if isinstance(dtype, type) else None
    if name is None:
        name = str(getattr(dtype, "name", dtype))
    if name in ML_DTYPES:
        return name
    try:
        name = np.dtype(dtype).name
    except TypeError:
        pass
    if name not in SUPPORTED:
        raise TypeError(f"dtype: expected one of {', '.join(SUPPORTED)}, got {dtype!r}")
    return name


def mlir_type(dtype: Any) -> ir.Type:
    """The MLIR element type of a dtype (signless integers for int and uint)."""
    name = dtype_name(dtype)
    if name in _MLIR_FLOAT_CTORS:
        return _MLIR_FLOAT_CTORS[name]()
    return ir.IntegerType.get_signless(_INT_BITS[name])


def bitwidth(t: ir.Type) -> int:
    """Bits of an MLIR scalar type (index counts as 64)."""
    if isinstance(t, ir.IndexType):
        return 64
    if isinstance(t, ir.IntegerType):
        return ir.IntegerType(t).width
    if isinstance(t, ir.FloatType):
        return ir.FloatType(t).width
    raise TypeError(f"type: expected a scalar integer or float type, got {t}")


def itemsize(dtype: Any) -> int:
    """Bytes per element of a dtype (name, numpy dtype or ml_dtypes type)."""
    return dtype_from_name(dtype_name(dtype)).itemsize


def numpy_dtype(name: str) -> np.dtype:
    """A numpy dtype for a canonical name, using ml_dtypes for bf16/fp8."""
    return dtype_from_name(name)


def dtype_of_mlir(t: ir.Type, *, unsigned: bool = False) -> str:
    """The dtype name of an MLIR element type (integers: intN, or uintN with `unsigned`)."""
    for name, ctor in _MLIR_FLOAT_CTORS.items():
        if t == ctor():
            return name
    if isinstance(t, ir.IntegerType):
        width = ir.IntegerType(t).width
        if width == 1:
            return "bool"
        if width in (8, 16, 32, 64):
            return f"{'u' if unsigned else ''}int{width}"
    raise ValueError(f"type: no dtype for the MLIR type {t}")
