"""Warpgroup MMA (Hopper `wgmma.mma_async`) from shared memory, f32 accumulators in registers.

One warpgroup (128 threads) computes a 64 x n tile: acc += a @ b, with a (64 x k) and b
(k x n) in shared memory, k = one swizzle span (64 bf16/f16 elements for the 128-byte
swizzle). The smem operands are what a TMA copy with that swizzle writes:

- a: memref (64, k), row-major ("K-major"), e.g. a slice of a TMA box (BM, 64).
- b, b_major="k": memref (n, k) holding b transposed (row j = column j of b). This is a
  TMA box of a row-major (N, K) matrix, so `wgmma(acc, a, b_t)` computes A @ B.T tiles.
- b, b_major="mn": memref (n // w, k, w), w = the swizzle span in elements: b itself in
  column chunks of w (what TMA boxes (k, w) of a row-major (K, N) matrix give), for A @ B.

The accumulator lives in n/2 f32 registers per thread (`WGMMAAccumulator`), in the wgmma
fragment layout: register i of a thread in warp w, lane l holds row 16w + l//4 + 8*((i%4)//2),
column 8*(i//4) + 2*(l%4) + i%2.

wgmma is asynchronous: issue `wgmma(...)` calls (they fence first), `wgmma_commit_group()`,
and `acc = wgmma_wait_group(n, acc)` before reading acc or overwriting the smem operands.
Threading acc through the wait is what keeps the compiler from reading the registers early.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

from .._mlir import arith, ir, vector
from .constants import c
from .dtypes import bitwidth
from .threads import lane_idx, thread_in_warpgroup
from .warpgroup import i32, i64, inline_ptx, smem_address

M_TILE = 64
K_STEP_BYTES = 32  # one wgmma instruction consumes k = 16 elements of a 16-bit type
_LAYOUT_CODE = {128: 1, 64: 2, 32: 3}  # sm_90 descriptor bits 62-63
_INPUT_TYPES = {"bf16": "bf16", "f16": "f16"}


def _f32() -> ir.Type:
    return ir.F32Type.get()


class WGMMAAccumulator:
    """A 64 x n f32 tile held by one warpgroup: n/2 f32 values per thread (see module doc)."""

    def __init__(self, values: Sequence[ir.Value], n: int):
        if len(values) != n // 2:
            raise ValueError(f"WGMMAAccumulator: a 64 x {n} tile needs {n // 2} values per thread, got {len(values)}")
        self.values = list(values)
        self.n = n

    @classmethod
    def zeros(cls, n: int) -> WGMMAAccumulator:
        _check_n(n)
        zero = c(0.0, _f32())
        return cls([zero] * (n // 2), n)

    def _flatten_values(self) -> tuple[list[ir.Value], Callable[[Sequence[ir.Value]], WGMMAAccumulator]]:
        """For `for_range(carry=acc)` and `if_else`: the accumulator as a flat list of values."""
        n = self.n
        return list(self.values), lambda vals: WGMMAAccumulator(list(vals), n)

    def fragment_coords(self) -> list[tuple[ir.Value, ir.Value]]:
        """(row, column) in the 64 x n tile of each of this thread's values, as index values."""
        return [(r, col) for r, col in _coords(self.n)]

    def store(self, ref: ir.Value, dtype: Any = None) -> None:
        """Write the tile to a (64, n) memref (global or shared), converting to its element type
        (or `dtype`), two adjacent columns per store."""
        elem = ir.MemRefType(ref.type).element_type if dtype is None else dtype
        shape = tuple(ir.MemRefType(ref.type).shape)
        if shape != (M_TILE, self.n):
            raise ValueError(f"WGMMAAccumulator.store: expected a ({M_TILE}, {self.n}) memref, got {shape}")
        vtype = ir.VectorType.get([2], elem)
        for i, (row, col) in enumerate(_pair_coords(self.n)):
            vector.store(_pack_pair(self.values[2 * i], self.values[2 * i + 1], vtype), ref, [row, col])

    def store_swizzled(self, ref: ir.Value, swizzle: int = 128) -> None:
        """Write the tile to smem laid out for a TMA store with `swizzle`: ref (n // w, 64, w), w
        = swizzle bytes / element size, the logical (64, w) column chunks stored swizzled. The
        swizzle also makes these stores bank-conflict free."""
        ref_type = ir.MemRefType(ref.type)
        elem = ref_type.element_type
        itemsize = bitwidth(elem) // 8
        width = swizzle // itemsize
        if tuple(ref_type.shape) != (self.n // width, M_TILE, width) or self.n % width:
            raise ValueError(f"WGMMAAccumulator.store_swizzled: expected a ({self.n // width}, {M_TILE}, {width}) smem "
                             f"ref for swizzle={swizzle} and {elem}, got {tuple(ref_type.shape)}")
        vtype = ir.VectorType.get([2], elem)
        for i, (row, col) in enumerate(_pair_coords(self.n)):
            chunk = arith.divui(col, c(width))
            byte = arith.muli(arith.remui(col, c(width)), c(itemsize))
            unit = arith.xori(arith.divui(byte, c(16)), arith.remui(row, c(swizzle // 16)))
            phys = arith.divui(arith.addi(arith.muli(unit, c(16)), arith.remui(byte, c(16))), c(itemsize))
            vector.store(_pack_pair(self.values[2 * i], self.values[2 * i + 1], vtype), ref, [chunk, row, phys])


def _pack_pair(x: ir.Value, y: ir.Value, vtype: ir.VectorType) -> ir.Value:
    f32 = _f32()
    pair = vector.from_elements(ir.VectorType.get([2], f32), [x, y])
    if vtype.element_type == f32:
        return pair
    return arith.truncf(vtype, pair)


def _lane_parts() -> tuple[ir.Value, ir.Value]:
    tid = thread_in_warpgroup()
    warp = arith.divui(tid, c(32))
    lane = lane_idx()
    row = arith.addi(arith.muli(warp, c(16)), arith.divui(lane, c(4)))
    col = arith.muli(arith.remui(lane, c(4)), c(2))
    return row, col


def _coords(n: int) -> list[tuple[ir.Value, ir.Value]]:
    row, col = _lane_parts()
    out = []
    for i in range(n // 2):
        r = arith.addi(row, c(8 * ((i % 4) // 2)))
        out.append((r, arith.addi(col, c(8 * (i // 4) + i % 2))))
    return out


def _pair_coords(n: int) -> list[tuple[ir.Value, ir.Value]]:
    """(row, first column) of value pairs (2i, 2i+1)."""
    row, col = _lane_parts()
    out = []
    for j in range(n // 8):
        for half in range(2):
            out.append((arith.addi(row, c(8 * half)), arith.addi(col, c(8 * j))))
    return out


def _check_n(n: int) -> None:
    if not isinstance(n, int) or not 8 <= n <= 256 or n % 8:
        raise ValueError(f"wgmma: n must be a multiple of 8 in [8, 256], got {n!r}")


def smem_descriptor(address: ir.Value, *, swizzle: int, leading_byte_offset: int,
                    stride_byte_offset: int) -> ir.Value:
    """The 64-bit wgmma matrix descriptor of an smem operand at `address` (i32, shared window):
    bits 0-13 address >> 4, 16-29 LBO >> 4, 32-45 SBO >> 4, 62-63 the swizzle mode."""
    if swizzle not in _LAYOUT_CODE:
        raise ValueError(f"wgmma: swizzle must be 32, 64 or 128 bytes, got {swizzle!r}")
    static = ((leading_byte_offset >> 4) & 0x3FFF) << 16
    static |= ((stride_byte_offset >> 4) & 0x3FFF) << 32
    static |= _LAYOUT_CODE[swizzle] << 62
    if static >= 1 << 63:
        static -= 1 << 64  # as a signed i64 constant
    addr = arith.extui(i64(), arith.andi(arith.shrui(address, c(4, i32())), c(0x3FFF, i32())))
    return arith.ori(addr, c(static, i64()))


def _advance(desc: ir.Value, nbytes: int) -> ir.Value:
    return desc if not nbytes else arith.addi(desc, c(nbytes >> 4, i64()))


def wgmma_fence() -> None:
    """`wgmma.fence`: order earlier register/smem writes before the next wgmma reads them."""
    inline_ptx("wgmma.fence.sync.aligned;")


def wgmma_commit_group() -> None:
    """Close the group of wgmma issued since the last commit."""
    inline_ptx("wgmma.commit_group.sync.aligned;")


def wgmma_wait_group(pending: int, acc: WGMMAAccumulator | None = None) -> WGMMAAccumulator | None:
    """Wait until at most `pending` committed groups are in flight. Pass the accumulator(s) the
    groups write and use the returned one: reads of it cannot move above the wait."""
    if not isinstance(pending, int) or not 0 <= pending <= 7:
        raise ValueError(f"wgmma_wait_group: pending must be an int in [0, 7], got {pending!r}")
    asm = f"wgmma.wait_group.sync.aligned {pending};"
    if acc is None:
        inline_ptx(asm)
        return None
    count = len(acc.values)
    values = inline_ptx(asm, acc.values, ["=f"] * count + [str(i) for i in range(count)], [_f32()] * count)
    values = values if isinstance(values, list) else [values]
    return WGMMAAccumulator(values, acc.n)


def _input_type(ref: ir.Value, what: str) -> str:
    elem = str(ir.MemRefType(ref.type).element_type)
    if elem not in _INPUT_TYPES:
        raise ValueError(f"wgmma: {what} must be bf16 or f16 in shared memory, got {elem}")
    return _INPUT_TYPES[elem]


def wgmma(acc: WGMMAAccumulator, a: ir.Value, b: ir.Value, *, b_major: str = "k", swizzle: int = 128,
          accumulate: bool | ir.Value = True, fence: bool = True) -> WGMMAAccumulator:
    """acc (64 x n) += a (64 x k) @ b (k x n) on one warpgroup; see the module doc for layouts.

    Issues k/16 `wgmma.mma_async` instructions (not committed: call `wgmma_commit_group`).
    accumulate=False (or an i1 value that is false) ignores acc's old contents (D = A @ B).
    """
    a_type, b_type = ir.MemRefType(a.type), ir.MemRefType(b.type)
    ta, tb = _input_type(a, "a"), _input_type(b, "b")
    if ta != tb:
        raise ValueError(f"wgmma: a and b must have the same element type, got {ta} and {tb}")
    itemsize = 2
    width = swizzle // itemsize  # the k extent of one swizzle span
    n = acc.n
    _check_n(n)
    if tuple(a_type.shape) != (M_TILE, width):
        raise ValueError(f"wgmma: a must be a ({M_TILE}, {width}) smem tile (64 rows x one {swizzle}-byte swizzle "
                         f"span of k), got {tuple(a_type.shape)}")
    if b_major == "k":
        if tuple(b_type.shape) != (n, width):
            raise ValueError(f"wgmma: with b_major='k', b must be ({n}, {width}) (b transposed: n rows of k), "
                             f"got {tuple(b_type.shape)}")
        b_lbo, b_sbo, b_step, transpose_b = 16, 8 * swizzle, K_STEP_BYTES, 0
    elif b_major == "mn":
        if n % width or tuple(b_type.shape) != (n // width, width, width):
            raise ValueError(f"wgmma: with b_major='mn', n must be a multiple of {width} and b must be "
                             f"({n // width}, {width}, {width}) (column chunks of b), got n={n}, "
                             f"b {tuple(b_type.shape)}")
        b_lbo, b_sbo, b_step, transpose_b = width * swizzle, 8 * swizzle, 16 * swizzle, 1
    else:
        raise ValueError(f"wgmma: b_major must be 'k' or 'mn', got {b_major!r}")
    desc_a = smem_descriptor(smem_address(a), swizzle=swizzle, leading_byte_offset=16,
                             stride_byte_offset=8 * swizzle)
    desc_b = smem_descriptor(smem_address(b), swizzle=swizzle, leading_byte_offset=b_lbo,
                             stride_byte_offset=b_sbo)
    if isinstance(accumulate, bool):
        scale_d = c(int(accumulate), i32())
    else:
        scale_d = arith.extui(i32(), accumulate)
    if fence:
        wgmma_fence()
    count = n // 2
    regs = ", ".join(f"${i}" for i in range(count))
    asm = ("{\n.reg .pred p;\n"
           f"setp.ne.b32 p, ${count + 2}, 0;\n"
           f"wgmma.mma_async.sync.aligned.m64n{n}k16.f32.{ta}.{tb} {{{regs}}}, ${count}, ${count + 1}, "
           f"p, 1, 1, 0, {transpose_b};\n}}")
    constraints = ["=f"] * count + ["l", "l", "r"] + [str(i) for i in range(count)]
    values = acc.values
    for step in range(width // 16):
        operands = [_advance(desc_a, step * K_STEP_BYTES), _advance(desc_b, step * b_step), scale_d, *values]
        out = inline_ptx(asm, operands, constraints, [_f32()] * count, memory=False)
        values = out if isinstance(out, list) else [out]
        scale_d = c(1, i32())
    return WGMMAAccumulator(values, n)
