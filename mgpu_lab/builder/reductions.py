"""Warp- and block-level reductions of scalar values (any register layout reduces through these).

`warp_reduce(v, "sum")`: a butterfly over `lanes` lanes (default the whole warp; a power of
two: groups of consecutive lanes reduce separately); every lane of a group ends with the
result. `block_reduce(v, "sum", scratch)`: each warp reduces, lane 0 writes its warp's value
to `scratch` (an smem ref of one value per warp), the block synchronizes, every thread
combines the partials in the same order (identical results everywhere), and synchronizes
again so `scratch` is free on return. Values: 32-bit floats or integers (what `shfl` moves).
"""

from __future__ import annotations

from collections.abc import Callable

from .._mlir import arith, gpu, ir, memref, nvvm
from .dtypes import bitwidth
from .threads import WARP_SIZE, linear_thread_idx
from .values import c, i32_type

OPS = ("sum", "max", "min")


def combiner(op: str, element_type: ir.Type, *, signed: bool = True) -> Callable[[ir.Value, ir.Value], ir.Value]:
    """The binary op of reduction `op` for `element_type` (max/min of floats propagate NaN)."""
    if op not in OPS:
        raise ValueError(f"op: expected one of {', '.join(OPS)}, got {op!r}")
    if isinstance(element_type, ir.FloatType):
        return {"sum": arith.addf, "max": arith.maximumf, "min": arith.minimumf}[op]
    if signed:
        return {"sum": arith.addi, "max": arith.maxsi, "min": arith.minsi}[op]
    return {"sum": arith.addi, "max": arith.maxui, "min": arith.minui}[op]


def shfl_xor(value: ir.Value, offset: int) -> ir.Value:
    """The value of lane `lane ^ offset` (all 32 lanes take part)."""
    return nvvm.shfl_sync(value.type, c(-1, i32_type()), value, c(offset, i32_type()), c(0x1F, i32_type()),
                          nvvm.ShflKind.bfly)


def _check_scalar(value: ir.Value, what: str) -> None:
    if not isinstance(value, ir.Value) or isinstance(value.type, (ir.VectorType, ir.MemRefType, ir.IndexType)) \
            or bitwidth(value.type) != 32:
        raise TypeError(f"{what}: expected a 32-bit scalar value (f32, i32), got "
                        f"{getattr(value, 'type', type(value).__name__)}; convert with dsl.cast first")


def warp_reduce(value: ir.Value, op: str = "sum", *, lanes: int = WARP_SIZE, signed: bool = True) -> ir.Value:
    """Reduce `value` over each group of `lanes` consecutive lanes; every lane gets its group's result."""
    _check_scalar(value, "warp_reduce")
    if lanes not in (1, 2, 4, 8, 16, 32):
        raise ValueError(f"warp_reduce: lanes must be a power of two up to 32, got {lanes!r}")
    combine = combiner(op, value.type, signed=signed)
    offset = lanes // 2
    while offset:
        value = combine(value, shfl_xor(value, offset))
        offset //= 2
    return value


def block_reduce(value: ir.Value, op: str, scratch: ir.Value, *, signed: bool = True) -> ir.Value:
    """Reduce `value` over the whole block; every thread gets the result (see the module doc).

    scratch: a shared-memory ref of (warps per block,) values of `value`'s type."""
    _check_scalar(value, "block_reduce")
    ref_type = ir.MemRefType(scratch.type) if isinstance(getattr(scratch, "type", None), ir.MemRefType) else None
    if ref_type is None or len(ref_type.shape) != 1 or ref_type.element_type != value.type:
        raise TypeError(f"block_reduce: scratch must be a 1-D smem ref of {value.type} (one per warp), got "
                        f"{getattr(scratch, 'type', type(scratch).__name__)}")
    warps = ref_type.shape[0]
    combine = combiner(op, value.type, signed=signed)
    mine = warp_reduce(value, op, signed=signed)
    tid = linear_thread_idx()
    from .control import when

    with when(tid % WARP_SIZE == 0):
        memref.store(mine, scratch, [tid // WARP_SIZE])
    gpu.barrier()
    total = memref.load(scratch, [c(0)])
    for w in range(1, warps):  # the same order in every thread: identical results
        total = combine(total, memref.load(scratch, [c(w)]))
    gpu.barrier()  # every thread has read scratch
    return total
