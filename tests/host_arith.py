"""Emitted integer index math evaluated on the host: what CPU tests of layouts, transforms and
swizzled stores use to check the arithmetic the builder emits without a GPU."""

from __future__ import annotations

from mgpu_lab._mlir import ir

INT_OPS = {
    "arith.addi": lambda a, b: a + b, "arith.muli": lambda a, b: a * b, "arith.divui": lambda a, b: a // b,
    "arith.remui": lambda a, b: a % b, "arith.xori": lambda a, b: a ^ b, "arith.andi": lambda a, b: a & b,
    "arith.subi": lambda a, b: a - b,
}


def evaluate(value: ir.Value) -> int:
    """The integer an index value computes, following its defining ops (constants and INT_OPS)."""
    op = value.owner
    if op.name == "arith.constant":
        return ir.IntegerAttr(op.attributes["value"]).value
    return INT_OPS[op.name](*(evaluate(v) for v in op.operands))
