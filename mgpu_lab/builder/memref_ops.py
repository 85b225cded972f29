"""Views of memrefs: slicing with static and dynamic indices, unfold, transpose, unsqueeze.

Every view is a strided memref over the same memory: nothing is copied.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from .._mlir import ir, memref, vector
from .values import CheckedDialect, as_index, index_hint, python_number, spelled_type

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


# -- checked loads and stores -----------------------------------------------------------------
# The upstream builders take any operands and leave the checks to the verifier, which runs
# after tracing and says "'memref.load' op incorrect number of indices". These check the
# first mistakes (a Python int index, too few indices, a value of another type) while the
# body runs, so the error is raised at the user's line and says how to fix it. They refuse
# only what the verifier would refuse.


def _memref_type(ref: Any) -> ir.MemRefType | None:
    return ir.MemRefType(ref.type) if isinstance(ref, ir.Value) and isinstance(ref.type, ir.MemRefType) else None


def _check_indices(op: str, ref_type: ir.MemRefType | None, indices: Any) -> None:
    """Refuse a Python number or a non-index value among `indices`, and a count other than the rank."""
    if not isinstance(indices, (list, tuple)):
        return  # the builder's own error (it iterates them) is clear enough
    for k, idx in enumerate(indices):
        if python_number(idx) is not None or (isinstance(idx, ir.Value) and not isinstance(idx.type, ir.IndexType)):
            raise TypeError(f"{op}: {index_hint(f'index {k}', idx)}")
    if ref_type is not None and len(indices) != ref_type.rank:
        raise IndexError(f"{op}: indices: expected {ref_type.rank} indices, one per dimension of the "
                         f"rank-{ref_type.rank} {ref_type}, got {len(indices)}")


def _check_element(op: str, what: str, value: Any, ref_type: ir.MemRefType | None, vector_ok: bool) -> None:
    """Refuse a stored value (or a loaded vector type) whose element type is not the memref's."""
    element = ref_type.element_type if ref_type is not None else None
    if element is None or isinstance(element, ir.VectorType):
        return
    given = value.type if isinstance(value, ir.Value) else value if isinstance(value, ir.Type) else None
    if given is None:
        number = python_number(value)
        if number is not None:
            raise TypeError(f"{op}: {what}: expected a value of type {element}, got {number}; write "
                            f"dsl.c({value!r}, {spelled_type(element)})")
        return
    scalar = ir.VectorType(given).element_type if vector_ok and isinstance(given, ir.VectorType) else given
    if scalar != element:
        fix = (f"; convert it with dsl.cast(value, {spelled_type(element)})" if not isinstance(given, ir.VectorType)
               else f"; load or store {str(given).replace(str(scalar), str(element))} and convert the elements")
        raise TypeError(f"{op}: {what}: expected {'a vector of ' if vector_ok else 'a value of type '}{element} "
                        f"(the memref's element type), got {given}{fix}")


def checked_memref_load(memref: Any, indices: Any, **kwargs: Any) -> ir.Value:
    """`memref.load(memref, indices)`, its indices and their count checked first."""
    _check_indices("memref.load", _memref_type(memref), indices)
    return _UPSTREAM_MEMREF.load(memref, indices, **kwargs)


def checked_memref_store(value: Any, memref: Any, indices: Any, **kwargs: Any) -> Any:
    """`memref.store(value, memref, indices)`, the value's type and the indices checked first."""
    ref_type = _memref_type(memref)
    _check_element("memref.store", "value", value, ref_type, vector_ok=False)
    _check_indices("memref.store", ref_type, indices)
    return _UPSTREAM_MEMREF.store(value, memref, indices, **kwargs)


def checked_vector_load(result: Any, base: Any, indices: Any, **kwargs: Any) -> ir.Value:
    """`vector.load(result, base, indices)`, the element type and the indices checked first."""
    ref_type = _memref_type(base)
    _check_element("vector.load", "result", result, ref_type, vector_ok=True)
    _check_indices("vector.load", ref_type, indices)
    return vector.load(result, base, indices, **kwargs)


def checked_vector_store(value_to_store: Any, base: Any, indices: Any, **kwargs: Any) -> Any:
    """`vector.store(value_to_store, base, indices)`, the element type and the indices checked first."""
    ref_type = _memref_type(base)
    _check_element("vector.store", "value_to_store", value_to_store, ref_type, vector_ok=True)
    _check_indices("vector.store", ref_type, indices)
    return vector.store(value_to_store, base, indices, **kwargs)


_UPSTREAM_MEMREF = memref  # the module: `checked_memref_load`'s parameter is named like upstream's


checked_memref = CheckedDialect(memref, {"load": checked_memref_load, "store": checked_memref_store})
checked_vector = CheckedDialect(vector, {"load": checked_vector_load, "store": checked_vector_store})
