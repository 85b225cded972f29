"""GPU tests of the wgmma variants (test_hopper_wgmma_variants.VARIANTS): single (64, n, k)
tiles against numpy float64 products. Inputs are exactly representable in the input type
(bf16/f16/f8 values; f32 values rounded to tf32), so the error is the accumulation's: f32
accumulators 1e-5 (f8: 1e-3), f16 accumulators 2e-2, relative to ||ref||. One tf32 case
uses arbitrary f32 inputs (the tensor core drops 13 mantissa bits): 3e-3."""

from __future__ import annotations

import numpy as np
import pytest
from test_hopper_wgmma_variants import (
    VARIANTS,
    make_wgmma_variant,
    variant_id,
    variant_shapes,
)

from mgpu_lab.builder.dtypes import numpy_dtype
from mgpu_lab.runtime.arrays import to_device

pytestmark = pytest.mark.gpu


def _random(rng, shape, dtype: str, tf32_exact: bool = True) -> np.ndarray:
    x = rng.standard_normal(shape).astype(np.float32)
    if dtype == "float32":
        if tf32_exact:
            x = (x.view(np.uint32) & np.uint32(0xFFFFE000)).view(np.float32)
        return x
    return x.astype(numpy_dtype(dtype))


def _poisoned(cupy, shape, dtype: str):
    out = cupy.empty(shape, numpy_dtype(dtype))
    bits = {"float16": (np.uint16, 0x7E00), "bfloat16": (np.uint16, 0x7FC0), "float32": (np.uint32, 0x7FC00000)}
    view, value = bits[dtype]
    out.view(view).fill(value)  # through an integer view: CuPy has no bf16 kernels
    return out


def _check(kwargs: dict, rng, tol: float, tf32_exact: bool = True) -> None:
    import cupy

    dtype = kwargs.get("dtype", "bfloat16")
    b_dtype = kwargs.get("b_dtype", dtype)
    acc = kwargs.get("acc", "float32")
    n = kwargs["n"]
    shape_kwargs = {k: v for k, v in kwargs.items() if k in ("a_major", "b_major", "a_swizzle", "b_swizzle")}
    a_shape, b_shape, _ = variant_shapes(dtype, n, a_regs=kwargs.get("a_regs", False), **shape_kwargs)
    kern = make_wgmma_variant(**kwargs)
    for _ in range(2):
        a = _random(rng, a_shape, dtype, tf32_exact)
        b = _random(rng, b_shape, b_dtype, tf32_exact)
        out = _poisoned(cupy, (64, n), acc)
        kern(to_device(a), to_device(b), out=out)  # float8 travels as bytes
        a64, b64 = a.astype(np.float64), b.astype(np.float64)
        a_transposed = kwargs.get("a_major") == "mn" and not kwargs.get("a_regs", False)
        a_logical = a64.T if a_transposed else a64
        b_logical = b64.T if kwargs.get("b_major", "k") == "k" else b64
        ref = a_logical @ b_logical
        got = out.get().astype(np.float64)
        assert np.isfinite(got).all(), "part of the tile was never written (NaN poison survived)"
        err = np.linalg.norm(got - ref) / np.linalg.norm(ref)
        print(f"{variant_id(kwargs)}: relative error {err:.2e}")
        assert err <= tol, err


def _tolerance(kwargs: dict) -> float:
    if kwargs.get("acc") == "float16":
        return 2e-2
    return 1e-3 if kwargs.get("dtype", "").startswith("float8") else 1e-5


@pytest.mark.parametrize("kwargs", [v[0] for v in VARIANTS], ids=[variant_id(v[0]) for v in VARIANTS])
def test_wgmma_variant(kwargs, rng):
    _check(kwargs, rng, _tolerance(kwargs))


@pytest.mark.parametrize("swizzle", [128, 32])
def test_tf32_of_arbitrary_f32(swizzle, rng):
    _check({"dtype": "float32", "n": 64, "a_swizzle": swizzle, "b_swizzle": swizzle}, rng, 3e-3, tf32_exact=False)


@pytest.mark.parametrize("swizzle", [32, 64, 128])
def test_accumulator_store_swizzled(swizzle, rng):
    """store_swizzled places values where a TMA store with that swizzle reads them."""
    import cupy
    from test_hopper_wgmma_variants import make_store_swizzled

    k = make_store_swizzled(swizzle)
    a = _random(rng, (64, 64), "bfloat16")
    b_t = _random(rng, (128, 64), "bfloat16")
    out = _poisoned(cupy, (64, 128), "bfloat16")
    k(cupy.asarray(a), cupy.asarray(b_t), out=out)
    ref = a.astype(np.float64) @ b_t.astype(np.float64).T
    got = out.get().astype(np.float64)
    assert np.isfinite(got).all()
    np.testing.assert_allclose(got, ref, rtol=1e-2, atol=1e-2)
