"""Every kernel maker checks its arguments with mgpu_lab.arguments before it computes with them:
a bool is no size (k=True built a k=8 GEMM through the padding path), "yes" is no flag."""

from __future__ import annotations

import re
import time

import pytest

from mgpu_lab.arguments import ArgumentError
from mgpu_lab.kernels.gemm import make_fp8_block_scaled_gemm, make_fp8_gemm, make_gemm, resolve_tiling


@pytest.mark.parametrize("make, where", [(make_gemm, "gemm"), (make_fp8_gemm, "fp8 gemm"),
                                         (make_fp8_block_scaled_gemm, "fp8 block-scaled gemm")])
@pytest.mark.parametrize("m, n, k, name, shown", [
    (256, 256, True, "k", "True (a bool)"),
    (True, 256, 128, "m", "True (a bool)"),
    (256, "256", 128, "n", "'256' (a str)"),
    (256, 256, 0, "k", "0"),
])
def test_gemm_makers_refuse_bad_sizes_before_padding(make, where, m, n, k, name, shown):
    with pytest.raises(ArgumentError, match="^" + re.escape(f"{where}: {name} must be a positive int, got {shown}")):
        make(m, n, k, transpose_b=True)


def test_gemm_flags_must_be_bools():
    with pytest.raises(ArgumentError, match=r"gemm: transpose_b must be True or False, got 'yes' \(a str\)"):
        make_gemm(256, 256, 128, transpose_b="yes")
    with pytest.raises(ArgumentError, match=r"gemm: swap_ab must be True or False, got 1 \(an int\)"):
        make_gemm(256, 256, 128, transpose_b=True, tile_m=64, tile_n=64, swap_ab=1)
    with pytest.raises(ArgumentError, match=r"gemm: cluster_m must be 1, 2 or 4, got True \(a bool\)"):
        make_gemm(1024, 1024, 1024, tile_m=128, tile_n=256, persistent=True, cluster_m=True)
    with pytest.raises(ArgumentError, match=r"gemm: stages must be an int >= 2, got True \(a bool\)"):
        make_gemm(256, 256, 128, tile_m=128, tile_n=128, stages=True)


def test_resolve_tiling_checks_sizes_before_the_config_lookup():
    with pytest.raises(ArgumentError, match=r"gemm: m must be a positive int, got 2.5 \(a float\)"):
        resolve_tiling(2.5, 256, 128)


def test_fp8_makers_name_the_dtype_and_tile():
    with pytest.raises(ArgumentError, match=r"fp8 gemm: dtype must be 'float8_e4m3fn', got 'bfloat16'"):
        make_fp8_gemm(256, 256, 128, dtype="bfloat16")
    with pytest.raises(ArgumentError, match=r"tile_n must be one of \(32, 64, 128\) .*got True \(a bool\)"):
        make_fp8_block_scaled_gemm(256, 256, 256, tile_n=True)


# -- attention -------------------------------------------------------------------------------------
@pytest.mark.parametrize("kwargs, message", [
    (dict(seq_q=True), "attention: seq_q must be a positive int, got True (a bool)"),
    (dict(batch=2.0), "attention: batch must be a positive int, got 2.0 (a float)"),
    (dict(kv_heads=False), "attention: kv_heads must be a positive int, got False (a bool)"),
    (dict(head_dim=True), "attention: head_dim must be one of (64, 128, 256), got True (a bool)"),
    (dict(causal="yes"), "attention: causal must be True or False, got 'yes' (a str)"),
    (dict(scale=True), "attention: scale must be a positive finite number, got True (a bool)"),
    (dict(exp2_fma_fraction=True), "attention: exp2_fma_fraction must be a number in [0, 1], got True (a bool)"),
    (dict(stages=True), "attention: stages must be an int >= 2, got True (a bool)"),
])
def test_attention_checks_every_argument(kwargs, message):
    from mgpu_lab.kernels.attention import make_attention

    args = dict(batch=1, heads=4, seq_q=256, seq_kv=256, head_dim=128) | kwargs
    shape = [args.pop(k) for k in ("batch", "heads", "seq_q", "seq_kv", "head_dim")]
    with pytest.raises(ArgumentError, match="^" + re.escape(message)):
        make_attention(*shape, **args)


@pytest.mark.parametrize("seq_q, seq_kv", [(2**62, 256), (256, 2**62), (2**31, 2**31)])
def test_attention_bounds_the_sequence_before_enumerating_tiles(seq_q, seq_kv):
    """The default persistence enumerates the query tiles: a 2**62-row sequence never finished."""
    from mgpu_lab.kernels.attention import MAX_SEQ, make_attention

    t0 = time.perf_counter()
    with pytest.raises(ValueError, match=rf"attention: seq_q and seq_kv may be at most {MAX_SEQ} \(2\*\*31 - 128: "
                                         rf"the kernel addresses rows with int32 .*got seq_q={seq_q}, seq_kv={seq_kv}"):
        make_attention(1, 4, seq_q, seq_kv, 128)
    assert time.perf_counter() - t0 < 1.0


# -- the teaching kernels ----------------------------------------------------------------------------
@pytest.mark.parametrize("make, kwargs, message", [
    ("vector_add", dict(n=True), "vector_add: n must be a positive int, got True (a bool)"),
    ("vector_add", dict(block=0), "vector_add: block must be a positive int, got 0"),
    ("tiled_copy", dict(m=4096.0), "tiled_copy: m must be a positive int, got 4096.0 (a float)"),
    ("tiled_copy", dict(tile=64), "tiled_copy: tile must be a tuple of 2 positive ints, got 64 (an int)"),
    ("block_sum", dict(blocks=True), "block_sum: blocks must be a positive int, got True (a bool)"),
    ("softmax", dict(n=True), "softmax: n must be a positive int, got True (a bool)"),
    ("scaled_add", dict(a=True), "scaled_add: a must be a finite number, got True (a bool)"),
    ("scaled_add", dict(m=-1), "scaled_add: m must be a positive int, got -1"),
    ("scaled_add", dict(tile=(32, 0)), "scaled_add: tile must be a tuple of 2 positive ints, got (32, 0)"),
])
def test_teaching_kernels_check_their_arguments(make, kwargs, message):
    import importlib

    module = importlib.import_module(f"mgpu_lab.examples.{make}")
    with pytest.raises(ArgumentError, match="^" + re.escape(message)):
        getattr(module, f"make_{make}")(**kwargs)


# -- mgpu_lab.kernel's own flags -------------------------------------------------------------------
def _body(ctx, out, smem):
    pass


@pytest.mark.parametrize("kwargs, message", [
    (dict(profile="no"), "profile must be True or False, got 'no' (a str)"),
    (dict(profile=1), "profile must be True or False, got 1 (an int)"),
    (dict(isolate="on"), "isolate must be True, False or None, got 'on' (a str)"),
])
def test_kernel_option_flags_are_bools(kwargs, message):
    import mgpu_lab

    with pytest.raises(ArgumentError, match="^" + re.escape(message)):
        mgpu_lab.kernel(_body, grid=1, block=128, out_shapes=mgpu_lab.ShapeDtype((128,), "float32"), **kwargs)


def test_kernel_grid_refuses_a_bool():
    import mgpu_lab

    with pytest.raises(TypeError, match=r"grid: expected an int or a tuple of 1-3 ints, got True$"):
        mgpu_lab.kernel(_body, grid=True, block=128, out_shapes=mgpu_lab.ShapeDtype((128,), "float32"))


def test_attention_defaults_for_a_billion_tokens_are_decided_without_listing_them():
    """default_persistent samples the query tiles of a huge problem instead of listing millions."""
    import time

    from mgpu_lab.kernels.attention import default_persistent

    t0 = time.perf_counter()
    assert default_persistent(1, 1, 2**30, 2**30, 128, True, 128) is False
    assert default_persistent(1, 8, 2**24, 2**24, 64, False, 128) is False
    assert time.perf_counter() - t0 < 1.0
