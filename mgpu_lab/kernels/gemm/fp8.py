"""FP8 (e4m3) GEMM with per-tensor scales: C = scale_a * scale_b * (A @ B.T), f32 accumulation,
bf16 (or f16 / f32) output; what `torch._scaled_mm(a, b.t(), scale_a, scale_b)` computes.

The same warp-specialized kernel as the bf16 GEMM (pieces.py) with 128-element k-steps
(one 128-byte swizzle span of fp8) and QGMMA instructions. FP8 wgmma operands must be K-major,
so B is given as (n, k) (an nn.Linear weight), never (k, n). The two scales are (1,) float32
arrays applied in the epilogue, before any user epilogue (bias, activation, ...).

float8 arrays travel as uint8 in CuPy (runtime/arrays.py `to_device` / `to_host`).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import mgpu_lab
from mgpu_lab import dsl
from mgpu_lab.arguments import choice
from mgpu_lab.user_errors import user_facing

from .kernel import build_gemm_kernel, epilogue_keywords, resolve_tiling
from .tiling import check_problem, swap_safe
from .padding import aligned_shape, padded_gemm
from .pieces import Epilogue, EpilogueTile

FP8 = "float8_e4m3fn"


@user_facing  # an argument error shows the caller's line, not the library's frames
def make_fp8_gemm(m: int, n: int, k: int, *, out_dtype: str = "bfloat16", tile_m: int | None = None,
                  tile_n: int | None = None, stages: int | None = None, group_m: int | None = None,
                  persistent: bool | str | None = None, cluster_m: int | None = None, split_k: int | None = None,
                  split_k_reduce: str | None = None, swap_ab: bool | None = None, cluster_n: int | None = None,
                  team_m: int | None = None, epilogue: Epilogue | None = None, epilogue_inputs: Sequence[Any] = (),
                  transpose_b: bool = True, dtype: str = FP8, **options) -> mgpu_lab.Kernel:
    """C (m, n) = epilogue(scale_a * scale_b * A (m, k) @ B (n, k).T); call it as
    `kernel(a, b, scale_a, scale_b, *epilogue_arrays)` with a, b e4m3 (uint8 bytes on the device)
    and the scales (1,) float32 arrays. split_k: K slices summed in a (1, split_k) cluster, the
    scales (and epilogue) applied to the sums (split_k.py). swap_ab: C.T = B @ A.T with A's
    few rows as the wgmma's N (as make_gemm's; the scales are scalars, so they apply to either;
    no user epilogue). cluster_m / cluster_n: multicast pairs sharing B / A tiles, team_m: stream-K
    teams, as make_gemm's."""
    m, n, k = check_problem(m, n, k, transpose_b, where="fp8 gemm")
    if transpose_b is not True:
        raise ValueError("fp8 gemm: B must be (n, k) (transpose_b=True): FP8 wgmma reads K-major operands only")
    choice("dtype", dtype, (FP8,), expected=repr(FP8), where="fp8 gemm")
    if not aligned_shape(m, n, k, True, FP8, out_dtype):
        return padded_gemm(make_fp8_gemm, m, n, k, transpose_b=True, dtype=FP8, out_dtype=out_dtype, tile_m=tile_m,
                          tile_n=tile_n, stages=stages, group_m=group_m, persistent=persistent, cluster_m=cluster_m,
                          split_k=split_k, split_k_reduce=split_k_reduce, swap_ab=swap_ab, cluster_n=cluster_n,
                          team_m=team_m, epilogue=epilogue, epilogue_inputs=epilogue_inputs, **options)
    t = resolve_tiling(m, n, k, transpose_b=True, dtype=FP8, out_dtype=out_dtype, tile_m=tile_m, tile_n=tile_n,
                       stages=stages, group_m=group_m, persistent=persistent, cluster_m=cluster_m,
                       split_k=split_k, split_k_reduce=split_k_reduce, swap_ab=swap_ab, cluster_n=cluster_n,
                       team_m=team_m, **epilogue_keywords(epilogue), input_dtypes=(FP8,))

    def scaled(acc: dsl.FragmentedArray, tile: EpilogueTile, scale_a: Any, scale_b: Any,
               *refs: Any) -> dsl.FragmentedArray:
        acc = acc * (tile.scalar(scale_a) * tile.scalar(scale_b))
        return acc if epilogue is None else epilogue(acc, tile, *refs)

    scaled.scalars_only = epilogue is None  # the same on C or C.T: swap_ab may take it
    scaled.swap_safe = epilogue is None or swap_safe(epilogue)  # (the user's, read through the tile's loaders)
    scales = (dsl.ShapeDtype((1,), "float32"), dsl.ShapeDtype((1,), "float32"))
    swapped = "_swapab" if t.swap_ab else ""
    return build_gemm_kernel(t, options, stages_given=stages is not None, epilogue=scaled,
                             epilogue_inputs=(*scales, *epilogue_inputs), name=f"gemm_fp8_nt_{m}x{n}x{k}{swapped}")
