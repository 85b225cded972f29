"""Row softmax of an (m, n) float32 array with one warpgroup per (128, n) tile.

Each block TMA-loads its tile into smem as n/32 column chunks with the 128-byte swizzle, then
for each 64-row half: loads it into registers in the WGMMA layout (`load_tiled`, conflict
free), takes the row maximum (`reduce_max(axis=1)`: in-thread, then two lane shuffles),
exponentiates with exp2 on max-subtracted, log2(e)-scaled values, sums the rows, scales by
the reciprocal and writes the result back in place (`store_tiled`). One TMA store per chunk
writes the tile out.

n must be a multiple of 32 up to 256 (a thread holds n/2 values per 64-row half) and m a
multiple of 128.
"""

from __future__ import annotations

import numpy as np

import mgpu_lab
from mgpu_lab import dsl
from mgpu_lab.arguments import size

TILE_M = 128
HALF = 64
SWIZZLE = 128
WIDTH = SWIZZLE // 4  # float32 columns per swizzled row
LOG2E = 1.4426950408889634


def make_softmax(m: int = 4096, n: int = 256, **options) -> mgpu_lab.Kernel:
    """softmax(x, axis=1) for an (m, n) float32 x."""
    m, n = size("m", m, where="softmax"), size("n", n, where="softmax")
    if n > 256 or n % WIDTH:
        raise ValueError(f"softmax: n must be a multiple of {WIDTH} in [{WIDTH}, 256], got {n!r}")
    if m % TILE_M:
        raise ValueError(f"softmax: m must be a positive multiple of {TILE_M}, got {m!r}")
    chunks = n // WIDTH
    sd = mgpu_lab.ShapeDtype((m, n), "float32")

    def softmax(ctx, x, y, smem):
        buf, bars = smem
        bars.init(chunks)  # one arrival (with its bytes) per chunk copy
        row0 = dsl.block_idx("x") * TILE_M
        for j in range(chunks):
            ctx.async_copy(src_ref=x, dst_ref=dsl.memref_slice(buf, j), barrier=bars[0], swizzle=SWIZZLE,
                           gmem_slice=(dsl.ds(row0, TILE_M), dsl.ds(j * WIDTH, WIDTH)))
        bars[0].wait(0)

        @dsl.for_range(0, TILE_M // HALF)
        def _(h):
            tile = dsl.memref_slice(buf, (slice(None), dsl.ds(h * HALF, HALF)))
            t = dsl.FragmentedArray.load_tiled(tile, SWIZZLE) * LOG2E
            e = (t - t.reduce_max(axis=1).broadcast(t.shape)).exp2()
            inv = 1.0 / e.reduce_sum(axis=1)
            (e * inv.broadcast(e.shape)).store_tiled(tile, SWIZZLE)

        dsl.commit_shared()
        for j in range(chunks):
            ctx.async_copy(src_ref=dsl.memref_slice(buf, j), dst_ref=y, swizzle=SWIZZLE,
                           gmem_slice=(dsl.ds(row0, TILE_M), dsl.ds(j * WIDTH, WIDTH)))
        ctx.await_async_copy(0, await_read_only=True)

    smem = (mgpu_lab.ShapeDtype((chunks, TILE_M, WIDTH), "float32"), mgpu_lab.Barriers(1))
    return mgpu_lab.kernel(softmax, grid=m // TILE_M, block=128, in_shapes=sd, out_shapes=sd, smem=smem,
                           name=f"softmax_{m}x{n}", **options)


def reference_softmax(x: np.ndarray) -> np.ndarray:
    """softmax(x, axis=1) in float64 (numpy)."""
    x = x.astype(np.float64)
    e = np.exp(x - x.max(axis=1, keepdims=True))
    return e / e.sum(axis=1, keepdims=True)


__all__ = ["make_softmax", "reference_softmax"]
