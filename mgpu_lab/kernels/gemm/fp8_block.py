"""Block-scaled FP8 (e4m3) GEMM, DeepGEMM style: C = sum over 128-wide k blocks kb of
(A[:, kb] @ B[:, kb].T) * scale_a[row, kb] * scale_b[col // 128, kb], in f32.

A (m, k) has one scale per row and k block (`scale_a`, (m, ceil(k / 128)) float32: 1 x 128
activation blocks); B (n, k) one per 128 x 128 block (`scale_b`, (ceil(n / 128), ceil(k / 128))).
Each k-step is one k block (128 fp8 = one 128-byte swizzle span): the wgmma group starts from
zero (its ~14-bit tensor-core sums cover only 128 products), waits, and is promoted into an
f32 register accumulator with the block's scales: the "fp32 promotion" that keeps long K
accurate. The producer, the ring and the epilogue are the plain GEMM's (pieces.py); the
two consumers' promotions overlap each other's tensor-core work (with `overlap_promotion=True`
also a consumer's own: it starts block j + 1's group before it promotes block j's, in iterations
of OVERLAP_BLOCKS blocks that end with nothing in flight). Few tiles over a long K split
K over a cluster of blocks (split_k, summed in distributed shared memory as the plain GEMM's
cluster split-K): each block's partial is already scaled, so the sum is the product.
"""

from __future__ import annotations

import functools
from collections.abc import Sequence
from typing import Any

import mgpu_lab
from mgpu_lab import dsl
from mgpu_lab.arguments import choice, count
from mgpu_lab.dsl import ir, memref, vector
from mgpu_lab.user_errors import user_facing

from .kernel import build_gemm_kernel, resolve_tiling
from .padding import aligned_shape, padded_gemm
from .pieces import WGMMA_ROWS, SWIZZLE, Epilogue, EpilogueTile, GemmTiling
from .split_k import MAX_CLUSTER_SPLIT, choose_split_k, even_split_k
from .tiling import check_problem

FP8 = "float8_e4m3fn"
BLOCK = 128  # k and n extent of one scale block
BLOCK_TILE_NS = (32, 64, 128)  # a tile must sit inside one 128-column block of B's scales
OVERLAP_BLOCKS = 4  # overlap_promotion: k blocks a mainloop iteration, the last one's promotion not overlapped


def scale_shapes(m: int, n: int, k: int) -> tuple[tuple[int, int], tuple[int, int]]:
    """Shapes of scale_a (one per row and k block) and scale_b (one per 128 x 128 block)."""
    return (m, -(-k // BLOCK)), (-(-n // BLOCK), -(-k // BLOCK))


def multiply_block_scaled(ctx: Any, t: GemmTiling, ring: tuple, full: Any, empty: Any, wg: ir.Value,
                          first: Any, release_last: bool, tile: EpilogueTile, refs: Sequence[ir.Value],
                          k_first: Any = 0, steps: Any = None, *, overlap: bool = False) -> dsl.FragmentedArray:
    """Consumer mainloop: per k block, a zero-started wgmma group, then acc += product * scales.
    k_first, steps: the block's K slice (split_k), in k blocks; all of K by default.
    overlap: issue the next k block's group before promoting this one, so the promotion runs
    while the tensor cores work on the next block (two product register sets in flight)."""
    del release_last  # every slot is released as soon as its group has been waited for
    scale_a, scale_b = refs[0], refs[1]
    a_smem, b_smem = ring
    lane0 = dsl.lane_idx() == 0
    parts = t.consumer_rows // WGMMA_ROWS
    layout = dsl.WGMMAFragLayout(t.tile_n, t.consumer_rows)
    f32 = ir.F32Type.get()
    rows = tile.thread_rows()  # this thread's C rows (clamped), per (row tile, half)
    block_n = tile.col0 // BLOCK
    steps = t.k_tiles if steps is None else steps
    # The plain mainloop where overlapping spilled: 128 rows a consumer (tile_m 256: 1 KB), and a
    # K of fewer than two runs known at build time (5 blocks: 8-20 bytes; 6 persistent: 88)
    overlap = overlap and parts == 1 and not (isinstance(steps, int) and steps < 2 * OVERLAP_BLOCKS)

    def scales(block_k: Any) -> list[ir.Value]:
        """This thread's rows' scales of k block block_k (row scale * the tile's column-block scale)."""
        block_k = dsl.c(block_k) if isinstance(block_k, int) else block_k
        col_scale = memref.load(scale_b, [block_n, block_k])
        return [memref.load(scale_a, [row, block_k]) * col_scale for row in rows]

    def wait_slot(it: Any) -> None:
        with ctx.named_region("wait_data"):
            full.wait_for_iteration(it)

    def start(it: Any) -> list[dsl.WGMMAAccumulator]:
        """Pipeline iteration it's zero-based group, committed, not waited for. With overlap its
        registers start undefined (accumulate=False ignores them): with zeros moved in beside a
        second product, the 4096^3 kernel spilled and drained a group early."""
        fresh = dsl.WGMMAAccumulator.uninitialized if overlap else dsl.WGMMAAccumulator.zeros
        slot = it % t.stages
        b_tile = dsl.memref_slice(b_smem, slot)
        groups = []
        for i in range(parts):
            a_tile = dsl.memref_slice(a_smem, (slot, dsl.ds(t.row_offset(wg) + WGMMA_ROWS * i, WGMMA_ROWS)))
            groups.append(dsl.wgmma(fresh(t.tile_n), a_tile, b_tile, b_major="k",
                                    swizzle=SWIZZLE, accumulate=False))
        dsl.wgmma_commit_group()
        return groups

    def release(it: Any) -> None:
        with dsl.when(lane0):  # one arrival per warp: the slot is free again
            empty.for_iteration(it)[0].arrive()

    def promote(acc: dsl.FragmentedArray, groups: list[dsl.WGMMAAccumulator],
                row_scales: list[ir.Value]) -> dsl.FragmentedArray:
        with ctx.named_region("promote"):
            frags = [dsl.FragmentedArray.from_accumulator(g) for g in groups]
            product = dsl.FragmentedArray([r for f in frags for r in f.registers], layout)
            one = ir.VectorType.get([1], f32)
            factors = dsl.FragmentedArray([vector.from_elements(one, [s]) for s in row_scales],
                                          dsl.WGMMARowLayout(t.consumer_rows)).broadcast(layout.shape)
            return acc + product * factors

    def one_block(kt: Any, acc: dsl.FragmentedArray) -> dsl.FragmentedArray:
        """k block kt alone: its group started, waited for, its slot freed, its product promoted."""
        it = kt + first
        row_scales = scales(kt + k_first)  # the scales' loads go out before the wait and hide behind it
        wait_slot(it)
        with ctx.named_region("mma"):
            groups = [dsl.wgmma_wait_group(0, g) for g in start(it)]
        release(it)
        return promote(acc, groups, row_scales)

    acc = dsl.FragmentedArray.splat(0.0, layout, "float32")
    if not overlap:
        return dsl.for_range(0, steps, carry=acc)(one_block)

    # OVERLAP_BLOCKS k blocks a loop iteration: block j + 1's group starts before block j's is
    # promoted, and the iteration ends with nothing in flight (a group still in flight across the
    # loop's back-edge made ptxas serialize every wgmma, its C7514); the last block of an
    # iteration is promoted alone.
    def blocks(acc: dsl.FragmentedArray, j0: Any) -> dsl.FragmentedArray:
        wait_slot(j0 + first)
        with ctx.named_region("mma"):
            pending = start(j0 + first)
        for u in range(1, OVERLAP_BLOCKS):
            # the scales of the block promoted next, loaded before the waits (one block's at a
            # time: fewer registers held beside the two products)
            row_scales = scales(j0 + u - 1 + k_first)
            wait_slot(j0 + u + first)
            with ctx.named_region("mma"):
                started = start(j0 + u + first)
                done = [dsl.wgmma_wait_group(1, g) for g in pending]  # block j0 + u's group stays in flight
            release(j0 + u - 1 + first)
            acc, pending = promote(acc, done, row_scales), started
        row_scales = scales(j0 + OVERLAP_BLOCKS - 1 + k_first)
        with ctx.named_region("mma"):
            done = [dsl.wgmma_wait_group(0, g) for g in pending]
        release(j0 + OVERLAP_BLOCKS - 1 + first)
        return promote(acc, done, row_scales)

    acc = dsl.for_range(0, steps // OVERLAP_BLOCKS, carry=acc)(lambda p, acc: blocks(acc, OVERLAP_BLOCKS * p))
    return dsl.for_range(steps // OVERLAP_BLOCKS * OVERLAP_BLOCKS, steps, carry=acc)(one_block)  # the rest


# Few rows: 64 x 128 tiles with K split over a cluster. On the H200 (probe_fp8_block_tiles.py
# --skinny, gemm_fp8_block_tiles_2026-12-05T035346Z) 4 x 4096 x 28672 ran 0.50x torch._scaled_mm
# in the model's 64 x 32 tiles and 1.16x in 64 x 128 over 3 slices, 8 x 3584 x 11008 0.70x -> 1.08x,
# 16 x 4096 x 7168 0.80x -> 1.09-1.12x: a k block's fixed costs (scale loads, the promotion's
# waits) weigh on a narrow tile, which the model (timing the per-tensor kernel) does not see.
SKINNY_ROWS = 64
SKINNY_MIN_COLUMN_TILES = 16  # below this the split cannot fill the SMs (8 x 912 x 24704 kept 64 x 32 over 4)
SKINNY_MIN_SLICE_BLOCKS = 16  # k blocks per slice: 64 x 7168 x 2048 (16 blocks) lost 0.24x split in 2


def block_config(m: int, n: int, k: int, out_dtype: str = "bfloat16") -> tuple[int, int, int | None]:
    """(tile_m, tile_n, split_k) for a block-scaled GEMM. Few rows (m <= SKINNY_ROWS) over many
    columns and a long K: 64 x 128 tiles, K split in as many slices as keep every cluster resident
    in one wave (the device's cluster counts), each of at least SKINNY_MIN_SLICE_BLOCKS k blocks,
    where that is two or more. Otherwise `block_tiles`' pick with split_k None (`choose_split_k`
    decides)."""
    from . import model
    from .configs import device_clusters, device_sms

    column_tiles, k_blocks = -(-n // 128), -(-k // BLOCK)
    if m <= SKINNY_ROWS and column_tiles >= SKINNY_MIN_COLUMN_TILES:
        problem = model.Problem(m, n, k, transpose_b=True, dtype=FP8, out_dtype=out_dtype, sms=device_sms(),
                                clusters=device_clusters())
        tiles = -(-m // 64) * column_tiles
        split = max((s for s in range(1, MAX_CLUSTER_SPLIT + 1)
                     if s == 1 or (tiles * s <= problem.sms and tiles <= model.clusters_resident(s, problem)
                                   and k_blocks // s >= SKINNY_MIN_SLICE_BLOCKS)), default=1)
        if split > 1:
            return 64, 128, even_split_k(k_blocks, split)
    return (*block_tiles(m, n, k, out_dtype), None)


def block_tiles(m: int, n: int, k: int, out_dtype: str = "bfloat16") -> tuple[int, int]:
    """(tile_m, tile_n) for a block-scaled GEMM: the performance model's fastest one-tile-per-block
    configuration among the tiles this kernel takes (tile_m 64 or 128, tile_n in BLOCK_TILE_NS).

    The model times the per-tensor FP8 kernel; the promotion costs every tile alike per k block,
    so what it ranks here is the grid: at few rows a 128 x 128 tile leaves most SMs idle (n / 128
    blocks streaming B), and 64 x 32 tiles give four times the blocks (the 2026-12-02 random-shape
    run measured 0.40-0.64x torch._scaled_mm at m <= 12 with 128 x 128). Persistent blocks are
    left to the caller: unmeasured with this mainloop."""
    from . import model
    from .configs import device_name

    problem = model.Problem(m, n, k, transpose_b=True, dtype=FP8, out_dtype=out_dtype)
    for _, config in model.ranked_lazily(problem, model.constants_for(device_name())):  # this GPU's calibration
        if (config["tile_m"] in (64, 128) and config["tile_n"] in BLOCK_TILE_NS and not config.get("persistent")
                and not config.get("swap_ab") and (config.get("split_k") or 1) == 1):
            return config["tile_m"], config["tile_n"]
    return 128, 128


@user_facing  # an argument error shows the caller's line, not the library's frames
def make_fp8_block_scaled_gemm(m: int, n: int, k: int, *, out_dtype: str = "bfloat16", tile_m: int | None = None,
                               tile_n: int | None = None, stages: int | None = None, group_m: int = 8,
                               persistent: bool | str | None = None, split_k: int | None = None,
                               epilogue: Epilogue | None = None, epilogue_inputs: Sequence[Any] = (),
                               transpose_b: bool = True, dtype: str = FP8, overlap_promotion: bool = True,
                               **options) -> mgpu_lab.Kernel:
    """C (m, n) = epilogue(block-scaled A (m, k) @ B (n, k).T); call it as
    `kernel(a, b, scale_a, scale_b, *epilogue_arrays)`, a and b e4m3 (uint8 bytes on the
    device), the scales float32 of `scale_shapes(m, n, k)`. tile_m and tile_n default to
    `block_config(m, n, k)` (few rows: 64 x 128 with K split; else the model's pick), either
    given alone to 128. split_k: K slices per tile, summed in a cluster of that many blocks (at
    most MAX_CLUSTER_SPLIT); None: block_config's split with default tiles, else as many as fill
    the SMs where the tiles fill fewer than half of them over a long K (`choose_split_k`), 1 with
    persistent blocks. persistent: None (default) takes persistent blocks for 128 x 128
    tiles over at least two waves of tiles without split-K (on the six large probe shapes of
    2026-12-05 they ran 1.01-1.19x the one-tile blocks with the promotion overlapped).
    overlap_promotion (default True): each consumer starts the next k block's wgmmas before it
    promotes this one's product, so the promotion (and the wait for the slot) overlaps its own
    tensor-core work, not only the other consumer's; it keeps two products in registers (64 more
    per thread at tile_n 128), so tile_m 256 (128 rows a consumer) and a K of fewer than 8 k
    blocks keep the plain mainloop (overlapped, they spilled). On the H200
    (`probe_fp8_block_tiles.py`, 2026-12-05) 128 x 128 tiles went from 0.58-0.71x
    `torch._scaled_mm` to 0.78-0.81x, persistent ones to 0.79-0.94x."""
    m, n, k = check_problem(m, n, k, transpose_b, where="fp8 block-scaled gemm")
    if not isinstance(overlap_promotion, bool):
        raise TypeError(f"fp8 block-scaled gemm: overlap_promotion must be True or False, got {overlap_promotion!r}")
    if tile_m is None and tile_n is None:
        tile_m, tile_n, picked_split = block_config(m, n, k, out_dtype)
        if split_k is None and persistent in (None, False):
            split_k = picked_split
    tile_m = 128 if tile_m is None else tile_m
    tile_n = 128 if tile_n is None else tile_n
    if persistent is None:
        waves = -(-m // tile_m) * -(-n // tile_n) / GemmTiling.sms
        persistent = (tile_m, tile_n) == (128, 128) and waves >= 2 and split_k in (None, 1)
    if transpose_b is not True:
        raise ValueError("fp8 block-scaled gemm: B must be (n, k) (transpose_b=True): FP8 wgmma reads K-major "
                         "operands only")
    choice("dtype", dtype, (FP8,), expected=repr(FP8), where="fp8 block-scaled gemm")
    choice("tile_n", tile_n, BLOCK_TILE_NS, expected=f"one of {BLOCK_TILE_NS} (a tile within one 128-column scale "
           f"block)", where="fp8 block-scaled gemm")
    if split_k is None:
        split_k = 1 if persistent else min(choose_split_k(m, n, k, tile_m, tile_n, GemmTiling.sms, tile_k=BLOCK),
                                            MAX_CLUSTER_SPLIT)
    split_k = count("split_k", split_k, minimum=1, maximum=MAX_CLUSTER_SPLIT,
                    expected=f"an int from 1 to {MAX_CLUSTER_SPLIT} (K slices summed in one cluster)",
                    where="fp8 block-scaled gemm")
    if not aligned_shape(m, n, k, True, FP8, out_dtype):
        return padded_gemm(make_fp8_block_scaled_gemm, m, n, k, transpose_b=True, dtype=FP8, out_dtype=out_dtype,
                          tile_m=tile_m, tile_n=tile_n, stages=stages, group_m=group_m, persistent=persistent,
                          split_k=split_k, epilogue=epilogue, epilogue_inputs=epilogue_inputs,
                          overlap_promotion=overlap_promotion, **options)
    t = resolve_tiling(m, n, k, transpose_b=True, dtype=FP8, out_dtype=out_dtype, tile_m=tile_m, tile_n=tile_n,
                       stages=stages, group_m=group_m, persistent=persistent, cluster_m=1,  # its own mainloop
                       split_k=split_k, split_k_reduce="cluster", input_dtypes=(FP8,))

    def user_epilogue(acc: dsl.FragmentedArray, tile: EpilogueTile, scale_a: Any, scale_b: Any,
                      *refs: Any) -> dsl.FragmentedArray:
        del scale_a, scale_b  # the mainloop's
        return acc if epilogue is None else epilogue(acc, tile, *refs)

    sa, sb = scale_shapes(m, n, k)
    scales = (dsl.ShapeDtype(sa, "float32"), dsl.ShapeDtype(sb, "float32"))
    mainloop = functools.partial(multiply_block_scaled, overlap=overlap_promotion)
    return build_gemm_kernel(t, options, stages_given=stages is not None, epilogue=user_epilogue,
                             epilogue_inputs=(*scales, *epilogue_inputs), mainloop=mainloop,
                             name=f"gemm_fp8_block_nt_{m}x{n}x{k}")
