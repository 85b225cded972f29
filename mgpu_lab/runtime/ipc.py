"""Device arrays across processes by CUDA IPC handles: no copies, both processes see one memory.

A CUDA IPC handle names a whole allocation (what one cudaMalloc returned), never a pointer
inside it, and an array is usually a slice of a larger allocation (CuPy's and torch's memory
pools hand out pieces of their blocks). So an array crosses as the handle of the allocation
that holds it plus the array's byte offset from the allocation's start; the receiver opens
the handle once (opening costs tens of microseconds) and adds the offset.

Memory from cudaMalloc works (CuPy's default pool, torch's default caching allocator);
stream-ordered pools (cudaMallocAsync) and virtual-memory allocations (torch's
expandable_segments) have no legacy IPC handle and are refused with a clear error.
"""

from __future__ import annotations

import collections
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

IPC_HANDLE_BYTES = 64
# Allocations the worker keeps open; opening one again after eviction costs ~50 us.
OPEN_ALLOCATIONS = 64


@dataclass(frozen=True)
class ArrayHandle:
    """One array as another process can open it: allocation handle + offset, shape, dtype."""

    handle: bytes  # cudaIpcMemHandle_t of the allocation holding the array
    offset: int  # bytes from the allocation's start to the array's first element
    shape: tuple[int, ...]
    dtype: str  # numpy dtype name of the device array (float8 travels as uint8)

    def __post_init__(self) -> None:
        if len(self.handle) != IPC_HANDLE_BYTES:
            raise ValueError(f"handle: expected {IPC_HANDLE_BYTES} bytes, got {len(self.handle)}")
        if self.offset < 0:
            raise ValueError(f"offset: expected >= 0, got {self.offset}")


def allocation_offset(ptr: int, base: int, size: int) -> int:
    """Offset of `ptr` in the allocation [base, base + size); ValueError when outside it."""
    if not base <= ptr < base + max(size, 1):
        raise ValueError(f"pointer {ptr:#x} is outside the allocation [{base:#x}, {base + size:#x})")
    return ptr - base


def _address_range(ptr: int) -> tuple[int, int]:
    from cuda.bindings import driver

    err, base, size = driver.cuMemGetAddressRange(ptr)
    if err != driver.CUresult.CUDA_SUCCESS:
        _, name = driver.cuGetErrorName(err)
        raise RuntimeError(f"cuMemGetAddressRange({ptr:#x}) failed: {name.decode() if isinstance(name, bytes) else name}")
    return int(base), int(size)


def _ipc_handle(base: int) -> bytes:
    import cupy

    return bytes(cupy.cuda.runtime.ipcGetMemHandle(base))


def export_array(array: Any, what: str, *, address_range: Callable[[int], tuple[int, int]] = _address_range,
                 ipc_handle: Callable[[int], bytes] = _ipc_handle) -> ArrayHandle:
    """The ArrayHandle of a CuPy array (`what` names it in errors). The two callables are the
    CUDA queries, replaceable for tests."""
    ptr = int(array.data.ptr)
    base, size = address_range(ptr)
    offset = allocation_offset(ptr, base, size)
    try:
        handle = ipc_handle(base)
    except Exception as e:  # noqa: BLE001 - any CUDA refusal gets the same explanation
        raise RuntimeError(
            f"{what}: its memory cannot be shared with the isolated worker by CUDA IPC ({e}); isolation "
            "needs cudaMalloc memory (CuPy's default pool, torch without expandable_segments), not "
            "cudaMallocAsync pools or virtual-memory allocations") from None
    return ArrayHandle(handle, offset, tuple(array.shape), array.dtype.name)


class OpenedAllocations:
    """The worker's side: opened allocations by handle, least recently used closed first.

    `open_handle(handle) -> base pointer` and `close(base)` are the CUDA calls (replaceable
    for tests). Handles name allocations uniquely, so a cached mapping stays right for as long
    as the exporting process keeps the allocation (memory pools keep them)."""

    def __init__(self, open_handle: Callable[[bytes], int] | None = None,
                 close: Callable[[int], None] | None = None, capacity: int = OPEN_ALLOCATIONS):
        if open_handle is None or close is None:
            import cupy

            runtime = cupy.cuda.runtime
            open_handle = open_handle or (lambda h: runtime.ipcOpenMemHandle(h, runtime.cudaIpcMemLazyEnablePeerAccess))
            close = close or runtime.ipcCloseMemHandle
        self._open, self._close, self._capacity = open_handle, close, capacity
        self._bases: collections.OrderedDict[bytes, int] = collections.OrderedDict()

    def pointer(self, array: ArrayHandle) -> int:
        """The address of `array` in this process."""
        base = self._bases.get(array.handle)
        if base is None:
            base = self._bases[array.handle] = int(self._open(array.handle))
            while len(self._bases) > self._capacity:
                _, old = self._bases.popitem(last=False)
                self._close(old)
        else:
            self._bases.move_to_end(array.handle)
        return base + array.offset

    def close_all(self) -> None:
        while self._bases:
            _, base = self._bases.popitem(last=False)
            self._close(base)

    def __len__(self) -> int:
        return len(self._bases)


def as_cupy_array(ptr: int, shape: tuple[int, ...], dtype: str, device: int) -> Any:
    """A CuPy array over `ptr` on `device` (memory this process does not own: nothing is freed)."""
    import cupy
    import numpy as np

    from .portable import dtype_from_name

    dt = dtype_from_name(dtype)
    nbytes = int(np.prod(shape, dtype=np.int64)) * dt.itemsize
    memory = cupy.cuda.UnownedMemory(ptr, nbytes, None, device_id=device)
    return cupy.ndarray(shape, dt, cupy.cuda.MemoryPointer(memory, 0))
