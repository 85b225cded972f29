"""`FragmentedArray`: an array held in registers, distributed over the 128 threads of a warpgroup.

Two layouts:

- `WGStridedLayout(shape, vec)`: the array flattened row-major; thread t holds elements
  [(i * 128 + t) * vec, ... + vec) for i = 0, 1, ... (coalesced 16-byte accesses).
- `WGMMAFragLayout(n)`: a 64 x n tile in the WGMMA accumulator layout; each register is a
  pair of adjacent columns (see `builder/wgmma.py`). `FragmentedArray.from_accumulator(acc)`
  turns an accumulator into one, e.g. to add a bias or apply an activation in the epilogue.

Arithmetic (+ - * / with arrays of the same layout or Python scalars, neg, max, min, exp,
astype) is elementwise on the registers and costs no data movement. Arrays load from and
store to memrefs (global or shared) of their shape.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

from .._mlir import arith, ir, vector
from .._mlir import math as mlir_math
from .constants import c
from .dtypes import bitwidth, mlir_type
from .threads import WARPGROUP_SIZE, thread_in_warpgroup
from .wgmma import M_TILE, WGMMAAccumulator, _pair_coords


@dataclass(frozen=True)
class WGStridedLayout:
    """Row-major flattening, `vec` consecutive elements per thread per register."""

    shape: tuple[int, ...]
    vec: int

    def __post_init__(self):
        size = math.prod(self.shape)
        if size % (WARPGROUP_SIZE * self.vec):
            raise ValueError(f"WGStridedLayout: {size} elements (shape {self.shape}) do not split into "
                             f"{WARPGROUP_SIZE} threads x {self.vec}-element vectors")

    @property
    def registers(self) -> int:
        return math.prod(self.shape) // (WARPGROUP_SIZE * self.vec)

    def indices(self) -> list[list[ir.Value]]:
        """Per register, the multi-dimensional index of its first element."""
        tid = thread_in_warpgroup()
        out = []
        for i in range(self.registers):
            flat = arith.muli(arith.addi(tid, c(i * WARPGROUP_SIZE)), c(self.vec))
            idx = []
            for extent in reversed(self.shape[1:]):
                idx.insert(0, arith.remui(flat, c(extent)))
                flat = arith.divui(flat, c(extent))
            idx.insert(0, flat)
            out.append(idx)
        return out


@dataclass(frozen=True)
class WGMMAFragLayout:
    """A 64 x n tile in the WGMMA accumulator layout; registers are pairs of adjacent columns."""

    n: int

    @property
    def shape(self) -> tuple[int, int]:
        return (M_TILE, self.n)

    @property
    def vec(self) -> int:
        return 2

    @property
    def registers(self) -> int:
        return self.n // 4

    def indices(self) -> list[list[ir.Value]]:
        return [[row, col] for row, col in _pair_coords(self.n)]


Layout = WGStridedLayout | WGMMAFragLayout


def _is_float(t: ir.Type) -> bool:
    return isinstance(t, ir.FloatType)


class FragmentedArray:
    """Registers (vectors of `layout.vec` elements) of one warpgroup, in `layout`."""

    def __init__(self, registers: Sequence[ir.Value], layout: Layout, *, signed: bool = True):
        if len(registers) != layout.registers:
            raise ValueError(f"FragmentedArray: {layout} needs {layout.registers} registers, got {len(registers)}")
        self.registers = list(registers)
        self.layout = layout
        self.signed = signed

    # -- construction ------------------------------------------------------------------
    @classmethod
    def load(cls, ref: ir.Value, vec: int | None = None) -> FragmentedArray:
        """Load a whole memref (contiguous, any rank) in the strided layout."""
        ref_type = ir.MemRefType(ref.type)
        elem = ref_type.element_type
        vec = vec or max(1, 128 // bitwidth(elem))  # 16 bytes per access
        layout = WGStridedLayout(tuple(ref_type.shape), vec)
        vtype = ir.VectorType.get([vec], elem)
        return cls([vector.load(vtype, ref, idx) for idx in layout.indices()], layout)

    @classmethod
    def splat(cls, value: ir.Value, layout: Layout) -> FragmentedArray:
        vtype = ir.VectorType.get([layout.vec], value.type)
        reg = vector.broadcast(vtype, value)
        return cls([reg] * layout.registers, layout)

    @classmethod
    def from_accumulator(cls, acc: WGMMAAccumulator) -> FragmentedArray:
        """The accumulator's values as a float32 array in `WGMMAFragLayout(acc.n)`."""
        vtype = ir.VectorType.get([2], ir.F32Type.get())
        regs = [vector.from_elements(vtype, [acc.values[2 * i], acc.values[2 * i + 1]])
                for i in range(acc.n // 4)]
        return cls(regs, WGMMAFragLayout(acc.n))

    # -- properties --------------------------------------------------------------------
    @property
    def shape(self) -> tuple[int, ...]:
        return tuple(self.layout.shape)

    @property
    def element_type(self) -> ir.Type:
        return ir.VectorType(self.registers[0].type).element_type

    def _flatten_values(self) -> tuple[list[ir.Value], Callable[[Sequence[ir.Value]], FragmentedArray]]:
        """For `for_range(carry=...)` and `if_else`."""
        layout, signed = self.layout, self.signed
        return list(self.registers), lambda vals: FragmentedArray(list(vals), layout, signed=signed)

    # -- elementwise ---------------------------------------------------------------------
    def _operand(self, other: Any) -> list[ir.Value]:
        if isinstance(other, FragmentedArray):
            if other.layout != self.layout:
                raise ValueError(f"FragmentedArray: layouts differ: {self.layout} and {other.layout}")
            if other.element_type != self.element_type:
                raise ValueError(f"FragmentedArray: element types differ: {self.element_type} and "
                                 f"{other.element_type}; use astype")
            return other.registers
        if isinstance(other, (int, float)):
            elem = self.element_type
            scalar = c(float(other) if _is_float(elem) else int(other), elem)
            reg = vector.broadcast(self.registers[0].type, scalar)
            return [reg] * len(self.registers)
        raise TypeError(f"FragmentedArray: cannot combine with {type(other).__name__}")

    def _binary(self, other: Any, float_op: Any, int_op: Any, reverse: bool = False) -> FragmentedArray:
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

    def max(self, other: Any) -> FragmentedArray:
        return self._binary(other, arith.maximumf, arith.maxsi if self.signed else arith.maxui)

    def min(self, other: Any) -> FragmentedArray:
        return self._binary(other, arith.minimumf, arith.minsi if self.signed else arith.minui)

    def exp(self) -> FragmentedArray:
        if not _is_float(self.element_type):
            raise TypeError(f"FragmentedArray.exp: needs a float array, got {self.element_type}")
        return FragmentedArray([mlir_math.exp(r) for r in self.registers], self.layout)

    def astype(self, dtype: Any) -> FragmentedArray:
        """Convert the elements (float <-> float by rounding, int <-> float, int widths)."""
        new = dtype if isinstance(dtype, ir.Type) else mlir_type(dtype)
        old = self.element_type
        if new == old:
            return self
        vtype = ir.VectorType.get([self.layout.vec], new)
        if _is_float(old) and _is_float(new):
            op = arith.extf if bitwidth(new) > bitwidth(old) else arith.truncf
        elif _is_float(old):
            op = arith.fptosi if self.signed else arith.fptoui
        elif _is_float(new):
            op = arith.sitofp if self.signed else arith.uitofp
        else:
            op = (arith.extsi if self.signed else arith.extui) if bitwidth(new) > bitwidth(old) else arith.trunci
        return FragmentedArray([op(vtype, r) for r in self.registers], self.layout, signed=self.signed)

    # -- storing -------------------------------------------------------------------------
    def store(self, ref: ir.Value) -> None:
        """Store to a memref of the array's shape and element type (global or shared)."""
        ref_type = ir.MemRefType(ref.type)
        if tuple(ref_type.shape) != self.shape:
            raise ValueError(f"FragmentedArray.store: the ref has shape {tuple(ref_type.shape)}, the array {self.shape}")
        if ref_type.element_type != self.element_type:
            raise ValueError(f"FragmentedArray.store: the ref holds {ref_type.element_type}, the array "
                             f"{self.element_type}; use astype first")
        for reg, idx in zip(self.registers, self.layout.indices()):
            vector.store(reg, ref, idx)
