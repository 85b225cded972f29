"""Split-K GEMM: shapes whose tiles leave most SMs idle over a long K (decode shapes such as
16 x 4096 x 14336 launch 32 tiles on 132 SMs).

The GEMM kernel runs a (tiles, split_k) grid: block (tile, s) multiplies K slice s
(`GemmTiling.k_steps` pipeline steps; the last slice's boxes past K read zeros). The slices are
summed one of two ways (`split_k_reduce`), both in a fixed order (deterministic):

- "cluster" (the default up to MAX_CLUSTER_SPLIT slices): a tile's blocks form a (1, split_k)
  cluster; each parks its f32 partial in smem and sums a share of the tile's output boxes from
  every block's partial through distributed shared memory, then TMA-stores them: one kernel,
  no workspace. A cluster's blocks must be resident at once: at 200+ KB of smem each, an H200
  holds 66 clusters of 2, 39 of 3 and 30 of 4 (cuOccupancyMaxActiveClusters), so the tuner
  weighs both ways per shape.
- "workspace": each block TMA-stores its f32 partial into slice s of a (split_k, m, n)
  workspace; a second kernel sums the slices, rounds to the output type and writes C.

Epilogues (and the FP8 GEMM's scales) apply to the sums in the cluster way; the workspace way
applies none.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import mgpu_lab
from mgpu_lab import dsl
from mgpu_lab.dsl import arith, ir, vector
from mgpu_lab.runtime.kernel import Kernel
from mgpu_lab.runtime.program import Launch, Program, Ref, Scratch, inputs

from .pieces import (
    Epilogue,
    EpilogueTile,
    GemmTiling,
    drain_stores,
    release_ring,
    run_epilogue,
    store_box,
)

SPLIT_K_MIN_STEPS = 8  # pipeline steps (512 of k in bf16) a K slice keeps at least
MAX_SPLIT_K = 16
MAX_CLUSTER_SPLIT = 8  # the portable cluster size: more slices go through the workspace
REDUCE_THREADS = 256
REDUCE_VECTOR = 4  # f32 per thread (16-byte loads; n is a multiple of 4 on the aligned path)


def default_reduce(split_k: Any) -> str:
    """How K slices are summed when the caller did not say: in a cluster up to MAX_CLUSTER_SPLIT
    of them, else through a workspace."""
    return "cluster" if isinstance(split_k, int) and split_k <= MAX_CLUSTER_SPLIT else "workspace"


def even_split_k(k_tiles: int, split_k: int) -> int:
    """The split count that gives the same K slices without an empty one (e.g. 9 k-steps in 4
    slices of 3 is 3 slices)."""
    steps = -(-k_tiles // max(1, split_k))
    return -(-k_tiles // steps)


def choose_split_k(m: int, n: int, k: int, tile_m: int, tile_n: int, sms: int, tile_k: int = 64) -> int:
    """How many K slices fill the SMs: 1 unless the tiles fill fewer than half of them and K
    keeps SPLIT_K_MIN_STEPS steps per slice."""
    if not all(isinstance(x, int) and not isinstance(x, bool) and x > 0 for x in (m, n, k)):
        return 1  # make_gemm's checks name the bad size
    tiles = -(-m // tile_m) * -(-n // tile_n)
    k_tiles = -(-k // tile_k)
    if 2 * tiles > sms:
        return 1
    split = min(sms // tiles, k_tiles // SPLIT_K_MIN_STEPS, MAX_SPLIT_K)
    return even_split_k(k_tiles, split) if split > 1 else 1


def reduce_in_cluster(ctx: Any, t: GemmTiling, acc: dsl.FragmentedArray, partials: Any, staging: Any, c_ref: Any,
                      row0: Any, col0: Any, wg: Any, split: Any, epilogue: Epilogue | None = None,
                      extras: Sequence[Any] = ()) -> None:
    """Consumer `wg` of cluster-split block `split` (its cluster rank: the cluster is the tile's
    split_k blocks) holds the f32 partial of its rows over its K slice: the blocks sum their
    partials through distributed shared memory and write C, each block a share of the tile.

    Every consumer parks its partial in smem over the ring (`store_by_thread`, one out_width-
    column piece at a time), the cluster meets (`cluster_sync`: every producer thread too),
    then block s sums pieces s, s + split_k, ... of every peer's partial (its own first, then
    ranks s + 1, s + 2, ...: a fixed order per piece, the same sum in any run), applies the
    epilogue to the sum (an EpilogueTile of the piece's columns), rounds it and TMA-stores it
    (clipped at C's edges) from its staging box (swap_ab: writes it transposed from registers).
    A last cluster_sync keeps every block (and its partial) alive until all peers have read."""
    width = t.out_width
    with ctx.named_region("park"):
        release_ring(t)  # every consumer is done with the ring the partials overlap
        for p in range(t.epilogue_pieces):
            acc.columns(p * width, width).store_by_thread(dsl.memref_slice(partials, (wg, p)))
    with ctx.named_region("meet"):  # (also waits for the slowest block's mainloop)
        dsl.cluster_sync()
    with ctx.named_region("sum"):
        _sum_pieces(ctx, t, partials, staging, c_ref, row0, col0, wg, split, epilogue, extras)
    with ctx.named_region("meet"):
        dsl.cluster_sync()


def _sum_pieces(ctx: Any, t: GemmTiling, partials: Any, staging: Any, c_ref: Any, row0: Any, col0: Any, wg: Any,
                split: Any, epilogue: Epilogue | None, extras: Sequence[Any]) -> None:
    """reduce_in_cluster's middle: block `split` sums its share of the pieces over every peer
    and stores them. (Issuing all of a block's peer reads before its first sum did not shorten
    this on a 128x144 tile split 3, ~2 us either way: the reads are bound by the SM-to-SM
    network's throughput, not its latency. Parking register pairs side by side for 16-byte
    accesses, half the requests, did not either (commit e9e602cb, reverted: 129x4096x4104 at
    0.977x cuBLAS against 0.987x with 8-byte ones, gemm_options_2026-12-01T153429Z_e9e602cb.json):
    bound by bytes.)"""
    width = t.out_width
    layout = dsl.WGMMAFragLayout(width, t.consumer_rows)
    row = row0 + t.row_offset(wg)
    for p in range(t.epilogue_pieces):
        with dsl.when(split == p % t.split_k):
            parts = _slices(t, dsl.memref_slice(partials, (wg, p)), layout, p % t.split_k)
            _store_piece(ctx, t, _in_order(parts), staging, c_ref, row, col0 + p * width, wg, epilogue, extras)
    drain_stores(ctx)


def _slices(t: GemmTiling, piece_ref: Any, layout: Any, rank: Any) -> list[dsl.FragmentedArray]:
    """Every K slice's partial of a piece that block `rank` sums: its own from its smem, the
    others through distributed shared memory (ranks rank + 1, rank + 2, ... mod split_k: the
    order is fixed for each piece, so its sum is the same in every run). The own read stays
    local: the SM-to-SM network carries ~35 GB/s per SM, the reduce's cost."""
    own = [dsl.FragmentedArray.load_by_thread(piece_ref, layout)]
    return own + [dsl.FragmentedArray.load_by_thread(piece_ref, layout, cta=(rank + d) % t.split_k)
                  for d in range(1, t.split_k)]


def _in_order(parts: Sequence[dsl.FragmentedArray]) -> dsl.FragmentedArray:
    """The slices' sum in the order given (the same result in every run)."""
    total = parts[0]
    for part in parts[1:]:
        total = total + part
    return total


def _store_piece(ctx: Any, t: GemmTiling, total: dsl.FragmentedArray, staging: Any, c_ref: Any, row: Any, col: Any,
                 wg: Any, epilogue: Epilogue | None, extras: Sequence[Any]) -> None:
    """The epilogue on one summed piece at (row, col), rounded and written to C."""
    total = run_epilogue(epilogue, total, EpilogueTile(t, row, col, t.out_width), extras).astype(t.out_dtype)
    if t.swap_ab:  # C is the transpose of this tiling's product
        total.store_transposed(c_ref, col, row)
        return
    # one staging box: this block's previous box must have left it
    store_box(ctx, t, total, dsl.memref_slice(staging, wg), c_ref, row, col, wg, pending=0)


def make_split_k_reduce(split_k: int, m: int, n: int, out_dtype: str, **options: Any) -> mgpu_lab.Kernel:
    """C (m, n) = sum over s of W[s] (f32 workspace (split_k, m, n)), rounded to out_dtype.
    Each thread sums REDUCE_VECTOR neighbouring columns of every slice in order."""
    if n % REDUCE_VECTOR:
        raise ValueError(f"split-K reduce: n must be a multiple of {REDUCE_VECTOR}, got {n}")
    per_block = REDUCE_THREADS * REDUCE_VECTOR
    size = m * n

    def reduce(ctx, work, c_ref, smem):
        del ctx, smem  # no shared memory
        f32 = ir.F32Type.get()
        wide = ir.VectorType.get([REDUCE_VECTOR], f32)
        start = (dsl.block_idx("x") * REDUCE_THREADS + dsl.thread_idx()) * REDUCE_VECTOR

        with dsl.when(start < size):
            row, col = start // n, start % n
            total = vector.load(wide, work, [dsl.c(0), row, col])
            for s in range(1, split_k):
                total = arith.addf(total, vector.load(wide, work, [dsl.c(s), row, col]))
            out_type = ir.MemRefType(c_ref.type).element_type
            if out_type != f32:
                total = arith.truncf(ir.VectorType.get([REDUCE_VECTOR], out_type), total)
            vector.store(total, c_ref, [row, col])

    return mgpu_lab.kernel(reduce, grid=-(-size // per_block), block=REDUCE_THREADS,
                           in_shapes=dsl.ShapeDtype((split_k, m, n), "float32"),
                           out_shapes=dsl.ShapeDtype((m, n), out_dtype), name=f"gemm_split_k_reduce_{m}x{n}",
                           **options)


def split_k_name(t: GemmTiling) -> str:
    """The name of a workspace split's GEMM launch and of its program."""
    return f"gemm_split{t.split_k}_{'nt' if t.transpose_b else 'nn'}_{t.m}x{t.n}x{t.k}"


def split_k_gemm(partial: Any, t: GemmTiling, options: dict[str, Any]) -> Any:
    """`make_gemm`'s Kernel when the K slices are summed through a workspace: a program of two
    launches, `partial` (the GEMM of `t` writing f32 partial sums into a (split_k, m, n) scratch
    buffer; make_gemm builds it, named `split_k_name(t)`) and the reduce summing them into C. The
    workspace is the program's: kept per device and stream in process, from torch's allocator
    in a torch op, allocated by an exported module itself. (profile=True profiles the GEMM
    launch, not the reduce.)"""
    plain = {key: value for key, value in options.items() if not key.startswith("profile")}
    reduce = make_split_k_reduce(t.split_k, t.m, t.n, t.out_dtype, **plain)
    workspace = Ref("scratch", 0)
    program = Program(
        split_k_name(t), inputs=tuple(partial.compiled.inputs), outputs=tuple(reduce.compiled.outputs),
        scratch=(Scratch((t.split_k, t.m, t.n), "float32", name="split_k_partials"),),
        steps=(Launch(partial.compiled, inputs(len(partial.compiled.inputs)) + (workspace,)),
               Launch(reduce.compiled, (workspace, Ref("output", 0)))),
        notes={"tiling": t})
    return Kernel(program, isolate=options.get("isolate"))


__all__ = ["MAX_CLUSTER_SPLIT", "split_k_gemm", "split_k_name", "choose_split_k", "default_reduce", "even_split_k",
           "make_split_k_reduce", "reduce_in_cluster"]
