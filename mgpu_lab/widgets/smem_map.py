"""The shared-memory address map: every buffer of a kernel placed on [0, total) bytes.

Buffers that overlap (members of one `Union`, or anything else sharing bytes) are put on
separate lanes so all of them stay visible; lanes are assigned greedily by offset, which uses
as few lanes as the deepest overlap needs.
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from dataclasses import dataclass

from mgpu_lab.compiler.compiled_kernel import SmemBuffer, dtype_itemsize
from mgpu_lab.widgets.bank_model import SWIZZLE_MODES, swizzle_period

TREE_PATH = re.compile(r"\d+(\.\d+)*")  # an unnamed buffer's position: smem[0][1] is "0.1"
UNNAMED_NOTE = (
    "buffers shown as numbers (0.1) are unnamed in the kernel: that is their position in the "
    "smem tree (smem[0][1]); ShapeDtype(..., name=...) names them"
)


@dataclass(frozen=True)
class MapEntry:
    """One buffer on the map, with what the viewer says about it."""

    buffer: SmemBuffer
    lane: int
    alignment: int  # largest power of two dividing the offset (capped at 1024)
    warnings: tuple[str, ...]

    @property
    def end(self) -> int:
        """First byte past the buffer."""
        return self.buffer.offset + self.buffer.nbytes

    @property
    def named(self) -> bool:
        """Whether the kernel named the buffer (`ShapeDtype(..., name=)`, or a dict key).

        The builder records a name in place of the tree path when there is one; an unnamed
        buffer's path is its position in the smem tree (`0.1`), all digits.
        """
        return not TREE_PATH.fullmatch(self.buffer.path)


def alignment_of(offset: int, cap: int = 1024) -> int:
    """Largest power of two (up to `cap`) that divides `offset`."""
    return cap if offset == 0 else min(offset & -offset, cap)


def buffer_warnings(buf: SmemBuffer) -> tuple[str, ...]:
    """Problems worth showing: misaligned swizzle, unknown swizzle mode, size/shape mismatch."""
    out = []
    if buf.swizzle not in SWIZZLE_MODES:
        out.append(f"swizzle {buf.swizzle} B is not a TMA/WGMMA mode (0, 32, 64, 128)")
    elif buf.swizzle and buf.offset % swizzle_period(buf.swizzle):
        out.append(
            f"offset {buf.offset} is not a multiple of {swizzle_period(buf.swizzle)} B: "
            f"the {buf.swizzle} B swizzle pattern will not line up with the buffer"
        )
    try:
        logical = dtype_itemsize(buf.dtype)
        for dim in buf.shape:
            logical *= dim
        if buf.kind == "buffer" and logical > buf.nbytes:
            out.append(f"shape {tuple(buf.shape)} of {buf.dtype} needs {logical} B but the buffer has {buf.nbytes} B")
    except TypeError:
        out.append(f"unknown dtype {buf.dtype!r}")
    return tuple(out)


def address_map(buffers: Iterable[SmemBuffer]) -> list[MapEntry]:
    """Buffers by offset, each on the lowest lane free over its byte range."""
    lane_ends: list[int] = []
    out = []
    for buf in sorted(buffers, key=lambda b: (b.offset, -b.nbytes, b.path)):
        for lane, end in enumerate(lane_ends):
            if end <= buf.offset:
                lane_ends[lane] = buf.offset + buf.nbytes
                break
        else:
            lane = len(lane_ends)
            lane_ends.append(buf.offset + buf.nbytes)
        out.append(MapEntry(buf, lane, alignment_of(buf.offset), buffer_warnings(buf)))
    return out


def total_bytes(entries: list[MapEntry], dynamic_smem_bytes: int = 0) -> int:
    """Extent of the map: the kernel's dynamic smem size, or the furthest buffer end."""
    return max([dynamic_smem_bytes, *(e.end for e in entries)])
