"""Block-scaled FP8 (e4m3) GEMM, DeepGEMM style: C = sum over 128-wide k blocks kb of
(A[:, kb] @ B[:, kb].T) * scale_a[row, kb] * scale_b[col // 128, kb], in f32.

A (m, k) has one scale per row and k block (`scale_a`, (m, ceil(k / 128)) float32: 1 x 128
activation blocks); B (n, k) one per 128 x 128 block (`scale_b`, (ceil(n / 128), ceil(k / 128))).
Each k-step is one k block (128 fp8 = one 128-byte swizzle span): the wgmma group starts from
zero (its ~14-bit tensor-core sums cover only 128 products), waits, and is promoted into an
f32 register accumulator with the block's scales: the "fp32 promotion" that keeps long K
accurate. The producer, the ring and the epilogue are the plain GEMM's (pieces.py); the
two consumers' promotions overlap each other's tensor-core work. Few tiles over a long K split
K over a cluster of blocks (split_k, summed in distributed shared memory as the plain GEMM's
cluster split-K): each block's partial is already scaled, so the sum is the product.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import mgpu_lab
from mgpu_lab import dsl
from mgpu_lab.arguments import choice, count
from mgpu_lab.dsl import ir, memref, vector
from mgpu_lab.user_errors import user_facing

from .kernel import build_gemm_kernel, check_problem, resolve_tiling
from .padding import aligned_shape, padded_gemm
from .pieces import WGMMA_ROWS, SWIZZLE, Epilogue, EpilogueTile, GemmTiling
from .split_k import MAX_CLUSTER_SPLIT, choose_split_k

FP8 = "float8_e4m3fn"
BLOCK = 128  # k and n extent of one scale block
BLOCK_TILE_NS = (32, 64, 128)  # a tile must sit inside one 128-column block of B's scales


def scale_shapes(m: int, n: int, k: int) -> tuple[tuple[int, int], tuple[int, int]]:
    """Shapes of scale_a (one per row and k block) and scale_b (one per 128 x 128 block)."""
    return (m, -(-k // BLOCK)), (-(-n // BLOCK), -(-k // BLOCK))


def multiply_block_scaled(ctx: Any, t: GemmTiling, ring: tuple, full: Any, empty: Any, wg: ir.Value,
                          first: Any, release_last: bool, tile: EpilogueTile, refs: Sequence[ir.Value],
                          k_first: Any = 0, steps: Any = None) -> dsl.FragmentedArray:
    """Consumer mainloop: per k block, a zero-started wgmma group, then acc += product * scales.
    k_first, steps: the block's K slice (split_k), in k blocks; all of K by default."""
    del release_last  # every slot is released as soon as its group has been waited for
    scale_a, scale_b = refs[0], refs[1]
    a_smem, b_smem = ring
    lane0 = dsl.lane_idx() == 0
    parts = t.consumer_rows // WGMMA_ROWS
    layout = dsl.WGMMAFragLayout(t.tile_n, t.consumer_rows)
    f32 = ir.F32Type.get()
    rows = tile.thread_rows()  # this thread's C rows (clamped), per (row tile, half)
    block_n = tile.col0 // BLOCK

    @dsl.for_range(0, t.k_tiles if steps is None else steps, carry=dsl.FragmentedArray.splat(0.0, layout, "float32"))
    def acc(kt, acc):
        it = kt + first
        block_k = kt + k_first  # the k block this step multiplies: its scales' column
        # the scales' loads go out before the wait and hide behind it
        col_scale = memref.load(scale_b, [block_n, block_k])
        row_scales = [memref.load(scale_a, [row, block_k]) * col_scale for row in rows]
        with ctx.named_region("wait_data"):
            full.wait_for_iteration(it)
        with ctx.named_region("mma"):
            slot = it % t.stages
            b_tile = dsl.memref_slice(b_smem, slot)
            groups = []
            for i in range(parts):
                a_tile = dsl.memref_slice(a_smem, (slot, dsl.ds(t.row_offset(wg) + WGMMA_ROWS * i, WGMMA_ROWS)))
                groups.append(dsl.wgmma(dsl.WGMMAAccumulator.zeros(t.tile_n), a_tile, b_tile, b_major="k",
                                        swizzle=SWIZZLE, accumulate=False))
            dsl.wgmma_commit_group()
            groups = [dsl.wgmma_wait_group(0, g) for g in groups]
        with dsl.when(lane0):  # one arrival per warp: the slot is free again
            empty.for_iteration(it)[0].arrive()
        with ctx.named_region("promote"):
            frags = [dsl.FragmentedArray.from_accumulator(g) for g in groups]
            product = dsl.FragmentedArray([r for f in frags for r in f.registers], layout)
            one = ir.VectorType.get([1], f32)
            scales = dsl.FragmentedArray([vector.from_elements(one, [s]) for s in row_scales],
                                         dsl.WGMMARowLayout(t.consumer_rows)).broadcast(layout.shape)
            return acc + product * scales

    return acc


def block_tiles(m: int, n: int, k: int, out_dtype: str = "bfloat16") -> tuple[int, int]:
    """(tile_m, tile_n) for a block-scaled GEMM: the performance model's fastest one-tile-per-block
    configuration among the tiles this kernel takes (tile_m 64 or 128, tile_n in BLOCK_TILE_NS).

    The model times the per-tensor FP8 kernel; the promotion costs every tile alike per k block,
    so what it ranks here is the grid: at few rows a 128 x 128 tile leaves most SMs idle (n / 128
    blocks streaming B), and 64 x 32 tiles give four times the blocks (the 2026-12-02 random-shape
    run measured 0.40-0.64x torch._scaled_mm at m <= 12 with 128 x 128). Persistent blocks are
    left to the caller: unmeasured with this mainloop."""
    from . import model

    problem = model.Problem(m, n, k, transpose_b=True, dtype=FP8, out_dtype=out_dtype)
    for _, config in model.ranked(problem):
        if (config["tile_m"] in (64, 128) and config["tile_n"] in BLOCK_TILE_NS and not config.get("persistent")
                and not config.get("swap_ab") and (config.get("split_k") or 1) == 1):
            return config["tile_m"], config["tile_n"]
    return 128, 128


@user_facing  # an argument error shows the caller's line, not the library's frames
def make_fp8_block_scaled_gemm(m: int, n: int, k: int, *, out_dtype: str = "bfloat16", tile_m: int | None = None,
                               tile_n: int | None = None, stages: int | None = None, group_m: int = 8,
                               persistent: bool | str = False, split_k: int | None = None,
                               epilogue: Epilogue | None = None, epilogue_inputs: Sequence[Any] = (),
                               transpose_b: bool = True, dtype: str = FP8, **options) -> mgpu_lab.Kernel:
    """C (m, n) = epilogue(block-scaled A (m, k) @ B (n, k).T); call it as
    `kernel(a, b, scale_a, scale_b, *epilogue_arrays)`, a and b e4m3 (uint8 bytes on the
    device), the scales float32 of `scale_shapes(m, n, k)`. tile_m and tile_n default to
    `block_tiles(m, n, k)` (the model's pick), either given alone to 128. split_k: K slices per
    tile, summed in a cluster of that many blocks (at most MAX_CLUSTER_SPLIT); None: as many as
    fill the SMs where the tiles fill fewer than half of them over a long K (`choose_split_k`),
    1 with persistent blocks."""
    m, n, k = check_problem(m, n, k, transpose_b, where="fp8 block-scaled gemm")
    if tile_m is None and tile_n is None:
        tile_m, tile_n = block_tiles(m, n, k, out_dtype)
    tile_m = 128 if tile_m is None else tile_m
    tile_n = 128 if tile_n is None else tile_n
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
                          split_k=split_k, epilogue=epilogue, epilogue_inputs=epilogue_inputs, **options)
    t = resolve_tiling(m, n, k, transpose_b=True, dtype=FP8, out_dtype=out_dtype, tile_m=tile_m, tile_n=tile_n,
                       stages=stages, group_m=group_m, persistent=persistent, cluster_m=1,  # its own mainloop
                       split_k=split_k, split_k_reduce="cluster", input_dtypes=(FP8,))

    def user_epilogue(acc: dsl.FragmentedArray, tile: EpilogueTile, scale_a: Any, scale_b: Any,
                      *refs: Any) -> dsl.FragmentedArray:
        del scale_a, scale_b  # the mainloop's
        return acc if epilogue is None else epilogue(acc, tile, *refs)

    sa, sb = scale_shapes(m, n, k)
    scales = (dsl.ShapeDtype(sa, "float32"), dsl.ShapeDtype(sb, "float32"))
    return build_gemm_kernel(t, options, stages_given=stages is not None, epilogue=user_epilogue,
                             epilogue_inputs=(*scales, *epilogue_inputs), mainloop=multiply_block_scaled,
                             name=f"gemm_fp8_block_nt_{m}x{n}x{k}")
