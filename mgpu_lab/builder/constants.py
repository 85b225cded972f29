"""Constants and index arithmetic helpers for kernel bodies."""

from __future__ import annotations

from typing import Any

from .._mlir import arith, ir
from .dtypes import mlir_type

Value = ir.Value


def index_type() -> ir.Type:
    return ir.IndexType.get()


def c(value: int | float | bool, type: Any = None) -> ir.Value:
    """An `arith.constant`. `type` is an MLIR type or a dtype name; default: index for ints."""
    if type is None:
        if isinstance(value, float):
            raise TypeError("c: a float constant needs an explicit type, e.g. c(1.0, 'float32')")
        type = index_type()
    elif not isinstance(type, ir.Type):
        type = mlir_type(type)
    if isinstance(type, ir.IndexType) or isinstance(type, ir.IntegerType):
        return arith.constant(type, ir.IntegerAttr.get(type, int(value)))
    return arith.constant(type, ir.FloatAttr.get(type, float(value)))


def as_index(x: int | ir.Value) -> ir.Value:
    """Python ints become index constants; integer values are cast to index."""
    if isinstance(x, int):
        return c(x)
    if isinstance(x.type, ir.IndexType):
        return x
    if isinstance(x.type, ir.IntegerType):
        return arith.index_cast(index_type(), x)
    raise TypeError(f"index: expected an int or an integer/index value, got {x.type}")


def as_i32(x: int | ir.Value) -> ir.Value:
    """Python ints and index values as i32."""
    i32 = ir.IntegerType.get_signless(32)
    if isinstance(x, int):
        return c(x, i32)
    if isinstance(x.type, ir.IndexType):
        return arith.index_cast(i32, x)
    if ir.IntegerType(x.type).width == 32:
        return x
    raise TypeError(f"i32: expected an int, index or i32 value, got {x.type}")
