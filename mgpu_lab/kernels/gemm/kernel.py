"""bf16 GEMM on Hopper: C = epilogue(A @ B) (or A @ B.T), any M, N, K, f32 accumulation,
warp-specialized (the pieces are in pieces.py):

- warpgroup 0 is the producer: it gives up registers (setmaxnreg 40) and one elected thread
  streams (tile_m x 64) tiles of A and (64 x tile_n) tiles of B into a ring of `stages` smem
  slots with TMA (128-byte swizzle). `full[s]` completes when slot s has landed (TMA
  transaction bytes); the producer waits on `empty[s]` before refilling it.
- one (tile_m = 64) or two consumer warpgroups (setmaxnreg 232) multiply their rows of the A
  tile (64 or 128 rows each: one or two wgmma row tiles) with the B tile on the tensor cores,
  keep one wgmma group in flight and release the previous slot when its group is done; tile_m =
  192 runs three consumers of 64 rows (setmaxnreg 152: 512 threads share the register file).
- epilogue: an optional callable rewrites the f32 tile in registers (bias, activation,
  residual, scaling: epilogues.py), the result is rounded to the output type, written to
  smem in the 128-byte swizzled layout (conflict-free) and TMA-stored to C. The epilogue buffer
  reuses the pipeline slots (a smem Union): the consumers pass a named barrier first.

Ragged shapes: the TMA descriptors carry the true sizes of A, B and C, so boxes over an edge
load zeros (M and N edges, the K tail) and stores are clipped. TMA also needs row strides that
are multiples of 16 bytes (K and, for A @ B or C, N multiples of 8 bf16); shapes that miss
that are served by `padded_gemm`, a program that copies the operands into padded buffers first.

Blocks are rasterized in groups of `group_m` tile rows so blocks running together share tiles
of A and B in L2. persistent=True launches one block per SM that loops over the tiles in that
order: the producer loads the next tile during the epilogue, which streams the tile out one
TMA box at a time through small slots of its own (pieces.stream_tile: 32 KB for 128x256
tiles, so the ring keeps 4 stages) and waits for no store to finish; persistent="pingpong"
gives the two consumers alternate whole tiles, taking turns at the ring (named barriers) so
that their mbarrier waits stay in pipeline order; persistent="stream_k" balances the last
wave: the tiles left after the whole rounds are cut over K into equal ranges, one per block,
partial tiles handed to the block that finishes each tile through a global workspace and
release/acquire flags (stream_k.py). cluster_m=2 (persistent=True, "stream_k" or "pingpong") runs the
blocks in (2, 1) clusters on vertically adjacent tiles that share B by TMA multicast; each
consumer warp releases a slot in both blocks (a peer mbarrier arrival at cta scope: at cluster
scope it waited ~0.5 us per k-step for the warp's writes, which is what made the first multicast
GEMM run at 0.6x; profiled with the named regions). On the H200 it runs at 0.95-1.01x the
plain persistent kernel, so the tuner picks it only where it measures faster. split_k=S (for
shapes whose tiles fill few SMs over a long K) gives each tile S blocks, one per K slice, which
sum their f32 partial tiles as a cluster through distributed shared memory (up to 8; the
epilogue then applies to the sums), or through a workspace and a second kernel
(split_k.py). Without tile_m / tile_n / stages, the configuration comes from the tuned
table (configs.json, per device and shape) or a heuristic (`gemm_config`).

FP8: fp8.py (per-tensor scales) and fp8_block.py (DeepGEMM-style block scales).
"""

from __future__ import annotations

import dataclasses
import functools
from collections.abc import Callable, Sequence
from typing import Any

import numpy as np

import mgpu_lab
from mgpu_lab import dsl
from mgpu_lab.arguments import choice
from mgpu_lab.builder.profiling import check_buffer_mode
from mgpu_lab.profiler.format import words_per_block
from mgpu_lab.runtime.kernel import Kernel
from mgpu_lab.user_errors import user_facing

from .configs import auto_settings, config_with_settings, config_with_side, gemm_config, heuristic_config
from .padding import aligned_shape, padded_gemm
from .split_k import MAX_CLUSTER_SPLIT, reduce_in_cluster, split_k_gemm, split_k_name
from .stream_k import StreamKPlan, consume, produce, signal_partials, stream_k_gemm, stream_k_inputs
from . import model
from .model import SWAPPABLE
from .tiling import _INPUT_DTYPES, SWAP_AB_EPILOGUE, check_problem, settle_tiling, swap_safe
from .pieces import (
    SMEM_LIMIT,
    Epilogue,
    EpilogueTile,
    TURN_BARRIER,
    WARPGROUP,
    GemmTiling,
    consumer_registers,
    deepest_ring,
    drain_stores,
    load_operands,
    load_tile,
    multicast_peers,
    multiply,
    producer_registers,
    release_ring,
    run_epilogue,
    store_tile,
    store_tile_transposed,
    stream_tile,
    stream_tile_transposed,
    tile_origin,
)

def gemm_smem_bytes(tile_n: int, stages: int, out_dtype: str = "bfloat16", tile_m: int = 128) -> int:
    """Shared memory of one block: the pipeline ring (or the epilogue tile, if larger) + barriers."""
    return GemmTiling(1, 1, 1, tile_m=tile_m, tile_n=tile_n, stages=stages, out_dtype=out_dtype).smem_bytes


def default_stages(tile_n: int, tile_m: int = 128, dtype: str = "bfloat16", persistent: bool | str = False) -> int:
    """The deepest ring (at most 8 slots) that fits in a block's shared memory."""
    return deepest_ring(GemmTiling(1, 1, 1, tile_m=tile_m, tile_n=tile_n, dtype=dtype, persistent=persistent))


@user_facing  # an argument error shows the caller's line, not the library's frames
def make_gemm(m: int, n: int, k: int, *, transpose_b: bool = False, dtype: str = "bfloat16",
              out_dtype: str = "bfloat16", tile_m: int | None = None, tile_n: int | None = None,
              stages: int | None = None, group_m: int | None = None, persistent: bool | str | None = None,
              split_k: int | None = None, split_k_reduce: str | None = None, cluster_m: int | None = None,
              swap_ab: bool | None = None, cluster_n: int | None = None, team_m: int | None = None,
              epilogue: Epilogue | None = None, epilogue_inputs: Sequence[Any] = (), tune: str | None = None,
              **options) -> mgpu_lab.Kernel:
    """C (m, n) = epilogue(A (m, k) @ B), B of shape (k, n), or (n, k) with transpose_b=True.

    Call it as `kernel(a, b, *epilogue_arrays)`. epilogue: `f(acc, tile, *refs) -> FragmentedArray`
    on the f32 (rows, tile_n) register tile of each consumer (see pieces.EpilogueTile and
    epilogues.py); epilogue_inputs: the ShapeDtypes (or (shape, dtype)) of its arrays.
    persistent: True launches one block per SM that loops over the tiles, loading the next tile
    during the epilogue; "pingpong" also gives the two consumers alternate whole tiles, so one's
    epilogue overlaps the other's tensor-core work (tile_m 64 or 128; a consumer keeps up to
    128 x 192 f32, so tile_n up to 192 for 128 rows); "stream_k" splits the tiles left after the
    whole rounds over K so every block gets the same k-steps, handing partial tiles over
    through a workspace and flags, scratch buffers of the returned Kernel's program (stream_k.py; combines
    with cluster_m=2).
    split_k: > 1 splits K over that many blocks per tile; for shapes whose tiles fill few SMs
    over a long K. split_k_reduce: how the slices are summed (split_k.py): "cluster" (the
    default up to 8 slices) by the tile's blocks, a cluster, through distributed shared memory
    inside the one kernel, the epilogue applied to the sums; "workspace" (the default above 8)
    by a second kernel from an f32 workspace, no epilogue (with one, a configured workspace
    split is dropped).
    cluster_m: 2 runs persistent blocks in pairs (a (2, 1) cluster) on vertically adjacent tiles,
    each loading half of their common B tile and multicasting it into both (needs persistent=True,
    "stream_k" or "pingpong"; tile_n a multiple of 16 from 32 with B (n, k), 128, 192 or 256 with B (k, n));
    4: four such tiles, a quarter of B each (tile_n a multiple of 32 from 64, or 256).
    cluster_n: 2 (4) pairs horizontally adjacent tiles instead, each block loading half (a
    quarter) of their common A tile (needs persistent=True, "stream_k" or "pingpong"; swapped over
    B (k, n), half (a quarter) of each box's k rows): the
    operand off the 128-byte line, or the taller tile's, read once from L2 for two blocks. Both
    2: clusters of four blocks on 2 x 2 quads of tiles, each loading half of its row's A tile and
    half of its column's B tile; 2 x 4 and 4 x 2, clusters of eight. Clusters of four or eight
    need persistent=True; at most 30 (15) run (what an H200 keeps resident).
    team_m: with persistent="stream_k" and no cluster, units of team_m (2-8) blocks on vertically
    adjacent tiles of a column, each block its own tile, all over the same k-steps at the same
    time: they read each panel of their common B tile from L2 together, where single blocks
    start their pieces at different k-steps and read B from DRAM up to once per tile row
    (mid-m long-K shapes with fewer tiles than SMs, e.g. 634x3584x28672: 5 row tiles, a team
    of 5 per column).
    swap_ab: True computes C.T = B @ A.T (an epilogue only if marked swap_safe, as `fused`'s are:
    its loaders then read the bias and residual transposed; bf16/f16 only with B (k, n), which the wgmma
    then reads MN-major): B's n side fills the wgmma's 64-row side and A's few rows a narrow tile_n
    (any multiple of 8), e.g. m = 129 as one 136-wide tile instead of two 128-row tiles, one
    nearly empty; m = 257 as two 136-wide tiles; tile_m and tile_n then tile
    C.T (tile_m over n, tile_n over m) and C is written transposed (by TMA through smem; split
    swapped tiles straight from the registers).
    With no epilogue to hold registers, a swapped consumer may keep 128 x 160 f32 (tile_m=256,
    tile_n up to 160; other tilings 128 x 128). Swapped blocks run one tile each (with the
    cluster split-K) or persistent (True or "stream_k": m = 530 as three 184-wide tiles looped
    over by 132 blocks), not pingpong; persistent=True ones also in multicast clusters
    (cluster_m over C.T's rows, sharing the caller's A rows; cluster_n along them, sharing B (n, k)'s
    rows: 64 x 176 tiles in pairs are 64 rows of n by 176 of m, cuBLAS's mid-m kernels).
    tile_m: 64 (one consumer warpgroup), 128 or 256 (two, of 64 or 128 rows), or 192: three
    consumers of 64 rows each (512 threads, so at most 128 registers a thread and tile_n up to
    192), one tile per block, persistent=True or "stream_k", in clusters too, swapped too (192 of
    n), not split or pingpong: the 192-row tiles cuBLAS fills a wave with (4822 x 904 in 130
    tiles of 192 x 192 on 132 SMs). Its GPU tests (test_gemm_192_row_tiles) pass on an H100;
    an H200 has not run them yet.
    Tile sizes (and split_k, swap_ab) left out come from `gemm_config` (tuned table, else the
    performance model; with an epilogue, a tuned entry that swaps gives way to the model). Given
    one of tile_m and tile_n, the other and the rest come from the model's fastest configuration
    with that side, so any side the kernel takes builds (tile_n=256 is not paired with a
    tile_m=256 it cannot keep in registers).
    tune: None (default: no timing at call time) or "auto": time the model's top few
    configurations once on this GPU and use (and cache, per device model and toolchain) the
    fastest; RuntimeError without a GPU."""
    m, n, k = check_problem(m, n, k, transpose_b)
    if tune is not None and tile_m is None and tile_n is None:
        settings = dict(stages=stages, group_m=group_m, persistent=persistent, split_k=split_k,
                        split_k_reduce=split_k_reduce, cluster_m=cluster_m, swap_ab=swap_ab, cluster_n=cluster_n,
                        team_m=team_m)
        (tile_m, tile_n, stages, group_m, persistent, split_k, split_k_reduce, cluster_m, swap_ab,
         cluster_n, team_m) = auto_settings(
            tune, m, n, k, make=make_gemm, transpose_b=transpose_b, dtype=dtype, out_dtype=out_dtype,
            epilogue=epilogue_kind(epilogue), given=settings)
    elif tune is not None:
        choice("tune", tune, ("auto", None), expected="'auto' or None", where="gemm")
    if not aligned_shape(m, n, k, transpose_b, dtype, out_dtype):
        return padded_gemm(make_gemm, m, n, k, transpose_b=transpose_b, dtype=dtype, out_dtype=out_dtype,
                          tile_m=tile_m, tile_n=tile_n, stages=stages, group_m=group_m, persistent=persistent,
                          split_k=split_k, split_k_reduce=split_k_reduce, cluster_m=cluster_m, swap_ab=swap_ab,
                          cluster_n=cluster_n, team_m=team_m,
                          epilogue=epilogue, epilogue_inputs=epilogue_inputs, **options)
    resolve = functools.partial(resolve_tiling, m, n, k, transpose_b=transpose_b, dtype=dtype, out_dtype=out_dtype,
                                tile_m=tile_m, tile_n=tile_n, stages=stages, group_m=group_m, persistent=persistent,
                                cluster_m=cluster_m, swap_ab=swap_ab, cluster_n=cluster_n, team_m=team_m,
                                **epilogue_keywords(epilogue))
    t = resolve(split_k=split_k, split_k_reduce=split_k_reduce)
    if epilogue is not None and t.split_k > 1 and not t.cluster_split:
        if split_k is not None:
            raise ValueError(f"gemm: split_k={split_k!r} with split_k_reduce='workspace' sums the K slices in a second "
                             f"kernel and cannot apply an epilogue; use split_k_reduce='cluster' (up to "
                             f"{MAX_CLUSTER_SPLIT} slices) or split_k=1")
        t = resolve(split_k=1)  # the configuration's workspace split: none
    if t.split_k > 1 and not t.cluster_split:
        return workspace_split_k_gemm(t, options, stages_given=stages is not None)
    return build_gemm_kernel(t, options, stages_given=stages is not None, epilogue=epilogue,
                             epilogue_inputs=epilogue_inputs)


def epilogue_kind(epilogue: Any) -> bool | str:
    """What the configuration choice needs to know of an epilogue (configs' `epilogue`): False
    (none), True (one on C's own tiles) or model.SWAPPABLE (one that applies to C.T's too,
    `swap_safe`, where swapped tiles are offered for it: model.OFFER_SWAP_EPILOGUE)."""
    if epilogue is None:
        return False
    return SWAPPABLE if swap_safe(epilogue) and model.OFFER_SWAP_EPILOGUE else True


def epilogue_keywords(epilogue: Any) -> dict[str, bool]:
    """resolve_tiling's keywords for an epilogue: none, one on C's own tiles (unswapped), or one
    that applies to C.T's too (swappable_epilogue)."""
    if epilogue is None:
        return {}
    return {"swappable_epilogue": True} if swap_safe(epilogue) else {"unswapped": True}


def workspace_split_k_gemm(t: GemmTiling, options: dict[str, Any], *, stages_given: bool = True) -> mgpu_lab.Kernel:
    """The program of a split whose K slices are summed through a workspace: the GEMM of `t`
    writing f32 partial sums, then split_k.py's reduce."""
    partial = build_gemm_kernel(dataclasses.replace(t, out_dtype="float32"), dict(options),
                                stages_given=stages_given, name=split_k_name(t))
    return split_k_gemm(partial, t, options)


def build_gemm_kernel(t: GemmTiling, options: dict[str, Any], *, stages_given: bool,
                      **definition: Any) -> mgpu_lab.Kernel:
    """`mgpu_lab.kernel` of a checked tiling. With profile=True the profiler records every
    region the kernel records (its capacity), and the ring keeps its stages: the row goes to
    global memory when it does not fit beside it (profile_buffer="auto", or "global"). On the
    H200 the profiled 4096^3 GEMM then took 1.025-1.034x the plain one's time, against 1.27x
    when the ring gave up a slot for a shared-memory row (profile_buffer="smem", which still does
    that unless the caller chose `stages`; benchmarks/results/profiler_2026-12-02T1726*)."""
    if options.get("profile"):
        capacity = options.setdefault("profile_capacity", profile_events(t))
        if not stages_given and options.get("profile_buffer") == "smem":
            t = room_for_profiler(t, capacity, options.get("profile_unit", "warpgroup"))
    kwargs = tiled_gemm_definition(t, **definition)
    kwargs.pop("profile_capacity")
    kernel = mgpu_lab.kernel(**kwargs, **options)
    if t.stream_k:
        return stream_k_gemm(kernel, t)
    return Kernel(dataclasses.replace(kernel.program, notes={"tiling": t}), isolate=kernel.isolate)


def profile_events(t: GemmTiling) -> int:
    """Events per profiled unit that hold every region a block records: 2 per producer k-step,
    4 per consumer k-step and the epilogue (with its split-K reduce's park, meet, sum, meet),
    for each of the block's tiles (stream-K: its k-steps, up to three split segments and the
    partials it sums)."""
    if t.stream_k:
        plan = StreamKPlan.of(t)
        steps = plan.max_steps + plan.max_contributors * t.partial_chunks
        return 4 * steps + 12 * (plan.dp_rounds + 3)
    # a persistent block loops over work items (a pair's: both blocks run every one, the one past
    # C's edge too), one tile per block otherwise
    per_block = -(-t.work_items // (t.grid // t.unit_blocks)) if t.persistent else -(-t.tiles // t.grid)
    return (4 * t.k_tiles + 12) * per_block


def _profiler_room(t: GemmTiling, capacity: int, unit: str) -> int:
    """Bytes the kernel's own buffers may take beside the profiler's smem row."""
    units = t.threads // (32 if unit == "warp" else WARPGROUP)
    return SMEM_LIMIT - words_per_block(units, capacity) * 4 - 1024  # 1 KiB: the buffer's alignment


def room_for_profiler(t: GemmTiling, capacity: int, unit: str = "warpgroup") -> GemmTiling:
    """The tiling with as many ring slots given up (down to 2) as the profiler's smem buffer
    (`capacity` events per warpgroup or warp) needs beside the kernel's own buffers."""
    room = _profiler_room(t, capacity, unit)
    while t.stages > 2 and t.smem_bytes > room:
        t = dataclasses.replace(t, stages=t.stages - 1)
    return t


@user_facing
def resolve_tiling(m: int, n: int, k: int, *, transpose_b: bool = False, dtype: str = "bfloat16",
                   out_dtype: str = "bfloat16", tile_m: int | None = None, tile_n: int | None = None,
                   stages: int | None = None, group_m: int | None = None, persistent: bool | str | None = None,
                   split_k: int | None = 1, split_k_reduce: str | None = None, cluster_m: int | None = None,
                   swap_ab: bool | None = None, cluster_n: int | None = None, team_m: int | None = None,
                   unswapped: bool = False, swappable_epilogue: bool = False,
                   input_dtypes: Sequence[str] = _INPUT_DTYPES) -> GemmTiling:
    """The checked GemmTiling: given tile sizes, the rest from `gemm_config` (split_k=None:
    the configuration's, 1 when the tile sizes were given; split_k_reduce=None: 'cluster' up
    to MAX_CLUSTER_SPLIT slices, else 'workspace'). With swap_ab the tiling is of C.T (m and n
    swapped, B the wgmma A operand). unswapped=True (an epilogue, which needs C's own tiles and
    K slices summed in a cluster): the pick is the fastest configuration that can apply it (the
    model's, where a tuned one swaps or splits through a workspace), and swap_ab=True is refused.
    swappable_epilogue=True (an epilogue marked swap_safe: it applies to C.T's tiles too): K slices
    summed in a cluster, tiles that may swap."""
    m, n, k = check_problem(m, n, k, transpose_b)
    # configs' `epilogue`: swapped tiles for a swappable one where offered (model.OFFER_SWAP_EPILOGUE) or asked for
    offered = swappable_epilogue and (model.OFFER_SWAP_EPILOGUE or swap_ab is True)
    kind = True if unswapped or swappable_epilogue and not offered else SWAPPABLE if offered else False
    if tile_m is None and tile_n is None:
        picked = gemm_config(m, n, k, transpose_b=transpose_b, dtype=dtype, out_dtype=out_dtype, epilogue=kind)
    elif tile_m is None or tile_n is None:  # one side given: a partner it builds with
        side, value = ("tile_m", tile_m) if tile_n is None else ("tile_n", tile_n)
        picked = config_with_side(m, n, k, side, value, transpose_b=transpose_b, dtype=dtype, out_dtype=out_dtype,
                                  epilogue=kind)
    else:
        picked = {}
    if unswapped and swap_ab is True:
        raise ValueError(SWAP_AB_EPILOGUE)
    if unswapped and picked.get("swap_ab"):
        picked = heuristic_config(m, n, k, transpose_b=transpose_b, dtype=dtype)
    if tile_m is None and tile_n is None:  # a pick that cannot take the user's settings gives way
        given = {key: value for key, value in (("persistent", persistent), ("split_k", split_k),
                                               ("split_k_reduce", split_k_reduce), ("cluster_m", cluster_m),
                                               ("swap_ab", swap_ab), ("cluster_n", cluster_n), ("team_m", team_m))
                 if value is not None}
        picked = config_with_settings(m, n, k, picked, given, transpose_b=transpose_b, dtype=dtype,
                                      out_dtype=out_dtype, epilogue=kind)
    return settle_tiling(m, n, k, picked, transpose_b=transpose_b, dtype=dtype, out_dtype=out_dtype, tile_m=tile_m,
                         tile_n=tile_n, stages=stages, group_m=group_m, persistent=persistent, split_k=split_k,
                         split_k_reduce=split_k_reduce, cluster_m=cluster_m, swap_ab=swap_ab, cluster_n=cluster_n,
                         team_m=team_m, input_dtypes=input_dtypes)


@user_facing
def gemm_definition(m: int, n: int, k: int, *, transpose_b: bool = False, dtype: str = "bfloat16",
                    out_dtype: str = "bfloat16", tile_m: int | None = None, tile_n: int | None = None,
                    stages: int | None = None, group_m: int | None = None, persistent: bool | str | None = None,
                    epilogue: Epilogue | None = None, epilogue_inputs: Sequence[Any] = (),
                    profile_capacity: int | None = None, profile_unit: str = "warpgroup",
                    profile_buffer: str = "auto") -> dict:
    """The GEMM as `mgpu_lab.kernel` arguments: body, grid, block, in/out shapes, smem, name, and
    the profile_capacity its regions need. `%%mosaic` cells can call the body directly.

    profile_capacity: the events per unit (`profile_unit`) the kernel will be profiled with
    (`%%mosaic --profile --profile-capacity N`). profile_buffer: the one it will be profiled
    with (`--profile-buffer`); with "smem" the ring gives up slots so that the profiler's smem
    buffer fits beside it (unless `stages` is given); "auto" and "global" keep the ring (the
    events go to global memory when the row does not fit).
    A tuned persistent='stream_k' entry gives way to persistent=True here (a stream-K body takes
    a workspace and flags after the epilogue's arrays: ask for it with persistent='stream_k' and
    pass `stream_k.stream_k_inputs(tiling)` arrays, the flags zeroed)."""
    m, n, k = check_problem(m, n, k, transpose_b)
    if not aligned_shape(m, n, k, transpose_b, dtype, out_dtype):
        raise ValueError(f"gemm_definition: TMA needs rows of A, B and C that are multiples of 16 bytes; "
                         f"{m}x{n}x{k} ({dtype} in, {out_dtype} out) is not: use make_gemm (it pads)")
    t = resolve_tiling(m, n, k, transpose_b=transpose_b, dtype=dtype, out_dtype=out_dtype, tile_m=tile_m,
                       tile_n=tile_n, stages=stages, group_m=group_m, persistent=persistent,
                       **epilogue_keywords(epilogue))
    if t.stream_k and persistent is None:
        t = dataclasses.replace(t, persistent=True, team_m=1)
    check_buffer_mode(profile_buffer)
    if profile_capacity is not None and stages is None and profile_buffer == "smem":
        t = room_for_profiler(t, profile_capacity, profile_unit)
    return tiled_gemm_definition(t, epilogue=epilogue, epilogue_inputs=epilogue_inputs)


def tiled_gemm_definition(t: GemmTiling, *, epilogue: Epilogue | None = None, epilogue_inputs: Sequence[Any] = (),
                          name: str | None = None, mainloop: Mainloop | None = None) -> dict:
    """`mgpu_lab.kernel` arguments of the GEMM for a checked tiling (also used by fp8*.py).

    mainloop: a consumer mainloop other than `multiply`, called as
    `mainloop(ctx, t, ring, full, empty, consumer, first, release_last, tile, extra_refs, k_first,
    steps)` (tile: the consumer's EpilogueTile; k_first, steps: the block's K slice in k-steps with
    split_k, else 0 and None for all of K) and returning its f32 accumulator."""
    if epilogue is not None and not callable(epilogue):
        raise TypeError(f"gemm: epilogue must be a callable f(acc, tile, *refs), got {type(epilogue).__name__}")
    if mainloop is not None and (t.cluster_size > 1 or t.split_k > 1 and not t.cluster_split or t.stream_k):
        raise ValueError("gemm: cluster_m=2, cluster_n=2, split_k_reduce='workspace' and persistent='stream_k' need "
                         "the built-in mainloop (slots released in both blocks, partials summed before the epilogue)")
    if epilogue is not None and t.swap_ab and not swap_safe(epilogue):
        raise ValueError(SWAP_AB_EPILOGUE)
    extras = tuple(_shape_dtype(s, i) for i, s in enumerate(epilogue_inputs))
    if extras and epilogue is None:
        raise ValueError("gemm: epilogue_inputs were given without an epilogue to read them")
    a_sd = dsl.ShapeDtype((t.m, t.k), t.dtype)
    b_sd = dsl.ShapeDtype((t.n, t.k) if t.transpose_b else (t.k, t.n), t.dtype)
    workspace = t.split_k > 1 and not t.cluster_split
    c_sd = dsl.ShapeDtype((t.split_k, t.m, t.n) if workspace else (t.m, t.n), t.out_dtype)
    if t.swap_ab:  # the caller's A (its m = our n) and B ((n, k) or (k, n): our m is its n), and C = (our C).T
        a_sd, b_sd = dsl.ShapeDtype((t.n, t.k), t.dtype), dsl.ShapeDtype((t.m, t.k) if t.transpose_b else (t.k, t.m),
                                                                           t.dtype)
        c_sd = dsl.ShapeDtype((t.n, t.m), t.out_dtype)
    stream_k = stream_k_inputs(t) if t.stream_k else ()  # the partials' workspace and flags, after the extras

    def gemm(ctx, a, b, *refs):
        if t.swap_ab:
            a, b = b, a
        *extra_refs, c_ref, smem = refs
        if t.stream_k:
            *extra_refs, sk_workspace, sk_flags = extra_refs
        if t.cluster_split:
            (ring, partials), epilogue_smem = smem[0]  # the partial tile overlaps the ring
        elif t.stream_k:  # the B buffers double as landing slots of other blocks' partial tiles
            (a_ring, (b_ring, chunks)), epilogue_smem = smem[0]
            ring = (a_ring, b_ring)
        else:
            ring, epilogue_smem = smem[0]  # one-tile blocks: a Union (the epilogue overlaps the ring)
        full, empty = smem[1], smem[2]
        full.init(1, sync=False)
        # one arrival per consumer warp of every block whose loads land in this block's slots
        empty.init(t.slot_consumers * WARPGROUP_WARPS * t.slot_writers,
                   sync="cluster" if t.cluster_size > 1 else True)
        wg = dsl.warpgroup_idx()
        me = wg - 1  # consumer index

        def compute(row0, col0, first=0, release_last=False, after_mainloop=None, steps=None, k_first=0):
            """This consumer's tile at (row0, col0): the mainloop, the epilogue, the store."""
            tile = EpilogueTile(t, row0 + t.row_offset(me), col0)
            if mainloop is None:
                acc = multiply(ctx, t, ring, full, empty, me, first, release_last, steps, peers)
            else:
                acc = mainloop(ctx, t, ring, full, empty, me, first, release_last, tile, extra_refs, k_first, steps)
            if after_mainloop is not None:
                after_mainloop()
            finish(acc, row0, col0)

        def finish(acc, row0, col0):
            """The epilogue and the store of this consumer's accumulator of the tile at (row0, col0)."""
            tile = EpilogueTile(t, row0 + t.row_offset(me), col0)
            if t.cluster_split:
                with ctx.named_region("epilogue"):
                    reduce_in_cluster(ctx, t, acc, partials, epilogue_smem, c_ref, row0, col0, me, split,
                                      epilogue, extra_refs)
                return
            with ctx.named_region("epilogue"):
                if t.swap_tma_store and not t.persistent:  # C goes out through smem over the ring
                    release_ring(t)  # (see store_tile_transposed)
                acc = run_epilogue(epilogue, acc, tile, extra_refs)
                if t.swap_tma_store and t.persistent:
                    stream_tile_transposed(ctx, t, acc, epilogue_smem, c_ref, row0, col0, me)
                elif t.swap_tma_store:
                    store_tile_transposed(ctx, t, acc, epilogue_smem, c_ref, row0, col0, me)
                elif t.swap_ab:
                    acc.astype(t.out_dtype).store_transposed(c_ref, col0, row0 + t.row_offset(me))
                elif t.persistent:
                    stream_tile(ctx, t, acc, epilogue_smem, c_ref, row0, col0, me)
                else:
                    store_tile(ctx, t, acc, epilogue_smem, c_ref, row0, col0, me, split)

        split = dsl.block_idx("y") if t.split_k > 1 else None
        peers = ()
        if not t.persistent:
            row0, col0 = tile_origin(t)
            # split-K: this block's K slice; the last one may be shorter (resolve_tiling leaves none empty)
            k_first = 0 if split is None else split * t.k_steps
            steps = None if split is None else dsl.min(t.k_tiles - k_first, t.k_steps)

            def consumer():
                consumer_registers(t)
                compute(row0, col0, steps=steps, k_first=k_first)

            def producer():
                load_operands(ctx, t, a, b, ring, full, empty, row0, col0, k_first, steps)
                if t.cluster_split:  # the consumers' two cluster barriers count every thread
                    dsl.cluster_sync()
                    dsl.cluster_sync()

            dsl.if_else(wg == 0, producer, consumer)
            return

        # persistent blocks: a unit (one block, a multicast cluster or a stream-K team) loops over
        # work items; `member` is the block's place in its unit (its cluster rank, or its team's)
        block = dsl.block_idx("x") // t.unit_blocks
        units = t.grid // t.unit_blocks
        rank = dsl.block_idx("x") % t.cluster_size if t.cluster_size > 1 else None
        member = dsl.block_idx("x") % t.team_m if t.team_m > 1 else rank
        peers = multicast_peers(t, rank)

        def origin(item):
            return tile_origin(t, item, member)

        def wait_turn(tile, block, me):
            """Pingpong: the block's first tile is consumer 0's at once; every later one waits
            until the other consumer has finished the previous tile's mainloop."""
            with dsl.when(tile >= block + units):
                dsl.named_barrier(me + TURN_BARRIER, 2 * WARPGROUP)

        def pass_turn(tile, me):
            """Pingpong: hand the ring to the other consumer, if the block has a next tile (every
            bar.arrive has its bar.sync: no barrier is left half-passed when the block exits)."""
            with dsl.when(tile + units < t.work_items):
                dsl.named_barrier(1 - me + TURN_BARRIER, 2 * WARPGROUP, arrive=True)

        def tiles(body, first_local=0, every=1):
            """body(tile, first pipeline iteration) for the block's tiles first_local, first_local
            + every, ... (a pingpong consumer takes every other one)."""
            @dsl.for_range(block + first_local * units, t.work_items, every * units)
            def _(tile):
                body(tile, (tile - block) // units * t.k_steps)

        def producer():
            producer_registers(t)
            if t.stream_k:
                plan = StreamKPlan.of(t)
                with dsl.single_thread("warpgroup"):
                    produce(ctx, t, plan, a, b, ring, chunks, full, empty, sk_workspace, sk_flags, block, rank,
                            member, origin)
                signal_partials(t, plan, sk_flags, block, dsl.block_idx("x"))
            else:
                with dsl.single_thread("warpgroup"):
                    tiles(lambda tile, first: load_tile(ctx, t, a, b, ring, full, empty, *origin(tile), first,
                                                        rank=rank))
            if t.cluster_size > 1:  # no block exits while its peer may write into it or arrive on its barriers
                dsl.cluster_sync()

        def consumer():
            consumer_registers(t)
            if t.stream_k:
                consume(ctx, t, StreamKPlan.of(t), ring, chunks, full, empty, sk_workspace, me, block,
                        dsl.block_idx("x"), peers, origin, finish)
                drain_stores(ctx)
                if t.cluster_size > 1:
                    dsl.cluster_sync()
                return
            if not t.pingpong:
                tiles(lambda tile, first: compute(*origin(tile), first, release_last=True))
                drain_stores(ctx)
                if t.cluster_size > 1:
                    dsl.cluster_sync()
                return

            def take_turn(tile, first):
                # The consumers' mainloops must run in tile order: mbarrier waits only know a
                # phase's parity, so a consumer waiting on the ring for a tile more than one ring
                # round ahead of the producer would take an older phase for its own.
                wait_turn(tile, block, me)
                compute(*origin(tile), first, release_last=True, after_mainloop=lambda: pass_turn(tile, me))

            tiles(take_turn, me, 2)
            drain_stores(ctx)
            if t.cluster_size > 1:
                dsl.cluster_sync()

        dsl.if_else(wg == 0, producer, consumer)

    layout = "nt" if t.transpose_b else "nn"
    # Regions per k-step: 2 events per producer step, 4 per consumer step, plus the epilogue.
    grid = (t.grid, t.split_k) if t.split_k > 1 else t.grid
    cluster = (1, t.split_k) if t.cluster_split else (t.cluster_size, 1)
    shape = f"{t.n}x{t.m}x{t.k}_swapab" if t.swap_ab else f"{t.m}x{t.n}x{t.k}"
    return dict(body=gemm, grid=grid, cluster=cluster, block=t.threads, in_shapes=(a_sd, b_sd, *extras, *stream_k),
                out_shapes=c_sd, smem=t.smem(), name=name or f"gemm_{layout}_{shape}",
                profile_capacity=profile_events(t))


WARPGROUP_WARPS = 4
Mainloop = Callable[..., dsl.FragmentedArray]


def _shape_dtype(spec: Any, index: int) -> dsl.ShapeDtype:
    if isinstance(spec, dsl.ShapeDtype):
        return spec
    try:
        shape, dtype = spec
        return dsl.ShapeDtype(tuple(shape), dtype)
    except (TypeError, ValueError):
        raise TypeError(f"gemm: epilogue_inputs[{index}] must be a ShapeDtype or (shape, dtype), "
                        f"got {spec!r}") from None


def reference_gemm(a: np.ndarray, b: np.ndarray, transpose_b: bool = False) -> np.ndarray:
    """float32 reference of make_gemm's product."""
    a32, b32 = a.astype(np.float32), b.astype(np.float32)
    return a32 @ (b32.T if transpose_b else b32)


# Names that lived here until the tiling rules got a file of their own: read through with a
# DeprecationWarning naming their home, until mgpu_lab 0.3.
_MOVED = {name: "tiling" for name in ("TILE_MS", "TILE_NS", "MAX_ACCUMULATOR", "MAX_SWAP_AB_ACCUMULATOR",
                                      "valid_tile_n", "check_tiling")} | {"MAX_STAGES": "pieces"}


def __getattr__(name: str) -> Any:
    if name not in _MOVED:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    import importlib

    from mgpu_lab.deprecation import warn_moved

    home = f"mgpu_lab.kernels.gemm.{_MOVED[name]}"
    warn_moved(f"{__name__}.{name}", f"{home}.{name}")
    return getattr(importlib.import_module(home), name)


__all__ = ["GemmTiling", "build_gemm_kernel", "default_stages", "gemm_definition", "gemm_smem_bytes",
           "make_gemm", "reference_gemm", "resolve_tiling", "tiled_gemm_definition"]
