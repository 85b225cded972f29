"""out = a + b, 16 bytes per thread per access."""

from __future__ import annotations

import numpy as np

import mgpu_lab
from mgpu_lab import dsl
from mgpu_lab.arguments import size
from mgpu_lab.dsl import ir, vector


def make_vector_add(n: int = 1 << 20, dtype: str = "float32", block: int = 256, **options) -> mgpu_lab.Kernel:
    """A kernel adding two 1-D arrays of `n` elements (any n: the tail is guarded)."""
    n, block = size("n", n, where="vector_add"), size("block", block, where="vector_add")
    itemsize = np.dtype(dtype).itemsize
    vec = 16 // itemsize  # elements per 16-byte access
    if n % vec:
        vec = 1
    per_block = block * vec
    grid = -(-n // per_block)
    sd = mgpu_lab.ShapeDtype((n,), dtype)

    def vector_add(ctx, a, b, out, smem):
        i = (dsl.block_idx() * block + dsl.thread_idx()) * vec
        with dsl.when(i < n):
            vtype = ir.VectorType.get([vec], ir.MemRefType(a.type).element_type)
            x = vector.load(vtype, a, [i])
            y = vector.load(vtype, b, [i])
            vector.store(x + y, out, [i])

    return mgpu_lab.kernel(vector_add, grid=grid, block=block, in_shapes=(sd, sd), out_shapes=sd, **options)


def reference_vector_add(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    """a + b in float64 (numpy): what make_vector_add's kernel is checked against."""
    return a.astype(np.float64) + b.astype(np.float64)


__all__ = ["make_vector_add", "reference_vector_add"]
