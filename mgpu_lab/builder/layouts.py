"""Register layouts of a `FragmentedArray` over the 128 threads of a warpgroup, and where each
thread's elements sit in a swizzled shared-memory tile.

Every layout says, per thread, which elements its registers hold: `registers` vectors of `vec`
elements. A layout is a frozen dataclass (hashable, comparable); `indices()` emits the
multi-dimensional index of each register's first element for the calling thread.

- `WGStridedLayout(shape, vec)`: the array flattened row-major; thread t holds elements
  [(i * 128 + t) * vec, ... + vec) for i = 0, 1, ... (coalesced 16-byte accesses).
- `WGMMAFragLayout(n, m=64)`: an (m, n) array, m a multiple of 64, in the WGMMA accumulator
  layout repeated over 64-row tiles. In each 64-row tile, warp w, lane l holds rows
  16w + l//4 and 16w + l//4 + 8, columns 8j + 2(l%4) + {0, 1} for every j: register
  (i, j, h) (i the row tile, h the +8 half) is a pair of adjacent columns. A (64, k) bf16/f16
  array in this layout is also the wgmma A operand from registers.
- `WGMMARowLayout(m)`: a vector of m values, one per row of an (m, n) WGMMA-layout array
  (what reducing it along axis 1 gives). A thread holds the values of its rows; the 4 lanes
  sharing a row hold copies.
- `WGMMAColLayout(n)`: a vector of n values, one per column (what reducing along axis 0
  gives). A thread holds its column pairs; the 8 lane groups and 4 warps hold copies.

Swizzled tiles: a logical (m, n) array stored as `(n // w, m, w)` column chunks, w = swizzle
bytes / element size, each chunk swizzled the way TMA writes it (16-byte unit u of row r
lands in unit u ^ ((r * swizzle / 128) % (swizzle / 16)), on absolute addresses). That is
what TMA boxes (m, w) of an (M, N) array give, and what TMA stores read.
`tiled_accesses` lists a thread's smem accesses for a WGMMA-layout array; it computes on
Python ints or index values alike (typed values have the same operators), so the
bank-conflict test checks the very arithmetic the kernel emits.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

from .._mlir import ir
from .threads import WARPGROUP_SIZE, lane_idx, thread_in_warpgroup

M_TILE = 64  # rows of one WGMMA tile (4 warps x 16)


@dataclass(frozen=True)
class WGStridedLayout:
    """Row-major flattening, `vec` consecutive elements per thread per register."""

    shape: tuple[int, ...]
    vec: int

    def __post_init__(self):
        size = math.prod(self.shape)
        if size % (WARPGROUP_SIZE * self.vec):
            raise ValueError(f"WGStridedLayout: {size} elements (shape {self.shape}) do not split into "
                             f"{WARPGROUP_SIZE} threads x {self.vec}-element vectors")

    @property
    def registers(self) -> int:
        return math.prod(self.shape) // (WARPGROUP_SIZE * self.vec)

    def indices(self) -> list[list[ir.Value]]:
        """Per register, the multi-dimensional index of its first element."""
        tid = thread_in_warpgroup()
        out = []
        for i in range(self.registers):
            flat = (tid + i * WARPGROUP_SIZE) * self.vec
            idx = []
            for extent in reversed(self.shape[1:]):
                idx.insert(0, flat % extent)
                flat = flat // extent
            idx.insert(0, flat)
            out.append(idx)
        return out

    def owner(self) -> ir.Value | None:
        return None  # every element lives in exactly one thread


def _check_rows(m: int, what: str) -> None:
    if not isinstance(m, int) or m <= 0 or m % M_TILE:
        raise ValueError(f"{what}: m (rows) must be a positive multiple of {M_TILE}, got {m!r}")


def _check_cols(n: int, what: str) -> None:
    if not isinstance(n, int) or n <= 0 or n % 8:
        raise ValueError(f"{what}: n (columns) must be a positive multiple of 8, got {n!r}")


def wgmma_thread_base() -> tuple[ir.Value, ir.Value]:
    """(row, column) of the calling thread's first element in a 64-row WGMMA tile:
    (16 * warp + lane // 4, 2 * (lane % 4))."""
    warp = thread_in_warpgroup() // 32
    lane = lane_idx()
    return warp * 16 + lane // 4, lane % 4 * 2


@dataclass(frozen=True)
class WGMMAFragLayout:
    """An (m, n) array in the WGMMA accumulator layout (see the module doc). Registers are
    ordered (row tile i, column group j, half h): index (i * n/8 + j) * 2 + h."""

    n: int
    m: int = M_TILE

    def __post_init__(self):
        _check_rows(self.m, "WGMMAFragLayout")
        _check_cols(self.n, "WGMMAFragLayout")

    @property
    def shape(self) -> tuple[int, int]:
        return (self.m, self.n)

    @property
    def vec(self) -> int:
        return 2

    @property
    def registers(self) -> int:
        return (self.m // M_TILE) * (self.n // 8) * 2

    def index(self, i: int, j: int, h: int) -> int:
        """The register holding row tile i, column group j, half h."""
        return (i * (self.n // 8) + j) * 2 + h

    def offsets(self) -> list[tuple[int, int]]:
        """Per register, its (row, column) offset from the thread base (static)."""
        return [(M_TILE * i + 8 * h, 8 * j) for i in range(self.m // M_TILE) for j in range(self.n // 8)
                for h in range(2)]

    def indices(self) -> list[list[ir.Value]]:
        row, col = wgmma_thread_base()
        return [[row + dr, col + dc] for dr, dc in self.offsets()]

    def owner(self) -> ir.Value | None:
        return None


@dataclass(frozen=True)
class WGMMARowLayout:
    """A vector of m values, one per row of an (m, n) WGMMA-layout array; register 2i + h holds
    the row of tile i, half h (one value; the 4 lanes of a row hold copies)."""

    m: int

    def __post_init__(self):
        _check_rows(self.m, "WGMMARowLayout")

    @property
    def shape(self) -> tuple[int]:
        return (self.m,)

    @property
    def vec(self) -> int:
        return 1

    @property
    def registers(self) -> int:
        return 2 * (self.m // M_TILE)

    def indices(self) -> list[list[ir.Value]]:
        row, _ = wgmma_thread_base()
        return [[row + (M_TILE * i + 8 * h)] for i in range(self.m // M_TILE) for h in range(2)]

    def owner(self) -> ir.Value:
        """i1: this thread is the one of its row's 4 copies that stores (lane % 4 == 0)."""
        return lane_idx() % 4 == 0


@dataclass(frozen=True)
class WGMMAColLayout:
    """A vector of n values, one per column of an (m, n) WGMMA-layout array; register j holds
    columns 8j + 2(lane % 4) + {0, 1} (copies in every lane group and warp)."""

    n: int

    def __post_init__(self):
        _check_cols(self.n, "WGMMAColLayout")

    @property
    def shape(self) -> tuple[int]:
        return (self.n,)

    @property
    def vec(self) -> int:
        return 2

    @property
    def registers(self) -> int:
        return self.n // 8

    def indices(self) -> list[list[ir.Value]]:
        _, col = wgmma_thread_base()
        return [[col + 8 * j] for j in range(self.n // 8)]

    def owner(self) -> ir.Value:
        """i1: this thread's copy is the one stored (warp 0, lanes 0-3)."""
        return thread_in_warpgroup() < 4


Layout = WGStridedLayout | WGMMAFragLayout | WGMMARowLayout | WGMMAColLayout


def swizzled_position(row: int | ir.Value, col: int | ir.Value, *, swizzle: int,
                      itemsize: int) -> tuple[int | ir.Value, int | ir.Value, int | ir.Value]:
    """Where logical element (row, col) of an (m, n) array sits in its swizzled smem tile.

    The tile is what TMA copies of (m, w) boxes with `swizzle` (0, 32, 64 or 128 bytes) write:
    `(n // w, m, w)` column chunks, w = swizzle / itemsize elements (one chunk, w = n, for no
    swizzle). Returns (chunk, row, physical column) to index that memref with, e.g.
    `memref.load(tile, [*map(dsl.as_index, swizzled_position(r, c, swizzle=128, itemsize=2))])`.
    Works on Python ints and index values alike; the chunk must start at a 1024-byte-aligned
    offset (the planner aligns swizzled buffers), as TMA's swizzle acts on absolute addresses.
    """
    if swizzle == 0:
        return 0, row, col
    if swizzle not in SWIZZLES:
        raise ValueError(f"swizzle: expected 0, 32, 64 or 128 (bytes), got {swizzle!r}")
    if itemsize not in (1, 2, 4, 8):
        raise ValueError(f"itemsize: expected 1, 2, 4 or 8 (bytes), got {itemsize!r}")
    width = swizzle // itemsize
    chunk, inner = col // width, col % width
    # 16-byte unit u of row r lands in unit u ^ ((r * swizzle / 128) % (swizzle / 16)).
    units = (row // (128 // swizzle)) % (swizzle // 16)
    byte = inner * itemsize
    physical = ((byte // 16) ^ units) * 16 + byte % 16
    return chunk, row, physical // itemsize


@dataclass(frozen=True)
class TiledAccess:
    """One smem access of one thread: register `register` (element `element` of it when the
    access moves one element, else the whole register) at index (chunk, row, column)."""

    register: int
    element: int | ir.Value | None
    index: tuple[int | ir.Value, int | ir.Value, int | ir.Value]


SWIZZLES = (32, 64, 128)


def tiled_accesses(layout: WGMMAFragLayout, itemsize: int, swizzle: int, row_base: int | ir.Value,
                   col_base: int | ir.Value) -> list[TiledAccess]:
    """The smem accesses of the thread whose WGMMA base is (row_base, col_base), moving
    `layout`'s registers to/from a swizzled tile (n // w, m, w) of `itemsize`-byte elements.

    16- and 8-bit elements: one access per register (4 or 2 bytes); the 8 rows a warp touches
    land in 8 distinct 16-byte units, so a warp is served in one wavefront.
    32-bit elements with a 64/128-byte swizzle: an 8-byte pair access would hit each bank
    twice (two rows of a half-warp share units); instead each register moves as two 4-byte
    accesses, and threads on odd swizzle rows move element 1 first, so the two rows sharing
    units use disjoint banks. (With the 32-byte swizzle a half-warp's rows are disjoint.)
    """
    if swizzle not in SWIZZLES:
        raise ValueError(f"swizzle must be 32, 64 or 128 (bytes), got {swizzle!r}")
    width = swizzle // itemsize
    if width % 8:
        raise ValueError(f"a {swizzle}-byte swizzle holds {width} elements of {itemsize} bytes; "
                         f"the WGMMA layout needs a multiple of 8")
    # Absolute-address swizzle: unit ^= (row * swizzle / 128) % (swizzle / 16). Rows of a thread
    # differ by multiples of 8, so the XOR is the same for all of them.
    units = (row_base // (128 // swizzle)) % (swizzle // 16)
    thread_bytes = (col_base * itemsize) ^ (units * 16)
    out = []
    for reg, (dr, dc) in enumerate(layout.offsets()):
        chunk = dc // width
        static_bytes = (dc % width) * itemsize  # a multiple of 8 elements: no carry into it
        row = row_base + dr
        col = (thread_bytes ^ static_bytes) // itemsize
        if itemsize == 4 and swizzle > 32:
            parity = units % 2
            for q in range(2):
                element = parity ^ q
                out.append(TiledAccess(reg, element, (chunk, row, col + element)))
        else:
            out.append(TiledAccess(reg, None, (chunk, row, col)))
    return out
