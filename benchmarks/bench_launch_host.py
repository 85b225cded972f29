"""Host-side cost of a launch, measured on a machine WITHOUT a GPU: the Python work per call.

The CUDA driver is replaced by a tiny C library named libcuda.so.1 whose cuLaunchKernel returns
at once (built here with the system C compiler), so what is timed is everything our call does on
the host: `Kernel.__call__`, the argument checks, the parameter writes and the driver call's
argument conversion (CuPy's Cython `launchKernel`, or ctypes in older trees). The arrays are real
CuPy arrays over made-up addresses (no allocation needs a GPU). CPU time per call
(`time.thread_time`, best of 7 blocks) keeps other processes on a shared machine out of it.

It cannot time CuPy's RawKernel (that needs the CUDA runtime); bench_launch.py compares against
RawKernel on a GPU. Refuses to run where a real libcuda.so.1 loads. The no-op driver also answers
cuda-bindings (cuGetProcAddress finds its functions by name), so a cluster kernel's launch is
timed too, and a TMA kernel's parameter block on pointers that change every call (the
descriptors' encode is a no-op here: what is timed is our work around it).

Run:  python benchmarks/bench_launch_host.py [--calls 200000] [--record]
To compare with another tree: PYTHONPATH=<that tree> python benchmarks/bench_launch_host.py
"""

from __future__ import annotations

import argparse
import ctypes
import re
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
#define _GNU_SOURCE
#include <dlfcn.h>
int cuLaunchKernel(void* f, unsigned gx, unsigned gy, unsigned gz, unsigned bx, unsigned by, unsigned bz,
                   unsigned smem, void* stream, void** params, void** extra) { return 0; }
int cuLaunchKernelEx(const void* config, void* f, void** params, void** extra) { return 0; }
int cuTensorMapEncodeTiled(void* map, int type, unsigned rank, void* address, const void* dims,
                           const void* strides, const void* box, const void* elements, int interleave,
                           int swizzle, int promotion, int fill) { return 0; }
int cuGetErrorName(int e, const char** s) { *s = "CUDA_ERROR_UNKNOWN"; return 0; }
int cuGetErrorString(int e, const char** s) { *s = "no-op driver"; return 0; }
int cuInit(unsigned flags) { return 0; }
int cuDriverGetVersion(int* v) { *v = 13000; return 0; }
static int missing(void) { return 999; }
/* cuda-bindings finds every driver function through this: the ones above, by name */
int cuGetProcAddress_v2(const char* symbol, void** pfn, int version, unsigned long long flags, int* status) {
  void* p = dlsym(RTLD_DEFAULT, symbol);
  *pfn = p ? p : (void*)missing;
  if (status) *status = p ? 0 : 1;
  return 0;
}
int cuGetProcAddress(const char* symbol, void** pfn, int version, unsigned long long flags) {
  return cuGetProcAddress_v2(symbol, pfn, version, flags, 0);
}
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
    subprocess.run(["cc", "-O2", "-shared", "-fPIC", "-Wl,-soname,libcuda.so.1", "-o", str(library), str(source),
                    "-ldl"], check=True)
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
    parser.add_argument("--record", action="store_true", help="also write a launch_host record (benchmarks/results)")
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
    rows += cluster_and_tma_rows(portable, opts.calls)
    tree = Path(portable.__file__).parents[2]
    print(f"mgpu_lab from {tree}")
    print(table(rows))
    if opts.record:
        from common import write_record

        figures = {f"host_us_{re.sub(r'[^a-z0-9]+', '_', label.lower()).strip('_')}": float(us)
                   for label, us in rows[1:]}
        notes = {"calls": opts.calls, "timer": "time.thread_time, best of 7 blocks", "driver": "no-op libcuda.so.1",
                 "mgpu_lab_tree": str(tree)}
        print(f"record: {write_record('launch_host', figures, notes)}")


def cluster_and_tma_rows(portable: object, calls: int) -> list[tuple[str, str]]:
    """Host work of the launches a model's GEMM layers make: a cluster kernel's launch (cuda-bindings'
    cuLaunchKernelEx), and a TMA kernel's launch on pointers that change every call, cycling through
    8 sets (a model's layers taking turns on one kernel), against the same pointers every call."""
    import numpy as np
    from cuda.bindings import driver

    from mgpu_lab.examples.scaled_add import make_scaled_add

    fn = loaded_function(portable)
    fn._driver, fn.function = driver, driver.CUfunction(fn.handle)
    fn.config = fn._cluster_config((2, 1, 1))
    argv = np.zeros(4, dtype=np.uint64)
    cases = [("cluster launch (cuLaunchKernelEx)", lambda: fn.launch(0, int(argv.ctypes.data)))]
    tma = make_scaled_add(256, 256)._new_launcher().single
    tma._loaded(0, loaded_function(portable)) if hasattr(tma, "_loaded") else None
    sets = [[0x7F0000000000 + 0x100000 * i + j * 0x40000 for j in range(3)] for i in range(8)]
    turn = iter(range(1 << 62))
    cases += [("TMA kernel, the same pointers every call", lambda: tma.launch_pointers(sets[0], 0, 0)),
              ("TMA kernel, 8 pointer sets in turn", lambda: tma.launch_pointers(sets[next(turn) % 8], 0, 0))]
    rows = []
    for label, fn_call in cases:
        fn_call()
        timer = timeit.Timer(fn_call, timer=time.thread_time)
        rows.append((label, f"{min(timer.repeat(number=calls // 4, repeat=7)) / (calls // 4) * 1e6:.3f}"))
    return rows


if __name__ == "__main__":
    main()
