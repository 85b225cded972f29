"""GPU tests of isolated execution: results land in the caller's arrays (CuPy and torch), a
fault raises KernelFaultError, the worker restarts, this process's context stays healthy."""

from __future__ import annotations

import numpy as np
import pytest

import mgpu_lab
from fault_kernels import FAR, FAULTS, N, make_hang, make_oob_write
from gpu_arrays import poisoned
from mgpu_lab.errors import KernelFaultError
from mgpu_lab.examples.vector_add import make_vector_add, reference_vector_add
from mgpu_lab.runtime import isolation
from mgpu_lab.runtime.isolation import worker_for

pytestmark = pytest.mark.gpu


@pytest.fixture(autouse=True)
def _no_sanitizer_reruns():
    """A compute-sanitizer re-run per fault takes tens of seconds; one test below asks for it."""
    saved = isolation.SETTINGS.locate_faults
    isolation.SETTINGS.locate_faults = False
    yield
    isolation.SETTINGS.locate_faults = saved


@pytest.fixture(scope="module")
def vadd():
    return make_vector_add(N)


def _inputs(cupy, rng):
    return (cupy.asarray(rng.standard_normal(N, dtype=np.float32)),
            cupy.asarray(rng.standard_normal(N, dtype=np.float32)))


def _check_vadd(cupy, vadd, rng, **call):
    a, b = _inputs(cupy, rng)
    out = poisoned(cupy, N, np.float32)
    vadd(a, b, out=out, **call)
    np.testing.assert_allclose(out.get(), reference_vector_add(a.get(), b.get()), rtol=1e-6, atol=1e-6)


def _parent_context_healthy(cupy):
    x = cupy.arange(1024, dtype=cupy.float32)
    assert float((x * 2).sum()) == 2 * 1023 * 1024 / 2
    cupy.cuda.runtime.deviceSynchronize()


def test_isolated_results_land_in_the_callers_arrays(vadd, rng):
    import cupy

    _check_vadd(cupy, vadd, rng, isolate=True)
    with mgpu_lab.isolated():
        a, b = _inputs(cupy, rng)
        c = vadd(a, b)  # output allocated here, written by the worker
        np.testing.assert_allclose(c.get(), reference_vector_add(a.get(), b.get()), rtol=1e-6, atol=1e-6)


def test_isolated_slices_of_one_allocation_cross_with_their_offsets(vadd, rng):
    import cupy

    pool = cupy.asarray(rng.standard_normal(4 * N, dtype=np.float32))
    a, b, out = pool[:N], pool[N:2 * N], pool[2 * N:3 * N]  # one allocation, three offsets
    out.fill(np.nan)
    expected = reference_vector_add(a.get(), b.get())
    vadd(a, b, out=out, isolate=True)
    np.testing.assert_allclose(out.get(), expected, rtol=1e-6, atol=1e-6)


def test_isolated_launch_respects_the_callers_stream(vadd):
    import cupy

    stream = cupy.cuda.Stream(non_blocking=True)
    with stream:
        a = cupy.zeros(N, np.float32)
        for _ in range(20):  # queue enough work that an unordered launch would read zeros
            a += 0.5
        out = poisoned(cupy, N, np.float32)
    vadd(a, a, out=out, stream=stream, isolate=True)
    assert float(out.min()) == 20.0 and float(out.max()) == 20.0


@pytest.mark.parametrize("fault", sorted(name for name in FAULTS if name != "oob_write_near"))
def test_a_fault_raises_restarts_the_worker_and_spares_this_process(fault, vadd, rng):
    import cupy

    make, takes_input = FAULTS[fault]
    k = make()
    sentinel = cupy.asarray(rng.standard_normal(1 << 16, dtype=np.float32))
    expected = sentinel.get()
    device = cupy.cuda.runtime.getDevice()
    _check_vadd(cupy, vadd, rng, isolate=True)
    restarts = worker_for(device).restarts
    args = (cupy.ones(N, np.float32),) if takes_input else ()
    with pytest.raises(KernelFaultError) as e:
        k(*args, out=cupy.zeros(N, np.float32), isolate=True, timeout_s=60)
    assert e.value.kernel == k.name and e.value.cuda_error, str(e.value)
    assert str(e.value).startswith(f"kernel {k.name} faulted in the isolated worker: ")
    assert worker_for(device).restarts == restarts + 1
    _parent_context_healthy(cupy)
    np.testing.assert_array_equal(sentinel.get(), expected)
    _check_vadd(cupy, vadd, rng, isolate=True)  # the restarted worker runs the next launch
    _check_vadd(cupy, vadd, rng)  # and so does this process


def test_a_near_out_of_bounds_write_never_harms_this_process(vadd, rng):
    """A write a few KiB past an array may land in another mapped allocation of the worker
    (no fault) or in unmapped memory (a fault); either way this process carries on."""
    import cupy

    sentinel = cupy.asarray(rng.standard_normal(1 << 16, dtype=np.float32))
    expected = sentinel.get()
    k = FAULTS["oob_write_near"][0]()
    try:
        k(out=cupy.zeros(N, np.float32), isolate=True)
    except KernelFaultError as e:
        assert e.cuda_error
    _parent_context_healthy(cupy)
    np.testing.assert_array_equal(sentinel.get(), expected)
    _check_vadd(cupy, vadd, rng, isolate=True)


def test_a_hang_times_out_and_the_next_launch_works(vadd, rng):
    import cupy

    k = make_hang()
    with pytest.raises(KernelFaultError, match=r"hang faulted in the isolated worker: timeout \(no reply within 3 s"):
        k(out=cupy.zeros(N, np.float32), isolate=True, timeout_s=3)
    _parent_context_healthy(cupy)
    _check_vadd(cupy, vadd, rng, isolate=True)


def test_the_fault_report_names_the_source_line_when_compute_sanitizer_is_there(rng):
    import cupy

    from mgpu_lab.runtime.fault_report import find_sanitizer

    if find_sanitizer() is None:
        pytest.skip("compute-sanitizer not found")
    k = make_oob_write(FAR)
    with mgpu_lab.isolated(locate_faults=True), pytest.raises(KernelFaultError) as e:
        k(out=cupy.zeros(N, np.float32))
    print(str(e.value))
    print(e.value.report)
    assert e.value.location is not None and "fault_kernels.py:" in e.value.location, str(e.value)
    assert "STG" in (e.value.sass or ""), str(e.value)


def test_isolated_torch_tensors(vadd):
    torch = pytest.importorskip("torch")
    a = torch.randn(N, device="cuda", dtype=torch.float32)
    b = torch.randn(N, device="cuda", dtype=torch.float32)
    out = torch.full((N,), float("nan"), device="cuda", dtype=torch.float32)
    try:
        vadd(a, b, out=out, isolate=True)
    except RuntimeError as e:
        if "cannot be shared with the isolated worker" in str(e):
            pytest.skip(f"torch's allocator gives memory without a CUDA IPC handle here: {e}")
        raise
    torch.cuda.synchronize()
    np.testing.assert_allclose(out.cpu().numpy(), (a.double() + b.double()).cpu().numpy(), rtol=1e-6, atol=1e-6)


def test_isolated_torch_fault_spares_torch(rng):
    torch = pytest.importorskip("torch")
    k = FAULTS["trap"][0]()
    keep = torch.arange(1024, device="cuda", dtype=torch.float32)
    with pytest.raises(KernelFaultError):
        k(out=torch.zeros(N, device="cuda", dtype=torch.float32), isolate=True)
    assert float((keep * 2).sum()) == 2 * 1023 * 1024 / 2


def test_isolated_tma_kernel_encodes_its_descriptors_in_the_worker(rng):
    """TMA descriptors hold pointers: the worker must encode them for its own mapping."""
    import cupy

    from mgpu_lab.examples.scaled_add import make_scaled_add, reference_scaled_add

    k = make_scaled_add(256, 512)
    for _ in range(2):
        x = rng.standard_normal((256, 512)).astype(np.float32)
        out = poisoned(cupy, (256, 512), np.float32)
        k(cupy.asarray(x), out=out, isolate=True)
        np.testing.assert_allclose(out.get(), reference_scaled_add(x), rtol=1e-6)


def test_isolated_profiled_kernel_brings_its_trace_back(rng):
    import cupy

    from mgpu_lab.examples.scaled_add import make_scaled_add

    k = make_scaled_add(256, 512, profile=True)
    x = cupy.asarray(rng.standard_normal((256, 512)).astype(np.float32))
    k(x, isolate=True)
    trace = k.last_trace
    assert trace is not None and trace.num_events >= 0
    k(x)  # and in this process
    assert k.last_trace.num_events == trace.num_events
