"""The low-level helpers the Hopper modules build on: `inline_ptx` (a volatile inline asm with
operands), `smem_address` (the 32-bit shared-window address of an smem memref) and
`global_address` (the 64-bit global address of a global-memory memref).

Inline PTX is used where an upstream op's builder is awkward or hides what is emitted.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from .._mlir import arith, ir, llvm, memref
from .dtypes import bitwidth

__all__ = ["global_address", "i32", "i64", "inline_ptx", "smem_address"]


def i32() -> ir.Type:
    return ir.IntegerType.get_signless(32)


def i64() -> ir.Type:
    return ir.IntegerType.get_signless(64)


def inline_ptx(asm: str, operands: Sequence[ir.Value] = (), constraints: Sequence[str] = (),
               results: Sequence[ir.Type] = (), *, memory: bool = True) -> Any:
    """Emit `asm` (PTX, operands as $0, $1, ...; outputs first) as a volatile inline asm.

    results: the output types (constraints list outputs first, e.g. "=r", then inputs).
    memory: add a memory clobber so the compiler keeps loads/stores on their side of it.
    Returns None, one value, or a list of values.
    """
    cons = list(constraints)
    if memory:
        cons.append("~{memory}")
    if not results:
        llvm.inline_asm(None, list(operands), asm, ",".join(cons), has_side_effects=True)
        return None
    if len(results) == 1:
        return llvm.inline_asm(results[0], list(operands), asm, ",".join(cons), has_side_effects=True)
    struct = llvm.StructType.get_literal(list(results))
    packed = llvm.inline_asm(struct, list(operands), asm, ",".join(cons), has_side_effects=True)
    return [llvm.extractvalue(t, packed, [i]) for i, t in enumerate(results)]


def smem_address(ref: ir.Value) -> ir.Value:
    """The 32-bit shared-memory address (`.shared::cta` window) of a workgroup memref's first
    element, including any static or dynamic view offset."""
    ref_type = ir.MemRefType(ref.type)
    if str(ref_type.memory_space) != "#gpu.address_space<workgroup>":
        raise ValueError(f"smem_address: expected a shared-memory (workgroup) memref, got {ref_type}")
    base = memref.extract_aligned_pointer_as_index(ref)
    offset = memref.extract_strided_metadata(ref)[1]
    nbytes = bitwidth(ref_type.element_type) // 8
    address = base + offset * nbytes
    return arith.index_cast(i32(), address)


def global_address(ref: ir.Value) -> ir.Value:
    """The 64-bit `.global` address of a global-memory memref's first element, including any
    static or dynamic view offset (for PTX that names the global state space: bulk copies,
    acquire/release flags)."""
    ref_type = ir.MemRefType(ref.type)
    if ref_type.memory_space is not None:
        raise ValueError(f"global_address: expected a global-memory memref, got {ref_type}")
    base = memref.extract_aligned_pointer_as_index(ref)
    offset = memref.extract_strided_metadata(ref)[1]
    nbytes = bitwidth(ref_type.element_type) // 8
    generic = arith.index_cast(i64(), base + offset * nbytes)
    return inline_ptx("cvta.to.global.u64 $0, $1;", [generic], ["=l", "l"], [i64()], memory=False)
