"""out = a + b, 16 bytes per thread per access."""

from __future__ import annotations

import numpy as np

import mgpu_lab
from mgpu_lab import dsl
from mgpu_lab.dsl import arith, c, ir, vector


def make_vector_add(n: int = 1 << 20, dtype: str = "float32", block: int = 256, **options) -> mgpu_lab.Kernel:
    """A kernel adding two 1-D arrays of `n` elements (any n: the tail is guarded)."""
    itemsize = np.dtype(dtype).itemsize
    vec = 16 // itemsize  # elements per 16-byte access
    if n % vec:
        vec = 1
    per_block = block * vec
    grid = -(-n // per_block)
    sd = mgpu_lab.ShapeDtype((n,), dtype)

    def vector_add(ctx, a, b, out, smem):
        i = arith.muli(arith.addi(arith.muli(dsl.block_idx(), c(block)), dsl.thread_idx()), c(vec))
        in_bounds = arith.cmpi(arith.CmpIPredicate.ult, i, c(n))
        with dsl.when(in_bounds):
            vtype = ir.VectorType.get([vec], ir.MemRefType(a.type).element_type)
            x = vector.load(vtype, a, [i])
            y = vector.load(vtype, b, [i])
            total = arith.addf(x, y) if dtype.startswith("float") else arith.addi(x, y)
            vector.store(total, out, [i])

    return mgpu_lab.kernel(vector_add, grid=grid, block=block, in_shapes=(sd, sd), out_shapes=sd, **options)


def reference_vector_add(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    return a.astype(np.float64) + b.astype(np.float64)
