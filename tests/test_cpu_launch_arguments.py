"""The launcher's argument checks on the CPU, with stand-in arrays exposing __cuda_array_interface__.

Public behaviour only: which error is raised and what its message names (the argument, what
was expected, what was given). The launch itself is recorded instead of run (tests/cupy_stand_in.py).
"""

from __future__ import annotations

import numpy as np
import pytest
from cupy_stand_in import DEVICE_1_BASE, DeviceArray, TorchTensor, install, set_current_device

from mgpu_lab.errors import LaunchArgumentError
from mgpu_lab.examples.vector_add import make_vector_add
from mgpu_lab.runtime.portable import PortableLaunchError, PortableLauncher

N = 1 << 12


@pytest.fixture(scope="module")
def compiled_vector_add():
    return make_vector_add(N).compiled


@pytest.fixture
def kernel(compiled_vector_add, monkeypatch):
    import mgpu_lab

    recorder = install(monkeypatch)
    k = mgpu_lab.Kernel(compiled_vector_add)
    k.recorder = recorder
    return k


def good(shape=(N,), dtype="float32", **kw):
    return DeviceArray(shape, dtype, **kw)


def test_a_valid_call_launches_on_the_arrays_in_order(kernel):
    a, b, out = good(), good(), good()
    result = kernel(a, b, out=out)
    [launch] = kernel.recorder.launches
    assert launch.pointers == [a.ptr, b.ptr, out.ptr]
    assert result.data.ptr == out.ptr
    assert launch.grid == tuple(kernel.compiled.grid) and launch.block == tuple(kernel.compiled.block)


def test_outputs_are_allocated_with_the_declared_shape_and_dtype(kernel):
    result = kernel(good(), good())
    assert result.shape == (N,) and result.dtype == np.float32
    [launch] = kernel.recorder.launches
    assert launch.pointers[2] == result.data.ptr


@pytest.mark.parametrize("args, out, words", [
    ((good(),), None, ["takes 2 input", "got 1"]),
    ((good(), good(), good()), None, ["takes 2 input", "got 3"]),
    ((good((N - 1,)), good()), None, ["input 0", "shape", f"({N},)", f"({N - 1},)"]),
    ((good(), good((2, N // 2))), None, ["input 1", "shape", f"(2, {N // 2})"]),
    ((good(), good(dtype="float64")), None, ["input 1", "dtype", "float32", "float64"]),
    ((good(dtype="int32"), good()), None, ["input 0", "dtype", "int32"]),
    ((good(strides=(8,)), good()), None, ["input 0", "C-contiguous", "(8,)"]),
    ((good(), good(ptr=(1 << 32) + 4)), None, ["input 1", "16-byte aligned", "0x100000004"]),
    ((good(), good(ptr=DEVICE_1_BASE)), None, ["input 1", "current device 0", "device 1"]),
    ((np.zeros(N, np.float32), good()), None, ["input 0", "host numpy.ndarray", "cupy.asarray"]),
    ((good(), 7), None, ["input 1", "device array", "got int"]),
    ((good(), [1.0] * 8), None, ["input 1", "device array", "got list"]),
    ((good(), np.float32(1)), None, ["input 1", "got numpy.float32"]),
    ((good(), good()), (good(), good()), ["out", "1 output", "got 2"]),
    ((good(), good()), good((N // 2,)), ["output 0", "shape", f"({N // 2},)"]),
    ((good(), good()), good(dtype="float16"), ["output 0", "dtype", "float16"]),
    ((good(), good()), good(ptr=(1 << 32) + 8), ["output 0", "16-byte aligned"]),
    ((good(), good()), good(strides=(8,)), ["output 0", "C-contiguous"]),
])
def test_bad_arguments_name_the_argument_the_expectation_and_the_value(kernel, args, out, words):
    with pytest.raises(LaunchArgumentError) as e:
        kernel(*args, out=out)
    message = str(e.value)
    assert "vector_add" in message
    for word in words:
        assert word in message, f"{word!r} missing from: {message}"
    assert not kernel.recorder.launches, "a bad call must not launch"


def test_a_list_of_outputs_is_accepted(kernel):
    out = good()
    assert kernel(good(), good(), out=[out]).data.ptr == out.ptr


def test_the_current_device_decides(kernel):
    set_current_device(1)
    a = good(ptr=DEVICE_1_BASE + (1 << 20))
    with pytest.raises(LaunchArgumentError, match="input 1 .*current device 1.*device 0"):
        kernel(a, good())
    b, out = good(ptr=DEVICE_1_BASE + (2 << 20)), good(ptr=DEVICE_1_BASE + (3 << 20))
    assert kernel(a, b, out=out).data.ptr == out.ptr


def _spec(inputs, outputs, params=None):
    return {"name": "k", "grid": [2, 1, 1], "block": [128, 1, 1], "cluster": [1, 1, 1], "dynamic_smem": 0,
            "static_smem": 0, "inputs": inputs, "outputs": outputs,
            "params": params or [("array", i) for i in range(len(inputs) + len(outputs))],
            "cubin": b"", "ptx": "", "profile_words": None}


def test_float8_arrays_travel_as_bytes_and_the_error_says_so(monkeypatch):
    install(monkeypatch)
    launcher = PortableLauncher(_spec([([64], "float8_e4m3fn")], [([64], "float32")]))
    with pytest.raises(PortableLaunchError, match=r"input 0 of k: expected dtype uint8 \(the bytes of float8_e4m3fn"):
        launcher(good((64,), "float16"))
    assert launcher(good((64,), "uint8")).shape == (64,)


def test_bfloat16_inputs_need_bfloat16_arrays(monkeypatch):
    install(monkeypatch)
    launcher = PortableLauncher(_spec([([8, 8], "bfloat16")], [([8, 8], "bfloat16")]))
    with pytest.raises(PortableLaunchError, match="expected dtype bfloat16, got float16"):
        launcher(good((8, 8), "float16"))
    import sys

    import ml_dtypes

    bf16 = sys.modules["cupy"].empty((8, 8), ml_dtypes.bfloat16)  # CuPy's own bfloat16 array (via DLPack)
    assert launcher(bf16).dtype == ml_dtypes.bfloat16


def test_the_error_class_is_injectable(monkeypatch):
    install(monkeypatch)

    class Mine(ValueError):
        pass

    launcher = PortableLauncher(_spec([([4], "float32")], [([4], "float32")]), error=Mine)
    with pytest.raises(Mine, match="takes 1 input"):
        launcher()


def test_launch_unchecked_skips_every_check(kernel):
    import sys

    a = sys.modules["cupy"].empty((3,), "float64")  # the wrong shape and dtype: not checked
    kernel.launch_unchecked(a, a, a)
    [launch] = kernel.recorder.launches
    assert launch.pointers == [a.data.ptr] * 3


def test_an_output_overlapping_an_input_is_refused_naming_both(kernel):
    a = good()
    with pytest.raises(LaunchArgumentError, match="output 0 of vector_add overlaps input 0"):
        kernel(a, good(), out=good(ptr=a.ptr + 16))  # shares all but the first 16 bytes
    assert not kernel.recorder.launches
    out = good(ptr=a.ptr + 4 * N)  # right after a: no overlap
    assert kernel(a, good(), out=out).data.ptr == out.ptr


def test_an_output_ending_exactly_where_an_input_starts_does_not_overlap_it(kernel):
    base = 1 << 40  # far from the stand-in's own pointers
    out = good(ptr=base)  # [base, base + 4N)
    a = good(ptr=base + 4 * N)  # starts at out's end
    b = good()
    assert kernel(a, b, out=out).data.ptr == out.ptr
    assert kernel.recorder.launches[-1].pointers == [a.ptr, b.ptr, out.ptr]
    with pytest.raises(LaunchArgumentError, match="output 0 of vector_add overlaps input 0"):
        kernel(good(ptr=base + 4 * N - 16), good(), out=out)  # 16 bytes earlier: they share 16 bytes


def test_may_alias_allows_only_the_declared_pairs(monkeypatch):
    install(monkeypatch)
    spec = {**_spec([([64], "float32")], [([64], "float32"), ([64], "float32")]), "may_alias": [(0, 0)]}
    x = good((64,))
    with pytest.raises(PortableLaunchError, match=r"output 1 of k overlaps input 0 in memory.*may_alias=\{1: 0\}"):
        PortableLauncher(spec)(x, out=(good((64,)), x))  # output 1 in place: not declared


def test_may_alias_allows_in_place_and_outputs_never_share(monkeypatch):
    recorder = install(monkeypatch)
    spec = _spec([([64], "float32")], [([64], "float32"), ([64], "float32")])
    x = good((64,))
    o = good((64,))
    with pytest.raises(PortableLaunchError, match="output 0 of k overlaps output 1 in memory: two outputs"):
        PortableLauncher(spec)(x, out=(o, good((64,), ptr=o.ptr)))
    with pytest.raises(PortableLaunchError, match=r"may_alias=\{0: 0\}"):
        PortableLauncher(spec)(x, out=(x, good((64,))))
    PortableLauncher({**spec, "may_alias": [(0, 0)]})(x, out=(x, good((64,))))
    assert recorder.launches[-1].pointers[:2] == [x.ptr, x.ptr]


def test_cuda_check_unpacks_successful_results():
    from cuda.bindings import driver

    from mgpu_lab.runtime.portable import cuda_check

    ok = driver.CUresult.CUDA_SUCCESS
    assert cuda_check((ok,), "x") is None
    assert cuda_check((ok, 5), "x") == 5
    assert cuda_check((ok, 1, 2), "x") == (1, 2)


def test_tma_slots_are_64_byte_aligned_and_argv_points_at_each_slot(monkeypatch):
    """Byval TMA descriptors need 64-byte aligned 128-byte parameters: every slot, every thread."""
    import ctypes
    import threading

    from mgpu_lab.runtime.portable import _ParamStorage

    def check(storage, count):
        assert storage.words.ctypes.data % 64 == 0 and storage.words.size == max(count, 1) * 16
        assert list(storage.argv) == [storage.words.ctypes.data + 128 * i for i in range(count)] or count == 0
        assert storage.argv_address == storage.argv.ctypes.data  # the int the launch passes as kernelParams
        assert storage.parts[0] is storage.slots and storage.parts[1] == storage.argv_address
        assert ctypes.addressof(storage.slots) == storage.words.ctypes.data

    for count in (0, 1, 3, 7):
        check(_ParamStorage(count), count)
    storage = _ParamStorage(2)
    other: list = []
    thread = threading.Thread(target=lambda: other.append((storage.words.ctypes.data, check(storage, 2))))
    thread.start()
    thread.join()
    assert other[0][0] != storage.words.ctypes.data  # each thread writes its own slots


def test_float8_note_names_the_output_s_own_declaration(monkeypatch):
    install(monkeypatch)
    spec = _spec([([8], "float8_e4m3fn"), ([8], "float32")], [([8], "float32"), ([8], "float8_e5m2")])
    launcher = PortableLauncher(spec)
    with pytest.raises(PortableLaunchError, match=r"output 1 of k: expected dtype uint8 \(the bytes of float8_e5m2"):
        launcher(good((8,), "uint8"), good((8,)), out=(good((8,)), good((8,), "float16")))
    with pytest.raises(PortableLaunchError, match=r"output 0 of k: expected dtype float32, got float16$"):
        launcher(good((8,), "uint8"), good((8,)), out=(good((8,), "float16"), good((8,), "uint8")))


class _HostDLPack:
    """A DLPack producer whose memory is on the host (a CPU torch tensor, a numpy-like array)."""

    def __dlpack__(self, stream=None):
        raise AssertionError("must not be converted")

    def __dlpack_device__(self):
        return (1, 0)


class _BrokenInterface:
    """Claims __cuda_array_interface__ but describes nothing usable."""

    __cuda_array_interface__ = {"version": 3}


def test_host_dlpack_and_unconvertible_objects_get_clear_errors(kernel):
    with pytest.raises(LaunchArgumentError, match=r"input 0 of vector_add: expected a device array .*got a "
                                                  r"test_cpu_launch_arguments\._HostDLPack in host memory \(cpu\)"):
        kernel(_HostDLPack(), good())
    with pytest.raises(LaunchArgumentError, match=r"input 1 of vector_add: expected a device array .*got "
                                                  r"test_cpu_launch_arguments\._BrokenInterface \(.+\)"):
        kernel(good(), _BrokenInterface())


def test_profiled_kernels_pass_a_fresh_profile_buffer(monkeypatch):
    recorder = install(monkeypatch)
    spec = {**_spec([([64], "float32")], [([64], "float32")], [("array", 0), ("array", 1), ("profile", 0)]),
            "profile_words": 10}
    launcher = PortableLauncher(spec)
    x, out = good((64,)), good((64,))
    launcher(x, out=out)
    first = launcher.last_profile
    assert first.shape == (2, 10) and first.dtype == np.uint32
    assert recorder.launches[-1].pointers == [x.ptr, out.ptr, first.data.ptr]
    launcher(x, out=out)
    assert launcher.last_profile.data.ptr != first.data.ptr
    assert recorder.launches[-1].pointers[2] == launcher.last_profile.data.ptr


@pytest.mark.parametrize("cluster", [(1, 1, 1), (2, 1, 1)])
def test_the_stream_argument_reaches_the_launch(monkeypatch, cluster):
    from types import SimpleNamespace

    recorder = install(monkeypatch)
    launcher = PortableLauncher({**_spec([([16], "float32")], [([16], "float32")]), "cluster": list(cluster)})
    x, out = good((16,)), good((16,))
    launcher(x, out=out)  # CuPy's current stream (the stand-in's is 0)
    launcher(x, out=out, stream=SimpleNamespace(ptr=0x77))  # a CuPy stream
    launcher(x, out=out, stream=SimpleNamespace(cuda_stream=0x88))  # a torch stream
    launcher(x, out=out, stream=0x99)  # a raw handle
    import sys

    cupy = sys.modules["cupy"]
    launcher.launch_unchecked(cupy.empty((16,), "float32"), cupy.empty((16,), "float32"), stream=0xAA)
    assert [launch.stream for launch in recorder.launches] == [0, 0x77, 0x88, 0x99, 0xAA]
    # a cluster kernel launches through cuLaunchKernelEx with its cluster dimensions, the others through cuLaunchKernel
    assert [launch.cluster for launch in recorder.launches] == [None if cluster == (1, 1, 1) else cluster] * 5


@pytest.mark.parametrize("cluster", [(1, 1, 1), (2, 1, 1)])
def test_the_first_call_which_loads_the_module_launches_on_the_given_stream(monkeypatch, cluster):
    recorder = install(monkeypatch)
    spec = {**_spec([([16], "float32")], [([16], "float32")]), "cluster": list(cluster)}
    PortableLauncher(spec)(good((16,)), out=good((16,)), stream=0x77)
    PortableLauncher(spec).call((good((16,)),), None, 0x88)
    assert [launch.stream for launch in recorder.launches] == [0x77, 0x88]


def test_cuda_torch_tensors_of_dtypes_cupy_lacks_are_viewed_through_their_pointers(monkeypatch):
    import ml_dtypes

    recorder = install(monkeypatch)
    launcher = PortableLauncher(_spec([([8, 8], "bfloat16")], [([8, 8], "bfloat16")]))
    x, out = TorchTensor((8, 8), "bfloat16"), TorchTensor((8, 8), "bfloat16")
    result = launcher(x, out=out)
    assert recorder.launches[-1].pointers == [x.data_ptr(), out.data_ptr()]
    assert result.data.ptr == out.data_ptr() and result.dtype == ml_dtypes.bfloat16 and result.shape == (8, 8)
    assert result.data.mem.size == 8 * 8 * 2  # the view's memory spans the tensor's bytes
    with pytest.raises(PortableLaunchError, match=r"^input 0 of k: expected a device array \(.*\), got "
                                                  r"cupy_stand_in\.TorchTensor \(CuPy does not support"):
        launcher(TorchTensor((8, 8), "bfloat16", contiguous=False))  # no view of strided memory
    with pytest.raises(PortableLaunchError, match="input 0 of k: expected an array on the current device 0, got "
                                                  "one on device 1"):
        launcher(TorchTensor((8, 8), "bfloat16", device=1))
    assert len(recorder.launches) == 1


def test_calls_matching_the_signature_exactly_skip_the_explaining_checks(monkeypatch):
    """The module docstring's fast path: CuPy arrays matching the signature exactly are accepted
    by the exact-match check (on the first call too) and, once the module is loaded, by the
    generated call without the explaining path; anything else gets the full check."""
    import sys

    install(monkeypatch)
    launcher = PortableLauncher(_spec([([64], "float32")], [([64], "float32")]))
    explaining, full = [], []
    call_explaining, checked_arrays = launcher._call_explaining, launcher._checked_arrays
    launcher._call_explaining = lambda *a: explaining.append(a) or call_explaining(*a)
    launcher._checked_arrays = lambda *a: full.append(a) or checked_arrays(*a)
    cupy = sys.modules["cupy"]
    x, out = cupy.empty((64,), "float32"), cupy.empty((64,), "float32")
    assert launcher(x, out=out) is out  # loads the module through the explaining path
    assert (len(explaining), len(full)) == (1, 0)
    assert launcher(x, out=out) is out and launcher(x).shape == (64,)
    assert (len(explaining), len(full)) == (1, 0)
    with pytest.raises(PortableLaunchError, match="input 0 of k: expected shape"):
        launcher(cupy.empty((32,), "float32"))
    assert (len(explaining), len(full)) == (2, 1)


def _fast_path_launcher(monkeypatch):
    """A loaded pointer-only launcher (2 inputs, 1 output, 2 KiB of dynamic smem) and the fake
    cupy: its own arrays match the signature exactly, so calls after the first (which loads the
    module) take the generated `call` / `unchecked` and launch from there."""
    import sys

    recorder = install(monkeypatch)
    spec = {**_spec([([64], "float32"), ([64], "float32")], [([8, 8], "float16")]),
            "grid": [3, 2, 1], "block": [64, 2, 1], "dynamic_smem": 2048}
    launcher = PortableLauncher(spec)
    cupy = sys.modules["cupy"]
    launcher(good((64,)), good((64,)))  # the explaining path; loads the module, installs the generated call
    assert "call" in launcher.__dict__ and "unchecked" in launcher.__dict__
    return launcher, recorder, cupy


def test_the_generated_call_launches_with_the_baked_configuration(monkeypatch):
    launcher, recorder, cupy = _fast_path_launcher(monkeypatch)
    a, b, out = cupy.empty((64,), "float32"), cupy.empty((64,), "float32"), cupy.empty((8, 8), "float16")
    assert launcher(a, b, out=out) is out
    allocated = launcher(a, b)
    assert allocated.shape == (8, 8) and allocated.dtype == np.float16
    launcher.launch_unchecked(b, a, out, stream=0x55)
    first, *fast = recorder.launches
    assert [launch.pointers for launch in fast] == [[a.data.ptr, b.data.ptr, out.data.ptr],
                                                    [a.data.ptr, b.data.ptr, allocated.data.ptr],
                                                    [b.data.ptr, a.data.ptr, out.data.ptr]]
    for launch in recorder.launches:
        assert (launch.grid, launch.block, launch.smem, launch.cluster) == ((3, 2, 1), (64, 2, 1), 2048, None)
        assert launch.handle == first.handle
    assert [launch.stream for launch in recorder.launches] == [0, 0, 0, 0x55]


def test_the_generated_call_still_refuses_with_the_full_message(monkeypatch):
    launcher, recorder, cupy = _fast_path_launcher(monkeypatch)
    a, b = cupy.empty((64,), "float32"), cupy.empty((64,), "float32")
    with pytest.raises(PortableLaunchError, match=r"^input 1 of k: expected shape \(64,\), got \(32,\)$"):
        launcher(a, cupy.empty((32,), "float32"))
    with pytest.raises(PortableLaunchError, match="input 0 of k: expected dtype float32, got float16"):
        launcher(cupy.empty((64,), "float16"), b)
    with pytest.raises(PortableLaunchError, match=r"^output 0 of k: expected shape \(8, 8\), got \(64,\)$"):
        launcher(a, b, out=cupy.empty((64,), "float16"))
    with pytest.raises(PortableLaunchError, match="output 0 of k overlaps input 1 in memory"):
        launcher(a, b, out=cupy.ndarray((8, 8), np.dtype("float16"), b.data, (16, 2)))
    assert len(recorder.launches) == 1, "only the first, good call launched"


def test_a_launch_without_a_context_is_retried_from_the_generated_call(monkeypatch):
    from cuda.bindings import driver

    launcher, recorder, cupy = _fast_path_launcher(monkeypatch)
    frees: list = []
    monkeypatch.setattr(cupy.cuda.runtime, "free", frees.append)
    monkeypatch.setattr(driver, "cuGetErrorName", lambda err: (driver.CUresult.CUDA_SUCCESS, err.name.encode()))
    a, b, out = cupy.empty((64,), "float32"), cupy.empty((64,), "float32"), cupy.empty((8, 8), "float16")
    recorder.failures[:] = [int(driver.CUresult.CUDA_ERROR_INVALID_CONTEXT)]
    launcher(a, b, out=out)
    assert frees == [0] and not recorder.failures
    assert len(recorder.launches) == 2 and recorder.launches[-1].pointers == [a.data.ptr, b.data.ptr, out.data.ptr]
    recorder.failures[:] = [int(driver.CUresult.CUDA_ERROR_LAUNCH_FAILED)]
    with pytest.raises(RuntimeError, match=r"^cuLaunchKernel failed: CUDA_ERROR_LAUNCH_FAILED$"):
        launcher(a, b, out=out)
    recorder.failures[:] = [int(driver.CUresult.CUDA_ERROR_INVALID_CONTEXT)] * 2  # retried once only
    with pytest.raises(RuntimeError, match=r"^cuLaunchKernel failed: CUDA_ERROR_INVALID_CONTEXT$"):
        launcher.launch_unchecked(a, b, out)
    assert len(recorder.launches) == 2 and frees == [0, 0] and not recorder.failures
