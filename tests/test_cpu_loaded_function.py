"""The launcher's driver layer (LoadedFunction) on the CPU, against a stand-in CUDA driver.

The real driver calls are replaced, on the cuda-bindings module itself, by recorders that
answer like the driver: module loading (with the PTX fallback for newer GPUs), the smem
limit, raising the dynamic smem attribute, cuLaunchKernelEx with a cluster, and the retry
after a thread had no current context. cuLaunchKernel is reached through CuPy's
`cupy.cuda.driver.launchKernel` (what `portable._driver_launch()` returns): the fake cupy's
records its integer arguments and raises CUDADriverError with the CUresult, as CuPy's does.
"""

from __future__ import annotations

import sys

import pytest
from cupy_stand_in import CUDADriverError, fake_cupy, launch_kernel_arguments, reread_driver_launch

from mgpu_lab.runtime import portable

OK = "CUDA_SUCCESS"


class FakeDriver:
    """Records every driver call LoadedFunction makes; `answers` decides the results."""

    def __init__(self, monkeypatch, driver):
        self.d, self.calls = driver, []
        self.smem_limit, self.cubin_error, self.ptx_error, self.launch_errors = 232448, None, None, []
        self.attribute_error = self.set_attribute_error = None
        for name in ("cuDeviceGetAttribute", "cuModuleLoadData", "cuModuleGetFunction", "cuFuncSetAttribute",
                     "cuLaunchKernelEx", "cuGetErrorName"):
            monkeypatch.setattr(driver, name, getattr(self, name))
        cupy = fake_cupy(launch_kernel=self.cu_launch_kernel)
        cupy.cuda.runtime.free = lambda ptr: self.calls.append(("free", ptr))  # makes the context current
        monkeypatch.setitem(sys.modules, "cupy", cupy)
        reread_driver_launch(monkeypatch, portable)

    def _result(self, error):
        return getattr(self.d.CUresult, error or OK)

    def cuDeviceGetAttribute(self, attr, device):
        self.calls.append(("attribute", attr, device))
        return self._result(self.attribute_error), self.smem_limit

    def cuModuleLoadData(self, image):
        self.calls.append(("load", bytes(image)))
        is_ptx = bytes(image).endswith(b"\0")
        error = self.ptx_error if is_ptx else self.cubin_error
        return self._result(error), (None if error else ("ptx module" if is_ptx else "cubin module"))

    def cuModuleGetFunction(self, module, name):
        self.calls.append(("function", module, name))
        return self._result(None), 0x1234

    def cuFuncSetAttribute(self, function, attr, value):
        self.calls.append(("set attribute", function, attr, value))
        return (self._result(self.set_attribute_error),)

    def cuLaunchKernelEx(self, config, function, argv, extra):
        cluster = config.attrs[0].value.clusterDim
        self.calls.append(("launch ex", (config.gridDimX, config.gridDimY, config.gridDimZ),
                           (config.blockDimX, config.blockDimY, config.blockDimZ), config.sharedMemBytes,
                           (cluster.x, cluster.y, cluster.z), int(config.numAttrs), int(config.hStream), function,
                           argv, extra))
        return (self._result(self.launch_errors.pop(0) if self.launch_errors else None),)

    def cu_launch_kernel(self, *args):
        handle, gx, gy, gz, bx, by, bz, smem, stream, argv, extra = launch_kernel_arguments(args)
        self.calls.append(("launch", handle, (gx, gy, gz), (bx, by, bz), smem, stream, argv, extra))
        if self.launch_errors:
            raise CUDADriverError(int(self._result(self.launch_errors.pop(0))))

    def cuGetErrorName(self, error):
        return self._result(None), error.name.encode()


@pytest.fixture
def driver(monkeypatch):
    from cuda.bindings import driver as real

    return FakeDriver(monkeypatch, real)


def spec(**changes):
    base = {"name": "k", "grid": [4, 2, 1], "block": [128, 1, 1], "cluster": [1, 1, 1], "dynamic_smem": 1024,
            "static_smem": 16, "params": [("array", 0)], "cubin": b"CUBIN", "ptx": ".version 8.0"}
    return base | changes


def test_smem_over_the_device_limit_names_both_numbers(driver):
    with pytest.raises(MemoryError, match=r"^smem: kernel k needs 232449 bytes of shared memory \(232000 dynamic "
                                          r"\+ 449 static\) but the device allows at most 232448 bytes per block$"):
        portable.LoadedFunction(spec(dynamic_smem=232000, static_smem=449), 3, MemoryError)
    attr = driver.d.CUdevice_attribute.CU_DEVICE_ATTRIBUTE_MAX_SHARED_MEMORY_PER_BLOCK_OPTIN
    assert driver.calls == [("attribute", attr, 3)]
    assert portable.device_smem_limit(0) == 232448


@pytest.mark.parametrize("smem, raised", [(48 * 1024, False), (48 * 1024 + 16, True)])
def test_dynamic_smem_above_48k_raises_the_function_attribute(driver, smem, raised):
    fn = portable.LoadedFunction(spec(dynamic_smem=smem), 0, MemoryError)
    attr = driver.d.CUfunction_attribute.CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES
    sets = [c for c in driver.calls if c[0] == "set attribute"]
    assert sets == ([("set attribute", fn.function, attr, smem)] if raised else [])
    assert ("load", b"CUBIN") in driver.calls and ("function", "cubin module", b"k") in driver.calls


def test_a_newer_gpu_loads_the_ptx_and_other_load_errors_are_named(driver):
    driver.cubin_error = "CUDA_ERROR_NO_BINARY_FOR_GPU"
    fn = portable.LoadedFunction(spec(), 0, MemoryError)
    assert fn.module == "ptx module" and ("load", b".version 8.0\0") in driver.calls
    driver.ptx_error = "CUDA_ERROR_INVALID_PTX"
    with pytest.raises(RuntimeError, match=r"^JIT-loading k's PTX failed: CUDA_ERROR_INVALID_PTX$"):
        portable.LoadedFunction(spec(), 0, MemoryError)
    driver.cubin_error = "CUDA_ERROR_INVALID_IMAGE"
    with pytest.raises(RuntimeError, match=r"^loading k's cubin failed: CUDA_ERROR_INVALID_IMAGE$"):
        portable.LoadedFunction(spec(), 0, MemoryError)
    driver.cubin_error = "CUDA_ERROR_NO_BINARY_FOR_GPU"
    with pytest.raises(RuntimeError, match=r"^loading k's cubin failed: CUDA_ERROR_NO_BINARY_FOR_GPU$"):
        portable.LoadedFunction(spec(ptx=""), 0, MemoryError)  # no PTX to fall back on


def test_a_plain_launch_is_one_culaunchkernel_with_the_baked_configuration(driver):
    fn = portable.LoadedFunction(spec(), 0, MemoryError)
    assert fn.config is None and fn.dims == (4, 2, 1, 128, 1, 1, 1024)
    assert fn.handle == 0x1234
    fn.launch(0x77, 0x99)
    assert driver.calls[-1] == ("launch", 0x1234, (4, 2, 1), (128, 1, 1), 1024, 0x77, 0x99, 0)
    assert [c for c in driver.calls if c[0].startswith("launch")] == [driver.calls[-1]]


def test_a_cluster_launch_goes_through_culaunchkernelex(driver):
    fn = portable.LoadedFunction(spec(cluster=[2, 1, 1]), 0, MemoryError)
    fn.launch(0x77, 0x99)
    assert driver.calls[-1] == ("launch ex", (4, 2, 1), (128, 1, 1), 1024, (2, 1, 1), 1, 0x77, fn.function, 0x99, 0)
    fn.launch(0, 0x99)  # the default stream
    assert driver.calls[-1][6] == 0
    assert not [c for c in driver.calls if c[0] == "launch"], "a cluster launch never goes through cuLaunchKernel"


def test_each_thread_sets_the_stream_in_its_own_launch_config(driver):
    """A thread switch between one thread's setting its stream and its launch must not send the
    other thread's kernel to that stream: each thread has its own CUlaunchConfig."""
    import threading

    fn = portable.LoadedFunction(spec(cluster=[2, 1, 1]), 0, MemoryError)
    fn.launch(0x77, 0x99)
    mine = fn.config.config
    seen = []
    thread = threading.Thread(target=lambda: (fn.launch(0x55, 0x99), seen.append(fn.config.config)))
    thread.start()
    thread.join()
    assert seen and seen[0] is not mine, "two threads share one CUlaunchConfig"
    assert [c[6] for c in driver.calls if c[0] == "launch ex"] == [0x77, 0x55]
    assert int(mine.hStream) == 0x77 and int(seen[0].hStream) == 0x55


@pytest.mark.parametrize("cluster", [[1, 1, 1], [2, 1, 1]])
def test_a_thread_without_a_context_is_retried_once_and_other_errors_raise(driver, cluster):
    fn = portable.LoadedFunction(spec(cluster=cluster), 0, MemoryError)
    driver.launch_errors = ["CUDA_ERROR_INVALID_CONTEXT"]
    fn.launch(0x77, 0x99)
    launches = [c for c in driver.calls if c[0].startswith("launch") or c[0] == "free"]
    assert len(launches) == 3 and launches[0] == launches[2] and launches[1] == ("free", 0)
    driver.launch_errors = ["CUDA_ERROR_LAUNCH_FAILED"]
    with pytest.raises(RuntimeError, match=r"^cuLaunchKernel failed: CUDA_ERROR_LAUNCH_FAILED$"):
        fn.launch(0x77, 0x99)
    driver.launch_errors = ["CUDA_ERROR_INVALID_CONTEXT", "CUDA_ERROR_INVALID_CONTEXT"]
    with pytest.raises(RuntimeError, match="CUDA_ERROR_INVALID_CONTEXT"):
        fn.launch(0x77, 0x99)


def test_cuda_check_names_the_error(driver):
    with pytest.raises(RuntimeError, match=r"^reading things failed: CUDA_ERROR_INVALID_VALUE$"):
        portable.cuda_check((driver.d.CUresult.CUDA_ERROR_INVALID_VALUE, None), "reading things")


def test_cuda_check_takes_the_error_name_as_bytes_or_str(driver, monkeypatch):
    invalid = driver.d.CUresult.CUDA_ERROR_INVALID_VALUE
    monkeypatch.setattr(driver.d, "cuGetErrorName", lambda err: (driver.d.CUresult.CUDA_SUCCESS, err.name))
    with pytest.raises(RuntimeError, match=r"^reading things failed: CUDA_ERROR_INVALID_VALUE$"):
        portable.cuda_check((invalid, None), "reading things")


def test_a_failing_smem_query_or_attribute_raise_names_the_call(driver):
    driver.attribute_error = "CUDA_ERROR_INVALID_DEVICE"
    with pytest.raises(RuntimeError, match=r"^cuDeviceGetAttribute failed: CUDA_ERROR_INVALID_DEVICE$"):
        portable.LoadedFunction(spec(), 7, MemoryError)
    driver.attribute_error, driver.set_attribute_error = None, "CUDA_ERROR_INVALID_VALUE"
    with pytest.raises(RuntimeError, match=r"^raising the dynamic smem limit failed: CUDA_ERROR_INVALID_VALUE$"):
        portable.LoadedFunction(spec(dynamic_smem=100 * 1024), 0, MemoryError)
    portable.LoadedFunction(spec(), 0, MemoryError)  # 1 KiB: the attribute is left alone
