"""A 2-D copy through shared memory: each block stages a tile, waits at a barrier, writes it out.

The write side reads smem rows in the opposite order to the ones each thread loaded, so the
result is right only if the block barrier orders the two phases.
"""

from __future__ import annotations

import numpy as np

import mgpu_lab
from mgpu_lab import dsl
from mgpu_lab.arguments import shape, size
from mgpu_lab.dsl import ir, vector


def make_tiled_copy(m: int = 4096, n: int = 4096, tile: tuple[int, int] = (64, 64), block: int = 256,
                    dtype: str = "float32", **options) -> mgpu_lab.Kernel:
    """Copy an (m, n) array tile by tile through a (tile) smem buffer."""
    m, n, block = (size(name, value, where="tiled_copy") for name, value in (("m", m), ("n", n), ("block", block)))
    tile = tm, tn = shape("tile", tile, 2, where="tiled_copy")
    if m % tm or n % tn:
        raise ValueError(f"shape: expected multiples of the tile {tile}, got {(m, n)}")
    vec = 16 // dsl.itemsize(dtype)
    threads_per_row = tn // vec
    rows_per_pass = block // threads_per_row
    if tn % vec or block % threads_per_row or tm % rows_per_pass:
        raise ValueError(f"tile: {tile} does not split evenly over {block} threads with {vec}-wide vectors")
    passes = tm // rows_per_pass
    sd = mgpu_lab.ShapeDtype((m, n), dtype)

    def tiled_copy(ctx, src, dst, tile_smem):
        vtype = ir.VectorType.get([vec], ir.MemRefType(src.type).element_type)
        tid = dsl.thread_idx()
        row0 = tid // threads_per_row
        col = tid % threads_per_row * vec
        window = (dsl.ds(dsl.block_idx("y") * tm, tm), dsl.ds(dsl.block_idx("x") * tn, tn))
        src_tile = dsl.memref_slice(src, window)
        dst_tile = dsl.memref_slice(dst, window)
        for p in range(passes):
            row = row0 + p * rows_per_pass
            vector.store(vector.load(vtype, src_tile, [row, col]), tile_smem, [row, col])
        ctx.block_barrier()
        for p in range(passes):
            row = (tm - 1) - (row0 + p * rows_per_pass)
            vector.store(vector.load(vtype, tile_smem, [row, col]), dst_tile, [row, col])

    return mgpu_lab.kernel(tiled_copy, grid=(n // tn, m // tm), block=block, in_shapes=sd, out_shapes=sd,
                           smem=mgpu_lab.ShapeDtype(tile, dtype), **options)


def reference_tiled_copy(x: np.ndarray) -> np.ndarray:
    """A copy of x: what make_tiled_copy's kernel is checked against."""
    return x.copy()


__all__ = ["make_tiled_copy", "reference_tiled_copy"]
