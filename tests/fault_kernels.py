"""Kernels that fault on purpose, written with the public `dsl`: the isolation tests and
benchmarks/bench_isolation.py inject them. Each takes one output array `y` of N float32
(and the misaligned one an input `x` too); a healthy kernel never writes outside its arrays.

- oob_write(distance): one thread writes y[N + distance]: far (GiBs past the end: no
  allocation there, an illegal address) or near (a few KiB past it).
- trap: every thread executes `trap`.
- mbarrier_timeout: waits on an mbarrier nobody arrives on, built with
  $MGPU_LAB_MBARRIER_TIMEOUT_S so the wait traps after 50 ms instead of hanging.
- misaligned: a 16-byte vector load declared 16-byte aligned at a 4-byte aligned address.
- hang: the same barrier wait without the timeout: never returns (the worker's timeout path).
"""

from __future__ import annotations

import contextlib
import os

import mgpu_lab
from mgpu_lab import dsl
from mgpu_lab.dsl import arith, c, ir, memref, vector

N = 1 << 22  # float32 elements: 16 MiB arrays
BLOCK = 128
FAR = 1 << 36  # elements: 256 GiB past the end
NEAR = 1024  # elements: 4 KiB past the end
MBARRIER_TIMEOUT_S = "0.05"

_SD = mgpu_lab.ShapeDtype((N,), "float32")


def make_oob_write(distance: int) -> mgpu_lab.Kernel:
    """Thread 0 of block 0 writes 1.0 at y[N + distance]."""

    def oob_write(ctx, y, smem):
        index = arith.addi(dsl.thread_idx(), c(N + distance))
        with dsl.when(arith.cmpi(arith.CmpIPredicate.eq, dsl.thread_idx(), c(0))):
            memref.store(c(1.0, "float32"), y, [index])

    return mgpu_lab.kernel(oob_write, grid=1, block=BLOCK, out_shapes=_SD,
                           name=f"oob_write_{'far' if distance >= FAR else 'near'}")


def make_trap() -> mgpu_lab.Kernel:
    def trap(ctx, y, smem):
        dsl.llvm.intr_trap()

    return mgpu_lab.kernel(trap, grid=1, block=BLOCK, out_shapes=_SD)


@contextlib.contextmanager
def _env(name: str, value: str | None):
    saved = os.environ.get(name)
    if value is None:
        os.environ.pop(name, None)
    else:
        os.environ[name] = value
    try:
        yield
    finally:
        if saved is None:
            os.environ.pop(name, None)
        else:
            os.environ[name] = saved


def _barrier_wait_kernel(name: str, timeout: str | None) -> mgpu_lab.Kernel:
    def body(ctx, y, barriers):
        barriers.init(1)
        barriers[0].wait(0)  # nobody arrives: phase 0 never completes
        memref.store(c(2.0, "float32"), y, [dsl.thread_idx()])

    with _env("MGPU_LAB_MBARRIER_TIMEOUT_S", timeout):
        return mgpu_lab.kernel(body, grid=1, block=BLOCK, out_shapes=_SD, smem=mgpu_lab.Barriers(1), name=name)


def make_mbarrier_timeout() -> mgpu_lab.Kernel:
    return _barrier_wait_kernel("mbarrier_timeout", MBARRIER_TIMEOUT_S)


def make_hang() -> mgpu_lab.Kernel:
    return _barrier_wait_kernel("hang", None)


def make_misaligned() -> mgpu_lab.Kernel:
    """y[4t:4t+4] = x[4t+1:4t+5], loaded as one vector the code claims is 16-byte aligned."""

    def misaligned(ctx, x, y, smem):
        t4 = arith.muli(dsl.thread_idx(), c(4))
        v4 = ir.VectorType.get([4], ir.F32Type.get())
        value = vector.load(v4, x, [arith.addi(t4, c(1))], alignment=16)
        vector.store(value, y, [t4])

    return mgpu_lab.kernel(misaligned, grid=1, block=BLOCK, in_shapes=_SD, out_shapes=_SD)


# name -> (maker, whether it takes the input x)
FAULTS = {
    "oob_write_far": (lambda: make_oob_write(FAR), False),
    "oob_write_near": (lambda: make_oob_write(NEAR), False),
    "trap": (make_trap, False),
    "mbarrier_timeout": (make_mbarrier_timeout, False),
    "misaligned": (make_misaligned, True),
}
