"""`LaunchContext`: what a kernel body receives as `ctx` — barriers, named regions, and
(Hopper) TMA copies. One per kernel trace."""

from __future__ import annotations

import contextlib
import contextvars
from collections.abc import Iterator, Sequence
from typing import TYPE_CHECKING, Any

from .._mlir import gpu, ir
from ..compiler.options import CompileOptions

if TYPE_CHECKING:
    from .profiling import DeviceProfiler
    from .barriers import BarrierRef
    from .transforms import MemRefTransform

_ACTIVE: contextvars.ContextVar[LaunchContext | None] = contextvars.ContextVar("mgpu_lab_launch_context",
                                                                             default=None)


def active_options() -> CompileOptions:
    """The compile options of the kernel being traced (defaults outside a trace)."""
    ctx = _ACTIVE.get()
    return ctx.options if ctx is not None else CompileOptions()


class LaunchContext:
    """Per-trace state of a kernel body: the module being built and the profiler, if any."""

    def __init__(self, *, grid: tuple[int, int, int], block: tuple[int, int, int],
                 cluster: tuple[int, int, int], profiler: DeviceProfiler | None = None,
                 options: CompileOptions | None = None):
        self.options = options or CompileOptions()
        self.grid = grid
        self.block = block
        self.cluster = cluster
        self.profiler = profiler
        self._unprofiled = 0  # depth of `unprofiled()` blocks around the op being traced
        self._record_when = None  # the i1 of the innermost `profile_when()`, or None
        self.tma_descriptors: list[Any] = []  # filled by async_copy (Hopper DSL)
        self.tma_params: list[ir.Value] = []
        # (smem offset, shape) of a planned buffer -> the swizzle TMA copies use on it (smem viewer)
        self.smem_swizzles: dict[tuple[int, tuple[int, ...]], int] = {}

    @contextlib.contextmanager
    def active(self) -> Iterator[LaunchContext]:
        """Make this the context of the trace in progress (read by `active_options`)."""
        token = _ACTIVE.set(self)
        try:
            yield self
        finally:
            _ACTIVE.reset(token)

    @contextlib.contextmanager
    def named_region(self, name: str) -> Iterator[None]:
        """Time the enclosed ops as region `name` when the kernel is built with profiling.

        Without profiling, or inside `unprofiled()`, this emits nothing at all."""
        if self.profiler is None or self._unprofiled:
            yield
            return
        self.profiler.begin(name, self._record_when)
        try:
            yield
        finally:
            self.profiler.end(name, self._record_when)

    @property
    def profiling(self) -> bool:
        """Whether this trace records named regions (the kernel is built with `profile=True`)."""
        return self.profiler is not None

    @contextlib.contextmanager
    def without_profiler(self) -> Iterator[None]:
        """Trace the enclosed code as if the kernel were not profiled (`profiling` is False):
        the code a block that records no regions runs, the same as the plain kernel's."""
        profiler, self.profiler = self.profiler, None
        try:
            yield
        finally:
            self.profiler = profiler

    @contextlib.contextmanager
    def profile_when(self, condition: Any) -> Iterator[None]:
        """Record the enclosed `named_region`s only where `condition` (a boolean value) holds:
        the records stay in the instruction stream, predicated, with no branch (so a sampled
        hot loop keeps one copy of its code). Nested conditions combine with and."""
        if self.profiler is None or self._unprofiled:
            yield
            return
        outer = self._record_when
        self._record_when = condition if outer is None else (outer & condition)
        try:
            yield
        finally:
            self._record_when = outer

    @contextlib.contextmanager
    def unprofiled(self) -> Iterator[None]:
        """Trace the enclosed code with no region records in it: `named_region`s inside emit nothing.

        The way to profile a hot loop at a sample's cost: split its iterations into a few traced
        as usual and the rest under `unprofiled()` (two `for_range` loops over one carry). Every
        region's clock reads and stores sit in the loop's instruction stream, so they cost time
        even when the buffer is full; the unprofiled copy has none. The trace then holds the
        sampled iterations only, and the time between them shows as a gap in the timeline."""
        self._unprofiled += 1
        try:
            yield
        finally:
            self._unprofiled -= 1

    def block_barrier(self) -> None:
        """`__syncthreads()`: every thread of the block waits here."""
        gpu.barrier()

    def async_copy(self, *, src_ref: ir.Value, dst_ref: ir.Value, gmem_slice: Any = (),
                   gmem_transform: MemRefTransform | tuple[MemRefTransform, ...] = (),
                   swizzle: int | None = None, barrier: BarrierRef | None = None,
                   arrive: bool | None = None, uniform: Any = True,
                   collective: str | Sequence[str] | None = None,
                   multicast_mask: int | ir.Value | None = None) -> None:
        """Start a TMA copy of one box between a kernel array and a shared-memory buffer.

        The arguments are `dsl.async_copy`'s (its docstring has the details): `gmem_slice`
        picks the box (ints, slices, `dsl.ds(start, size)`), `swizzle` the smem swizzle,
        `barrier` the mbarrier a load completes on (`arrive=False`: you call
        `arrive_expect_tx` yourself), `uniform` which thread issues, `collective` /
        `multicast_mask` cluster multicast."""
        from .tma import async_copy

        async_copy(self, src_ref=src_ref, dst_ref=dst_ref, gmem_slice=gmem_slice, gmem_transform=gmem_transform,
                   swizzle=swizzle, barrier=barrier, arrive=arrive, uniform=uniform, collective=collective,
                   multicast_mask=multicast_mask)

    def await_async_copy(self, allow_groups: int, await_read_only: bool = False, sync: str | None = None) -> None:
        """Wait for TMA stores (bulk groups) of this thread; see `builder.tma.await_async_copy`."""
        from .tma import await_async_copy

        await_async_copy(self, allow_groups, await_read_only, sync)
