"""GPU tests: the example kernels against float64 numpy references, outputs poisoned first."""

from __future__ import annotations

import numpy as np
import pytest

from gpu_arrays import poisoned
from mgpu_lab.examples.block_sum import make_block_sum, reference_block_sum
from mgpu_lab.examples.tiled_copy import make_tiled_copy, reference_tiled_copy
from mgpu_lab.examples.vector_add import make_vector_add, reference_vector_add

pytestmark = pytest.mark.gpu


@pytest.mark.parametrize("n, dtype", [(1 << 20, "float32"), (1000, "float32"), (1 << 18, "float16"), (12345, "int32")])
def test_vector_add(n, dtype, rng):
    import cupy

    k = make_vector_add(n, dtype)
    for _ in range(2):  # fresh inputs and a fresh poisoned output every run
        if dtype == "int32":
            a, b = (rng.integers(-2**20, 2**20, n).astype(dtype) for _ in range(2))
        else:
            a, b = (rng.standard_normal(n).astype(dtype) for _ in range(2))
        out = poisoned(cupy, (n,), dtype)
        k(cupy.asarray(a), cupy.asarray(b), out=out)
        ref = reference_vector_add(a, b)
        got = out.get().astype(np.float64)
        tol = 1e-3 if dtype == "float16" else 1e-6
        assert np.isfinite(got).all()
        np.testing.assert_allclose(got, ref, rtol=tol, atol=tol)


def test_vector_add_allocates_its_output_and_takes_torch_tensors(rng):
    torch = pytest.importorskip("torch")
    import cupy

    k = make_vector_add(1 << 16)
    a = torch.randn(1 << 16, device="cuda")
    b = torch.randn(1 << 16, device="cuda")
    out = k(a, b)  # torch in, torch out (on the inputs' device, from torch's allocator)
    assert isinstance(out, torch.Tensor) and out.device == a.device
    np.testing.assert_allclose(out.cpu().numpy(), (a + b).cpu().numpy(), rtol=1e-6)
    target = cupy.full(1 << 16, np.nan, np.float32)  # a CuPy out= still works with torch inputs
    assert k(a, b, out=target) is target
    np.testing.assert_allclose(target.get(), (a + b).cpu().numpy(), rtol=1e-6)


def test_block_sum(rng):
    import cupy

    n, blocks = 1 << 22, 1024
    k = make_block_sum(n, blocks)
    x = rng.standard_normal(n).astype(np.float32)
    out = poisoned(cupy, (blocks,), np.float32)
    k(cupy.asarray(x), out=out)
    ref = reference_block_sum(x, blocks)
    np.testing.assert_allclose(out.get(), ref, rtol=1e-4, atol=1e-3)


@pytest.mark.parametrize("shape", [(4096, 4096), (128, 640)])
def test_tiled_copy(shape, rng):
    import cupy

    k = make_tiled_copy(*shape)
    x = rng.standard_normal(shape).astype(np.float32)
    out = poisoned(cupy, shape, np.float32)
    k(cupy.asarray(x), out=out)
    np.testing.assert_array_equal(out.get(), reference_tiled_copy(x))


def test_kernels_run_on_cupys_current_stream(rng):
    import cupy

    k = make_vector_add(1 << 20)
    a = cupy.asarray(rng.standard_normal(1 << 20).astype(np.float32))
    s = cupy.cuda.Stream(non_blocking=True)
    with s:
        out = k(a, a)
    s.synchronize()
    np.testing.assert_allclose(out.get(), 2 * a.get(), rtol=1e-6)


def test_torch_bfloat16_tensors_are_accepted_as_inputs_and_outputs(rng):
    torch = pytest.importorskip("torch")

    k = make_vector_add(1 << 16, "float16")
    a = torch.randn(1 << 16, device="cuda", dtype=torch.float16)
    out = torch.full((1 << 16,), float("nan"), device="cuda", dtype=torch.float16)
    k(a, a, out=out)
    torch.testing.assert_close(out, a + a)
    from mgpu_lab.kernels.gemm import make_gemm

    g = make_gemm(256, 256, 128, transpose_b=True)
    x = torch.randn(256, 128, device="cuda").to(torch.bfloat16)
    y = torch.randn(256, 128, device="cuda").to(torch.bfloat16)
    c = torch.full((256, 256), float("nan"), device="cuda", dtype=torch.bfloat16)
    g(x, y, out=c)  # bf16 has no DLPack route into CuPy: the launcher views the tensor's memory
    ref = x.float() @ y.float().T
    assert float(torch.linalg.norm(c.float() - ref) / torch.linalg.norm(ref)) < 1e-2


def test_launch_unchecked_runs_the_same_kernel(rng):
    import cupy

    k = make_vector_add(1 << 16)
    a = cupy.asarray(rng.standard_normal(1 << 16).astype(np.float32))
    out = poisoned(cupy, (1 << 16,), np.float32)
    k(a, a, out=out)
    out2 = poisoned(cupy, (1 << 16,), np.float32)
    k.launch_unchecked(a, a, out2)
    assert out2.get().tobytes() == out.get().tobytes()


def test_float8_arrays_travel_as_bytes(rng):
    import cupy
    import ml_dtypes

    import mgpu_lab
    from mgpu_lab.errors import LaunchArgumentError
    from mgpu_lab.examples.tiled_copy import make_tiled_copy

    k = make_tiled_copy(128, 256, dtype="float8_e4m3fn")
    x = rng.standard_normal((128, 256)).astype(ml_dtypes.float8_e4m3fn)
    out = cupy.full((128, 256), 0xFF, np.uint8)  # 0xFF is NaN in e4m3fn
    k(mgpu_lab.to_device(x), out=out)
    assert mgpu_lab.to_host(out, "float8_e4m3fn").tobytes() == x.tobytes()
    with pytest.raises(LaunchArgumentError, match=r"expected dtype uint8 \(the bytes of float8_e4m3fn"):
        k(cupy.zeros((128, 256), np.float32))
