"""GPU tests of FragmentedArray operations against numpy float64: the softmax example,
reductions along both axes with broadcasts / comparisons / where / exp2 / log, conversions
to bf16/f16/f8 (bit-exact against ml_dtypes' round-to-nearest-even), and swizzled smem tile
round trips for every swizzle, column pieces parked in smem and read back from a cluster peer.
Fresh random inputs every run, outputs poisoned with NaN."""

from __future__ import annotations

import numpy as np
import pytest
from test_fragmented_ops import (
    CONVERSIONS,
    make_conversions,
    make_exp2_fma,
    make_peer_exchange,
    make_reductions,
    make_tiled_roundtrip,
)

from mgpu_lab.builder.dtypes import numpy_dtype
from mgpu_lab.runtime.arrays import to_device
from mgpu_lab.runtime.portable import device_dtype
from mgpu_lab.examples.softmax import make_softmax, reference_softmax

pytestmark = pytest.mark.gpu
_NAN_BITS = {2: 0x7E00, 4: 0x7FC00000, 1: 0x7F}  # f16 NaN (bf16 NaN is 0x7FC0), f32, e4m3fn/e5m2 NaN
_UINT = {1: "uint8", 2: "uint16", 4: "uint32"}


def poisoned(cupy, shape, dtype: str):
    """A device array of any float dtype (bf16 and f8 too) filled with NaN bits."""
    out = cupy.empty(shape, device_dtype(dtype))  # float8: its bytes, as uint8
    bits = 0x7FC0 if dtype == "bfloat16" else _NAN_BITS[out.itemsize]
    out.view(_UINT[out.itemsize]).fill(bits)
    return out


def host64(x) -> np.ndarray:
    return x.get().astype(np.float32).astype(np.float64)


@pytest.mark.parametrize("m, n", [(128, 256), (512, 256), (256, 128), (128, 32)])
def test_softmax(m, n, rng):
    import cupy

    k = make_softmax(m, n)
    for scale in (1.0, 30.0):  # large scale: exp of large negatives must underflow to 0, not NaN
        x = (scale * rng.standard_normal((m, n))).astype(np.float32)
        out = poisoned(cupy, (m, n), "float32")
        k(to_device(x), out=out)
        got = host64(out)
        assert np.isfinite(got).all(), "part of the output was never written (NaN poison survived)"
        np.testing.assert_allclose(got, reference_softmax(x), rtol=2e-5, atol=1e-7)
        np.testing.assert_allclose(got.sum(axis=1), 1.0, rtol=1e-5)


def test_reductions_broadcasts_comparisons(rng):
    import cupy

    m, n = 128, 64
    k = make_reductions(m, n)
    x = rng.standard_normal((m, n)).astype(np.float32)
    x[3, 5] = x[7, 9] = 0.0  # exact zeros for == / !=
    x[10, :] = 0.25  # ties with the scalar of <=
    outs = [poisoned(cupy, s, "float32") for s in ((m,), (m,), (n,), (n,), (m, n), (m, n))]
    k(to_device(x), out=outs)
    row_max, row_sum, col_sum, col_max, z, code = (host64(o) for o in outs)
    x64 = x.astype(np.float64)
    np.testing.assert_array_equal(row_max, x64.max(axis=1))
    np.testing.assert_array_equal(col_max, x64.max(axis=0))
    np.testing.assert_allclose(row_sum, x64.sum(axis=1), rtol=1e-5, atol=1e-5)
    np.testing.assert_allclose(col_sum, x64.sum(axis=0), rtol=1e-5, atol=1e-5)
    mean_c = col_sum.astype(np.float32) * np.float32(1.0 / m)
    expected_z = np.where(x > mean_c[None, :], np.exp2(x64), np.log(x64 * x64 + 1.0))
    np.testing.assert_allclose(z, expected_z, rtol=2e-6, atol=1e-7)
    mean_r = (row_sum.astype(np.float32) * np.float32(1.0 / n))[:, None]
    tests = [x < mean_r, x <= 0.25, x > mean_r, x >= -0.25, x == np.maximum(x, 0), x != np.minimum(x, 0)]
    expected_code = sum((t.astype(np.float64) * (1 << bit) for bit, t in enumerate(tests)))
    np.testing.assert_array_equal(code, expected_code)


def test_exp2_fma_polynomial_matches_exp2(rng):
    """Every element by the FMA polynomial (fraction 1), half of them (0.5) and none (0): relative
    error < 1e-4 against float64 where 2**x is a normal float; 0 for -inf and x <= -127; nothing
    above 2**-126 where the result is subnormal."""
    import cupy

    fractions = (1.0, 0.5, 0.0)
    k = make_exp2_fma(fractions=fractions)
    x = rng.uniform(-130.0, 127.9, (64, 64)).astype(np.float32)
    x[0, :12] = [-np.inf, -1e30, -127.0, -126.5, -126.0, 0.0, -0.0, -1e-8, 1e-8, 0.5, -0.5, 127.99]
    x[1] = rng.uniform(-1.0, 0.0, 64)  # the softmax range: fractional parts near 0 and 1
    outs = [poisoned(cupy, x.shape, "float32") for _ in fractions]
    k(to_device(x), out=outs)
    want = np.exp2(x.astype(np.float64))
    normal = want >= 2.0 ** -126
    for f, out in zip(fractions, outs):
        got = out.get().astype(np.float64)
        assert np.isfinite(got).all(), f"fraction {f}: an output was never written (NaN poison survived)"
        np.testing.assert_allclose(got[normal], want[normal], rtol=1e-4, err_msg=f"fma_fraction={f}")
        assert (got[~normal] < 2.0 ** -126).all() and (got[~normal] >= 0).all(), f"fma_fraction={f}"
        assert (got[x <= -127] == 0).all(), f"fma_fraction={f}: -inf and x <= -127 must give exactly 0"


def test_conversions_round_like_ml_dtypes(rng):
    import cupy

    shape = (64, 64)
    k = make_conversions(shape)
    x = (8 * rng.standard_normal(shape)).astype(np.float32)  # within e4m3's +-448
    x[0, :8] = [0.0, -0.0, 1e-3, -1e-3, 447.0, -300.0, 2.0 ** -9, 3.0 * 2.0 ** -10]  # e4m3 subnormals
    outs = [poisoned(cupy, shape, t) for t in CONVERSIONS] + [poisoned(cupy, shape, "float32")
                                                              for _ in range(len(CONVERSIONS) + 4)]
    k(to_device(x), out=outs)
    direct, back = outs[:len(CONVERSIONS)], outs[len(CONVERSIONS):]
    for t, d, b in zip(CONVERSIONS, direct, back):
        want = x.astype(numpy_dtype(t))
        np.testing.assert_array_equal(d.get().view(_UINT[want.itemsize]), want.view(_UINT[want.itemsize]),
                                      err_msg=f"f32 -> {t}")
        np.testing.assert_array_equal(b.get(), want.astype(np.float32), err_msg=f"f32 -> {t} -> f32")
    e4m3, e5m2, bf16, f16 = (numpy_dtype(t) for t in ("float8_e4m3fn", "float8_e5m2", "bfloat16", "float16"))
    extra = back[len(CONVERSIONS):]
    expected = [x.astype(f16).astype(e4m3), x.astype(bf16).astype(e5m2), x.astype(e4m3).astype(bf16),
                x.astype(e5m2).astype(np.float32).astype(e4m3)]
    for name, got, want in zip(("f16->e4m3", "bf16->e5m2", "e4m3->bf16", "e5m2->e4m3"), extra, expected):
        np.testing.assert_array_equal(got.get(), want.astype(np.float32), err_msg=name)


@pytest.mark.parametrize("dtype", ["float32", "bfloat16", "float8_e4m3fn"])
@pytest.mark.parametrize("swizzle", [32, 64, 128])
@pytest.mark.parametrize("m", [64, 128])
def test_tiled_roundtrip(dtype, swizzle, m, rng):
    import cupy

    k = make_tiled_roundtrip(dtype, swizzle, m)
    n = 2 * swizzle // np.dtype(numpy_dtype(dtype)).itemsize
    x = rng.standard_normal((m, n)).astype(numpy_dtype(dtype))
    outs = [poisoned(cupy, (m, n), dtype) for _ in range(2)]
    k(to_device(x), out=outs)
    bits = _UINT[x.itemsize]
    for name, out in zip(("WGMMA layout -> GMEM", "store_tiled -> TMA"), outs):
        np.testing.assert_array_equal(out.get().view(bits), x.view(bits), err_msg=name)


@pytest.mark.parametrize("pack", [1, 2])
def test_peer_exchange_reads_the_other_blocks_piece(rng, pack):
    """Column pieces parked by thread and read back here and from the cluster peer (distributed
    shared memory) are exactly the inputs' columns (pack=2: register pairs side by side)."""
    import cupy

    m, n, start, width = 128, 64, 16, 32
    x = rng.standard_normal((2, m, n)).astype(np.float32)
    out, own = poisoned(cupy, (2, m, width), "float32"), poisoned(cupy, (2, m, width), "float32")
    make_peer_exchange(m, n, start, width, pack=pack)(to_device(x), out=(out, own))
    piece = x[:, :, start:start + width]
    np.testing.assert_array_equal(own.get(), piece)
    np.testing.assert_array_equal(out.get(), piece[::-1])
