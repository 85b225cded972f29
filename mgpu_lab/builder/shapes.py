"""Shape/dtype structs describing kernel arrays and shared-memory scratch trees."""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Any, Generic, TypeVar

import numpy as np

from ..arguments import as_int, given
from ..user_errors import user_facing
from .dtypes import dtype_name

T = TypeVar("T")


@dataclass(frozen=True, init=False)
class ShapeDtype:
    """The shape and element type of an array, like `jax.ShapeDtypeStruct`.

    `name` (optional) names a shared-memory buffer in the viewers and the smem layout, in place
    of its position in the smem tree (`0.0.1`).
    """

    shape: tuple[int, ...]
    dtype: str
    name: str = field(default="", compare=False)

    @user_facing
    def __init__(self, shape: Any, dtype: Any, name: str = ""):
        dims = tuple(as_int(d) for d in (shape if isinstance(shape, (tuple, list)) else (shape,)))
        if None in dims:
            raise TypeError(f"ShapeDtype shape: expected an int or a tuple of ints, got {given(shape, typed=True)}")
        shape = dims
        if any(d <= 0 for d in shape):
            raise ValueError(f"shape: expected positive dimensions, got {shape}")
        if not isinstance(name, str):
            raise TypeError(f"ShapeDtype name: expected a str, got {type(name).__name__} {name!r}")
        object.__setattr__(self, "shape", shape)
        object.__setattr__(self, "dtype", dtype_name(dtype))
        object.__setattr__(self, "name", name)
        _check_addressable(self)

    @property
    def nbytes(self) -> int:
        from ..compiler.compiled_kernel import dtype_itemsize

        return int(np.prod(self.shape, dtype=np.int64)) * dtype_itemsize(self.dtype)

    @classmethod
    def like(cls, array: Any) -> "ShapeDtype":
        """The ShapeDtype of an existing array (numpy, CuPy, torch)."""
        return cls(tuple(array.shape), _array_dtype_name(array))


@dataclass(frozen=True)
class Union(Generic[T]):
    """Shared-memory buffers whose lifetimes do not overlap: all members start at one offset."""

    members: T


@dataclass(frozen=True)
class Barriers:
    """An array of `count` mbarriers in shared memory (8 bytes each). `name` (optional) names it in
    the viewers and the smem layout, in place of its position in the smem tree."""

    count: int = 1
    name: str = field(default="", compare=False)

    def __post_init__(self):
        if type(self.count) is not int or self.count < 1:
            raise ValueError(f"Barriers.count: expected an int >= 1, got {self.count!r}")
        if not isinstance(self.name, str):
            raise TypeError(f"Barriers.name: expected a str, got {type(self.name).__name__}")


def _check_addressable(sd: ShapeDtype) -> None:
    """MLIR asserts (killing the process) on a memref whose size overflows int64: refuse it here."""
    from ..compiler.compiled_kernel import dtype_itemsize
    from ..errors import ShapeError

    nbytes = math.prod(sd.shape) * dtype_itemsize(sd.dtype)
    if nbytes > _MAX_BYTES:
        raise ShapeError(f"shape: {sd.shape} {sd.dtype} is {nbytes} bytes, more than the {_MAX_BYTES} "
                         f"(2**63 - 1) bytes an array can address")


_MAX_BYTES = 2**63 - 1


def _array_dtype_name(array: Any) -> str:
    dtype = array.dtype
    name = str(dtype).removeprefix("torch.")
    return dtype_name(name)


def as_shape_dtype(x: Any, what: str) -> ShapeDtype:
    """Accept a ShapeDtype, a (shape, dtype) pair or an array-like; name `what` in errors."""
    if isinstance(x, ShapeDtype):
        return x
    if isinstance(x, tuple) and len(x) == 2 and isinstance(x[0], (tuple, list)):
        return ShapeDtype(*x)
    if hasattr(x, "shape") and hasattr(x, "dtype"):
        return ShapeDtype.like(x)
    raise TypeError(f"{what}: expected a ShapeDtype, (shape, dtype) or an array, got {x!r}")

