"""GPU tests: calling a kernel with the wrong arguments raises a clear LaunchArgumentError."""

from __future__ import annotations

import numpy as np
import pytest

from mgpu_lab.errors import LaunchArgumentError, ResourceLimitError
from mgpu_lab.examples.vector_add import make_vector_add

pytestmark = pytest.mark.gpu
N = 4096


@pytest.fixture(scope="module")
def vadd():
    return make_vector_add(N)


def test_wrong_number_of_arguments(vadd):
    import cupy

    a = cupy.zeros(N, np.float32) + 1
    with pytest.raises(LaunchArgumentError, match=r"vector_add takes 2 input array\(s\) .*got 1"):
        vadd(a)


def test_wrong_shape(vadd):
    import cupy

    a = cupy.ones(N, np.float32)
    with pytest.raises(LaunchArgumentError, match=rf"input 1 of vector_add: expected shape \({N},\), got \(10,\)"):
        vadd(a, cupy.ones(10, np.float32))


def test_wrong_dtype(vadd):
    import cupy

    with pytest.raises(LaunchArgumentError, match="input 0 of vector_add: expected dtype float32, got float64"):
        vadd(cupy.ones(N, np.float64), cupy.ones(N, np.float32))


def test_host_array(vadd):
    import cupy

    with pytest.raises(LaunchArgumentError, match="got a host numpy.ndarray; move it with cupy.asarray"):
        vadd(np.ones(N, np.float32), cupy.ones(N, np.float32))


def test_non_contiguous(vadd):
    import cupy

    strided = cupy.ones(2 * N, np.float32)[::2]
    with pytest.raises(LaunchArgumentError, match="expected a C-contiguous array, got strides"):
        vadd(strided, cupy.ones(N, np.float32))


def test_misaligned(vadd):
    import cupy

    shifted = cupy.ones(N + 1, np.float32)[1:]
    with pytest.raises(LaunchArgumentError, match="expected a 16-byte aligned array"):
        vadd(shifted, cupy.ones(N, np.float32))


def test_wrong_device(vadd):
    import cupy

    if cupy.cuda.runtime.getDeviceCount() < 2:
        pytest.skip("needs two GPUs to place an array on another device")
    with cupy.cuda.Device(1):
        other = cupy.ones(N, np.float32)
    with pytest.raises(LaunchArgumentError, match="expected an array on the current device 0, got one on device 1"):
        vadd(other, cupy.ones(N, np.float32))


def test_wrong_output_count_and_shape(vadd):
    import cupy

    a = cupy.ones(N, np.float32)
    with pytest.raises(LaunchArgumentError, match="out of vector_add: expected 1 output arrays, got 2"):
        vadd(a, a, out=(a, a))
    with pytest.raises(LaunchArgumentError, match=r"output 0 of vector_add: expected shape"):
        vadd(a, a, out=cupy.ones(3, np.float32))


def test_not_an_array(vadd):
    import cupy

    with pytest.raises(LaunchArgumentError, match=r"input 0 of vector_add: expected a device array \(CuPy/torch/"
                                                  r"__cuda_array_interface__/DLPack\), got str"):
        vadd("nope", cupy.ones(N, np.float32))


def test_python_list_is_not_a_device_array(vadd):
    import cupy

    with pytest.raises(LaunchArgumentError, match=r"input 0 of vector_add: expected a device array \(CuPy/torch/"
                                                  r"__cuda_array_interface__/DLPack\), got list$"):
        vadd([1.0] * N, cupy.ones(N, np.float32))


def test_out_overlapping_an_input_is_refused_naming_both(vadd):
    import cupy

    a, b = cupy.ones(N, np.float32), cupy.ones(N, np.float32)
    with pytest.raises(LaunchArgumentError, match="output 0 of vector_add overlaps input 0 in memory"):
        vadd(a, b, out=a)
    pool = cupy.ones(2 * N + 8, np.float32)
    with pytest.raises(LaunchArgumentError, match="output 0 of vector_add overlaps input 1 in memory.*may_alias"):
        vadd(a, pool[:N], out=pool[4:N + 4])  # partial overlap, 16 bytes apart
    out = pool[N + 4: 2 * N + 4]  # adjacent, not overlapping: accepted
    vadd(a, pool[:N], out=out)
    assert float(out.min()) == 2.0


def test_may_alias_allows_an_in_place_kernel(rng):
    import cupy

    k = make_vector_add(N, may_alias={0: 0})
    a0 = rng.standard_normal(N, dtype=np.float32)
    a, b = cupy.asarray(a0), cupy.ones(N, np.float32)
    k(a, b, out=a)
    np.testing.assert_allclose(a.get(), a0 + 1, rtol=1e-6)
    with pytest.raises(LaunchArgumentError, match="output 0 of vector_add overlaps input 1"):
        k(a, b, out=b)  # only input 0 was declared


def test_smem_over_the_device_limit_is_refused_with_both_numbers():
    import mgpu_lab
    from mgpu_lab.runtime.device import max_dynamic_smem_bytes

    limit = max_dynamic_smem_bytes()
    big = mgpu_lab.ShapeDtype((limit + 1024,), "uint8")
    sd = mgpu_lab.ShapeDtype((128,), "float32")
    with pytest.raises(ResourceLimitError) as e:
        mgpu_lab.kernel(lambda ctx, a, o, s: None, grid=1, block=128, in_shapes=sd, out_shapes=sd, smem=big)
    assert str(limit) in str(e.value) and str(limit + 1024) in str(e.value)
