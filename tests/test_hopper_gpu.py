"""GPU tests of single-warpgroup WGMMA tiles (TMA-loaded, 128-byte swizzle) against numpy."""

from __future__ import annotations

import numpy as np
import pytest

from mgpu_lab.builder.dtypes import numpy_dtype
from test_hopper import make_wgmma_tile, poison

pytestmark = pytest.mark.gpu
BF16 = numpy_dtype("bfloat16")


@pytest.mark.parametrize("n, b_major, accumulate", [
    (64, "k", True), (128, "k", True), (256, "k", True), (256, "k", False),
    (64, "mn", True), (128, "mn", True), (256, "mn", True), (128, "mn", False),
])
def test_wgmma_tile(n, b_major, accumulate, rng):
    import cupy

    k = make_wgmma_tile(n, b_major, accumulate)
    a = rng.standard_normal((64, 64)).astype(BF16)
    b = rng.standard_normal((64, n)).astype(BF16)  # the logical B (k, n)
    b_arg = np.ascontiguousarray(b.T) if b_major == "k" else b
    out = poison(cupy, (64, n), "float32")
    k(cupy.asarray(a), cupy.asarray(b_arg), out=out)
    ref = a.astype(np.float32) @ b.astype(np.float32)
    np.testing.assert_allclose(out.get(), ref, rtol=1e-4, atol=1e-4)
