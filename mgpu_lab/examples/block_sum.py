"""out[b] = sum of block b's contiguous chunk of x: strided loads, warp shuffles, a smem step.

The two warp-level steps are `dsl.warp_reduce`; `dsl.block_reduce(v, "sum", scratch)` does the
whole thing in one call (this example spells out the smem step to show it)."""

from __future__ import annotations

import numpy as np

import mgpu_lab
from mgpu_lab import dsl
from mgpu_lab.arguments import size
from mgpu_lab.dsl import c, ir, memref, vector

WARP = 32


def make_block_sum(n: int = 1 << 22, blocks: int = 1024, block: int = 256, **options) -> mgpu_lab.Kernel:
    """Sum `n` float32 values in `blocks` chunks; one float32 partial sum per block."""
    n, blocks, block = (size(name, value, where="block_sum")
                        for name, value in (("n", n), ("blocks", blocks), ("block", block)))
    vec = 4
    if n % (blocks * block * vec):
        raise ValueError(f"n: expected a multiple of blocks * block * 4 = {blocks * block * vec}, got {n}")
    chunk = n // blocks
    steps = chunk // (block * vec)
    warps = block // WARP
    f32 = "float32"

    def block_sum(ctx, x, out, partials):
        f32_t = ir.F32Type.get()
        v4 = ir.VectorType.get([vec], f32_t)
        base = dsl.block_idx() * chunk + dsl.thread_idx() * vec

        @dsl.for_range(0, steps, carry=c(0.0, f32))
        def acc(step, acc):
            v = vector.load(v4, x, [base + step * (block * vec)])
            return acc + vector.reduction(f32_t, vector.CombiningKind.ADD, v, acc=c(0.0, f32))

        total = dsl.warp_reduce(acc, "sum")  # butterfly: every lane ends with the warp's total
        lane, warp = dsl.lane_idx(), dsl.warp_idx()
        with dsl.when(lane == 0):
            memref.store(total, partials, [warp])
        ctx.block_barrier()
        with dsl.when(warp == 0):
            in_range = lane < warps
            mine = dsl.select(in_range, memref.load(partials, [dsl.select(in_range, lane, 0)]), 0.0)
            block_total = dsl.warp_reduce(mine, "sum")
            with dsl.when(lane == 0):
                memref.store(block_total, out, [dsl.block_idx()])

    return mgpu_lab.kernel(block_sum, grid=blocks, block=block, in_shapes=mgpu_lab.ShapeDtype((n,), f32),
                           out_shapes=mgpu_lab.ShapeDtype((blocks,), f32),
                           smem=mgpu_lab.ShapeDtype((warps,), f32), **options)


def reference_block_sum(x: np.ndarray, blocks: int) -> np.ndarray:
    """The float64 sum of each of x's `blocks` contiguous chunks (numpy)."""
    return x.astype(np.float64).reshape(blocks, -1).sum(axis=1)


__all__ = ["make_block_sum", "reference_block_sum"]
