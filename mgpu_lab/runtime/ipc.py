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
    base: int  # the allocation's address in the exporting process: the worker's cache key
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
    return ArrayHandle(handle, base, offset, tuple(array.shape), array.dtype.name)


class OpenedAllocations:
    """The worker's side: opened allocations, least recently used closed first.

    CUDA lets a process open one allocation only once (a second open fails with "already
    mapped"), so mappings are keyed by the allocation's address in the exporting process. A
    different handle for a known address means that allocation was freed and another one made
    there: the old mapping is closed before the new one is opened.
    `open_handle(handle) -> base pointer` and `close(base)` are the CUDA calls (replaceable
    for tests)."""

    def __init__(self, open_handle: Callable[[bytes], int] | None = None,
                 close: Callable[[int], None] | None = None, capacity: int = OPEN_ALLOCATIONS):
        if open_handle is None or close is None:
            import cupy

            runtime = cupy.cuda.runtime
            open_handle = open_handle or (lambda h: runtime.ipcOpenMemHandle(h, runtime.cudaIpcMemLazyEnablePeerAccess))
            close = close or runtime.ipcCloseMemHandle
        self._open, self._close, self._capacity = open_handle, close, capacity
        # exporter's base address -> (handle, base address here)
        self._mapped: collections.OrderedDict[int, tuple[bytes, int]] = collections.OrderedDict()

    def pointer(self, array: ArrayHandle) -> int:
        """The address of `array` in this process."""
        entry = self._mapped.get(array.base)
        if entry is not None and entry[0] == array.handle:
            self._mapped.move_to_end(array.base)
            return entry[1] + array.offset
        if entry is not None:
            del self._mapped[array.base]
            self._close(entry[1])
        local = int(self._open(array.handle))
        self._mapped[array.base] = (array.handle, local)
        while len(self._mapped) > self._capacity:
            _, (_, old) = self._mapped.popitem(last=False)
            self._close(old)
        return local + array.offset

    def close_all(self) -> None:
        while self._mapped:
            _, (_, local) = self._mapped.popitem(last=False)
            self._close(local)

    def __len__(self) -> int:
        return len(self._mapped)


def as_cupy_array(ptr: int, shape: tuple[int, ...], dtype: str, device: int) -> Any:
    """A CuPy array over `ptr` on `device` (memory this process does not own: nothing is freed)."""
    import cupy
    import numpy as np

    from .portable import dtype_from_name

    dt = dtype_from_name(dtype)
    nbytes = int(np.prod(shape, dtype=np.int64)) * dt.itemsize
    memory = cupy.cuda.UnownedMemory(ptr, nbytes, None, device_id=device)
    return cupy.ndarray(shape, dt, cupy.cuda.MemoryPointer(memory, 0))
