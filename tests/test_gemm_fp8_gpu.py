"""GPU tests of the FP8 e4m3 GEMM with per-tensor scales against a float32 matmul of the
decoded fp8 inputs times the scales. Fresh random inputs, outputs poisoned with NaN."""

from __future__ import annotations

import numpy as np
import pytest
from test_gemm_gpu import relative_error
from test_hopper import host_f32, poison

from mgpu_lab.builder.dtypes import numpy_dtype
from mgpu_lab.kernels.gemm.epilogues import fused, reference_fused
from mgpu_lab.kernels.gemm.fp8 import make_fp8_gemm
from mgpu_lab.runtime.arrays import to_device

pytestmark = pytest.mark.gpu
E4M3 = numpy_dtype("float8_e4m3fn")


def _run(m, n, k, rng, *, out_dtype="bfloat16", tiles=None, epilogue=None):
    import cupy

    a = (rng.standard_normal((m, k), dtype=np.float32) * 2).astype(E4M3)
    b = (rng.standard_normal((n, k), dtype=np.float32) * 2).astype(E4M3)
    sa, sb = np.float32(rng.uniform(0.01, 0.1)), np.float32(rng.uniform(0.01, 0.1))
    extras, host = [], {}
    if epilogue is not None:
        e = fused(m, n, **epilogue)
        host["bias"] = rng.standard_normal(n, dtype=np.float32).astype(numpy_dtype("bfloat16"))
        extras = [to_device(host["bias"])]
        kern = make_fp8_gemm(m, n, k, out_dtype=out_dtype, epilogue=e.fn, epilogue_inputs=e.inputs, **(tiles or {}))
    else:
        kern = make_fp8_gemm(m, n, k, out_dtype=out_dtype, **(tiles or {}))
    out = poison(cupy, (m, n), out_dtype)
    kern(to_device(a), to_device(b), cupy.asarray([sa]), cupy.asarray([sb]), *extras, out=out)
    product = (cupy.asarray(a.astype(np.float32)) @ cupy.asarray(b.astype(np.float32)).T).get() * (sa * sb)
    want = reference_fused(product, bias=host.get("bias"), activation=(epilogue or {}).get("activation"))
    err = relative_error(host_f32(out), want)
    print(f"fp8 {m}x{n}x{k} {tiles} {epilogue}: relative error {err:.2e}")
    return err


@pytest.mark.parametrize("m, n, k", [(256, 256, 128), (1024, 1024, 1024), (4096, 4096, 4096), (16, 4096, 4096),
                                     (1000, 1000, 1000), (129, 257, 72), (4000, 4000, 4000)])
def test_fp8_gemm(m, n, k, rng):
    assert _run(m, n, k, rng) <= 2e-2  # fp8 wgmma accumulates with ~14-bit sums (no promotion)


@pytest.mark.parametrize("tiles", [{"tile_m": 128, "tile_n": 256}, {"tile_m": 256, "tile_n": 128},
                                   {"tile_m": 64, "tile_n": 64}])
def test_fp8_gemm_tiles(tiles, rng):
    assert _run(700, 712, 512, rng, tiles=tiles) <= 2e-2


def test_fp8_gemm_float32_output_and_epilogue(rng):
    assert _run(512, 1024, 768, rng, out_dtype="float32", epilogue={"bias": "bfloat16", "activation": "gelu"}) <= 1e-2


@pytest.mark.parametrize("m, n, k, tiles", [(256, 384, 512, {}), (1000, 1000, 1000, {"tile_m": 64}),
                                            (2048, 2048, 4096, {"tile_m": 256, "tile_n": 64}),
                                            (16, 4096, 7168, {"tile_m": 64, "tile_n": 32}),
                                            (300, 2000, 1024, {}),  # the model's tiles (128x64)
                                            (8, 3584, 11008, {}), (4, 4096, 28672, {}),  # few rows: 64x128 in 4 / 3 slices
                                            (8, 912, 24704, {}),  # split K in 4: a cluster sums the scaled partials
                                            (40, 640, 5000, {"tile_m": 64, "tile_n": 64, "split_k": 3}),  # a K tail
                                            (130, 256, 3072, {"tile_m": 128, "tile_n": 128, "split_k": 2}),
                                            # persistent blocks, several tiles each (probe_fp8_block_tiles times them)
                                            (2048, 2304, 1024, {"tile_m": 128, "tile_n": 128, "persistent": True}),
                                            (1536, 2112, 768, {"tile_m": 256, "tile_n": 64, "persistent": True})])
def test_fp8_block_scaled_gemm(m, n, k, tiles, rng):
    assert block_scaled_error(m, n, k, tiles, rng) <= 1e-2  # fp32 promotion every 128: bf16 rounding dominates


@pytest.mark.parametrize("m, n, k, tiles", [
    (2048, 2048, 4096, {}),  # 32 k blocks: 8 iterations of OVERLAP_BLOCKS, none left over
    (1000, 1000, 1000, {"tile_m": 64}),  # 8 blocks, the last one partial (K tail)
    (300, 2000, 1664, {"tile_m": 128, "tile_n": 128}),  # 13 blocks: one left over, promoted alone
    (256, 640, 1792, {"tile_m": 64, "tile_n": 64}),  # 14: two left over
    (130, 384, 1920, {"tile_m": 128, "tile_n": 64}),  # 15: three left over
    (8, 912, 24704, {}),  # split K: each block's slice (its own count of k blocks) overlapped
    (1000, 1000, 1000, {"tile_m": 64, "overlap_promotion": False}),  # the plain mainloop, no longer the default
    (2048, 2304, 1024, {"tile_m": 128, "tile_n": 128, "overlap_promotion": False, "persistent": False}),
    (40, 640, 5000, {"tile_m": 64, "tile_n": 64, "split_k": 3}),  # slices of 14, 14 and 12 blocks
    (2048, 2304, 1024, {"tile_m": 128, "tile_n": 128, "persistent": True}),  # several tiles a block
    (8, 3584, 11008, {"tile_m": 64, "tile_n": 32}),
])
def test_fp8_block_scaled_gemm_overlapping_the_promotion(m, n, k, tiles, rng):
    """overlap_promotion=True: block j + 1's wgmmas start before block j's product is promoted
    (two products in registers); every k block must still be summed once with its own scales."""
    assert block_scaled_error(m, n, k, {"overlap_promotion": True, **tiles}, rng) <= 1e-2


def block_scaled_error(m, n, k, tiles, rng):
    """||C - ref|| / ||ref||, ref = float32 (A * scale_a) @ (B * scale_b).T with the scales
    expanded to their blocks (a block scale factors into the two operands)."""
    import cupy

    from mgpu_lab.kernels.gemm.fp8_block import BLOCK, make_fp8_block_scaled_gemm, scale_shapes

    a = (rng.standard_normal((m, k), dtype=np.float32) * 2).astype(E4M3)
    b = (rng.standard_normal((n, k), dtype=np.float32) * 2).astype(E4M3)
    sa_shape, sb_shape = scale_shapes(m, n, k)
    sa = rng.uniform(0.01, 0.2, sa_shape).astype(np.float32)
    sb = rng.uniform(0.01, 0.2, sb_shape).astype(np.float32)
    kern = make_fp8_block_scaled_gemm(m, n, k, **tiles)
    out = poison(cupy, (m, n), "bfloat16")
    kern(to_device(a), to_device(b), cupy.asarray(sa), cupy.asarray(sb), out=out)
    a_scaled = cupy.asarray(a.astype(np.float32)) * cupy.repeat(cupy.asarray(sa), BLOCK, axis=1)[:, :k]
    b_scales = cupy.repeat(cupy.repeat(cupy.asarray(sb), BLOCK, axis=0)[:n], BLOCK, axis=1)[:, :k]
    want = (a_scaled @ (cupy.asarray(b.astype(np.float32)) * b_scales).T).get()
    err = relative_error(host_f32(out), want)
    print(f"fp8 block-scaled {m}x{n}x{k} {tiles}: relative error {err:.2e}")
    return err


@pytest.mark.parametrize("m, n, k, tiles", [
    (16, 6144, 4096, {"tile_m": 64, "tile_n": 16}),
    (16, 4096, 4096, {"tile_m": 128, "tile_n": 16, "split_k": 2}),  # the scales applied to the sums
    (129, 1000, 1000, {"tile_m": 64, "tile_n": 136}),  # ragged: tiles over both edges of C, a K tail
])
def test_fp8_swap_ab(m, n, k, tiles, rng):
    """C.T = B @ A.T (A's rows as the wgmma's N), the per-tensor scales applied to C.T's tiles."""
    assert _run(m, n, k, rng, tiles={**tiles, "swap_ab": True}) <= 2e-2


@pytest.mark.parametrize("tiles", [{"tile_m": 256, "tile_n": 144, "persistent": True},
                                   {"tile_m": 128, "tile_n": 224, "persistent": "stream_k"}])
def test_fp8_swap_ab_persistent(tiles, rng):
    """Persistent swapped FP8 blocks loop over C.T's tiles (m = 572 in four 144-wide ones)."""
    assert _run(572, 7920, 4096, rng, tiles={**tiles, "swap_ab": True}) <= 2e-2

