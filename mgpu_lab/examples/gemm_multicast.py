"""bf16 GEMM with 2-block clusters sharing the B tile through TMA multicast.

The same warp-specialized kernel as `gemm.py` (producer warpgroup + 2 consumer warpgroups,
128 x tile_n tiles, 64-deep k-steps through a ring of `stages` smem slots), launched in clusters
of 2 blocks along x. The two blocks of a cluster compute vertically adjacent C tiles (rows m0
and m0 + 128, the same columns), so they need the same B tile at every k-step: each block loads
its own A tile and half of the B tile, multicast into both blocks' slot. B traffic from L2
halves.

What changes against gemm.py:
- `full[s]` of each block still expects the whole slot's bytes (its A + both B halves);
- a slot is free only when the consumers of *both* blocks are done with it, since the peer's
  multicast writes into it: `empty[s]` counts 2 x 8 consumer warps, and each consumer warp
  releases the slot in both blocks (a local and a remote mbarrier arrival, via mapa);
- barriers are initialized with a cluster sync, and every thread meets the cluster again before
  exiting (peers may still arrive on its barriers).

m must be a multiple of 256 (a cluster's two row tiles); the rest is as in gemm.py.
"""

from __future__ import annotations

import mgpu_lab
from mgpu_lab import dsl
from mgpu_lab.builder.warpgroup import (
    cluster_sync,
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
from mgpu_lab.examples.gemm import (
    CONSUMER_REGS,
    CONSUMERS,
    PRODUCER_REGS,
    SWIZZLE,
    TILE_K,
    TILE_M,
    WARPGROUP,
    _check,
    default_stages,
)
from mgpu_lab.examples.gemm import reference_gemm as reference_gemm  # noqa: PLC0414 - re-exported

CLUSTER = 2
_CONSUMER_BARRIER = 1
_WG_BARRIER = 2
CONSUMER_WARPS = CONSUMERS * WARPGROUP // 32


def make_gemm_multicast(m: int, n: int, k: int, *, transpose_b: bool = False, dtype: str = "bfloat16",
                        out_dtype: str = "bfloat16", tile_n: int = 256, stages: int | None = None, group_m: int = 8,
                        **options) -> mgpu_lab.Kernel:
    """C (m, n) = A (m, k) @ B (B (k, n), or (n, k) with transpose_b=True), 2-block clusters
    sharing B tiles by multicast."""
    stages = default_stages(tile_n) if stages is None else stages
    _check(m, n, k, tile_n, stages, dtype, out_dtype)
    if m % (CLUSTER * TILE_M):
        raise ValueError(f"gemm_multicast: m must be a multiple of {CLUSTER * TILE_M} (a cluster's {CLUSTER} row "
                         f"tiles), got {m}")
    tiles_m, tiles_n, k_tiles = m // TILE_M, n // tile_n, k // TILE_K
    pairs_m = tiles_m // CLUSTER
    b_chunks = tile_n // 64
    out_width = SWIZZLE // dtype_itemsize(out_dtype)
    stage_bytes = (TILE_M + tile_n) * TILE_K * 2
    group_m = max(1, min(group_m, pairs_m))

    a_sd = mgpu_lab.ShapeDtype((m, k), dtype)
    b_sd = mgpu_lab.ShapeDtype((n, k) if transpose_b else (k, n), dtype)
    c_sd = mgpu_lab.ShapeDtype((m, n), out_dtype)
    b_slot = (stages, tile_n, TILE_K) if transpose_b else (stages, b_chunks, TILE_K, 64)
    pipeline = (mgpu_lab.ShapeDtype((stages, TILE_M, TILE_K), dtype), mgpu_lab.ShapeDtype(b_slot, dtype))
    epilogue = mgpu_lab.ShapeDtype((CONSUMERS, tile_n // out_width, 64, out_width), out_dtype)
    smem = (mgpu_lab.Union([pipeline, epilogue]), mgpu_lab.Barriers(stages), mgpu_lab.Barriers(stages))

    def tile_origin(rank):
        """(row, column) of this block's C tile: clusters take pairs of row tiles, grouped along M."""
        pid = arith.divui(dsl.block_idx("x"), c(CLUSTER))
        per_group = group_m * tiles_n
        group = arith.divui(pid, c(per_group))
        first = arith.muli(group, c(group_m))
        size = arith.minui(arith.subi(c(pairs_m), first), c(group_m)) if pairs_m % group_m else c(group_m)
        in_group = arith.remui(pid, c(per_group))
        pair = arith.addi(first, arith.remui(in_group, size))
        tile_m = arith.addi(arith.muli(pair, c(CLUSTER)), rank)
        return arith.muli(tile_m, c(TILE_M)), arith.muli(arith.divui(in_group, size), c(tile_n))

    def producer(ctx, a, b, a_smem, b_smem, full, empty, row0, col0, rank):
        setmaxnreg(PRODUCER_REGS)
        with single_thread("warpgroup"):
            @dsl.for_range(0, k_tiles)
            def _(kt):
                with ctx.named_region("load"):
                    empty.wait_for_iteration(kt, flip=True)  # free in both blocks
                    bar, _ = full.for_iteration(kt)
                    bar.arrive_expect_tx(stage_bytes)  # own A + the whole B tile (both halves)
                    slot = arith.remui(kt, c(stages))
                    k0 = arith.muli(kt, c(TILE_K))
                    copy = {"barrier": bar, "arrive": False, "swizzle": SWIZZLE, "uniform": False}
                    ctx.async_copy(src_ref=a, dst_ref=dsl.memref_slice(a_smem, slot),
                                   gmem_slice=(dsl.ds(row0, TILE_M), dsl.ds(k0, TILE_K)), **copy)
                    if transpose_b:  # B.T box (tile_n, 64): each block loads tile_n / 2 rows of it
                        ctx.async_copy(src_ref=b, dst_ref=dsl.memref_slice(b_smem, slot), collective="x",
                                       gmem_slice=(dsl.ds(col0, tile_n), dsl.ds(k0, TILE_K)), **copy)
                    elif b_chunks % CLUSTER == 0:  # whole 64-column chunks, alternating between the blocks
                        for j in range(b_chunks // CLUSTER):
                            chunk = arith.addi(c(CLUSTER * j), rank)
                            col = arith.addi(col0, arith.muli(chunk, c(64)))
                            ctx.async_copy(src_ref=b, dst_ref=dsl.memref_slice(b_smem, (slot, chunk)),
                                           gmem_slice=(dsl.ds(k0, TILE_K), dsl.ds(col, 64)),
                                           multicast_mask=(1 << CLUSTER) - 1, **copy)
                    else:  # an odd number of chunks: each block loads half of every chunk's k rows
                        for j in range(b_chunks):
                            ctx.async_copy(src_ref=b, dst_ref=dsl.memref_slice(b_smem, (slot, j)), collective="x",
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
                acc = wgmma_wait_group(1, acc)
            released = arith.andi(lane0, arith.cmpi(arith.CmpIPredicate.ugt, kt, c(0)))
            with dsl.when(released):
                previous = empty.for_iteration(arith.subi(kt, c(1)))[0]
                for peer in range(CLUSTER):  # the slot is free here and in the peer (its multicast target)
                    previous.arrive(cta=peer)
            return acc

        with ctx.named_region("epilogue"):
            acc = wgmma_wait_group(0, acc)
            named_barrier(_CONSUMER_BARRIER, CONSUMERS * WARPGROUP)
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

    def gemm_multicast(ctx, a, b, c_ref, smem):
        (a_smem, b_smem), epi = smem[0]
        full, empty = smem[1], smem[2]
        full.init(1, sync=False)
        empty.init(CLUSTER * CONSUMER_WARPS, sync="cluster")  # peers arrive here and multicast into us
        rank = arith.remui(dsl.block_idx("x"), c(CLUSTER))  # the cluster is CLUSTER consecutive blocks in x
        row0, col0 = tile_origin(rank)
        wg = dsl.warpgroup_idx()
        is_producer = arith.cmpi(arith.CmpIPredicate.eq, wg, c(0))
        dsl.if_else(is_producer,
                    lambda: producer(ctx, a, b, a_smem, b_smem, full, empty, row0, col0, rank),
                    lambda: consumer(ctx, c_ref, a_smem, b_smem, epi, full, empty, row0, col0,
                                     arith.subi(wg, c(1))))
        cluster_sync()  # the peer may still arrive on our `empty` barriers

    name = f"gemm_multicast_{'nt' if transpose_b else 'nn'}_{m}x{n}x{k}"
    if options.get("profile"):
        options.setdefault("profile_capacity", 4 * k_tiles + 8)
    return mgpu_lab.kernel(gemm_multicast, grid=tiles_m * tiles_n, block=(CONSUMERS + 1) * WARPGROUP,
                           cluster=(CLUSTER, 1, 1), in_shapes=(a_sd, b_sd), out_shapes=c_sd, smem=smem, name=name,
                           **options)
