"""`LaunchContext`: what a kernel body receives as `ctx` — barriers, named regions, and
(Hopper) TMA copies. One per kernel trace."""

from __future__ import annotations

import contextlib
from collections.abc import Iterator
from typing import TYPE_CHECKING, Any

from .._mlir import gpu, ir

if TYPE_CHECKING:
    from ..profiler.device import DeviceProfiler


class LaunchContext:
    """Per-trace state of a kernel body: the module being built and the profiler, if any."""

    def __init__(self, *, grid: tuple[int, int, int], block: tuple[int, int, int],
                 cluster: tuple[int, int, int], profiler: DeviceProfiler | None = None):
        self.grid = grid
        self.block = block
        self.cluster = cluster
        self.profiler = profiler
        self.tma_descriptors: list[Any] = []  # filled by async_copy (Hopper DSL)
        self.tma_params: list[ir.Value] = []
        # (smem offset, shape) of a planned buffer -> the swizzle TMA copies use on it (smem viewer)
        self.smem_swizzles: dict[tuple[int, tuple[int, ...]], int] = {}

    @contextlib.contextmanager
    def named_region(self, name: str) -> Iterator[None]:
        """Time the enclosed ops as region `name` when the kernel is built with profiling.

        Without profiling this emits nothing at all."""
        if self.profiler is None:
            yield
            return
        self.profiler.begin(name)
        try:
            yield
        finally:
            self.profiler.end(name)

    def block_barrier(self) -> None:
        """`__syncthreads()`: every thread of the block waits here."""
        gpu.barrier()

    def async_copy(self, **kwargs: Any) -> None:
        """Start a TMA copy between a kernel array and smem; see `builder.tma.async_copy`."""
        from .tma import async_copy

        async_copy(self, **kwargs)

    def await_async_copy(self, allow_groups: int, await_read_only: bool = False, sync: str | None = None) -> None:
        """Wait for TMA stores (bulk groups) of this thread; see `builder.tma.await_async_copy`."""
        from .tma import await_async_copy

        await_async_copy(self, allow_groups, await_read_only, sync)
