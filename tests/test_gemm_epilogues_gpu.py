"""GPU tests of fused GEMM epilogues against float64 references of a float32 product: bias,
relu / gelu / silu, residual add, output scaling, bf16 and f32 outputs, on aligned, ragged
and unaligned (padded) shapes. Fresh random inputs, outputs poisoned with NaN."""

from __future__ import annotations

import numpy as np
import pytest
from test_gemm_gpu import random_operands, reference, relative_error
from test_hopper import host_f32, poison

from mgpu_lab.builder.dtypes import numpy_dtype
from mgpu_lab.kernels.gemm import make_gemm
from mgpu_lab.kernels.gemm.epilogues import fused, reference_fused

pytestmark = pytest.mark.gpu


def _check(m, n, k, rng, *, out_dtype="bfloat16", transpose_b=True, tiles=None, **options):
    import cupy

    e = fused(m, n, **options)
    kern = make_gemm(m, n, k, transpose_b=transpose_b, out_dtype=out_dtype, epilogue=e.fn, epilogue_inputs=e.inputs,
                     **(tiles or {}))
    a, b = random_operands(m, n, k, rng, transpose_b)
    host = {"scale": np.array([rng.uniform(0.25, 2.0)], np.float32)}
    if options.get("bias"):
        host["bias"] = rng.standard_normal(n, dtype=np.float32).astype(numpy_dtype(options["bias"]))
    if options.get("residual"):
        host["residual"] = rng.standard_normal((m, n), dtype=np.float32).astype(numpy_dtype(options["residual"]))
    out = poison(cupy, (m, n), out_dtype)
    kern(cupy.asarray(a), cupy.asarray(b), *(cupy.asarray(host[name]) for name in e.names), out=out)
    scale = float(host["scale"][0]) if options.get("scale") else None
    want = reference_fused(reference(a, b, transpose_b), bias=host.get("bias"), activation=options.get("activation"),
                           residual=host.get("residual"), scale=scale)
    err = relative_error(host_f32(out), want)
    print(f"fused {m}x{n}x{k} {options} {tiles}: relative error {err:.2e}")
    return err


@pytest.mark.parametrize("options", [
    {"bias": "bfloat16"},
    {"bias": "bfloat16", "activation": "relu"},
    {"bias": "float32", "activation": "gelu"},
    {"activation": "silu"},
    {"residual": "bfloat16"},
    {"scale": True},
    {"bias": "bfloat16", "activation": "gelu", "residual": "bfloat16", "scale": True},
])
@pytest.mark.parametrize("m, n, k", [(1024, 2048, 512), (300, 520, 200), (129, 257, 72), (16, 4096, 1024)])
def test_fused_epilogue(m, n, k, options, rng):
    assert _check(m, n, k, rng, **options) <= 1e-2


@pytest.mark.parametrize("tiles", [{"tile_m": 128, "tile_n": 256}, {"tile_m": 256, "tile_n": 128},
                                   {"tile_m": 64, "tile_n": 32}, {"tile_m": 192, "tile_n": 192}])
def test_fused_epilogue_every_tile(tiles, rng):
    assert _check(700, 712, 456, rng, tiles=tiles, bias="bfloat16", activation="silu", residual="bfloat16",
                  scale=True) <= 1e-2


def test_fused_epilogue_float32_output(rng):
    assert _check(333, 520, 256, rng, out_dtype="float32", transpose_b=False, bias="float32", activation="relu",
                  residual="float32", scale=True) <= 1e-4
