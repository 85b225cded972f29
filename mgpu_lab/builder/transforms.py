"""Layout transforms between a logical array and how it is stored in shared memory."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from .._mlir import arith, ir
from .values import as_index
from .memref_ops import memref_transpose, memref_unfold


class MemRefTransform:
    """Maps a logical memref view to its stored form, and logical indices/shapes likewise."""

    def apply(self, ref: ir.Value) -> ir.Value:
        raise NotImplementedError

    def transform_index(self, idx: Sequence[ir.Value]) -> tuple[ir.Value, ...]:
        raise NotImplementedError

    def transform_shape(self, shape: Sequence[int]) -> tuple[int, ...]:
        raise NotImplementedError


@dataclass(frozen=True)
class TileTransform(MemRefTransform):
    """Tile the trailing dimensions: (..., M, N) with tiling (tm, tn) -> (..., M/tm, N/tn, tm, tn)."""

    tiling: tuple[int, ...]

    def apply(self, ref: ir.Value) -> ir.Value:
        shape = ir.MemRefType(ref.type).shape
        self.transform_shape(shape)  # validates divisibility
        rank, n = len(shape), len(self.tiling)
        for i, tile in enumerate(self.tiling):
            dim = rank - n + 2 * i
            ref = memref_unfold(ref, dim, [None, tile])
        # Now (..., M/tm, tm, N/tn, tn): move every tile dim to the end.
        untiled = list(range(rank - n))
        outer = [rank - n + 2 * i for i in range(n)]
        inner = [rank - n + 2 * i + 1 for i in range(n)]
        return memref_transpose(ref, untiled + outer + inner)

    def transform_index(self, idx: Sequence[ir.Value]) -> tuple[ir.Value, ...]:
        n = len(self.tiling)
        head, tail = list(idx[:-n]), list(idx[-n:])
        outer = [as_index(i) // t for i, t in zip(tail, self.tiling)]
        inner = [as_index(i) % t for i, t in zip(tail, self.tiling)]
        return tuple(head + outer + inner)

    def transform_shape(self, shape: Sequence[int]) -> tuple[int, ...]:
        n = len(self.tiling)
        if len(shape) < n:
            raise ValueError(f"TileTransform{self.tiling}: shape {tuple(shape)} has fewer than {n} dims")
        tail = shape[-n:]
        for size, tile in zip(tail, self.tiling):
            if size % tile:
                raise ValueError(f"TileTransform{self.tiling}: dimension {size} is not a multiple of {tile}")
        return (*shape[:-n], *(s // t for s, t in zip(tail, self.tiling)), *self.tiling)


@dataclass(frozen=True)
class TransposeTransform(MemRefTransform):
    """Store dimensions in the order `permutation` (result dim i = source dim permutation[i])."""

    permutation: tuple[int, ...]

    def __post_init__(self):
        if sorted(self.permutation) != list(range(len(self.permutation))):
            raise ValueError(f"TransposeTransform: {self.permutation} is not a permutation")

    def apply(self, ref: ir.Value) -> ir.Value:
        return memref_transpose(ref, self.permutation)

    def transform_index(self, idx: Sequence[ir.Value]) -> tuple[ir.Value, ...]:
        return tuple(idx[p] for p in self.permutation)

    def transform_shape(self, shape: Sequence[int]) -> tuple[int, ...]:
        return tuple(shape[p] for p in self.permutation)
