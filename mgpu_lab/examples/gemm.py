"""bf16 GEMM on Hopper: C = A @ B (or A @ B.T) with f32 accumulation, warp-specialized.

Each block computes a (tile_m=128) x (tile_n) tile of C:

- warpgroup 0 is the producer: it gives up registers (setmaxnreg 40) and one elected thread
  streams (128 x 64) tiles of A and (64 x tile_n) tiles of B into a ring of `stages` smem
  slots with TMA (128-byte swizzle). `full[s]` completes when slot s has landed (TMA
  transaction bytes); the producer waits on `empty[s]` before refilling it.
- warpgroups 1 and 2 are consumers (setmaxnreg 232): each multiplies its 64 rows of the A tile
  with the B tile on the tensor cores (4 wgmma k-steps per slot), keeps one wgmma group in
  flight, and releases the previous slot when its group is done (one arrival per warp).
- epilogue: the f32 accumulators are rounded to the output type and written to smem in the
  128-byte swizzled layout (conflict-free), then TMA-stored to C. The epilogue buffer reuses
  the pipeline slots (a smem Union): both consumers pass a named barrier first.

Blocks are rasterized in groups of `group_m` tile rows so blocks running together share
tiles of A and B in L2. Shapes must be multiples of the tile; anything else raises ValueError.
"""

from __future__ import annotations

import numpy as np

import mgpu_lab
from mgpu_lab import dsl
from mgpu_lab.builder.warpgroup import (
    fence_async_shared,
    named_barrier,
    setmaxnreg,
    single_thread,
)
from mgpu_lab.builder.wgmma import (
    WGMMAAccumulator,
    wgmma,
    wgmma_commit_group,
    wgmma_wait_group,
)
from mgpu_lab.compiler.compiled_kernel import dtype_itemsize
from mgpu_lab.dsl import arith, c

TILE_M = 128
TILE_K = 64  # one 128-byte swizzle span of bf16
SWIZZLE = 128
WARPGROUP = 128
CONSUMERS = 2
PRODUCER_REGS, CONSUMER_REGS = 40, 232
SMEM_LIMIT = 227 * 1024
_CONSUMER_BARRIER = 1  # named barrier of the 256 consumer threads
_WG_BARRIER = 2  # + consumer index: named barrier of one consumer warpgroup


def gemm_smem_bytes(tile_n: int, stages: int, out_dtype: str) -> int:
    del out_dtype  # the epilogue reuses the pipeline slots
    return stages * (TILE_M + tile_n) * TILE_K * 2 + 2 * stages * 8


def _check(m: int, n: int, k: int, tile_n: int, stages: int, dtype: str, out_dtype: str) -> None:
    for name, size, tile in (("m", m, TILE_M), ("n", n, tile_n), ("k", k, TILE_K)):
        if not isinstance(size, int) or size <= 0 or size % tile:
            raise ValueError(f"gemm: {name} must be a positive multiple of the tile's {tile}, got {size!r} "
                             f"(pad the operands, or pick tile_n from 64, 128, 192, 256 for n)")
    if tile_n not in (64, 128, 192, 256):
        raise ValueError(f"gemm: tile_n must be 64, 128, 192 or 256, got {tile_n!r}")
    if dtype not in ("bfloat16", "float16"):
        raise ValueError(f"gemm: dtype must be 'bfloat16' or 'float16', got {dtype!r}")
    if out_dtype not in ("bfloat16", "float16", "float32"):
        raise ValueError(f"gemm: out_dtype must be 'bfloat16', 'float16' or 'float32', got {out_dtype!r}")
    if not isinstance(stages, int) or stages < 2:
        raise ValueError(f"gemm: stages must be an int >= 2, got {stages!r}")
    need = gemm_smem_bytes(tile_n, stages, out_dtype)
    if need > SMEM_LIMIT:
        raise ValueError(f"gemm: {stages} stages of a {TILE_M}x{tile_n}x{TILE_K} tile need {need} bytes of smem, "
                         f"more than the {SMEM_LIMIT} a Hopper block can have; use fewer stages")
    epilogue = CONSUMERS * 64 * tile_n * dtype_itemsize(out_dtype)
    if epilogue > stages * (TILE_M + tile_n) * TILE_K * 2:
        raise ValueError(f"gemm: the epilogue tile ({epilogue} bytes) does not fit in the {stages} pipeline slots")


def default_stages(tile_n: int) -> int:
    return max(s for s in range(2, 9) if gemm_smem_bytes(tile_n, s, "bfloat16") <= SMEM_LIMIT)


def make_gemm(m: int, n: int, k: int, *, transpose_b: bool = False, dtype: str = "bfloat16",
              out_dtype: str = "bfloat16", tile_n: int = 256, stages: int | None = None, group_m: int = 8,
              **options) -> mgpu_lab.Kernel:
    """C (m, n) = A (m, k) @ B, B of shape (k, n), or (n, k) with transpose_b=True (C = A @ B.T)."""
    definition = gemm_definition(m, n, k, transpose_b=transpose_b, dtype=dtype, out_dtype=out_dtype,
                                 tile_n=tile_n, stages=stages, group_m=group_m)
    if options.get("profile"):
        options.setdefault("profile_capacity", definition.pop("profile_capacity"))
    definition.pop("profile_capacity", None)
    return mgpu_lab.kernel(**definition, **options)


def gemm_definition(m: int, n: int, k: int, *, transpose_b: bool = False, dtype: str = "bfloat16",
                    out_dtype: str = "bfloat16", tile_n: int = 256, stages: int | None = None,
                    group_m: int = 8) -> dict:
    """The GEMM as `mgpu_lab.kernel` arguments: body, grid, block, in/out shapes, smem, name, and
    the profile_capacity its regions need. `%%mosaic` cells can call the body directly."""
    stages = default_stages(tile_n) if stages is None else stages
    _check(m, n, k, tile_n, stages, dtype, out_dtype)
    tiles_m, tiles_n, k_tiles = m // TILE_M, n // tile_n, k // TILE_K
    b_chunks = tile_n // 64  # B tiles of A @ B arrive as (64 x 64) column chunks
    out_width = SWIZZLE // dtype_itemsize(out_dtype)  # columns per TMA-store chunk
    stage_bytes = (TILE_M + tile_n) * TILE_K * 2
    group_m = max(1, min(group_m, tiles_m))

    a_sd = mgpu_lab.ShapeDtype((m, k), dtype)
    b_sd = mgpu_lab.ShapeDtype((n, k) if transpose_b else (k, n), dtype)
    c_sd = mgpu_lab.ShapeDtype((m, n), out_dtype)
    b_slot = (stages, tile_n, TILE_K) if transpose_b else (stages, b_chunks, TILE_K, 64)
    pipeline = (mgpu_lab.ShapeDtype((stages, TILE_M, TILE_K), dtype), mgpu_lab.ShapeDtype(b_slot, dtype))
    epilogue = mgpu_lab.ShapeDtype((CONSUMERS, tile_n // out_width, 64, out_width), out_dtype)
    smem = (mgpu_lab.Union([pipeline, epilogue]), mgpu_lab.Barriers(stages), mgpu_lab.Barriers(stages))

    def tile_origin():
        """(row, column) of this block's C tile, grouped along M for L2 reuse."""
        pid = dsl.block_idx("x")
        per_group = group_m * tiles_n
        group = arith.divui(pid, c(per_group))
        first_m = arith.muli(group, c(group_m))
        if tiles_m % group_m:  # the last group is shorter
            size = arith.minui(arith.subi(c(tiles_m), first_m), c(group_m))
        else:
            size = c(group_m)
        in_group = arith.remui(pid, c(per_group))
        tile_m = arith.addi(first_m, arith.remui(in_group, size))
        tile_n_idx = arith.divui(in_group, size)
        return arith.muli(tile_m, c(TILE_M)), arith.muli(tile_n_idx, c(tile_n))

    def producer(ctx, a, b, a_smem, b_smem, full, empty, row0, col0):
        setmaxnreg(PRODUCER_REGS)
        with single_thread("warpgroup"):
            @dsl.for_range(0, k_tiles)
            def _(kt):
                with ctx.named_region("load"):
                    empty.wait_for_iteration(kt, flip=True)  # passes at once on the first round
                    bar, _ = full.for_iteration(kt)
                    bar.arrive_expect_tx(stage_bytes)
                    slot = arith.remui(kt, c(stages))
                    k0 = arith.muli(kt, c(TILE_K))
                    copy = {"barrier": bar, "arrive": False, "swizzle": SWIZZLE, "uniform": False}
                    ctx.async_copy(src_ref=a, dst_ref=dsl.memref_slice(a_smem, slot),
                                   gmem_slice=(dsl.ds(row0, TILE_M), dsl.ds(k0, TILE_K)), **copy)
                    if transpose_b:
                        ctx.async_copy(src_ref=b, dst_ref=dsl.memref_slice(b_smem, slot),
                                       gmem_slice=(dsl.ds(col0, tile_n), dsl.ds(k0, TILE_K)), **copy)
                    else:
                        for j in range(b_chunks):
                            ctx.async_copy(src_ref=b, dst_ref=dsl.memref_slice(b_smem, (slot, j)),
                                           gmem_slice=(dsl.ds(k0, TILE_K), dsl.ds(arith.addi(col0, c(64 * j)), 64)),
                                           **copy)

    def consumer(ctx, c_ref, a_smem, b_smem, epi, full, empty, row0, col0, wg):
        setmaxnreg(CONSUMER_REGS)
        lane0 = arith.cmpi(arith.CmpIPredicate.eq, dsl.lane_idx(), c(0))

        @dsl.for_range(0, k_tiles, carry=WGMMAAccumulator.zeros(tile_n))
        def acc(kt, acc):
            with ctx.named_region("wait_data"):
                full.wait_for_iteration(kt)
            with ctx.named_region("mma"):
                slot = arith.remui(kt, c(stages))
                a_tile = dsl.memref_slice(a_smem, (slot, dsl.ds(arith.muli(wg, c(64)), 64)))
                acc = wgmma(acc, a_tile, dsl.memref_slice(b_smem, slot), b_major="k" if transpose_b else "mn",
                            swizzle=SWIZZLE)
                wgmma_commit_group()
                acc = wgmma_wait_group(1, acc)  # the previous k-step's group is done with its slot
            released = arith.andi(lane0, arith.cmpi(arith.CmpIPredicate.ugt, kt, c(0)))
            with dsl.when(released):
                empty.for_iteration(arith.subi(kt, c(1)))[0].arrive()
            return acc

        with ctx.named_region("epilogue"):
            acc = wgmma_wait_group(0, acc)
            named_barrier(_CONSUMER_BARRIER, CONSUMERS * WARPGROUP)  # both consumers are done with the slots
            mine = dsl.memref_slice(epi, wg)
            acc.store_swizzled(mine, SWIZZLE)
            fence_async_shared()
            named_barrier(arith.addi(wg, c(_WG_BARRIER)), WARPGROUP)
            with single_thread("warpgroup"):
                row = arith.addi(row0, arith.muli(wg, c(64)))
                for j in range(tile_n // out_width):
                    ctx.async_copy(src_ref=dsl.memref_slice(mine, j), dst_ref=c_ref, swizzle=SWIZZLE, uniform=False,
                                   gmem_slice=(dsl.ds(row, 64), dsl.ds(arith.addi(col0, c(j * out_width)), out_width)))
            ctx.await_async_copy(0, await_read_only=True)

    def gemm(ctx, a, b, c_ref, smem):
        (a_smem, b_smem), epi = smem[0]  # the Union: pipeline slots and the epilogue tile overlap
        full, empty = smem[1], smem[2]
        full.init(1, sync=False)
        empty.init(CONSUMERS * WARPGROUP // 32)  # one arrival per consumer warp
        row0, col0 = tile_origin()
        wg = dsl.warpgroup_idx()
        is_producer = arith.cmpi(arith.CmpIPredicate.eq, wg, c(0))
        dsl.if_else(is_producer,
                    lambda: producer(ctx, a, b, a_smem, b_smem, full, empty, row0, col0),
                    lambda: consumer(ctx, c_ref, a_smem, b_smem, epi, full, empty, row0, col0,
                                     arith.subi(wg, c(1))))

    # Regions per k-step: 2 events per producer step, 4 per consumer step, plus the epilogue.
    return dict(body=gemm, grid=tiles_m * tiles_n, block=(CONSUMERS + 1) * WARPGROUP, in_shapes=(a_sd, b_sd),
                out_shapes=c_sd, smem=smem, name=f"gemm_{'nt' if transpose_b else 'nn'}_{m}x{n}x{k}",
                profile_capacity=4 * k_tiles + 8)


def reference_gemm(a: np.ndarray, b: np.ndarray, transpose_b: bool = False) -> np.ndarray:
    """float32 reference of make_gemm's product."""
    a32, b32 = a.astype(np.float32), b.astype(np.float32)
    return a32 @ (b32.T if transpose_b else b32)
