"""GPU tests of single-warpgroup WGMMA tiles (TMA-loaded, 128-byte swizzle) against numpy."""

from __future__ import annotations

import numpy as np
import pytest
from test_hopper import host_f32, make_fragmented_elementwise, make_wgmma_tile, poison

from mgpu_lab.builder.dtypes import numpy_dtype

pytestmark = pytest.mark.gpu
BF16 = numpy_dtype("bfloat16")


@pytest.mark.parametrize("n, b_major, accumulate", [
    (64, "k", True), (128, "k", True), (256, "k", True), (256, "k", False),
    (64, "mn", True), (128, "mn", True), (256, "mn", True), (128, "mn", False),
    (128, "k", "uninitialized"),  # accumulate=False from WGMMAAccumulator.uninitialized
])
def test_wgmma_tile(n, b_major, accumulate, rng):
    import cupy

    k = make_wgmma_tile(n, b_major, False, init_with="uninitialized") if accumulate == "uninitialized" \
        else make_wgmma_tile(n, b_major, accumulate)
    a = rng.standard_normal((64, 64)).astype(BF16)
    b = rng.standard_normal((64, n)).astype(BF16)  # the logical B (k, n)
    b_arg = np.ascontiguousarray(b.T) if b_major == "k" else b
    out = poison(cupy, (64, n), "float32")
    k(cupy.asarray(a), cupy.asarray(b_arg), out=out)
    ref = a.astype(np.float32) @ b.astype(np.float32)
    np.testing.assert_allclose(out.get(), ref, rtol=1e-4, atol=1e-4)


def test_fragmented_epilogue_on_wgmma_tile(rng):
    import cupy

    k = make_wgmma_tile(128, "mn", epilogue=True)
    a = rng.standard_normal((64, 64)).astype(BF16)
    b = rng.standard_normal((64, 128)).astype(BF16)
    out = poison(cupy, (64, 128), "bfloat16")
    k(cupy.asarray(a), cupy.asarray(b), out=out)
    ref = np.maximum(0.5 * (a.astype(np.float32) @ b.astype(np.float32)) + 1.0, 0.0)
    np.testing.assert_allclose(host_f32(out), ref, rtol=1e-2, atol=1e-2)


def test_fragmented_elementwise(rng):
    import cupy

    k = make_fragmented_elementwise((256, 64))
    x, y = (rng.standard_normal((256, 64)).astype(np.float32) for _ in range(2))
    out = poison(cupy, (256, 64), "bfloat16")
    k(cupy.asarray(x), cupy.asarray(y), out=out)
    np.testing.assert_allclose(host_f32(out), np.exp(2 * x - y), rtol=1e-2)
