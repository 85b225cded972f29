"""The GEMM's tiling rules: which tile sizes, kernel kinds and settings the kernel can build,
checked with errors that name the argument (`check_problem`, `check_tiling`), and a tiling
settled from a configuration and the caller's settings (`settle_tiling`: defaults, the deepest
ring that fits, an even K split).

Below the configuration choice (configs.py validates the model's and the table's picks here)
and the kernel (kernel.resolve_tiling picks a configuration, then settles it here): the rules
live in one place and nothing here looks a configuration up.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Sequence
from typing import Any

from mgpu_lab.arguments import alternatives, choice, count, flag, size

from .cluster_shares import pairs_split_b  # the rule lives there (the model reads it too); still importable here
from .pieces import SMEM_LIMIT, GemmTiling, deepest_ring
from .split_k import MAX_CLUSTER_SPLIT, default_reduce, even_split_k
from .stream_k import check_stream_k
from .stream_k_plan import MAX_TEAM
# the limits live there (the model reads them too); still importable here
from .tile_limits import (MAX_ACCUMULATOR, MAX_PINGPONG_ACCUMULATOR, MAX_SWAP_AB_ACCUMULATOR, THREE_CONSUMER_MAX_N,
                          THREE_CONSUMER_ROWS, TILE_MS, TILE_NS, accumulator_limit, valid_tile_n)

SWAP_AB_EPILOGUE = ("gemm: swap_ab=True holds C.T's tiles and applies only an epilogue marked swap_safe (one that "
                    "reads its arrays through the tile's loaders, as `fused(...)` does); use swap_ab=False with this "
                    "epilogue")
_INPUT_DTYPES = ("bfloat16", "float16")
_OUTPUT_DTYPES = ("bfloat16", "float16", "float32")
_PERSISTENT = (False, True, "pingpong", "stream_k")


def swap_safe(epilogue: Any) -> bool:
    """Whether an epilogue applies to C.T's tiles as well (swap_ab): one marked `swap_safe = True`
    (it reads its arrays through EpilogueTile's loaders, which speak C's terms either way, and is
    elementwise otherwise: what `fused` builds), or one of scalars only (the FP8 scales)."""
    return bool(getattr(epilogue, "swap_safe", False) or getattr(epilogue, "scalars_only", False))


def check_problem(m: Any, n: Any, k: Any, transpose_b: Any = False, *, where: str = "gemm") -> tuple[int, int, int]:
    """The sizes as ints, checked before anything computes with them (k=True would otherwise
    pad to a k=8 GEMM), and transpose_b a bool."""
    flag("transpose_b", transpose_b, where=where)
    return size("m", m, where=where), size("n", n, where=where), size("k", k, where=where)


def check_tiling(t: GemmTiling, input_dtypes: Sequence[str] = _INPUT_DTYPES) -> None:
    """ValueError naming the argument for anything the kernel cannot do."""
    check_problem(t.m, t.n, t.k, t.transpose_b)
    choice("tile_m", t.tile_m, TILE_MS, where="gemm")
    if not valid_tile_n(t.tile_n, t.transpose_b, t.swap_ab):
        if t.b_k_major:
            step = 8 if t.swap_ab is True else 16
            raise ValueError(f"gemm: tile_n must be a multiple of {step} from {step} to 256 ("
                             f"{'swap_ab' if step == 8 else 'B (n, k)'}), got {t.tile_n!r}")
        raise ValueError(f"gemm: tile_n must be one of {TILE_NS} (B (k, n) loads 64- or 32-column boxes; B (n, k) takes "
                         f"any multiple of 16), got {t.tile_n!r}")

    choice("dtype", t.dtype, input_dtypes, expected=f"one of {', '.join(map(repr, input_dtypes))}", where="gemm")
    choice("out_dtype", t.out_dtype, _OUTPUT_DTYPES, expected=alternatives(_OUTPUT_DTYPES), where="gemm")
    count("stages", t.stages, minimum=2, where="gemm")
    choice("persistent", t.persistent, _PERSISTENT, expected=alternatives(_PERSISTENT), where="gemm")
    if t.pingpong and t.tile_m not in (64, 128):
        raise ValueError(f"gemm: persistent='pingpong' gives each consumer whole tiles: tile_m must be 64 or 128, "
                         f"got {t.tile_m}")
    if t.tile_m == THREE_CONSUMER_ROWS and (t.split_k > 1 or t.tile_n > THREE_CONSUMER_MAX_N):  # pingpong: above
        raise ValueError(f"gemm: tile_m=192 runs three consumer warpgroups of 64 rows (a 512-thread block): it takes "
                         f"one tile per block, persistent=True or 'stream_k', split_k=1 and tile_n up to "
                         f"{THREE_CONSUMER_MAX_N}; got persistent={t.persistent!r}, split_k={t.split_k}, "
                         f"tile_n={t.tile_n}")
    if t.tile_m == THREE_CONSUMER_ROWS and t.itemsize != 2:
        raise ValueError(f"gemm: tile_m=192 (three consumer warpgroups) runs 16-bit inputs only (its FP8 scales are "
                         f"untested), got dtype {t.dtype!r}; use tile_m=128 or 256")
    limit = accumulator_limit(t.pingpong, t.swap_ab is True)
    if t.consumer_rows * t.tile_n > limit:
        how = "persistent='pingpong' with " if t.pingpong else "swap_ab=True with " if t.swap_ab is True else ""
        raise ValueError(f"gemm: {how}tile_m={t.tile_m} keeps a {t.consumer_rows} x tile_n f32 accumulator per "
                         f"consumer; tile_n must be at most {limit // t.consumer_rows} to fit in "
                         f"registers, got {t.tile_n}")
    count("split_k", t.split_k, minimum=1, maximum=t.k_tiles, expected=f"an int from 1 to the {t.k_tiles} k-steps "
          f"of k={t.k}", where="gemm")
    if t.split_k > 1 and t.persistent:
        raise ValueError(f"gemm: split_k={t.split_k} runs one tile slice per block; it cannot be combined with "
                         f"persistent={t.persistent!r}")
    choice("cluster_m", t.cluster_m, (1, 2, 4), expected="1, 2 or 4", where="gemm")
    if t.cluster_m > 1 and (t.persistent not in (True, "stream_k", "pingpong") or t.split_k > 1):
        raise ValueError(f"gemm: cluster_m={t.cluster_m} ({t.cluster_m} blocks sharing B tiles by multicast) needs "
                         f"persistent=True (or 'stream_k' or 'pingpong') and split_k=1, got "
                         f"persistent={t.persistent!r}, split_k={t.split_k}")
    if t.cluster_m > 1 and not pairs_split_b(t.tile_n, t.b_k_major, t.cluster_m):
        share = "halves" if t.cluster_m == 2 else "quarters"
        widths = (f"a multiple of {8 * t.cluster_m} from {16 * t.cluster_m}" if t.b_k_major
                  else "128, 192 or 256" if t.cluster_m == 2 else "256")
        raise ValueError(f"gemm: cluster_m={t.cluster_m} splits the B tile between the blocks (in 8-row {share} of "
                         f"B (n, k), or 64-column boxes of B (k, n)): tile_n must be {widths}, got {t.tile_n}")
    choice("cluster_n", t.cluster_n, (1, 2, 4), expected="1, 2 or 4", where="gemm")
    if t.cluster_n > 1 and t.persistent not in (True, "stream_k", "pingpong"):
        raise ValueError(f"gemm: cluster_n={t.cluster_n} ({t.cluster_n} blocks sharing A tiles by multicast) needs "
                         f"persistent=True (or 'stream_k' or 'pingpong'), got persistent={t.persistent!r}")
    if t.cluster_size > 8:
        raise ValueError(f"gemm: a cluster holds at most eight blocks (2 x 4 or 4 x 2; four: 2 x 2, 4 x 1 or "
                         f"1 x 4), got cluster_m={t.cluster_m} with cluster_n={t.cluster_n}")
    if t.cluster_size >= 4 and t.persistent is not True:
        size = "four" if t.cluster_size == 4 else "eight"
        raise ValueError(f"gemm: clusters of {size} blocks (cluster_m={t.cluster_m}, cluster_n={t.cluster_n}) "
                         f"need persistent=True, got persistent={t.persistent!r}")
    choice("split_k_reduce", t.split_k_reduce, ("cluster", "workspace"), expected="'cluster' or 'workspace'",
           where="gemm")
    if t.cluster_split and t.split_k > MAX_CLUSTER_SPLIT:
        raise ValueError(f"gemm: split_k_reduce='cluster' sums the K slices in one cluster of at most "
                         f"{MAX_CLUSTER_SPLIT} blocks, got split_k={t.split_k}; use split_k_reduce='workspace'")
    if t.split_k > 1 and t.dtype not in _INPUT_DTYPES and not t.cluster_split:
        raise ValueError(f"gemm: split_k with dtype {t.dtype!r} needs split_k_reduce='cluster' (its scales apply "
                         f"to the sums), got {t.split_k_reduce!r}")
    flag("swap_ab", t.swap_ab, where="gemm")
    if t.swap_ab and (t.pingpong or t.cluster_size > 1 and t.persistent is not True
                      or t.split_k > 1 and not t.cluster_split):
        raise ValueError(f"gemm: swap_ab=True (C.T = B @ A.T, written transposed) runs one tile per "
                         f"block or persistent blocks (True or 'stream_k'; multicast clusters with True only), and "
                         f"the cluster split-K reduce; got persistent={t.persistent!r}, cluster_m={t.cluster_m!r}, "
                         f"cluster_n={t.cluster_n!r}, split_k_reduce={t.split_k_reduce!r} (split_k={t.split_k})")
    if t.a_mn_major and t.itemsize != 2:
        raise ValueError(f"gemm: swap_ab=True with B (k, n) reads B as an MN-major wgmma operand, which needs 16-bit "
                         f"inputs, got dtype {t.dtype!r}; pass B as (n, k) (transpose_b=True)")
    count("group_m", t.group_m, minimum=1, where="gemm")
    count("team_m", t.team_m, minimum=1, maximum=MAX_TEAM, expected=f"an int from 1 to {MAX_TEAM}", where="gemm")
    if t.team_m > 1 and (not t.stream_k or t.cluster_size > 1):
        raise ValueError(f"gemm: team_m={t.team_m} (stream-K units of {t.team_m} blocks on a column's tiles) needs "
                         f"persistent='stream_k' without a multicast cluster, got persistent={t.persistent!r}, "
                         f"cluster_m={t.cluster_m}, cluster_n={t.cluster_n}")
    if t.team_m > t.tiles_m:
        raise ValueError(f"gemm: team_m={t.team_m} puts {t.team_m} row tiles in a team, but "
                         f"{'n' if t.swap_ab else 'm'}={t.m} makes only {t.tiles_m} of {t.tile_m} rows: "
                         f"team_m must be at most {t.tiles_m}")
    if t.stream_k:
        check_stream_k(t)
    if t.smem_bytes > SMEM_LIMIT:
        raise ValueError(f"gemm: {t.stages} stages of a {t.tile_m}x{t.tile_n}x{t.tile_k} tile need {t.smem_bytes} "
                         f"bytes of smem, more than the {SMEM_LIMIT} a Hopper block can have; use fewer stages")


def settle_tiling(m: int, n: int, k: int, picked: dict[str, Any], *, transpose_b: bool = False,
                  dtype: str = "bfloat16", out_dtype: str = "bfloat16", tile_m: int | None = None,
                  tile_n: int | None = None, stages: int | None = None, group_m: int | None = None,
                  persistent: bool | str | None = None, split_k: int | None = 1, split_k_reduce: str | None = None,
                  cluster_m: int | None = None, swap_ab: bool | None = None, cluster_n: int | None = None,
                  team_m: int | None = None, input_dtypes: Sequence[str] = _INPUT_DTYPES) -> GemmTiling:
    """The checked GemmTiling of sizes already checked (check_problem): each setting the caller
    gave, else the configuration `picked`'s, else the default (stages: the deepest ring that
    fits; split_k=None: the configuration's split and its reduce; split_k_reduce=None: 'cluster'
    up to MAX_CLUSTER_SPLIT slices, else 'workspace'), K split into slices none of which is empty.
    A picked team_m gives way (to 1) where the settings given leave no stream-K grid of single
    blocks for it, or too few row tiles."""
    if swap_ab is None:
        swap_ab = picked.get("swap_ab", False)
    tile_m = picked["tile_m"] if tile_m is None else tile_m
    tile_n = picked["tile_n"] if tile_n is None else tile_n
    stages = picked.get("stages") if stages is None else stages
    group_m = picked.get("group_m", 8) if group_m is None else group_m
    persistent = picked.get("persistent", False) if persistent is None else persistent
    cluster_m = picked.get("cluster_m", 1) if cluster_m is None else cluster_m
    cluster_n = picked.get("cluster_n", 1) if cluster_n is None else cluster_n
    if split_k is None:  # the configuration's split, summed its way
        split_k = picked.get("split_k", 1)
        split_k_reduce = picked.get("split_k_reduce") if split_k_reduce is None else split_k_reduce
    if swap_ab is True:
        m, n = n, m
    t = GemmTiling(m, n, k, tile_m=tile_m, tile_n=tile_n, stages=stages if stages is not None else 2,
                   group_m=group_m, transpose_b=transpose_b, dtype=dtype, out_dtype=out_dtype,
                   persistent=persistent, split_k=split_k, swap_ab=swap_ab)
    if split_k_reduce is None:
        split_k_reduce = default_reduce(split_k)
    t = dataclasses.replace(t, split_k_reduce=split_k_reduce, cluster_m=cluster_m, cluster_n=cluster_n)
    if team_m is None:
        team_m = picked.get("team_m", 1) or 1
        if not t.stream_k or t.cluster_size > 1 or team_m > t.tiles_m:
            team_m = 1
    t = dataclasses.replace(t, team_m=team_m)
    if tile_m in TILE_MS and valid_tile_n(tile_n, transpose_b, swap_ab) and stages is None:
        t = dataclasses.replace(t, stages=deepest_ring(t if t.dtype in input_dtypes else
                                                        dataclasses.replace(t, dtype="bfloat16")))
    check_tiling(t, input_dtypes)
    return dataclasses.replace(t, split_k=even_split_k(t.k_tiles, t.split_k))  # no empty K slice


__all__ = ["MAX_ACCUMULATOR", "MAX_PINGPONG_ACCUMULATOR", "MAX_SWAP_AB_ACCUMULATOR", "SWAP_AB_EPILOGUE", "TILE_MS",
           "TILE_NS", "check_problem", "check_tiling", "pairs_split_b", "settle_tiling", "swap_safe", "valid_tile_n"]
