"""GPU tests of the WGMMA GEMM against a float32 matmul: fresh random bf16 inputs every run,
outputs poisoned with NaN first, relative error ||C - ref|| / ||ref|| <= 1e-2 (bf16 output)."""

from __future__ import annotations

import numpy as np
import pytest
from test_hopper import host_f32, poison

from mgpu_lab.builder.dtypes import numpy_dtype
from mgpu_lab.examples.gemm import make_gemm

pytestmark = pytest.mark.gpu


def _run(m, n, k, rng, transpose_b=False, runs=2, **kwargs):
    """Max over `runs` fresh inputs of ||C - ref|| / ||ref||; inputs are made on the host (CuPy has
    no bf16 arithmetic) and the reference is a float32 matmul on the device."""
    import cupy

    in_dtype = kwargs.get("dtype", "bfloat16")
    out_dtype = kwargs.get("out_dtype", "bfloat16")
    kern = make_gemm(m, n, k, transpose_b=transpose_b, **kwargs)
    errors = []
    for _ in range(runs):
        a = rng.standard_normal((m, k), dtype=np.float32).astype(numpy_dtype(in_dtype))
        b = rng.standard_normal((n, k) if transpose_b else (k, n), dtype=np.float32).astype(numpy_dtype(in_dtype))
        out = poison(cupy, (m, n), out_dtype)
        kern(cupy.asarray(a), cupy.asarray(b), out=out)
        b32 = cupy.asarray(b.astype(np.float32))
        ref = (cupy.asarray(a.astype(np.float32)) @ (b32.T if transpose_b else b32)).get()
        got = host_f32(out)
        assert np.isfinite(got).all(), "part of C was never written (the NaN poison survived)"
        errors.append(float(np.linalg.norm(got - ref) / np.linalg.norm(ref)))
    print(f"gemm {m}x{n}x{k} transpose_b={transpose_b} {kwargs}: relative errors {errors}")
    return max(errors)


@pytest.mark.parametrize("transpose_b", [False, True], ids=["nn", "nt"])
@pytest.mark.parametrize("m, n, k", [(128, 256, 64), (256, 512, 192), (1408, 768, 320), (1024, 1024, 1024),
                                     (4096, 4096, 4096)])
def test_gemm(m, n, k, transpose_b, rng):
    assert _run(m, n, k, rng, transpose_b) <= 1e-2


@pytest.mark.parametrize("kwargs, tol", [({"tile_n": 128}, 1e-2), ({"tile_n": 64, "stages": 3}, 1e-2),
                                         ({"out_dtype": "float32"}, 1e-4),
                                         ({"dtype": "float16", "out_dtype": "float16"}, 2e-3)])
@pytest.mark.parametrize("transpose_b", [False, True], ids=["nn", "nt"])
def test_gemm_variants(kwargs, tol, transpose_b, rng):
    assert _run(512, 768, 448, rng, transpose_b, **kwargs) <= tol


def test_gemm_8192_nt(rng):
    assert _run(8192, 8192, 8192, rng, transpose_b=True, runs=1) <= 1e-2
