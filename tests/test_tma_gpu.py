"""GPU tests of TMA copies: scaled_add against numpy (outputs poisoned first, fresh inputs every
run, shapes that are and are not multiples of the tile) and the swizzle layouts TMA writes."""

from __future__ import annotations

import numpy as np
import pytest
from test_hopper import host_f32, poison

import mgpu_lab
from mgpu_lab.builder.dtypes import numpy_dtype
from mgpu_lab.examples.scaled_add import make_scaled_add, reference_scaled_add

pytestmark = pytest.mark.gpu


@pytest.mark.parametrize("shape, dtype", [((4096, 4096), "float32"), ((1000, 2048), "bfloat16"),
                                          ((777, 776), "float16"), ((32, 256), "float32")])
def test_scaled_add(shape, dtype, rng):
    import cupy

    a, b = 1.5, -0.25
    k = make_scaled_add(*shape, a=a, b=b, dtype=dtype)
    for _ in range(3):  # fresh arrays (new addresses: new descriptors) every run
        x = rng.standard_normal(shape).astype(numpy_dtype(dtype))
        out = poison(cupy, shape, dtype)
        k(cupy.asarray(x), out=out)
        got = host_f32(out).astype(np.float64)
        assert np.isfinite(got).all(), "some of the output was never written"
        tol = 1e-6 if dtype == "float32" else 1e-2
        np.testing.assert_allclose(got, reference_scaled_add(x, a, b), rtol=tol, atol=tol)


def test_scaled_add_same_arrays_reuse_cached_descriptors(rng):
    import cupy

    k = make_scaled_add(256, 512)
    x = cupy.asarray(rng.standard_normal((256, 512)).astype(np.float32))
    out = poison(cupy, (256, 512), "float32")
    for i in range(3):
        x *= 2  # same address, new contents
        k(x, out=out)
        np.testing.assert_allclose(out.get(), reference_scaled_add(x.get()), rtol=1e-6)


def _swizzled(x: np.ndarray, swizzle: int) -> np.ndarray:
    """Where TMA puts each element of a (rows, swizzle bytes) box: 16-byte chunk c of the row at
    byte address a lands in chunk c ^ ((a >> 7) & (swizzle/16 - 1))."""
    flat = x.reshape(-1)
    itemsize = x.dtype.itemsize
    out = np.empty_like(flat)
    for i in range(flat.size):
        addr = i * itemsize
        phys = addr ^ (((addr >> 7) & (swizzle // 16 - 1)) << 4)
        out[phys // itemsize] = flat[i]
    return out.reshape(x.shape)


@pytest.mark.parametrize("swizzle", [32, 64, 128])
def test_tma_swizzle_layout(swizzle, rng):
    """Load with swizzle, store the same smem without: the output shows the smem layout."""
    import cupy

    rows, cols = 64, swizzle // 2
    sd = mgpu_lab.ShapeDtype((rows, cols), "bfloat16")

    def body(ctx, x, y, smem):
        buf, bars = smem
        bars.init(1)
        ctx.async_copy(src_ref=x, dst_ref=buf, barrier=bars[0], swizzle=swizzle)
        bars[0].wait(0)
        ctx.async_copy(src_ref=buf, dst_ref=y)
        ctx.await_async_copy(0)

    k = mgpu_lab.kernel(body, grid=1, block=128, in_shapes=sd, out_shapes=sd, name=f"swizzle{swizzle}",
                        smem=(mgpu_lab.ShapeDtype((rows, cols), "bfloat16"), mgpu_lab.Barriers(1)))
    x = rng.standard_normal((rows, cols)).astype(numpy_dtype("bfloat16"))
    out = poison(cupy, (rows, cols), "bfloat16")
    k(cupy.asarray(x), out=out)
    np.testing.assert_array_equal(host_f32(out), _swizzled(x, swizzle).astype(np.float32))
