"""The kernels whose shared-memory bank conflicts are predicted from their SASS and checked: on the
CPU against hand-derived wavefronts (tests/test_smem_addresses.py), on the H200 against Nsight
Compute's per-instruction counts (benchmarks/validate_banks.py).

Each builder returns a `mgpu_lab.Kernel`; the kernel bodies use the public `dsl` namespace only.
"""

from __future__ import annotations

from collections.abc import Callable

import mgpu_lab
from mgpu_lab import dsl
from mgpu_lab.dsl import memref

TILE = 32


def make_transpose(n: int = 1024, pad: int = 0) -> mgpu_lab.Kernel:
    """out = x.T through a 32 x (32 + pad) float32 smem tile: a row store, then a column read
    (unpadded: all 32 lanes of the read hit one bank, 32 wavefronts; padded by one: none)."""
    sd = mgpu_lab.ShapeDtype((n, n), "float32")

    def transpose(ctx, x, out, tile):
        tx, ty = dsl.thread_idx("x"), dsl.thread_idx("y")
        bx, by = dsl.block_idx("x"), dsl.block_idx("y")
        memref.store(memref.load(x, [by * TILE + ty, bx * TILE + tx]), tile, [ty, tx])
        ctx.block_barrier()
        memref.store(memref.load(tile, [tx, ty]), out, [bx * TILE + ty, by * TILE + tx])

    return mgpu_lab.kernel(transpose, grid=(n // TILE, n // TILE), block=(TILE, TILE), in_shapes=sd, out_shapes=sd,
                           smem=mgpu_lab.ShapeDtype((TILE, TILE + pad), "float32"),
                           name=f"transpose_pad{pad}_{n}")


def make_four_way(blocks: int = 1024) -> mgpu_lab.Kernel:
    """A deliberately 4-way conflict: 32 threads store 128 floats row by row (conflict-free), then
    lane t reads word 4t (a 16-byte stride: 8 banks, 4 distinct words each, 4 wavefronts)."""
    words = 4 * TILE

    def four_way(ctx, x, out, tile):
        t, b = dsl.thread_idx(), dsl.block_idx()
        for k in range(4):
            memref.store(memref.load(x, [b * words + k * TILE + t]), tile, [k * TILE + t])
        ctx.block_barrier()
        memref.store(memref.load(tile, [t * 4]), out, [b * TILE + t])

    return mgpu_lab.kernel(four_way, grid=blocks, block=TILE,
                           in_shapes=mgpu_lab.ShapeDtype((blocks * words,), "float32"),
                           out_shapes=mgpu_lab.ShapeDtype((blocks * TILE,), "float32"),
                           smem=mgpu_lab.ShapeDtype((words,), "float32"), name=f"four_way_{blocks}")


def make_block_sum_kernel() -> mgpu_lab.Kernel:
    """The reduction example: one STS per warp's lane 0, one LDS by warp 0."""
    from mgpu_lab.examples.block_sum import make_block_sum

    return make_block_sum(1 << 22, 1024, 256)


def make_tiled_copy_kernel() -> mgpu_lab.Kernel:
    """The tiled-copy example: 16-byte STS/LDS of consecutive vectors (4 quarter-warp wavefronts)."""
    from mgpu_lab.examples.tiled_copy import make_tiled_copy

    return make_tiled_copy(4096, 4096)


def make_gemm_kernel() -> mgpu_lab.Kernel:
    """The GEMM, whose epilogue stores the accumulator to a swizzled smem tile with STS."""
    from mgpu_lab.kernels.gemm.kernel import make_gemm

    return make_gemm(2048, 2048, 2048)


def make_attention_kernel() -> mgpu_lab.Kernel:
    """Flash attention forward, whose epilogue stores the output tile to swizzled smem with STS."""
    from mgpu_lab.kernels.attention import make_attention

    return make_attention(2, 4, 1024, 1024, 64)


KERNELS: dict[str, Callable[[], mgpu_lab.Kernel]] = {
    "transpose_unpadded": lambda: make_transpose(1024, 0),
    "transpose_padded": lambda: make_transpose(1024, 1),
    "four_way": make_four_way,
    "block_sum": make_block_sum_kernel,
    "tiled_copy": make_tiled_copy_kernel,
    "gemm": make_gemm_kernel,
    "attention": make_attention_kernel,
}
