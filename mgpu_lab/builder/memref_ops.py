"""Views of memrefs: slicing with static and dynamic indices, unfold, transpose, unsqueeze.

Every view is a strided memref over the same memory: nothing is copied.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from .._mlir import ir, memref
from .values import as_index

_DYNAMIC = ir.ShapedType.get_dynamic_stride_or_offset()


@dataclass(frozen=True)
class DynamicSlice:
    """`size` elements starting at `start` (a Python int or an index value)."""

    start: int | ir.Value
    size: int

    def __post_init__(self):
        if not isinstance(self.size, int) or self.size <= 0:
            raise ValueError(f"ds: size must be a positive Python int, got {self.size!r}")


def ds(start: int | ir.Value, size: int) -> DynamicSlice:
    """Slice of static `size` at a static or dynamic `start`."""
    return DynamicSlice(start, size)


def _layout(ref_type: ir.MemRefType) -> tuple[list[int], int]:
    strides, offset = ref_type.get_strides_and_offset()
    return list(strides), offset


def _strided_type(like: ir.MemRefType, shape: Sequence[int], strides: Sequence[int],
                  offset: int) -> ir.MemRefType:
    layout = ir.StridedLayoutAttr.get(offset, list(strides))
    return ir.MemRefType.get(list(shape), like.element_type, layout, like.memory_space)


def memref_slice(ref: ir.Value, index: Any) -> ir.Value:
    """`ref[index]` as a view. Ints and index values drop their dimension; slices (step 1)
    and `ds(start, size)` keep it. Missing trailing dimensions are taken whole."""
    ref_type = ir.MemRefType(ref.type)
    shape = list(ref_type.shape)
    index = index if isinstance(index, tuple) else (index,)
    if len(index) > len(shape):
        raise IndexError(f"memref_slice: {len(index)} indices for a rank-{len(shape)} memref")
    index = index + (slice(None),) * (len(shape) - len(index))
    strides, offset = _layout(ref_type)
    offsets: list[int | ir.Value] = []
    sizes: list[int] = []
    kept_shape: list[int] = []
    kept_strides: list[int] = []
    static_offset = offset != _DYNAMIC
    new_offset = offset if static_offset else 0
    for dim, (idx, extent, stride) in enumerate(zip(index, shape, strides)):
        if isinstance(idx, slice):
            start, stop, step = idx.indices(extent)
            if step != 1:
                raise ValueError(f"memref_slice: dimension {dim}: only step 1 is supported, got {step}")
            size, keep = stop - start, True
        elif isinstance(idx, DynamicSlice):
            start, size, keep = idx.start, idx.size, True
        else:
            start, size, keep = idx, 1, False
        if isinstance(start, int):
            if not 0 <= start or start + size > extent:
                raise IndexError(
                    f"memref_slice: dimension {dim}: [{start}, {start + size}) is outside [0, {extent})")
            new_offset += start * stride
        else:
            start = as_index(start)
            static_offset = False
        offsets.append(start)
        sizes.append(size)
        if keep:
            kept_shape.append(size)
            kept_strides.append(stride)
    result = _strided_type(ref_type, kept_shape, kept_strides, new_offset if static_offset else _DYNAMIC)
    return memref.subview(ref, offsets, sizes, [1] * len(shape), result_type=result)


def memref_unfold(ref: ir.Value, dim: int, factors: Sequence[int | None]) -> ir.Value:
    """Split dimension `dim` into `factors` (one may be None, inferred)."""
    ref_type = ir.MemRefType(ref.type)
    shape = list(ref_type.shape)
    factors = list(factors)
    if factors.count(None) > 1:
        raise ValueError("memref_unfold: at most one factor may be None")
    requested = list(factors)
    known = 1
    for f in factors:
        known *= f or 1
    if None in factors:
        factors[factors.index(None)] = shape[dim] // known if known and shape[dim] % known == 0 else 0
    product = 1
    for f in factors:
        product *= f
    if product != shape[dim]:
        raise ValueError(f"memref_unfold: factors {requested} do not divide dimension {dim} of size {shape[dim]}")
    strides, offset = _layout(ref_type)
    inner = strides[dim]
    split_strides = []
    for f in reversed(factors):
        split_strides.insert(0, inner)
        inner *= f
    new_shape = shape[:dim] + factors + shape[dim + 1:]
    new_strides = strides[:dim] + split_strides + strides[dim + 1:]
    reassociation, pos = [], 0
    for d in range(len(shape)):
        width = len(factors) if d == dim else 1
        reassociation.append(list(range(pos, pos + width)))
        pos += width
    result = _strided_type(ref_type, new_shape, new_strides, offset)
    return memref.expand_shape(result, ref, reassociation, [], new_shape)


def memref_unsqueeze(ref: ir.Value, dim: int) -> ir.Value:
    """Insert a dimension of size 1 before `dim` (dim may equal the rank)."""
    ref_type = ir.MemRefType(ref.type)
    rank = ref_type.rank
    if not 0 <= dim <= rank:
        raise IndexError(f"memref_unsqueeze: dim must be in [0, {rank}], got {dim}")
    if rank == 0:
        raise ValueError("memref_unsqueeze: cannot unsqueeze a rank-0 memref")
    if dim == rank:
        return memref_unfold(ref, rank - 1, [ref_type.shape[-1], 1])
    return memref_unfold(ref, dim, [1, ref_type.shape[dim]])


def memref_transpose(ref: ir.Value, permutation: Sequence[int]) -> ir.Value:
    """Dimensions reordered: result dim i is source dim permutation[i]."""
    ref_type = ir.MemRefType(ref.type)
    permutation = list(permutation)
    if sorted(permutation) != list(range(ref_type.rank)):
        raise ValueError(f"memref_transpose: {permutation} is not a permutation of {ref_type.rank} dims")
    strides, offset = _layout(ref_type)
    shape = list(ref_type.shape)
    result = _strided_type(ref_type, [shape[p] for p in permutation], [strides[p] for p in permutation], offset)
    perm_map = ir.AffineMap.get_permutation(permutation)
    return memref.transpose(result, ref, ir.AffineMapAttr.get(perm_map))
