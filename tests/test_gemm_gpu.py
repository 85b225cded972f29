"""GPU tests of the WGMMA GEMM against a float32 matmul: fresh random inputs every run, outputs
poisoned with NaN first, relative error ||C - ref|| / ||ref|| <= 1e-2 (bf16 output). Ragged
shapes (TMA zero fill and clipped stores), K tails, decode shapes (M of 1 to 64), unaligned
rows (the padded path) and every tile size."""

from __future__ import annotations

import numpy as np
import pytest
from test_hopper import host_f32, poison

from mgpu_lab.builder.dtypes import numpy_dtype
from mgpu_lab.kernels.gemm import make_gemm

pytestmark = pytest.mark.gpu


def random_operands(m, n, k, rng, transpose_b=False, dtype="bfloat16"):
    """Host inputs (CuPy has no bf16 arithmetic) of unit variance."""
    a = rng.standard_normal((m, k), dtype=np.float32).astype(numpy_dtype(dtype))
    b = rng.standard_normal((n, k) if transpose_b else (k, n), dtype=np.float32).astype(numpy_dtype(dtype))
    return a, b


def reference(a, b, transpose_b=False):
    """float32 A @ B (or A @ B.T) on the device, as a host array."""
    import cupy

    b32 = cupy.asarray(b.astype(np.float32))
    return (cupy.asarray(a.astype(np.float32)) @ (b32.T if transpose_b else b32)).get()


def relative_error(got, ref):
    assert np.isfinite(got).all(), "part of C was never written (the NaN poison survived)"
    return float(np.linalg.norm(got - ref) / max(np.linalg.norm(ref), 1e-30))


def _run(m, n, k, rng, transpose_b=False, runs=2, **kwargs):
    """Max over `runs` fresh inputs of ||C - ref|| / ||ref||."""
    import cupy

    in_dtype = kwargs.get("dtype", "bfloat16")
    out_dtype = kwargs.get("out_dtype", "bfloat16")
    kern = make_gemm(m, n, k, transpose_b=transpose_b, **kwargs)
    errors = []
    for _ in range(runs):
        a, b = random_operands(m, n, k, rng, transpose_b, in_dtype)
        out = poison(cupy, (m, n), out_dtype)
        kern(cupy.asarray(a), cupy.asarray(b), out=out)
        errors.append(relative_error(host_f32(out), reference(a, b, transpose_b)))
    print(f"gemm {m}x{n}x{k} transpose_b={transpose_b} {kwargs}: relative errors {errors}")
    return max(errors)


@pytest.mark.parametrize("transpose_b", [False, True], ids=["nn", "nt"])
@pytest.mark.parametrize("m, n, k", [(128, 256, 64), (256, 512, 192), (1408, 768, 320), (1024, 1024, 1024),
                                     (4096, 4096, 4096), (1024, 6144, 4096)])  # B (n, k): tuned 128x192 tiles
def test_gemm(m, n, k, transpose_b, rng):
    assert _run(m, n, k, rng, transpose_b) <= 1e-2


@pytest.mark.parametrize("transpose_b", [False, True], ids=["nn", "nt"])
@pytest.mark.parametrize("m, n, k", [
    (129, 257, 72),  # unaligned N: the padded path
    (129, 264, 72),  # ragged M and N, a K tail of 8
    (1, 4096, 4096), (7, 4096, 4096), (64, 4096, 4096),  # decode shapes
    (8, 14336, 4096),
    (4000, 4000, 4000),  # ragged everything at size
    (3, 5, 7),  # smaller than every tile, unaligned
    (520, 4104, 136),
])
def test_gemm_odd_shapes(m, n, k, transpose_b, rng):
    assert _run(m, n, k, rng, transpose_b, runs=1) <= 1e-2


@pytest.mark.parametrize("tile_m, tile_n", [(64, 32), (64, 64), (64, 256), (128, 64), (128, 128), (128, 192),
                                            (256, 64), (256, 128)])
@pytest.mark.parametrize("transpose_b", [False, True], ids=["nn", "nt"])
def test_gemm_every_tile_on_a_ragged_shape(tile_m, tile_n, transpose_b, rng):
    assert _run(700, 712, 456, rng, transpose_b, runs=1, tile_m=tile_m, tile_n=tile_n) <= 1e-2


@pytest.mark.parametrize("m, n, k, transpose_b, kwargs", [
    (700, 712, 456, False, {"tile_n": 128}),
    (700, 712, 456, True, {"tile_n": 192, "persistent": True}),
    (4822, 904, 3600, False, {"tile_n": 192, "persistent": True, "cluster_n": 2}),
    (4822, 904, 3600, True, {"tile_n": 128, "persistent": True, "cluster_m": 2}),
    (1528, 1872, 2792, False, {"tile_n": 128, "persistent": True, "cluster_m": 2, "cluster_n": 4}),
    (163, 18944, 4096, True, {"tile_n": 176, "persistent": True, "swap_ab": True}),
    (1528, 1872, 2792, False, {"tile_n": 128, "persistent": True, "swap_ab": True, "cluster_m": 2, "cluster_n": 4}),
    (333, 1000, 200, False, {"tile_n": 64, "out_dtype": "float32"}),
    (4822, 904, 3600, False, {"tile_n": 192, "persistent": "stream_k"}),
    (1538, 1080, 20352, True, {"tile_n": 144, "persistent": "stream_k"}),
    (4822, 904, 3600, False, {"tile_n": 192, "persistent": "stream_k", "cluster_m": 2}),
], ids=["one-tile", "persistent-nt", "pairs-sharing-a", "pairs-sharing-b", "2x4", "swapped-nt", "swapped-nn-2x4",
        "f32-out", "stream-k", "stream-k-nt", "stream-k-pairs"])
def test_gemm_192_row_tiles(m, n, k, transpose_b, kwargs, rng):
    """tile_m=192: three consumer warpgroups of 64 rows each, ragged edges, clusters, swapped."""
    tol = 1e-4 if kwargs.get("out_dtype") == "float32" else 1e-2
    assert _run(m, n, k, rng, transpose_b, runs=1, tile_m=192, **kwargs) <= tol


@pytest.mark.parametrize("kwargs, tol", [({"tile_n": 128}, 1e-2), ({"tile_n": 64, "stages": 3}, 1e-2),
                                         ({"out_dtype": "float32"}, 1e-4),
                                         ({"dtype": "float16", "out_dtype": "float16"}, 2e-3)])
@pytest.mark.parametrize("transpose_b", [False, True], ids=["nn", "nt"])
def test_gemm_variants(kwargs, tol, transpose_b, rng):
    assert _run(512, 768, 448, rng, transpose_b, **kwargs) <= tol


def test_gemm_ragged_float32_output(rng):
    assert _run(333, 332, 200, rng, out_dtype="float32", runs=1) <= 1e-4


def test_gemm_8192_nt(rng):
    assert _run(8192, 8192, 8192, rng, transpose_b=True, runs=1) <= 1e-2
