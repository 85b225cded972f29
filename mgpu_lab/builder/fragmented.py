"""`FragmentedArray`: an array held in registers, distributed over the 128 threads of a warpgroup.

The layouts (which thread holds which elements) are in `builder/layouts.py`: the strided
layout for coalesced copies, the WGMMA layout of an (m, n) tile, and the row / column vector
layouts that reductions of a WGMMA tile produce and `broadcast` expands again.

Elementwise math (+ - * / with arrays of the same layout or Python scalars, neg, max, min,
exp, exp2, log, comparisons giving i1 arrays, `where`) works on the registers and moves no
data. `astype` converts between f32, f16, bf16, f8 (e4m3fn, e5m2) and integers, two elements
per instruction where PTX has a packed conversion (cvt.rn.{bf16x2,f16x2}.f32,
cvt.rn.satfinite.{e4m3x2,e5m2}x2.{f32,f16x2}, cvt.rn.f16x2.{e4m3x2,e5m2}x2).

`reduce_sum` / `reduce_max` of a WGMMA-layout array along axis 1 stay within each row's 4
lanes (two butterfly shuffles); along axis 0 they shuffle across the 8 lane groups of a warp,
then combine the 4 warps through a small smem `scratch` buffer (4, n).

Arrays load from / store to memrefs of their shape (global or shared); WGMMA-layout arrays
also to and from 128/64/32-byte swizzled smem tiles (`load_tiled` / `store_tiled`, bank
conflict free), the layout TMA copies use.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

from .._mlir import arith, ir, memref, nvvm, vector
from .._mlir import math as mlir_math
from .values import as_index, c, select
from .control import when
from .dtypes import bitwidth, mlir_type
from .layouts import (
    Layout,
    WGMMAColLayout,
    WGMMAFragLayout,
    WGMMARowLayout,
    WGStridedLayout,
    tiled_accesses,
    wgmma_thread_base,
)
from .reductions import combiner, shfl_xor, warp_reduce
from .threads import WARPGROUP_SIZE, thread_in_warpgroup
from .ptx import i32, inline_ptx, smem_address
from .warpgroup import map_to_peer, warpgroup_barrier

__all__ = ["FragmentedArray", "Layout", "WGMMAColLayout", "WGMMAFragLayout", "WGMMARowLayout",
           "WGStridedLayout", "optimization_barrier", "where"]

_F8 = ("f8E4M3FN", "f8E5M2")
_F8_PTX = {"f8E4M3FN": "e4m3", "f8E5M2": "e5m2"}
_LOG2E = 1.4426950408889634
_LN2 = 0.6931471805599453
# 2 ** x for x <= 128 with no MUFU op: x = n + f (n = floor(x), by adding 1.5 * 2**23 rounding down,
# which leaves n in the low mantissa bits), 2 ** f by a degree-3 polynomial with p(0) = 1 (coefficients
# fitted here for minimax relative error on [0, 1): 8.6e-5), and n added to its exponent field. x is
# clamped at -127 first: -inf and anything below give 1.0f's bits - 127 << 23 = +0.
_EXP2_POLY_PTX = """{
.reg .f32 t, r, f, p;
.reg .b32 e, q;
max.ftz.f32 t, $1, 0fC2FE0000;
add.rm.ftz.f32 r, t, 0f4B400000;
sub.ftz.f32 f, r, 0f4B400000;
sub.ftz.f32 f, t, f;
fma.rn.ftz.f32 p, f, 0f3D9DD566, 0f3E691BBB;
fma.rn.ftz.f32 p, p, f, 0f3F31F32D;
fma.rn.ftz.f32 p, p, f, 0f3F800000;
mov.b32 e, r;
shl.b32 e, e, 23;
mov.b32 q, p;
add.s32 q, q, e;
mov.b32 $0, q;
}"""


def _is_float(t: ir.Type) -> bool:
    return isinstance(t, ir.FloatType)


def _is_f8(t: ir.Type) -> bool:
    return str(t) in _F8


def _vtype(n: int, elem: ir.Type) -> ir.VectorType:
    return ir.VectorType.get([n], elem)


def elements(reg: ir.Value) -> list[ir.Value]:
    """The scalars of a 1-D vector register. One built by `vector.from_elements` or broadcast
    from a scalar gives its own operands back instead of new `vector.extract`s: what the
    canonicalizer would fold them to, minus the ops (a 128 x 256 accumulator's zeros alone made
    256 extracts of one splat per consumer, a fifth of a stream-K GEMM's IR)."""
    n = ir.VectorType(reg.type).shape[0]
    owner = reg.owner
    op = getattr(owner, "operation", owner)
    name = getattr(op, "name", None)  # a block argument's owner is a Block
    if name == "vector.from_elements":
        return list(op.operands)
    if name == "vector.broadcast" and not isinstance(op.operands[0].type, ir.VectorType):
        return [op.operands[0]] * n
    return [vector.extract(reg, [], [i]) for i in range(n)]


def _f32_ptx(asm: str, reg: ir.Value) -> ir.Value:
    """`asm` ($0 = f($1): one f32 in, one out) applied to each element of an f32 register."""
    vals = [inline_ptx(asm, [v], ["=f", "f"], [v.type], memory=False) for v in elements(reg)]
    return vector.from_elements(reg.type, vals)


def _i16() -> ir.Type:
    return ir.IntegerType.get_signless(16)


def bits_of(reg: ir.Value, width: int) -> list[ir.Value]:
    """A register's bits as `width`-bit integers (e.g. a vector<2xf16> as one i32)."""
    vt = ir.VectorType(reg.type)
    elem_bits = bitwidth(vt.element_type)
    int_elems = _vtype(vt.shape[0], ir.IntegerType.get_signless(elem_bits))
    ints = reg if isinstance(vt.element_type, ir.IntegerType) else arith.bitcast(int_elems, reg)
    total = vt.shape[0] * elem_bits
    words = vector.bitcast(_vtype(total // width, ir.IntegerType.get_signless(width)), ints)
    return elements(words)


def from_bits(words: Sequence[ir.Value], elem: ir.Type, count: int) -> ir.Value:
    """Integer words (all of one width) reinterpreted as a vector of `count` `elem`s."""
    width = ir.IntegerType(words[0].type).width
    packed = vector.from_elements(_vtype(len(words), words[0].type), list(words))
    bits = bitwidth(elem)
    ints = vector.bitcast(_vtype(len(words) * width // bits, ir.IntegerType.get_signless(bits)), packed)
    if len(words) * width // bits != count:
        ints = vector.extract_strided_slice(_vtype(count, ints.type.element_type), ints, [0], [count], [1])
    return ints if isinstance(elem, ir.IntegerType) else arith.bitcast(_vtype(count, elem), ints)


class FragmentedArray:
    """Registers (vectors of `layout.vec` elements) of one warpgroup, in `layout`."""

    __hash__ = None  # == builds an array

    def __init__(self, registers: Sequence[ir.Value], layout: Layout, *, signed: bool = True):
        if len(registers) != layout.registers:
            raise ValueError(f"FragmentedArray: {layout} needs {layout.registers} registers, got {len(registers)}")
        self.registers = list(registers)
        self.layout = layout
        self.signed = signed

    def __repr__(self) -> str:
        return f"FragmentedArray({self.shape}, {self.element_type}, {self.layout})"

    # -- construction ------------------------------------------------------------------
    @classmethod
    def load(cls, ref: ir.Value, vec: int | None = None, *, layout: Layout | None = None) -> FragmentedArray:
        """Load a whole memref (any rank, global or shared): in the strided layout (`vec`
        elements per access, 16 bytes by default), or in `layout` (of the ref's shape)."""
        ref_type = ir.MemRefType(ref.type)
        elem = ref_type.element_type
        if layout is None:
            vec = vec or max(1, 128 // bitwidth(elem))
            layout = WGStridedLayout(tuple(ref_type.shape), vec)
        elif tuple(layout.shape) != tuple(ref_type.shape):
            raise ValueError(f"FragmentedArray.load: layout {layout} has shape {tuple(layout.shape)}, the ref "
                             f"{tuple(ref_type.shape)}")
        vtype = _vtype(layout.vec, elem)
        return cls([vector.load(vtype, ref, idx) for idx in layout.indices()], layout)

    @classmethod
    def splat(cls, value: ir.Value | float, layout: Layout, dtype: Any = None) -> FragmentedArray:
        """Every element equal to `value` (an MLIR scalar, or a Python number with `dtype`)."""
        if not isinstance(value, ir.Value):
            if dtype is None:
                raise ValueError("FragmentedArray.splat: a Python number needs dtype= (e.g. 'float32')")
            elem = mlir_type(dtype)
            value = c(float(value) if _is_float(elem) else int(value), elem)
        reg = vector.broadcast(_vtype(layout.vec, value.type), value)
        return cls([reg] * layout.registers, layout)

    @classmethod
    def from_accumulator(cls, acc: Any) -> FragmentedArray:
        """The array a `WGMMAAccumulator` wraps (`acc.value`): WGMMAFragLayout(acc.n), f32 or f16."""
        return acc.value

    def to_accumulator(self) -> Any:
        """This (64, n) f32/f16 WGMMA-layout array as a wgmma accumulator (e.g. a bias);
        the same as `WGMMAAccumulator.from_array(array)`."""
        from .wgmma import WGMMAAccumulator  # wgmma builds on this module, not the reverse

        return WGMMAAccumulator.from_array(self)

    # -- properties --------------------------------------------------------------------
    @property
    def shape(self) -> tuple[int, ...]:
        return tuple(self.layout.shape)

    @property
    def element_type(self) -> ir.Type:
        return ir.VectorType(self.registers[0].type).element_type

    def flatten_values(self) -> tuple[list[ir.Value], Callable[[Sequence[ir.Value]], FragmentedArray]]:
        """For `for_range(carry=...)` and `if_else`."""
        layout, signed = self.layout, self.signed
        return list(self.registers), lambda vals: FragmentedArray(list(vals), layout, signed=signed)

    _flatten_values = flatten_values  # the older private name

    # -- elementwise ---------------------------------------------------------------------
    def _operand(self, other: Any, what: str = "FragmentedArray") -> list[ir.Value]:
        if isinstance(other, FragmentedArray):
            if other.layout != self.layout:
                raise ValueError(f"{what}: layouts differ: {self.layout} and {other.layout} (broadcast a row/column "
                                 f"vector to the tile first)")
            if other.element_type != self.element_type:
                raise ValueError(f"{what}: element types differ: {self.element_type} and "
                                 f"{other.element_type}; use astype")
            return other.registers
        if isinstance(other, (int, float)):
            elem = self.element_type
            scalar = c(float(other) if _is_float(elem) else int(other), elem)
            reg = vector.broadcast(self.registers[0].type, scalar)
            return [reg] * len(self.registers)
        raise TypeError(f"{what}: cannot combine with {type(other).__name__}")

    def _check_math(self, what: str) -> None:
        if _is_f8(self.element_type):
            raise TypeError(f"FragmentedArray.{what}: {self.element_type} is a storage type; convert with "
                            f"astype('float32') first")

    def _binary(self, other: Any, float_op: Any, int_op: Any, reverse: bool = False) -> FragmentedArray:
        self._check_math("arithmetic")
        rhs = self._operand(other)
        op = float_op if _is_float(self.element_type) else int_op
        if op is None:
            raise TypeError(f"FragmentedArray: operation not supported for {self.element_type}")
        regs = [op(b, a) if reverse else op(a, b) for a, b in zip(self.registers, rhs)]
        return FragmentedArray(regs, self.layout, signed=self.signed)

    def __add__(self, other: Any) -> FragmentedArray:
        return self._binary(other, arith.addf, arith.addi)

    __radd__ = __add__

    def __sub__(self, other: Any) -> FragmentedArray:
        return self._binary(other, arith.subf, arith.subi)

    def __rsub__(self, other: Any) -> FragmentedArray:
        return self._binary(other, arith.subf, arith.subi, reverse=True)

    def __mul__(self, other: Any) -> FragmentedArray:
        return self._binary(other, arith.mulf, arith.muli)

    __rmul__ = __mul__

    def __truediv__(self, other: Any) -> FragmentedArray:
        return self._binary(other, arith.divf, arith.divsi if self.signed else arith.divui)

    def __rtruediv__(self, other: Any) -> FragmentedArray:
        return self._binary(other, arith.divf, arith.divsi if self.signed else arith.divui, reverse=True)

    def __neg__(self) -> FragmentedArray:
        return 0 - self if not _is_float(self.element_type) else \
            FragmentedArray([arith.negf(r) for r in self.registers], self.layout, signed=self.signed)

    def __and__(self, other: Any) -> FragmentedArray:
        return self._binary(other, None, arith.andi)

    def __or__(self, other: Any) -> FragmentedArray:
        return self._binary(other, None, arith.ori)

    def __invert__(self) -> FragmentedArray:
        return self._binary(-1 if bitwidth(self.element_type) > 1 else 1, None, arith.xori)

    def max(self, other: Any) -> FragmentedArray:
        return self._binary(other, arith.maximumf, arith.maxsi if self.signed else arith.maxui)

    def min(self, other: Any) -> FragmentedArray:
        return self._binary(other, arith.minimumf, arith.minsi if self.signed else arith.minui)

    def _unary_float(self, what: str, op: Callable[[ir.Value], ir.Value]) -> FragmentedArray:
        if not _is_float(self.element_type) or _is_f8(self.element_type):
            raise TypeError(f"FragmentedArray.{what}: needs an f32/f16/bf16 array, got {self.element_type}")
        return FragmentedArray([op(r) for r in self.registers], self.layout)

    def exp(self) -> FragmentedArray:
        return self._unary_float("exp", mlir_math.exp)

    def fma(self, b: Any, c: Any) -> FragmentedArray:
        """self * b + c with one rounding (`math.fma`: FFMA / HFMA2), elementwise; b and c are
        arrays of this layout and type or Python numbers. `x * b + c` leaves fusing to LLVM."""
        if not _is_float(self.element_type) or _is_f8(self.element_type):
            raise TypeError(f"FragmentedArray.fma: needs an f32/f16/bf16 array, got {self.element_type}")
        bs, cs = self._operand(b, "FragmentedArray.fma"), self._operand(c, "FragmentedArray.fma")
        regs = [mlir_math.fma(a, x, y) for a, x, y in zip(self.registers, bs, cs)]
        return FragmentedArray(regs, self.layout, signed=self.signed)

    def exp2(self, ftz: bool = True, *, fma_fraction: float = 0.0) -> FragmentedArray:
        """2 ** x on the MUFU unit (`ex2.approx`, ~2 ulp). ftz=True (f32): one instruction;
        results below 2**-126 flush to zero. ftz=False keeps subnormal results (scales around it).

        fma_fraction (f32, ftz only): the share of this thread's registers, spread evenly, whose
        2 ** x is a degree-3 polynomial on the FMA and integer pipes instead (8 instructions per
        element, relative error < 9e-5 for normal results; x <= 128; x <= -127, -inf included,
        gives 0, results below 2**-126 are tiny but inexact where ftz would flush them). MUFU does
        16 ex2 per clock per SM against 128 FMAs: where exp2 is the bottleneck (attention softmax
        at head dim 64), moving 3/16 of them off MUFU balances the two."""
        if not isinstance(fma_fraction, (int, float)) or isinstance(fma_fraction, bool) \
                or not 0.0 <= fma_fraction <= 1.0:
            raise ValueError(f"FragmentedArray.exp2: fma_fraction must be a number in [0, 1], got {fma_fraction!r}")
        if fma_fraction and (not ftz or str(self.element_type) != "f32"):
            raise TypeError(f"FragmentedArray.exp2(fma_fraction={fma_fraction}): needs an f32 array and ftz=True, "
                            f"got {self.element_type} with ftz={ftz}")
        if not ftz or str(self.element_type) != "f32":
            return self._unary_float("exp2", mlir_math.exp2)

        n = len(self.registers)
        # register i goes to the FMA pipes where floor((i + 1) f) steps: floor(n f) of them, evenly spread
        on_fma = [int((i + 1) * fma_fraction + 1e-9) > int(i * fma_fraction + 1e-9) for i in range(n)]
        return FragmentedArray([_f32_ptx(_EXP2_POLY_PTX if poly else "ex2.approx.ftz.f32 $0, $1;", r)
                                for r, poly in zip(self.registers, on_fma)], self.layout)

    def log(self, approx: bool = False) -> FragmentedArray:
        """Natural log: accurate (libm-style polynomial), or approx=True: `lg2.approx` * ln 2."""
        if approx:
            return self.log2(approx=True) * _LN2
        return self._unary_float("log", mlir_math.log)

    def log2(self, approx: bool = False) -> FragmentedArray:
        if not approx:
            return self._unary_float("log2", mlir_math.log2)
        if str(self.element_type) != "f32":
            raise TypeError(f"FragmentedArray.log2(approx=True): needs f32, got {self.element_type}")

        return self._unary_float("log2", lambda reg: _f32_ptx("lg2.approx.f32 $0, $1;", reg))

    # -- comparisons and selection ---------------------------------------------------------
    def _compare(self, other: Any, fpred: str, spred: str, upred: str) -> FragmentedArray:
        self._check_math("comparison")
        rhs = self._operand(other, "FragmentedArray comparison")
        if _is_float(self.element_type):
            pred = getattr(arith.CmpFPredicate, fpred)
            regs = [arith.cmpf(pred, a, b) for a, b in zip(self.registers, rhs)]
        else:
            pred = getattr(arith.CmpIPredicate, spred if self.signed else upred)
            regs = [arith.cmpi(pred, a, b) for a, b in zip(self.registers, rhs)]
        return FragmentedArray(regs, self.layout, signed=False)

    def __lt__(self, other: Any) -> FragmentedArray:
        return self._compare(other, "OLT", "slt", "ult")

    def __le__(self, other: Any) -> FragmentedArray:
        return self._compare(other, "OLE", "sle", "ule")

    def __gt__(self, other: Any) -> FragmentedArray:
        return self._compare(other, "OGT", "sgt", "ugt")

    def __ge__(self, other: Any) -> FragmentedArray:
        return self._compare(other, "OGE", "sge", "uge")

    def __eq__(self, other: object) -> FragmentedArray:  # type: ignore[override]
        return self._compare(other, "OEQ", "eq", "eq")

    def __ne__(self, other: object) -> FragmentedArray:  # type: ignore[override]
        return self._compare(other, "UNE", "ne", "ne")

    def select(self, on_true: Any, on_false: Any, dtype: Any = None) -> FragmentedArray:
        """Elementwise `on_true if self else on_false` for an i1 array (from a comparison)."""
        return where(self, on_true, on_false, dtype)

    # -- conversion --------------------------------------------------------------------
    def astype(self, dtype: Any) -> FragmentedArray:
        """Convert the elements: floats round to nearest even (f8: saturating to the largest
        finite value), int <-> float, int widths (sign per `signed`)."""
        new = dtype if isinstance(dtype, ir.Type) else mlir_type(dtype)
        old = self.element_type
        if new == old:
            return self
        if _is_f8(old) or _is_f8(new):
            return FragmentedArray([_convert_f8(r, new) for r in self.registers], self.layout, signed=self.signed)
        vtype = _vtype(self.layout.vec, new)
        if _is_float(old) and _is_float(new):
            op = arith.extf if bitwidth(new) > bitwidth(old) else arith.truncf
            if bitwidth(new) == bitwidth(old):  # bf16 <-> f16
                return self.astype("float32").astype(new)
            if str(old) == "f32" and str(new) in ("bf16", "f16"):
                op = _pack_f32
        elif _is_float(old):
            op = arith.fptosi if self.signed else arith.fptoui
        elif _is_float(new):
            op = arith.sitofp if self.signed else arith.uitofp
        else:
            op = (arith.extsi if self.signed else arith.extui) if bitwidth(new) > bitwidth(old) else arith.trunci
        return FragmentedArray([op(vtype, r) for r in self.registers], self.layout, signed=self.signed)

    # -- reductions and broadcasts -------------------------------------------------------
    def reduce_sum(self, axis: int, *, scratch: ir.Value | None = None) -> FragmentedArray:
        """Sum a WGMMA-layout (m, n) array along `axis`: axis=1 gives a WGMMARowLayout (m,)
        vector, axis=0 a WGMMAColLayout (n,) vector (needs `scratch`, a (4, n) smem ref of the
        element type, to combine the 4 warps; it is free again when this returns)."""
        return self._reduce("sum", axis, scratch)

    def reduce_max(self, axis: int, *, scratch: ir.Value | None = None) -> FragmentedArray:
        """Maximum along `axis` (NaN propagates); see reduce_sum."""
        return self._reduce("max", axis, scratch)

    def reduce_min(self, axis: int, *, scratch: ir.Value | None = None) -> FragmentedArray:
        return self._reduce("min", axis, scratch)

    def _combiner(self, op: str) -> Callable[[ir.Value, ir.Value], ir.Value]:
        return combiner(op, self.element_type, signed=self.signed)

    def reduce(self, op: str, axis: int | None = None, *, scratch: ir.Value | None = None) -> Any:
        """Reduce with `op` ("sum", "max", "min") in any layout without copies (strided, WGMMA).

        axis=None: over the whole array, a scalar every thread of the warpgroup holds (the 4
        warps combine through `scratch`, a (4,) smem ref of the element type).
        axis=-1 on a WGStridedLayout (rows, cols) array: per row, as an array of the same layout
        where every element holds its row's result (so `x - x.reduce("sum", -1) / cols` is
        elementwise). A row's cols / vec threads must fit in a warp (a power of two <= 32).
        The WGMMA-layout row/column reductions are `reduce_sum(axis=...)` and friends."""
        what = f"FragmentedArray.reduce({op!r})"
        if bitwidth(self.element_type) != 32 or _is_f8(self.element_type):
            raise TypeError(f"{what}: reduces 32-bit elements (f32, i32), got {self.element_type}; "
                            f"use astype('float32') first")
        if isinstance(self.layout, (WGMMARowLayout, WGMMAColLayout)):
            raise ValueError(f"{what}: {self.layout} holds copies of each value in several threads; reduce "
                             f"the WGMMA-layout array it came from")
        combine = self._combiner(op)
        if axis is None:
            mine = combine_all([v for r in self.registers for v in elements(r)], combine)
            warp_total = warp_reduce(mine, op, signed=self.signed)
            return _warpgroup_combine(warp_total, combine, scratch, what)
        layout = self.layout
        if not isinstance(layout, WGStridedLayout) or axis not in (-1, len(layout.shape) - 1):
            raise ValueError(f"{what}: axis={axis!r} needs a WGStridedLayout array and its last axis; "
                             f"got {layout}")
        group = layout.shape[-1] // layout.vec
        if layout.shape[-1] % layout.vec or group not in (1, 2, 4, 8, 16, 32):
            raise ValueError(f"{what}: a row of {layout.shape[-1]} elements spans {layout.shape[-1] / layout.vec:g} "
                             f"threads of {layout.vec}; per-row reductions need a power of two up to 32")
        out = []
        for reg in self.registers:
            row_value = warp_reduce(combine_all(elements(reg), combine), op, lanes=group, signed=self.signed)
            out.append(vector.broadcast(reg.type, row_value))
        return FragmentedArray(out, layout, signed=self.signed)

    def _reduce(self, op: str, axis: int, scratch: ir.Value | None) -> FragmentedArray:
        layout = self.layout
        what = f"FragmentedArray.reduce_{op}"
        if not isinstance(layout, WGMMAFragLayout):
            raise ValueError(f"{what}: reductions need an array in WGMMAFragLayout, got {layout}")
        if axis not in (0, 1, -1, -2):
            raise ValueError(f"{what}: axis must be 0 or 1 for an (m, n) array, got {axis!r}")
        axis %= 2
        if bitwidth(self.element_type) != 32 or _is_f8(self.element_type):
            raise TypeError(f"{what}: reduces 32-bit elements (f32, i32), got {self.element_type}; "
                            f"use astype('float32') first")
        combine = self._combiner(op)
        tiles, groups = layout.m // 64, layout.n // 8
        if axis == 1:
            out = []
            for i in range(tiles):
                for h in range(2):
                    acc = _tree([self.registers[layout.index(i, j, h)] for j in range(groups)], combine)
                    v = combine(*elements(acc))
                    for offset in (1, 2):  # the 4 lanes of a row
                        v = combine(v, shfl_xor(v, offset))
                    out.append(vector.from_elements(_vtype(1, v.type), [v]))
            return FragmentedArray(out, WGMMARowLayout(layout.m), signed=self.signed)
        if scratch is None:
            raise ValueError(f"{what}(axis=0): the 4 warps combine through shared memory: pass scratch=, a "
                             f"(4, {layout.n}) smem ref of {self.element_type}")
        scratch_type = ir.MemRefType(scratch.type)
        if tuple(scratch_type.shape) != (4, layout.n) or scratch_type.element_type != self.element_type:
            raise ValueError(f"{what}(axis=0): scratch must be a (4, {layout.n}) smem ref of {self.element_type}, "
                             f"got {tuple(scratch_type.shape)} of {scratch_type.element_type}")
        partial = []
        for j in range(groups):
            acc = _tree([self.registers[layout.index(i, j, h)] for i in range(tiles) for h in range(2)], combine)
            elems = elements(acc)
            for offset in (4, 8, 16):  # the 8 lane groups of a warp
                elems = [combine(v, shfl_xor(v, offset)) for v in elems]
            partial.append(vector.from_elements(acc.type, elems))
        warp = thread_in_warpgroup() // 32
        _, col = wgmma_thread_base()
        with when(thread_in_warpgroup() % 32 < 4):  # the first lane group holds the warp's sums
            for j, reg in enumerate(partial):
                vector.store(reg, scratch, [warp, col + 8 * j])
        warpgroup_barrier()
        out = []
        for j in range(groups):
            regs = [vector.load(partial[j].type, scratch, [c(w), col + 8 * j]) for w in range(4)]
            acc = regs[0]
            for r in regs[1:]:  # the same order in every thread: identical copies
                acc = combine(acc, r)
            out.append(acc)
        warpgroup_barrier()  # everyone has read scratch
        return FragmentedArray(out, WGMMAColLayout(layout.n), signed=self.signed)

    def broadcast(self, shape: Sequence[int]) -> FragmentedArray:
        """A row vector (WGMMARowLayout, shape (m,)) or column vector (WGMMAColLayout, (n,))
        repeated along the other axis into an (m, n) WGMMAFragLayout array. No data moves."""
        shape = tuple(shape)
        layout = self.layout
        if len(shape) != 2:
            raise ValueError(f"FragmentedArray.broadcast: shape must be (m, n), got {shape}")
        m, n = shape
        if isinstance(layout, WGMMARowLayout):
            if m != layout.m:
                raise ValueError(f"FragmentedArray.broadcast: a row vector of {layout.m} values broadcasts to "
                                 f"({layout.m}, n), got shape {shape}")
            target = WGMMAFragLayout(n, m)
            wide = [vector.broadcast(_vtype(2, self.element_type), vector.extract(r, [], [0])) for r in self.registers]
            regs = [wide[2 * i + h] for i in range(m // 64) for _ in range(n // 8) for h in range(2)]
        elif isinstance(layout, WGMMAColLayout):
            if n != layout.n:
                raise ValueError(f"FragmentedArray.broadcast: a column vector of {layout.n} values broadcasts to "
                                 f"(m, {layout.n}), got shape {shape}")
            target = WGMMAFragLayout(n, m)
            regs = [self.registers[j] for _ in range(m // 64) for j in range(n // 8) for _ in range(2)]
        else:
            raise ValueError(f"FragmentedArray.broadcast: needs a WGMMARowLayout or WGMMAColLayout vector, got "
                             f"{layout}")
        return FragmentedArray(regs, target, signed=self.signed)

    def columns(self, start: int, width: int) -> FragmentedArray:
        """Columns [start, start + width) of an (m, n) WGMMAFragLayout array, as an (m, width)
        one (its registers, no data moves): e.g. to convert and store a wide tile in pieces.
        start and width are multiples of 8 (a thread's column group)."""
        layout = self.layout
        if not isinstance(layout, WGMMAFragLayout):
            raise ValueError(f"FragmentedArray.columns: needs an array in WGMMAFragLayout, got {layout}")
        for name, value in (("start", start), ("width", width)):
            if isinstance(value, bool) or not isinstance(value, int) or value % 8:
                raise ValueError(f"FragmentedArray.columns: {name} must be an int multiple of 8 (a column group), "
                                 f"got {value!r}")
        if width <= 0 or start < 0 or start + width > layout.n:
            raise ValueError(f"FragmentedArray.columns: columns [{start}, {start + width}) must lie inside the "
                             f"array's {layout.n} columns (width > 0)")
        regs = [self.registers[layout.index(i, j, h)] for i in range(layout.m // 64)
                for j in range(start // 8, (start + width) // 8) for h in range(2)]
        return FragmentedArray(regs, WGMMAFragLayout(width, layout.m), signed=self.signed)

    @classmethod
    def from_columns(cls, pieces: Sequence[FragmentedArray]) -> FragmentedArray:
        """The (m, n1 + n2 + ...) WGMMAFragLayout array whose columns are the pieces' side by side
        (each (m, n_i) in WGMMAFragLayout, one element type): the inverse of `columns`, e.g. to
        put a tile back together after working on it piece by piece. Moves no data."""
        if not pieces or not all(isinstance(p, FragmentedArray) and isinstance(p.layout, WGMMAFragLayout)
                                 for p in pieces):
            raise ValueError("FragmentedArray.from_columns: needs one or more arrays in WGMMAFragLayout, got "
                             f"{[getattr(p, 'layout', type(p).__name__) for p in pieces]}")
        m, elem = pieces[0].layout.m, pieces[0].element_type
        if any(p.layout.m != m or p.element_type != elem for p in pieces):
            raise ValueError(f"FragmentedArray.from_columns: the pieces must have the same rows and element type, got "
                             f"{[(p.shape, str(p.element_type)) for p in pieces]}")
        layout = WGMMAFragLayout(sum(p.layout.n for p in pieces), m)
        regs = [p.registers[p.layout.index(i, j, h)] for i in range(m // 64) for p in pieces
                for j in range(p.layout.n // 8) for h in range(2)]
        return cls(regs, layout, signed=pieces[0].signed)

    # -- memory ----------------------------------------------------------------------
    def store(self, ref: ir.Value) -> None:
        """Store to a memref of the array's shape and element type (global or shared). Row /
        column vectors are stored once (by the threads `layout.owner()` picks)."""
        ref_type = ir.MemRefType(ref.type)
        if tuple(ref_type.shape) != self.shape:
            raise ValueError(f"FragmentedArray.store: the ref has shape {tuple(ref_type.shape)}, the array {self.shape}")
        if ref_type.element_type != self.element_type:
            raise ValueError(f"FragmentedArray.store: the ref holds {ref_type.element_type}, the array "
                             f"{self.element_type}; use astype first")
        owner = self.layout.owner()
        if owner is None:
            for reg, idx in zip(self.registers, self.layout.indices()):
                vector.store(reg, ref, idx)
            return
        indices = self.layout.indices()
        with when(owner):
            for reg, idx in zip(self.registers, indices):
                vector.store(reg, ref, idx)

    def store_by_thread(self, ref: ir.Value, *, pack: int = 1) -> None:
        """Park the registers as they are: register r of warpgroup thread t at ref[r, t], ref a
        (registers, 128, vec) array of the element type in shared or global memory (consecutive
        threads write consecutive bytes: no bank conflicts, coalesced). `load_by_thread` reads
        them back in the same layout, here or, with cta=, from a peer block of the cluster
        (distributed shared memory): how the blocks of a cluster sum their partial tiles
        (split-K); in global memory, how stream-K blocks hand partial tiles to each other.
        pack: registers r .. r + pack - 1 side by side at ref[r // pack, t] (ref (registers /
        pack, 128, vec * pack)): wider accesses, e.g. 16 bytes for pairs of f32 pairs."""
        _check_by_thread(ref, self.layout, self.element_type, "FragmentedArray.store_by_thread", pack)
        thread = thread_in_warpgroup()
        for r in range(0, len(self.registers), pack):
            group = self.registers[r:r + pack]
            wide = group[0]
            for reg in group[1:]:  # concatenate: shuffle indices run over both operands
                n, m = ir.VectorType(wide.type).shape[0], ir.VectorType(reg.type).shape[0]
                wide = vector.shuffle(wide, reg, list(range(n + m)))
            vector.store(wide, ref, [c(r // pack), thread, c(0)])

    def store_transposed(self, ref: ir.Value, row: Any, col: Any) -> None:
        """Store an (m, n) WGMMAFragLayout array transposed into a 2-d `ref` (global or shared)
        of its element type: element (i, j) to ref[row + j, col + i], skipping those that fall
        outside the ref (a tile over an edge of C). For a GEMM computed as C.T = B @ A.T (swap
        A and B so a skinny A fills a narrow wgmma N instead of 64 mostly empty rows): one
        scalar store per element, so meant for small outputs."""
        if not isinstance(self.layout, WGMMAFragLayout):
            raise ValueError(f"FragmentedArray.store_transposed: needs an array in WGMMAFragLayout, got {self.layout}")
        ref_type = ir.MemRefType(ref.type)
        shape = tuple(ref_type.shape)
        if len(shape) != 2 or ref_type.element_type != self.element_type:
            raise ValueError(f"FragmentedArray.store_transposed: ref must be a 2-d array of {self.element_type}, got "
                             f"{shape} of {ref_type.element_type}; use astype first")
        layout = self.layout
        base_row, base_col = wgmma_thread_base()
        for i in range(layout.m // 64):
            for j in range(layout.n // 8):
                for h in range(2):
                    source_row = as_index(col) + base_row + (64 * i + 8 * h)  # a row of the array: a column of ref
                    values = elements(self.registers[layout.index(i, j, h)])
                    for e, value in enumerate(values):
                        target_row = as_index(row) + base_col + (8 * j + e)
                        with when((target_row < shape[0]) & (source_row < shape[1])):
                            memref.store(value, ref, [target_row, source_row])

    def store_tiled_transposed(self, ref: ir.Value, swizzle: int = 128) -> None:
        """Store an (m, n) WGMMAFragLayout array as its (n, m) transpose into a swizzled smem tile
        (m // w, n, w) (w = swizzle / itemsize; n a multiple of 8), the layout a TMA store of
        that transpose reads: element (i, j) to row j, column i of the transpose. For a GEMM
        computed as C.T = B @ A.T (swap-AB): C's tile goes out by TMA, whole 128-byte lines,
        instead of a scalar global store per element (`store_transposed`). One 2- or 4-byte
        access per element; a warp's 32 land in 4 rows, one 16-byte unit each, which the
        swizzle puts in distinct banks. Make the writes visible to TMA (`fence_async_shared` +
        a barrier) before the store."""
        what = "FragmentedArray.store_tiled_transposed"
        if not isinstance(self.layout, WGMMAFragLayout):
            raise ValueError(f"{what}: needs an array in WGMMAFragLayout, got {self.layout}")
        if swizzle not in (32, 64, 128):
            raise ValueError(f"{what}: swizzle must be 32, 64 or 128 (bytes), got {swizzle!r}")
        ref_type = ir.MemRefType(ref.type)
        if str(ref_type.memory_space) != "#gpu.address_space<workgroup>":
            raise ValueError(f"{what}: the tile must be in shared memory, got {ref_type}")
        elem = ref_type.element_type
        itemsize = bitwidth(elem) // 8
        width = swizzle // itemsize
        m, n = self.shape
        if tuple(ref_type.shape) != (m // width, n, width) or m % width or n % 8 or elem != self.element_type:
            raise ValueError(f"{what}: expected a ({m // width}, {n}, {width}) smem tile of {self.element_type} "
                             f"(the ({n}, {m}) transpose in {width}-element rows), got {tuple(ref_type.shape)} of "
                             f"{elem}")
        layout = self.layout
        base_row, base_col = wgmma_thread_base()
        lines = 128 // swizzle  # transpose rows per 128-byte line of the swizzle pattern
        # The thread's element (64 i + 8 h + base_row, 8 j + e + base_col) goes to chunk
        # (base_row + 8 h) // width + 64 i // width, row 8 j + e + base_col, and a swizzled column
        # that depends on h and e only (8 j moves whole swizzle periods): four addresses per
        # thread, each store one constant offset from them (what keeps the epilogue's registers).
        local = [base_row + 8 * h for h in range(2)]  # < 64: a width (8-64) divides 64
        unit = [(base_col + e) // lines % (swizzle // 16) for e in range(2)]
        column = [[((local[h] % width * itemsize) ^ (unit[e] * 16)) // itemsize for e in range(2)] for h in range(2)]
        chunk = [local[h] // width for h in range(2)]
        for i in range(layout.m // 64):
            for j in range(layout.n // 8):
                for h in range(2):
                    values = elements(self.registers[layout.index(i, j, h)])
                    for e, value in enumerate(values):
                        vector.store(vector.from_elements(_vtype(1, elem), [value]), ref,
                                     [as_index(chunk[h] + 64 * i // width), as_index(base_col + (8 * j + e)),
                                      as_index(column[h][e])])

    @classmethod
    def load_by_thread(cls, ref: ir.Value, layout: Layout, *, cta: int | ir.Value | None = None,
                       pack: int = 1) -> FragmentedArray:
        """The array `store_by_thread` parked in `ref` (a (layout.registers / pack, 128, vec *
        pack) array in shared or global memory, `pack` as it was stored with): this block's, or
        with `cta` (a cluster rank; smem only) the same smem location in that block of the
        cluster (`mapa` + `ld.shared::cluster`; 32-bit elements, at most 4 per access). The peer
        must have stored before a cluster barrier this block has passed, and must not exit or
        overwrite the buffer before a later one (e.g. `cluster_sync()` after the loads)."""
        elem = ir.MemRefType(ref.type).element_type
        _check_by_thread(ref, layout, elem, "FragmentedArray.load_by_thread", pack, peer=cta is not None)
        thread = thread_in_warpgroup()
        vec, wide = layout.vec, layout.vec * pack
        if cta is None:
            slots = [vector.load(_vtype(wide, elem), ref, [c(r), thread, c(0)]) for r in range(layout.registers // pack)]
            return cls(_unpack(slots, vec, pack), layout)
        if bitwidth(elem) != 32 or wide not in (1, 2, 4):
            raise ValueError(f"FragmentedArray.load_by_thread: reading a peer block needs 32-bit elements, 1, 2 or "
                             f"4 per access (register width x pack); got {vec} x {pack} x {elem}")
        step = wide * 4  # bytes per slot
        mine = smem_address(ref) + arith.index_cast(i32(), thread) * step
        peer = map_to_peer(mine, cta)
        kind = "f" if _is_float(elem) else "r"
        outs = ", ".join(f"${i}" for i in range(wide))
        width = "" if wide == 1 else f".v{wide}"
        slots = []
        for r in range(layout.registers // pack):
            offset = r * WARPGROUP_SIZE * step
            values = inline_ptx(f"ld.shared::cluster{width}.b32 {{{outs}}}, [${wide}+{offset}];" if wide > 1
                                else f"ld.shared::cluster.b32 $0, [$1+{offset}];",
                                [peer], [f"={kind}"] * wide + ["r"], [elem] * wide, memory=False)
            values = values if isinstance(values, list) else [values]
            slots.append(vector.from_elements(_vtype(wide, elem), values))
        return cls(_unpack(slots, vec, pack), layout)

    @classmethod
    def load_tiled(cls, ref: ir.Value, swizzle: int = 128, *, m: int | None = None) -> FragmentedArray:
        """Load an (m, n) array in WGMMAFragLayout from a swizzled smem tile (n // w, m, w)
        (or (m, w)), w = swizzle bytes / element size: what TMA copies of (m, w) boxes with
        `swizzle` write. Bank-conflict free."""
        elem, m, n, ref3 = _tiled_ref(ref, swizzle, "FragmentedArray.load_tiled")
        layout = WGMMAFragLayout(n, m)
        itemsize = bitwidth(elem) // 8
        row, col = wgmma_thread_base()
        parts: dict[int, list[Any]] = {}
        for access in tiled_accesses(layout, itemsize, swizzle, row, col):
            index = [as_index(x) for x in access.index]
            if access.element is None:
                parts[access.register] = [vector.load(_vtype(2, elem), ref3, index)]
            else:
                value = vector.extract(vector.load(_vtype(1, elem), ref3, index), [], [0])
                parts.setdefault(access.register, []).append((access.element, value))
        regs = []
        for r in range(layout.registers):
            got = parts[r]
            if len(got) == 1:
                regs.append(got[0])
                continue
            (flip, first), (_, second) = got  # first holds element `flip`, second the other one
            swapped = flip != 0
            regs.append(vector.from_elements(_vtype(2, elem), [select(swapped, second, first),
                                                               select(swapped, first, second)]))
        return cls(regs, layout)

    def store_tiled(self, ref: ir.Value, swizzle: int = 128) -> None:
        """Store a WGMMAFragLayout array into a swizzled smem tile (n // w, m, w) (or (m, w)) for
        a TMA store with `swizzle`; see load_tiled. Bank-conflict free. Make the writes visible
        to TMA (`commit_shared`, or `fence_async_shared` + a barrier) before the store."""
        if not isinstance(self.layout, WGMMAFragLayout):
            raise ValueError(f"FragmentedArray.store_tiled: needs an array in WGMMAFragLayout, got {self.layout}")
        elem, m, n, ref3 = _tiled_ref(ref, swizzle, "FragmentedArray.store_tiled")
        if (m, n) != self.shape or elem != self.element_type:
            raise ValueError(f"FragmentedArray.store_tiled: the tile holds a ({m}, {n}) array of {elem}, the array "
                             f"is {self.shape} of {self.element_type}")
        itemsize = bitwidth(elem) // 8
        row, col = wgmma_thread_base()
        for access in tiled_accesses(self.layout, itemsize, swizzle, row, col):
            index = [as_index(x) for x in access.index]
            reg = self.registers[access.register]
            if access.element is None:
                vector.store(reg, ref3, index)
                continue
            first, second = elements(reg)
            value = select(access.element != 0, second, first)
            vector.store(vector.from_elements(_vtype(1, elem), [value]), ref3, index)


def _check_by_thread(ref: ir.Value, layout: Layout, elem: ir.Type, what: str, pack: int = 1, *,
                     peer: bool = False) -> None:
    ref_type = ir.MemRefType(ref.type)
    smem = str(ref_type.memory_space) == "#gpu.address_space<workgroup>"
    if peer and not smem:
        raise ValueError(f"{what}: reading a peer block (cta=) needs a shared-memory ref, got {ref_type}")
    if not smem and ref_type.memory_space is not None:
        raise ValueError(f"{what}: ref must be in shared or global memory, got {ref_type}")
    if isinstance(pack, bool) or not isinstance(pack, int) or pack < 1 or layout.registers % pack:
        raise ValueError(f"{what}: pack must be a positive int dividing the {layout.registers} registers, "
                         f"got {pack!r}")
    want = (layout.registers // pack, WARPGROUP_SIZE, layout.vec * pack)
    if tuple(ref_type.shape) != want or ref_type.element_type != elem:
        raise ValueError(f"{what}: ref must be a {want} array of {elem} (registers{' / pack' if pack > 1 else ''}, "
                         f"warpgroup threads, elements per register{' x pack' if pack > 1 else ''}), got "
                         f"{tuple(ref_type.shape)} of {ref_type.element_type}")
    strides, offset = ref_type.get_strides_and_offset()
    if list(strides) != [WARPGROUP_SIZE * want[2], want[2], 1]:
        raise ValueError(f"{what}: ref must be contiguous, got strides {tuple(strides)}")


def _unpack(slots: list[ir.Value], vec: int, pack: int) -> list[ir.Value]:
    """Split slots of vec * pack elements back into pack registers of vec each."""
    if pack == 1:
        return slots
    return [vector.shuffle(slot, slot, list(range(i * vec, (i + 1) * vec))) for slot in slots for i in range(pack)]


def combine_all(values: list[ir.Value], combine: Callable[[ir.Value, ir.Value], ir.Value]) -> ir.Value:
    """Combine scalars pairwise as a tree (shorter dependency chains than a left fold)."""
    return _tree(list(values), combine)


def _warpgroup_combine(value: ir.Value, combine: Callable[[ir.Value, ir.Value], ir.Value],
                       scratch: ir.Value | None, what: str) -> ir.Value:
    """Each warp's (identical-in-its-lanes) value combined over the warpgroup's 4 warps."""
    if scratch is None:
        raise ValueError(f"{what}: the 4 warps combine through shared memory: pass scratch=, a (4,) smem ref "
                         f"of {value.type}")
    ref_type = ir.MemRefType(scratch.type)
    if tuple(ref_type.shape) != (4,) or ref_type.element_type != value.type:
        raise ValueError(f"{what}: scratch must be a (4,) smem ref of {value.type}, got "
                         f"{tuple(ref_type.shape)} of {ref_type.element_type}")
    warp = thread_in_warpgroup() // 32
    with when(thread_in_warpgroup() % 32 == 0):
        memref.store(value, scratch, [warp])
    warpgroup_barrier()
    total = memref.load(scratch, [c(0)])
    for w in range(1, 4):  # the same order in every thread: identical results
        total = combine(total, memref.load(scratch, [c(w)]))
    warpgroup_barrier()  # every thread has read scratch
    return total


def _tree(values: list[ir.Value], combine: Callable[[ir.Value, ir.Value], ir.Value]) -> ir.Value:
    while len(values) > 1:
        values = [combine(values[k], values[k + 1]) if k + 1 < len(values) else values[k]
                  for k in range(0, len(values), 2)]
    return values[0]


def _tiled_ref(ref: ir.Value, swizzle: int, what: str) -> tuple[ir.Type, int, int, ir.Value]:
    """(element type, m, n, rank-3 view) of a swizzled tile ref, checked."""
    from .memref_ops import memref_unsqueeze

    ref_type = ir.MemRefType(ref.type)
    if str(ref_type.memory_space) != "#gpu.address_space<workgroup>":
        raise ValueError(f"{what}: the tile must be in shared memory, got {ref_type}")
    if swizzle not in (32, 64, 128):
        raise ValueError(f"{what}: swizzle must be 32, 64 or 128 (bytes), got {swizzle!r}")
    elem = ref_type.element_type
    itemsize = bitwidth(elem) // 8
    width = swizzle // itemsize
    shape = tuple(ref_type.shape)
    if len(shape) == 2:
        ref, shape = memref_unsqueeze(ref, 0), (1, *shape)
    if len(shape) != 3 or shape[2] != width or shape[1] % 64:
        raise ValueError(f"{what}: expected a (n // {width}, m, {width}) smem tile (m a multiple of 64; {width} "
                         f"{elem} = {swizzle} bytes per swizzled row), got {tuple(ref_type.shape)}")
    strides, offset = ir.MemRefType(ref.type).get_strides_and_offset()
    period = 8 * swizzle
    dynamic = ir.ShapedType.get_dynamic_stride_or_offset()
    if strides[2] != 1 or strides[1] != width or (shape[0] > 1 and (strides[0] * itemsize) % period):
        raise ValueError(f"{what}: rows must be contiguous {swizzle}-byte lines and chunks {period}-byte aligned, "
                         f"got strides {tuple(strides)}")
    if offset != dynamic and (offset * itemsize) % period:
        raise ValueError(f"{what}: the tile starts {offset * itemsize} bytes into its buffer; a {swizzle}-byte "
                         f"swizzle repeats every {period} bytes, so the start must be a multiple of {period}")
    return elem, shape[1], shape[0] * width, ref


def optimization_barrier(*arrays: FragmentedArray) -> tuple[FragmentedArray, ...]:
    """The same arrays, passed through an empty volatile asm: everything that computes them
    happens before it and everything after it that uses them, after. The compiler schedules
    freely otherwise; this keeps e.g. a running sum from being deferred below the loads of the
    next piece (which would hold every piece in registers at once, and spill). 32-bit elements."""
    values, shapes = [], []
    for array in arrays:
        if not isinstance(array, FragmentedArray) or bitwidth(array.element_type) != 32:
            raise ValueError(f"optimization_barrier: expected FragmentedArrays of 32-bit elements, got "
                             f"{getattr(array, 'element_type', type(array).__name__)}")
        regs = [elements(reg) for reg in array.registers]
        shapes.append([len(r) for r in regs])
        values += [v for r in regs for v in r]
    if not values:
        return tuple(arrays)
    kinds = ["f" if _is_float(v.type) else "r" for v in values]
    outs = inline_ptx("", values, [f"={k}" for k in kinds] + [str(i) for i in range(len(values))],
                      [v.type for v in values], memory=False)
    outs = outs if isinstance(outs, list) else [outs]
    result, at = [], 0
    for array, sizes in zip(arrays, shapes):
        regs = []
        for size in sizes:
            regs.append(vector.from_elements(_vtype(size, array.element_type), outs[at:at + size]))
            at += size
        result.append(FragmentedArray(regs, array.layout, signed=array.signed))
    return tuple(result)


def where(condition: FragmentedArray, on_true: Any, on_false: Any, dtype: Any = None) -> FragmentedArray:
    """Elementwise select: `on_true` where the i1 array `condition` holds, else `on_false`
    (arrays of the condition's layout, or Python scalars; two scalars need `dtype`)."""
    if not isinstance(condition, FragmentedArray) or str(condition.element_type) != "i1":
        raise TypeError(f"where: condition must be an i1 FragmentedArray (from a comparison), got "
                        f"{condition!r}")
    arrays = [x for x in (on_true, on_false) if isinstance(x, FragmentedArray)]
    if not arrays:
        if dtype is None:
            raise TypeError("where: with two scalars pass dtype= (e.g. 'float32'); or pass a FragmentedArray")
        arrays = [FragmentedArray.splat(0, condition.layout, dtype)]
    like = arrays[0]
    if like.layout != condition.layout:
        raise ValueError(f"where: layouts differ: condition {condition.layout}, values {like.layout}")
    a, b = like._operand(on_true, "where"), like._operand(on_false, "where")
    regs = [arith.select(cnd, x, y) for cnd, x, y in zip(condition.registers, a, b)]
    return FragmentedArray(regs, like.layout, signed=like.signed)


# -- f8 conversions (PTX cvt; MLIR's arith lowering has none for NVPTX) -------------------------

def _pairs(values: list[ir.Value]) -> list[tuple[ir.Value, ir.Value]]:
    if len(values) % 2:
        values = values + [values[-1]]
    return [(values[k], values[k + 1]) for k in range(0, len(values), 2)]


def _pack_f32(vtype: ir.VectorType, reg: ir.Value) -> ir.Value:
    """f32 -> bf16/f16, two elements per `cvt.rn.{bf16x2,f16x2}.f32` (LLVM splits the packed
    form into scalar cvts whenever the result has more than one use)."""
    kind = "bf16x2" if str(vtype.element_type) == "bf16" else "f16x2"
    words = [inline_ptx(f"cvt.rn.{kind}.f32 $0, $1, $2;", [hi, lo], ["=r", "f", "f"], [i32()], memory=False)
             for lo, hi in _pairs(elements(reg))]
    return from_bits(words, vtype.element_type, vtype.shape[0])


def _to_f8(reg: ir.Value, new: ir.Type) -> ir.Value:
    """f32 or f16 register -> f8: two elements per cvt.rn.satfinite.{e4m3x2,e5m2}x2."""
    old = ir.VectorType(reg.type).element_type
    count = ir.VectorType(reg.type).shape[0]
    kind = _F8_PTX[str(new)]
    words = []
    if str(old) == "f16" and count % 2 == 0:
        for word in bits_of(reg, 32):
            words.append(inline_ptx(f"cvt.rn.satfinite.{kind}x2.f16x2 $0, $1;", [word], ["=h", "r"], [_i16()],
                                    memory=False))
    else:
        if str(old) != "f32":
            reg = arith.extf(_vtype(count, ir.F32Type.get()), reg)
        for lo, hi in _pairs(elements(reg)):
            # the first source operand fills the upper byte
            words.append(inline_ptx(f"cvt.rn.satfinite.{kind}x2.f32 $0, $1, $2;", [hi, lo], ["=h", "f", "f"],
                                    [_i16()], memory=False))
    return from_bits(words, new, count)


def _f8_to_f16(reg: ir.Value) -> ir.Value:
    old = ir.VectorType(reg.type).element_type
    count = ir.VectorType(reg.type).shape[0]
    kind = _F8_PTX[str(old)]
    elems = elements(arith.bitcast(_vtype(count, ir.IntegerType.get_signless(8)), reg))
    words = []
    for lo, hi in _pairs(elems):
        pair = vector.bitcast(_vtype(1, _i16()), vector.from_elements(_vtype(2, lo.type), [lo, hi]))
        word = inline_ptx(f"cvt.rn.f16x2.{kind}x2 $0, $1;", [vector.extract(pair, [], [0])], ["=r", "h"], [i32()],
                          memory=False)
        words.append(word)
    return from_bits(words, ir.F16Type.get(), count)


def _convert_f8(reg: ir.Value, new: ir.Type) -> ir.Value:
    old = ir.VectorType(reg.type).element_type
    count = ir.VectorType(reg.type).shape[0]
    if not _is_float(old) or not _is_float(new):
        raise TypeError(f"astype: f8 converts to and from float types only, got {old} -> {new}")
    if _is_f8(new):
        if _is_f8(old):
            return _to_f8(_f8_to_f16(reg), new)
        if str(old) == "bf16" or bitwidth(old) > 32:
            reg = (arith.extf if str(old) == "bf16" else arith.truncf)(_vtype(count, ir.F32Type.get()), reg)
        return _to_f8(reg, new)
    half = _f8_to_f16(reg)
    if str(new) == "f16":
        return half
    wide = arith.extf(_vtype(count, ir.F32Type.get()), half)
    if str(new) == "f32":
        return wide
    return (arith.truncf if bitwidth(new) < 32 else arith.extf)(_vtype(count, new), wide)
