"""GPU tests of the split-K GEMM, both ways of summing the K slices (in a cluster through
distributed shared memory, or through a workspace and a second kernel), against a float32
matmul: fresh random inputs, C (and the f32 workspace) poisoned with NaN before each run (a K slice or tile never written shows up), on the
decode shapes the sweep runs slowest (few tiles over a long K), ragged shapes (K slices of
unequal length, a K tail, the padded path) and f32 output. A file of its own so that a fault
here cannot take the other GEMM tests' CUDA context down with it."""

from __future__ import annotations

import numpy as np
import pytest
from test_gemm_epilogues_gpu import _check
from test_gemm_fp8_gpu import _run as _run_fp8
from test_gemm_gpu import random_operands, reference, relative_error
from test_hopper import host_f32, poison

from mgpu_lab.kernels.gemm import make_gemm

pytestmark = pytest.mark.gpu


def _split_error(m, n, k, rng, transpose_b=False, out_dtype="bfloat16", reduce="cluster", **kwargs):
    """||C - ref|| / ||ref|| of one run of the split-K GEMM (checked to be one, summed the
    `reduce` way: one kernel on a (1, split_k) cluster, or a GEMM into a workspace + a reduce)."""
    import cupy

    kern = make_gemm(m, n, k, transpose_b=transpose_b, out_dtype=out_dtype, split_k_reduce=reduce, **kwargs)
    if reduce == "workspace":
        assert len(kern.launches) == 2, f"{m}x{n}x{k} {kwargs}: not split: {kern!r}"
        for buffer in kern.scratch_buffers():  # the partial sums' workspace (and any padded operand)
            buffer.view(cupy.uint8).fill(0xFF) if buffer.dtype.kind != "f" else buffer.fill(np.nan)
    else:
        cluster = kern.compiled.cluster
        assert cluster[1] > 1 and kern.compiled.grid[1] == cluster[1], f"{m}x{n}x{k} {kwargs}: {cluster}"
    a, b = random_operands(m, n, k, rng, transpose_b)
    out = poison(cupy, (m, n), out_dtype)
    kern(cupy.asarray(a), cupy.asarray(b), out=out)
    err = relative_error(host_f32(out), reference(a, b, transpose_b))
    print(f"split-K ({reduce}) gemm {m}x{n}x{k} transpose_b={transpose_b} {kwargs}: relative error {err:.3g}")
    return err


REDUCES = pytest.mark.parametrize("reduce", ["cluster", "workspace"])


@REDUCES
@pytest.mark.parametrize("m, n, k, tiles, split_k", [
    (16, 4096, 14336, (64, 128), 4),
    (129, 4096, 4104, (64, 128), 3),  # ragged M, K tail, slices of 22, 22, 21 k-steps
    (16, 6144, 4096, (64, 128), 2),
    (16, 8192, 28672, (64, 128), 2),
    (129, 4096, 4104, (128, 256), 4),  # two consumer warpgroups per block
    (16, 6144, 4096, (64, 32), 8),  # the widest cluster, one output box per tile (some blocks store none)
])
def test_split_k_decode_shapes(m, n, k, tiles, split_k, reduce, rng):
    tile_m, tile_n = tiles
    assert _split_error(m, n, k, rng, transpose_b=True, tile_m=tile_m, tile_n=tile_n, split_k=split_k,
                        reduce=reduce) <= 1e-2


@REDUCES
@pytest.mark.parametrize("transpose_b", [False, True], ids=["nn", "nt"])
def test_split_k_ragged(transpose_b, reduce, rng):
    # unaligned N (the padded path), 16 k-steps in slices of 6, 6, 4, a K tail of 40
    assert _split_error(129, 257, 1000, rng, transpose_b, tile_m=64, tile_n=64, split_k=3, reduce=reduce) <= 1e-2
    assert _split_error(300, 520, 2056, rng, transpose_b, tile_m=128, tile_n=128, split_k=5, reduce=reduce) <= 1e-2


@REDUCES
def test_split_k_float32_output(reduce, rng):
    assert _split_error(333, 332, 3000, rng, out_dtype="float32", tile_m=128, tile_n=128, split_k=6,
                        reduce=reduce) <= 1e-4


def test_split_k_beyond_a_cluster_goes_through_the_workspace(rng):
    """12 slices are more than a portable cluster holds: the default is the workspace."""
    kern = make_gemm(16, 1024, 8192, transpose_b=True, tile_m=64, tile_n=128, split_k=12)
    assert len(kern.launches) == 2
    assert _split_error(16, 1024, 8192, rng, transpose_b=True, tile_m=64, tile_n=128, split_k=12,
                        reduce="workspace") <= 1e-2


def test_split_k_from_the_configuration(rng):
    """What make_gemm picks by itself for a decode shape whose tiles cannot fill the SMs."""
    import cupy

    m, n, k = 16, 1024, 8192
    kern = make_gemm(m, n, k, transpose_b=True)
    a, b = random_operands(m, n, k, rng, True)
    out = poison(cupy, (m, n), "bfloat16")
    kern(cupy.asarray(a), cupy.asarray(b), out=out)
    assert relative_error(host_f32(out), reference(a, b, True)) <= 1e-2


@pytest.mark.parametrize("m, n, k, tiles", [
    (16, 6144, 4096, {"tile_m": 64, "tile_n": 128, "split_k": 2}),
    (129, 4104, 4104, {"tile_m": 128, "tile_n": 256, "split_k": 3}),  # ragged M and N, pieces shared 2-1-1
])
def test_split_k_in_a_cluster_fuses_the_epilogue(m, n, k, tiles, rng):
    """Bias, GELU, residual and scale applied once, to the sums of the K slices."""
    assert _check(m, n, k, rng, tiles=tiles, bias="bfloat16", activation="gelu", residual="bfloat16",
                  scale=True) <= 1e-2


@pytest.mark.parametrize("m, n, k, tiles", [
    (16, 6144, 4096, {"tile_m": 64, "tile_n": 128, "split_k": 2}),
    (129, 4096, 4104, {"tile_m": 64, "tile_n": 256, "split_k": 4}),
])
def test_fp8_split_k_in_a_cluster(m, n, k, tiles, rng):
    """The per-tensor scales apply to the sums of the K slices."""
    assert _run_fp8(m, n, k, rng, tiles=tiles) <= 2e-2
