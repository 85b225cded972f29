"""benchmarks/kernel_breakdown.py on the CPU: where a forward's GPU time goes, from kernel lists."""

from __future__ import annotations

import math
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "benchmarks"))

from kernel_breakdown import breakdown_figures, busy_us, is_gemm, side_figures  # noqa: E402

OURS = [(0.0, 10.0, "gemm_nt_2048x2048x2048"), (12.0, 14.0, "rms_norm_kernel"), (20.0, 30.0, "gemm_nt_2048x512x2048"),
        (30.0, 40.0, "gemm_nt_2048x2048x2048")]
THEIRS = [(0.0, 8.0, "nvjet_hsh_128x256_64x4_2x1_v_bz_coopA_TNT"), (9.0, 11.0, "rms_norm_kernel"),
          (11.0, 16.0, "sm90_xmma_gemm_bf16bf16_bf16f32"), (16.0, 24.0, "nvjet_hsh_128x256_64x4_2x1_v_bz_coopA_TNT")]


def test_kernels_are_told_apart_by_name():
    assert is_gemm("gemm_nn_129x28672x4096_swapab", ours=True) and not is_gemm("rms_norm_kernel", ours=True)
    assert is_gemm("sm90_xmma_gemm_bf16bf16", ours=False) and is_gemm("nvjet_hsh_128x256", ours=False)
    assert is_gemm("void cutlass::Kernel2<...>", ours=False) and not is_gemm("elementwise_kernel", ours=False)


def test_busy_time_is_the_union_of_overlapping_kernels():
    assert busy_us([(0, 10, "a"), (5, 12, "b"), (20, 25, "c"), (21, 22, "d")]) == 17
    assert side_figures(OURS, ours=True) == {"kernels": 4, "gemm_kernels": 3, "gemm_us": 30.0, "other_us": 2.0,
                                             "busy_us": 32.0, "span_us": 40.0}


def test_gemms_pair_up_by_order_and_sum_per_shape():
    figures = breakdown_figures("x", OURS, THEIRS)
    assert figures["x_breakdown_gemm_torch_over_ours"] == 21.0 / 30.0
    shapes = figures["x_breakdown_per_shape"]
    assert shapes["gemm_nt_2048x2048x2048"]["calls"] == 2
    assert shapes["gemm_nt_2048x2048x2048"]["torch_us"] == 16.0 and shapes["gemm_nt_2048x2048x2048"]["ours_us"] == 20.0
    assert math.isclose(shapes["gemm_nt_2048x512x2048"]["torch_over_ours"], 0.5)


def test_unequal_gemm_counts_are_not_paired():
    figures = breakdown_figures("x", OURS, THEIRS + [(30.0, 31.0, "splitKreduce_kernel")])
    assert figures["x_breakdown_per_shape"] == "not paired: 3 GEMM kernels of ours, 4 of torch's"
    assert figures["x_breakdown_torch_gemm_kernels"] == 4
