"""y = a * x + b through TMA: each block loads a tile of x into smem with one TMA copy that
completes on an mbarrier, scales it in place, and writes it back with one TMA store.

Shapes need not be multiples of the tile: TMA fills out-of-bounds loads with zeros and clips
out-of-bounds stores. The row length must be a multiple of 16 bytes (TMA's stride rule).
"""

from __future__ import annotations

import numpy as np

import mgpu_lab
from mgpu_lab import dsl
from mgpu_lab.arguments import number, shape, size
from mgpu_lab.dsl import arith, c, ir, vector

BLOCK = 128  # one warpgroup: async_copy issues from one elected thread of it


def make_scaled_add(m: int = 4096, n: int = 4096, a: float = 2.0, b: float = 1.0, dtype: str = "float32",
                    tile: tuple[int, int] | None = None, **options) -> mgpu_lab.Kernel:
    """A kernel computing a * x + b for an (m, n) array x (float32, float16 or bfloat16)."""
    m, n = size("m", m, where="scaled_add"), size("n", n, where="scaled_add")
    a, b = number("a", a, where="scaled_add"), number("b", b, where="scaled_add")  # a=True would scale by 1
    itemsize = dsl.itemsize(dtype)
    if (n * itemsize) % 16:
        raise ValueError(f"n: rows of {n} x {dtype} are {n * itemsize} bytes; TMA needs a multiple of 16 bytes "
                         f"(n a multiple of {16 // itemsize})")
    tm, tn = (32, 256) if tile is None else shape("tile", tile, 2, where="scaled_add")
    vec = 16 // itemsize
    if tn % vec or (tm * tn) % (BLOCK * vec):
        raise ValueError(f"tile: {(tm, tn)} does not split into {BLOCK} threads x {vec}-element vectors")
    per_row = tn // vec
    passes = tm * tn // (BLOCK * vec)
    sd = mgpu_lab.ShapeDtype((m, n), dtype)

    def scaled_add(ctx, x, y, smem):
        buf, barrier = smem
        barrier.init(1)
        window = (dsl.ds(dsl.block_idx("y") * tm, tm), dsl.ds(dsl.block_idx("x") * tn, tn))
        ctx.async_copy(src_ref=x, dst_ref=buf, gmem_slice=window, barrier=barrier[0])
        barrier[0].wait(0)
        elem = ir.MemRefType(buf.type).element_type
        f32 = ir.F32Type.get()
        vtype, vf32 = ir.VectorType.get([vec], elem), ir.VectorType.get([vec], f32)
        scale = vector.broadcast(vf32, c(a, "float32"))
        shift = vector.broadcast(vf32, c(b, "float32"))
        tid = dsl.thread_idx()
        for p in range(passes):
            flat = tid + p * BLOCK
            row, col = flat // per_row, flat % per_row * vec
            v = vector.load(vtype, buf, [row, col])
            wide = v if elem == f32 else arith.extf(vf32, v)
            out = wide * scale + shift
            vector.store(out if elem == f32 else arith.truncf(vtype, out), buf, [row, col])
        dsl.commit_shared()  # the TMA store reads what every thread wrote
        ctx.async_copy(src_ref=buf, dst_ref=y, gmem_slice=window)
        ctx.await_async_copy(0, await_read_only=True)  # keep smem alive until the store read it

    grid = (-(-n // tn), -(-m // tm))
    return mgpu_lab.kernel(scaled_add, grid=grid, block=BLOCK, in_shapes=sd, out_shapes=sd,
                           smem=(mgpu_lab.ShapeDtype((tm, tn), dtype), mgpu_lab.Barriers(1)), **options)


def reference_scaled_add(x: np.ndarray, a: float = 2.0, b: float = 1.0) -> np.ndarray:
    """a * x + b in float64 (numpy)."""
    return a * x.astype(np.float64) + b


__all__ = ["make_scaled_add", "reference_scaled_add"]
