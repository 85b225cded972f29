"""Host-side cost of a launch, measured on a machine WITHOUT a GPU: the Python work per call.

The CUDA driver is replaced by a tiny C library named libcuda.so.1 whose cuLaunchKernel returns
at once (built here with the system C compiler), so what is timed is everything our call does on
the host: `Kernel.__call__`, the argument checks, the parameter writes and the driver call's
argument conversion (CuPy's Cython `launchKernel`, or ctypes in older trees). The arrays are real
CuPy arrays over made-up addresses (no allocation needs a GPU). CPU time per call
(`time.thread_time`, best of 7 blocks) keeps other processes on a shared machine out of it.

It cannot time CuPy's RawKernel (that needs the CUDA runtime); bench_launch.py compares against
RawKernel on a GPU. Refuses to run where a real libcuda.so.1 loads.

Run:  python benchmarks/bench_launch_host.py [--calls 200000]
To compare with another tree: PYTHONPATH=<that tree> python benchmarks/bench_launch_host.py
"""

from __future__ import annotations

import argparse
import ctypes
import subprocess
import sys
import tempfile
import time
import timeit
from pathlib import Path
from types import SimpleNamespace

sys.path.insert(0, str(Path(__file__).parent))
from common import table  # noqa: E402

NO_OP_DRIVER = r"""
int cuLaunchKernel(void* f, unsigned gx, unsigned gy, unsigned gz, unsigned bx, unsigned by, unsigned bz,
                   unsigned smem, void* stream, void** params, void** extra) { return 0; }
int cuGetErrorName(int e, const char** s) { *s = "CUDA_ERROR_UNKNOWN"; return 0; }
int cuGetErrorString(int e, const char** s) { *s = "no-op driver"; return 0; }
"""
N = 1 << 12


def load_no_op_driver(folder: Path) -> None:
    """Build and load the no-op libcuda.so.1; later dlopen("libcuda.so.1") calls get it by soname."""
    try:
        ctypes.CDLL("libcuda.so.1")
    except OSError:
        pass
    else:
        sys.exit("a real libcuda.so.1 loads here: run this on a machine without a GPU driver "
                 "(on a GPU machine, bench_launch.py measures the real thing)")
    source, library = folder / "no_op_driver.c", folder / "libcuda.so.1"
    source.write_text(NO_OP_DRIVER)
    subprocess.run(["cc", "-O2", "-shared", "-fPIC", "-Wl,-soname,libcuda.so.1", "-o", str(library), str(source)],
                   check=True)
    ctypes.CDLL(str(library), mode=ctypes.RTLD_GLOBAL)


def fake_device_array(address: int) -> object:
    import cupy
    import numpy as np

    memory = cupy.cuda.UnownedMemory(address, N * 4, None, device_id=0)
    return cupy.ndarray((N,), np.float32, cupy.cuda.MemoryPointer(memory, 0))


def loaded_function(portable: object) -> object:
    """A LoadedFunction for device 0 without cuModuleLoadData (the no-op driver has no modules)."""
    fn = object.__new__(portable.LoadedFunction)
    fn.handle, fn.grid, fn.block, fn.smem, fn.config = 0x1234, (N // 1024, 1, 1), (256, 1, 1), 0, None
    fn.dims = (*fn.grid, *fn.block, fn.smem)
    if hasattr(portable, "_driver_launch"):
        fn.launch_kernel, fn.launch_error = portable._driver_launch()
    else:  # trees before the CuPy launchKernel path
        fn.launch_kernel, fn.handle_pointer = portable._cu_launch_kernel(), ctypes.c_void_p(fn.handle)
    return fn


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--calls", type=int, default=200_000)
    opts = parser.parse_args()
    load_no_op_driver(Path(tempfile.mkdtemp()))
    from mgpu_lab.examples.vector_add import make_vector_add
    from mgpu_lab.runtime import portable

    kernel = make_vector_add(N)
    launcher = kernel._new_launcher().single  # a plain kernel's program: one launch on the user's arrays
    # the CUDA runtime needs a driver; these are the two calls it would make
    launcher._get_device = launcher._raw_get_device = lambda: 0
    launcher._current_stream = lambda device=-1: SimpleNamespace(ptr=0)
    fn = loaded_function(portable)
    if hasattr(launcher, "_loaded"):
        launcher._loaded(0, fn)
    else:
        launcher._functions[0] = fn
    a, b, out = (fake_device_array(0x7F0000000000 + i * 0x10000) for i in range(3))
    cases = [("checked, out= passed", lambda: kernel(a, b, out=out)),
             ("launch_unchecked", lambda: kernel.launch_unchecked(a, b, out)),
             ("launcher.call (no Kernel.__call__)", lambda: launcher.call((a, b), out, None)),
             ("launcher.checked (the checks alone)", lambda: launcher.checked((a, b), out, 0))]
    rows = [("host work per call", "us")]
    for label, fn_call in cases:
        fn_call()
        timer = timeit.Timer(fn_call, timer=time.thread_time)
        rows.append((label, f"{min(timer.repeat(number=opts.calls, repeat=7)) / opts.calls * 1e6:.3f}"))
    print(f"mgpu_lab from {Path(portable.__file__).parents[2]}")
    print(table(rows))


if __name__ == "__main__":
    main()
