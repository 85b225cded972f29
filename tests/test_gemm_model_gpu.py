"""On the H200: the model's pick computes the right product on shapes it has never seen, drawn at
run time (a fresh seed each run, printed), the tuned table switched off, outputs poisoned first,
checked against an f32 reference on fresh random inputs."""

from __future__ import annotations

import os
import random

import numpy as np
import pytest
from test_gemm_model_build import _shapes

from mgpu_lab.kernels.gemm import make_gemm
from mgpu_lab.kernels.gemm.configs import MODEL_ENV, TABLE_ENV, gemm_config

pytestmark = pytest.mark.gpu
SEED = int(os.environ.get("MGPU_LAB_TEST_SEED", random.SystemRandom().randrange(1 << 30)))


@pytest.mark.parametrize("m, n, k, transpose_b", _shapes(10, SEED), ids=lambda v: str(v))
def test_the_models_pick_is_correct_on_a_shape_drawn_now(monkeypatch, rng, m, n, k, transpose_b):
    import cupy
    from test_gemm_gpu import random_operands
    from test_hopper import poison

    monkeypatch.setenv(TABLE_ENV, "0")
    monkeypatch.setenv(MODEL_ENV, "1")
    print(f"seed {SEED}: {m}x{n}x{k} transpose_b={transpose_b} -> {gemm_config(m, n, k, transpose_b=transpose_b)}")
    kern = make_gemm(m, n, k, transpose_b=transpose_b)
    a, b = random_operands(m, n, k, rng, transpose_b)
    out = poison(cupy, (m, n), "bfloat16")
    kern(cupy.asarray(a), cupy.asarray(b), out=out)
    # the f32 reference on the GPU: these shapes reach 16384 x 32768 x 32768
    a32, b32 = cupy.asarray(a.astype(np.float32)), cupy.asarray(b.astype(np.float32))
    want = a32 @ (b32.T if transpose_b else b32)
    got = (out.view(cupy.uint16).astype(cupy.uint32) << 16).view(cupy.float32)
    error = float(cupy.linalg.norm(got - want) / cupy.linalg.norm(want))
    assert error <= 1e-2, (SEED, m, n, k, transpose_b, error)


def test_the_device_says_how_many_clusters_it_holds():
    """The model's split-K waves read the device's own cluster counts: at one block per SM, pairs
    fill every SM, and larger clusters never more than the SMs (a GPC holds whole clusters)."""
    from mgpu_lab.kernels.gemm.configs import device_clusters, device_sms

    clusters = device_clusters()
    sms = device_sms()
    assert len(clusters) == 8 and clusters[0] == sms, clusters
    assert clusters[1] == sms // 2, clusters
    for size, count in enumerate(clusters, start=1):
        assert 0 < count * size <= sms, (size, count, clusters)
