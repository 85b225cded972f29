"""Shared-memory swizzle and bank-conflict arithmetic for Hopper, as plain Python.

Swizzle: TMA and WGMMA descriptors permute 16-byte chunks of shared memory with the CUTLASS
`Swizzle<B, 4, 3>` function applied to the *absolute* byte address: bits [4, 4+B) (the
16-byte chunk within a 128-byte line) are XORed with bits [7, 7+B) (the line index). The
32-, 64- and 128-byte modes are B = 1, 2, 3; their patterns repeat every 256, 512 and 1024
bytes, which is why swizzled buffers are aligned to that much.

Banks: 32 banks of 4 bytes; the bank of byte address `a` is `(a // 4) % 32`. A warp-wide
access is served in phases (32 threads for accesses of up to 4 bytes a thread, half-warps for
8 bytes, quarter-warps for 16 bytes, which is how the hardware keeps a phase at 128 bytes).
Inside a phase, threads that read the same 4-byte word share it (broadcast) and each bank
serves one distinct word per wavefront, so a phase takes as many wavefronts as the busiest
bank has distinct words. The conflict degree is wavefronts over the conflict-free minimum.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

NUM_BANKS = 32
BANK_BYTES = 4
LINE_BYTES = NUM_BANKS * BANK_BYTES  # 128: one wavefront's worth of distinct banks
SWIZZLE_MODES = (0, 32, 64, 128)
WARP_SIZE = 32


def swizzle_bits(swizzle_bytes: int) -> int:
    """B of `Swizzle<B, 4, 3>` for a swizzle mode in bytes (0, 32, 64 or 128)."""
    if swizzle_bytes not in SWIZZLE_MODES:
        raise ValueError(f"swizzle must be one of {SWIZZLE_MODES} bytes, got {swizzle_bytes}")
    return {0: 0, 32: 1, 64: 2, 128: 3}[swizzle_bytes]


def swizzle_period(swizzle_bytes: int) -> int:
    """Bytes after which the swizzle pattern repeats (also the alignment it needs)."""
    return 0 if swizzle_bytes == 0 else 8 * LINE_BYTES * swizzle_bytes // 128


def swizzle_address(address: int | np.ndarray, swizzle_bytes: int) -> int | np.ndarray:
    """Apply `Swizzle<B, 4, 3>` to byte address(es): the physical address of a logical one.

    The function is its own inverse (it only XORs higher bits into lower ones), so the same
    call maps a physical address back to the logical one.
    """
    bits = swizzle_bits(swizzle_bytes)
    if bits == 0:
        return address
    yyy_mask = ((1 << bits) - 1) << (4 + 3)
    return address ^ ((address & yyy_mask) >> 3)


def bank_of(address: int | np.ndarray) -> int | np.ndarray:
    """Bank (0-31) of byte address(es)."""
    return (address // BANK_BYTES) % NUM_BANKS


@dataclass(frozen=True)
class BufferGeometry:
    """A shared-memory buffer seen as a row-major 2-D array of `rows` x `cols` elements.

    Leading dimensions of an N-d buffer fold into `rows`; `base` is the buffer's byte offset
    in shared memory (the swizzle acts on absolute addresses, so it matters).
    """

    base: int
    rows: int
    cols: int
    itemsize: int
    swizzle: int = 0

    @classmethod
    def from_shape(cls, base: int, shape: tuple[int, ...], itemsize: int, swizzle: int = 0) -> BufferGeometry:
        """Geometry of a buffer of `shape`; a 1-D buffer is one row, a 0-d one one element."""
        cols = int(shape[-1]) if shape else 1
        rows = int(np.prod(shape[:-1], dtype=np.int64)) if len(shape) > 1 else 1
        return cls(base, rows, cols, itemsize, swizzle)

    @property
    def row_bytes(self) -> int:
        """Bytes of one logical row."""
        return self.cols * self.itemsize

    @property
    def nbytes(self) -> int:
        """Bytes of the whole buffer."""
        return self.rows * self.row_bytes

    @property
    def aligned(self) -> bool:
        """Whether the base is aligned to the swizzle period (TMA/WGMMA assume it is)."""
        period = swizzle_period(self.swizzle)
        return period == 0 or self.base % period == 0

    def address(self, row: int | np.ndarray, col: int | np.ndarray) -> int | np.ndarray:
        """Physical byte address of logical element(s) (row, col)."""
        logical = self.base + row * self.row_bytes + col * self.itemsize
        return swizzle_address(logical, self.swizzle)

    def element_at(self, address: int | np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """Logical (row, col) of the element whose bytes start at or cover physical address(es)."""
        offset = np.asarray(swizzle_address(np.asarray(address), self.swizzle)) - self.base
        return offset // self.row_bytes, (offset % self.row_bytes) // self.itemsize


@dataclass(frozen=True)
class Access:
    """One thread's part of a warp-wide shared-memory instruction."""

    thread: int
    address: int
    nbytes: int

    @property
    def words(self) -> range:
        """The 4-byte words (address // 4) it touches; a sub-word access touches its one word."""
        return range(self.address // BANK_BYTES, (self.address + self.nbytes - 1) // BANK_BYTES + 1)


@dataclass(frozen=True)
class ConflictReport:
    """How a warp-wide access is served by the 32 banks.

    `phases` lists the threads of each phase; `thread_wavefront[i]` is the wavefront (within
    its phase, 0-based) that serves `accesses[i]`; `word_conflicts` maps each 4-byte word touched
    to how many distinct words its bank had to serve in that phase (1: no conflict).
    """

    accesses: tuple[Access, ...]
    phases: tuple[tuple[int, ...], ...]
    wavefronts: int
    ideal_wavefronts: int
    thread_wavefront: tuple[int, ...]
    word_conflicts: dict[int, int]

    @property
    def degree(self) -> float:
        """Wavefronts over the conflict-free minimum: 1.0 means no bank conflict."""
        return self.wavefronts / self.ideal_wavefronts if self.ideal_wavefronts else 1.0

    @property
    def max_way(self) -> int:
        """The worst bank's distinct words in one phase (an `n`-way conflict)."""
        return max(self.word_conflicts.values(), default=0)


def threads_per_phase(nbytes: int) -> int:
    """Threads served together: all 32 up to 4 bytes each, 16 at 8 bytes, 8 at 16 bytes."""
    if nbytes not in (1, 2, 4, 8, 16):
        raise ValueError(f"a thread accesses 1, 2, 4, 8 or 16 bytes, not {nbytes}")
    return WARP_SIZE * BANK_BYTES // max(nbytes, BANK_BYTES)


def bank_conflicts(accesses: list[Access] | tuple[Access, ...]) -> ConflictReport:
    """Wavefronts a warp needs for `accesses` (one per active thread, all the same width)."""
    accesses = tuple(accesses)
    if not accesses:
        return ConflictReport((), (), 0, 0, (), {})
    widths = {a.nbytes for a in accesses}
    if len(widths) != 1:
        raise ValueError(f"one instruction has one access width, got {sorted(widths)}")
    per_phase = threads_per_phase(widths.pop())
    phase_of = {a.thread: a.thread // per_phase for a in accesses}
    phases: dict[int, list[Access]] = {}
    for a in accesses:
        phases.setdefault(phase_of[a.thread], []).append(a)
    wavefronts = 0
    thread_wave: dict[int, int] = {}
    word_conflicts: dict[int, int] = {}
    for phase in sorted(phases):
        # Distinct words per bank, in first-touch order: the k-th one waits for wavefront k.
        bank_words: dict[int, list[int]] = {}
        for a in phases[phase]:
            for word in a.words:
                listed = bank_words.setdefault(word % NUM_BANKS, [])
                if word not in listed:
                    listed.append(word)
        wavefronts += max(len(words) for words in bank_words.values())
        for words in bank_words.values():
            for word in words:
                word_conflicts[word] = max(word_conflicts.get(word, 0), len(words))
        for a in phases[phase]:
            thread_wave[a.thread] = max(bank_words[w % NUM_BANKS].index(w) for w in a.words)
    return ConflictReport(
        accesses=accesses,
        phases=tuple(tuple(a.thread for a in phases[p]) for p in sorted(phases)),
        wavefronts=wavefronts,
        ideal_wavefronts=len(phases),
        thread_wavefront=tuple(thread_wave[a.thread] for a in accesses),
        word_conflicts=word_conflicts,
    )


ACCESS_PATTERNS = ("row", "column", "fragment", "ldmatrix")


def row_access(geom: BufferGeometry, row: int, vector_bytes: int) -> list[Access]:
    """A warp reading consecutive vectors of the logical row-major order from (row, 0).

    Thread t reads elements [t*v, (t+1)*v) counted from the start of `row`; rows shorter than
    the warp's span continue into the next rows (like a vectorized row-major copy).
    """
    vec = _vector_elements(geom, vector_bytes)
    out = []
    for t in range(WARP_SIZE):
        flat = row * geom.cols + t * vec
        r, c = divmod(flat, geom.cols)
        if r >= geom.rows:
            break
        out.append(Access(t, int(geom.address(r, c)), vector_bytes))
    return out


def column_access(geom: BufferGeometry, col: int, vector_bytes: int, row0: int = 0) -> list[Access]:
    """A warp reading one vector per row down a column: thread t reads (row0 + t, col)."""
    vec = _vector_elements(geom, vector_bytes)
    col = col - col % vec  # vectors are aligned to their size
    return [
        Access(t, int(geom.address(row0 + t, col)), vector_bytes)
        for t in range(WARP_SIZE)
        if row0 + t < geom.rows
    ]


def fragment_access(geom: BufferGeometry, row0: int, col0: int) -> list[Access]:
    """A warp storing (or loading) one register pair of a WGMMA accumulator fragment.

    In the m64nNk16 accumulator (and mma.sync's C fragment), lane l holds two consecutive
    elements at row `l // 4` and column `2 * (l % 4)` of each 8x8 tile; one instruction moves
    one such pair per lane: 8 rows of 4 lanes, starting at (row0, col0).
    """
    out = []
    for lane in range(WARP_SIZE):
        r, c = row0 + lane // 4, col0 + 2 * (lane % 4)
        if r < geom.rows and c < geom.cols:
            out.append(Access(lane, int(geom.address(r, c)), 2 * geom.itemsize))
    return out


def ldmatrix_access(geom: BufferGeometry, row0: int, col0: int) -> list[Access]:
    """A warp's `ldmatrix.x4` / `stmatrix.x4` (SASS LDSM / STSM) of a 16x16 tile at (row0, col0).

    Lane l gives the address of one 16-byte row of an 8x8 matrix: lanes 0-7 rows 0-7 of
    columns 0-7, lanes 8-15 rows 8-15, lanes 16-23 rows 0-7 of columns 8-15, lanes 24-31 rows
    8-15 there (the A-operand order of mma). Eight lanes (128 bytes) are served per phase.
    """
    per_row = max(16 // geom.itemsize, 1)
    out = []
    for lane in range(WARP_SIZE):
        r = row0 + lane % 8 + 8 * ((lane // 8) % 2)
        c = col0 + per_row * (lane // 16)
        if r < geom.rows and c < geom.cols:
            out.append(Access(lane, int(geom.address(r, c)), 16))
    return out


def pattern_accesses(geom: BufferGeometry, pattern: str, index: int, vector_bytes: int) -> list[Access]:
    """Accesses of a named pattern: `row` index, `column` index, `fragment` tile index, or
    `ldmatrix` tile index.

    For `fragment`, tiles are 8x8 elements numbered row-major over the buffer (the vector
    width is fixed by the element type: two elements a lane); for `ldmatrix`, 16x16 tiles of
    16-byte rows (the width is fixed at 16 bytes).
    """
    if pattern == "row":
        return row_access(geom, index, vector_bytes)
    if pattern == "column":
        return column_access(geom, index, vector_bytes)
    if pattern == "fragment":
        tiles_per_row = max(geom.cols // 8, 1)
        tile_r, tile_c = divmod(index, tiles_per_row)
        return fragment_access(geom, 8 * tile_r, 8 * tile_c)
    if pattern == "ldmatrix":
        per_tile = 2 * max(16 // geom.itemsize, 1)
        tile_r, tile_c = divmod(index, max(geom.cols // per_tile, 1))
        return ldmatrix_access(geom, 16 * tile_r, per_tile * tile_c)
    raise ValueError(f"unknown access pattern {pattern!r}; use one of {ACCESS_PATTERNS}")


def _vector_elements(geom: BufferGeometry, vector_bytes: int) -> int:
    threads_per_phase(vector_bytes)  # validates the width
    if vector_bytes % geom.itemsize:
        raise ValueError(f"a {vector_bytes}-byte vector does not hold whole {geom.itemsize}-byte elements")
    return vector_bytes // geom.itemsize
