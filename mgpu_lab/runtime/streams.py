"""A CuPy stream over a raw CUDA stream handle (torch's current stream, a user's int)."""

from __future__ import annotations

from typing import Any


class _StreamHandle:
    """The CUDA stream protocol's side of a raw handle: `__cuda_stream__` -> (version 0, handle)."""

    __slots__ = ("handle",)

    def __init__(self, handle: int):
        self.handle = handle

    def __cuda_stream__(self) -> tuple[int, int]:
        return (0, self.handle)


def external_stream(handle: int) -> Any:
    """A `cupy.cuda.Stream` that enqueues on the existing stream `handle` (it neither creates nor
    destroys one). CuPy 14 deprecates `ExternalStream` for `Stream.from_external` (the CUDA
    stream protocol); older CuPy has only the former."""
    import cupy

    from_external = getattr(cupy.cuda.Stream, "from_external", None)
    if from_external is not None:
        return from_external(_StreamHandle(int(handle)))
    return cupy.cuda.ExternalStream(int(handle))
