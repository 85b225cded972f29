"""The bank view of one buffer: which logical element sits in each of the 32 banks of each
128-byte line, and which words a chosen warp access touches with how much conflict.

Rows of the grid are 128-byte lines of shared memory (absolute line numbers), columns are the
32 banks. A cell names the logical element (row, col) whose bytes start that 4-byte word, and
carries the element's 16-byte chunk within its row, which the views colour so the swizzle's
permutation of chunks is visible at a glance.

The access is a kernel instruction whose lane addresses were derived from its own arithmetic
(`DERIVED`, `smem_instructions`), a hand-picked pattern (`bank_model.ACCESS_PATTERNS`), which
the summary calls hypothetical, or `UNKNOWN`: a kernel instruction whose lane addresses were not
derived, for which the grid shows the buffer's layout and no touched words, and the summary says why.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from mgpu_lab.compiler.compiled_kernel import SmemBuffer, dtype_itemsize
from mgpu_lab.widgets.bank_model import (
    ACCESS_PATTERNS,
    Access,
    BANK_BYTES,
    LINE_BYTES,
    NUM_BANKS,
    BufferGeometry,
    ConflictReport,
    bank_conflicts,
    pattern_accesses,
    threads_per_phase,
)
from mgpu_lab.widgets.smem_instructions import DERIVED, UNKNOWN

WINDOW_LINES = 32  # 4 KiB of shared memory: four 1024-byte swizzle atoms


@dataclass(frozen=True)
class BankGrid:
    """Grid of `lines` x 32 cells starting at absolute 128-byte line `first_line`."""

    buffer: SmemBuffer
    geometry: BufferGeometry
    pattern: str
    index: int
    vector_bytes: int
    first_line: int
    labels: list[list[str]]  # "" outside the buffer
    chunks: list[list[int]]  # logical 16-byte chunk of the element in the row, -1 outside
    hits: dict[tuple[int, int], tuple[int, tuple[int, ...]]]  # (line, bank) -> (ways, threads)
    report: ConflictReport
    note: str = ""  # for an UNKNOWN access: which instruction, and why its pattern is unknown

    def summary(self) -> str:
        """One sentence: conflict-free, or how many ways and wavefronts; or why it is unknown."""
        r = self.report
        if self.pattern == UNKNOWN:
            return self.note or "access pattern unknown"
        if not r.accesses:
            return "the access touches no element of this buffer"
        if self.pattern == DERIVED:
            width = r.accesses[0].nbytes
            head = f"{self.note}: {len(r.accesses)} lanes x {width} B, from the kernel's own addresses: "
            if r.degree == 1.0:
                return head + f"conflict-free, {r.wavefronts} wavefront{'s' if r.wavefronts > 1 else ''} (the minimum)"
            return head + f"{r.max_way}-way bank conflict, {r.wavefronts} wavefronts instead of {r.ideal_wavefronts}"
        what = {
            "row": f"row {self.index}",
            "column": f"column {self.index}",
            "fragment": f"WGMMA accumulator tile {self.index}",
            "ldmatrix": f"ldmatrix.x4 (LDSM) tile {self.index}",
        }[self.pattern]
        width = r.accesses[0].nbytes
        phases = f"{len(r.phases)} phase{'s' if len(r.phases) > 1 else ''} of {threads_per_phase(width)} threads"
        # A hand-picked pattern is a what-if: say so, so it is not read as the kernel's access.
        head = f"hypothetical {what}, {len(r.accesses)} threads x {width} B ({phases}): "
        if r.degree == 1.0:
            return head + f"conflict-free, {r.wavefronts} wavefront{'s' if r.wavefronts > 1 else ''} (the minimum)"
        return head + f"{r.max_way}-way bank conflict, {r.wavefronts} wavefronts instead of {r.ideal_wavefronts}"


def geometry_of(buf: SmemBuffer) -> BufferGeometry:
    """The 2-D geometry of a buffer (leading dimensions folded into rows)."""
    return BufferGeometry.from_shape(buf.offset, tuple(buf.shape), dtype_itemsize(buf.dtype), buf.swizzle)


def vector_choices(buf: SmemBuffer) -> list[int]:
    """Per-thread access widths that hold whole elements of the buffer's dtype."""
    size = dtype_itemsize(buf.dtype)
    return [w for w in (1, 2, 4, 8, 16) if w >= size and w % size == 0]


def pattern_index_limit(buf: SmemBuffer, pattern: str) -> int:
    """Largest valid `index` for a pattern (rows, columns or 8x8 tiles of the buffer)."""
    g = geometry_of(buf)
    if pattern in (UNKNOWN, DERIVED):
        return 0
    if pattern == "row":
        return max(g.rows - 1, 0)
    if pattern == "column":
        return max(g.cols - 1, 0)
    if pattern == "ldmatrix":
        per_tile = 2 * max(16 // g.itemsize, 1)
        return max(-(-g.rows // 16) * max(g.cols // per_tile, 1) - 1, 0)
    return max(-(-g.rows // 8) * max(g.cols // 8, 1) - 1, 0)


def bank_grid(
    buf: SmemBuffer, pattern: str, index: int, vector_bytes: int, lines: int = WINDOW_LINES, note: str = "",
    accesses: list[Access] | None = None,
) -> BankGrid:
    """Grid and conflicts for `pattern` ("row", "column", "fragment", "ldmatrix") at `index`, for
    `DERIVED` (a kernel instruction's own `accesses`, `note` naming it), or the bare grid for
    `UNKNOWN` (then `note` is the summary)."""
    if pattern not in ACCESS_PATTERNS and pattern not in (UNKNOWN, DERIVED):
        raise ValueError(f"unknown access pattern {pattern!r}; use one of {ACCESS_PATTERNS}")
    geom = geometry_of(buf)
    index = min(max(index, 0), pattern_index_limit(buf, pattern))
    if pattern == DERIVED:
        accesses = list(accesses or [])
    else:
        accesses = [] if pattern == UNKNOWN else pattern_accesses(geom, pattern, index, vector_bytes)
    report = bank_conflicts(accesses)

    # The window: whole 1024-byte atoms from the one holding the access's first word.
    buf_first = buf.offset // LINE_BYTES
    buf_last = (buf.offset + max(buf.nbytes, 1) - 1) // LINE_BYTES
    touched = min((a.address for a in accesses), default=buf.offset) // LINE_BYTES
    first = max(buf_first, touched - touched % 8)
    first = max(buf_first, min(first, buf_last - lines + 1))
    count = min(lines, buf_last - first + 1)

    words = (first * LINE_BYTES + np.arange(count * NUM_BANKS) * BANK_BYTES).reshape(count, NUM_BANKS)
    inside = (words >= buf.offset) & (words < buf.offset + buf.nbytes)
    rows, cols = geom.element_at(words)
    chunk = (cols * geom.itemsize) // 16
    labels = [
        [f"{r},{c}" if ok else "" for r, c, ok in zip(rrow, crow, irow)]
        for rrow, crow, irow in zip(rows.tolist(), cols.tolist(), inside.tolist())
    ]
    chunks = np.where(inside, chunk, -1).tolist()

    threads_at: dict[int, list[int]] = {}
    for a in accesses:
        for word in a.words:
            threads_at.setdefault(word, []).append(a.thread)
    hits = {}
    for word, threads in threads_at.items():
        line, byte = divmod(word * BANK_BYTES, LINE_BYTES)
        if first <= line < first + count:
            hits[(line - first, byte // BANK_BYTES)] = (report.word_conflicts[word], tuple(threads))
    return BankGrid(buf, geom, pattern, index, vector_bytes, first, labels, chunks, hits, report, note)
