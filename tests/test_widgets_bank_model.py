"""Swizzle and bank-conflict arithmetic (pure Python, no widgets)."""

from __future__ import annotations

import numpy as np
import pytest

from mgpu_lab.widgets.bank_model import (
    Access,
    BufferGeometry,
    bank_conflicts,
    bank_of,
    column_access,
    fragment_access,
    pattern_accesses,
    row_access,
    swizzle_address,
    swizzle_period,
)


def test_swizzle_128_permutes_16_byte_chunks_by_line_index() -> None:
    # Line r (128 bytes) of an aligned 1024-byte atom: chunk c lands in chunk c ^ (r % 8).
    for line in range(16):
        for chunk in range(8):
            logical = line * 128 + chunk * 16 + 5
            assert swizzle_address(logical, 128) == line * 128 + (chunk ^ (line % 8)) * 16 + 5


def test_swizzle_matches_cutlass_formula_on_known_values() -> None:
    # Swizzle<3,4,3>(0x90): bits 7..9 = 1 XOR into bits 4..6 = 1 -> 0.
    assert swizzle_address(0x90, 128) == 0x80
    assert swizzle_address(0x3F0, 128) == 0x380  # line 7, chunk 7 -> chunk 0
    # Swizzle<2,4,3>: only chunk bits 4..5 change, from line bits 7..8.
    assert swizzle_address(0x180 + 0x10, 64) == 0x180 + 0x20  # line 3: chunk 1 ^ 3 = 2
    assert swizzle_address(0x200 + 0x10, 64) == 0x210  # line 4: bits 7..8 are 0
    # Swizzle<1,4,3>: bit 4 ^= bit 7.
    assert swizzle_address(0x80, 32) == 0x90
    assert swizzle_address(0x100, 32) == 0x100


@pytest.mark.parametrize("mode", [0, 32, 64, 128])
def test_swizzle_is_an_involution_and_a_permutation_of_its_period(mode: int) -> None:
    addresses = np.arange(4096)
    swizzled = swizzle_address(addresses, mode)
    assert np.array_equal(swizzle_address(swizzled, mode), addresses)
    assert sorted(swizzled.tolist()) == addresses.tolist()
    period = swizzle_period(mode) or 128
    # Stays within its period block and never moves bytes within a 16-byte chunk.
    assert np.array_equal(swizzled // period, addresses // period)
    assert np.array_equal(swizzled % 16, addresses % 16)


def test_unknown_swizzle_mode_is_rejected() -> None:
    with pytest.raises(ValueError, match="swizzle must be one of"):
        swizzle_address(0, 96)


def test_column_access_of_8_bf16_rows_128b_swizzle_is_conflict_free() -> None:
    # A 64x64 bf16 tile: 128-byte rows. 8 threads read 16 bytes of column 0 from rows 0..7.
    plain = BufferGeometry(base=0, rows=8, cols=64, itemsize=2, swizzle=0)
    swz = BufferGeometry(base=0, rows=8, cols=64, itemsize=2, swizzle=128)
    unswizzled = bank_conflicts(column_access(plain, col=0, vector_bytes=16))
    swizzled = bank_conflicts(column_access(swz, col=0, vector_bytes=16))
    assert unswizzled.wavefronts == 8 and unswizzled.max_way == 8
    assert swizzled.wavefronts == 1 and swizzled.degree == 1.0


def test_scalar_column_access_conflicts_by_swizzle_mode() -> None:
    # 32 threads read one bf16 each down a column of 32 rows of 128 bytes.
    ways = {
        mode: bank_conflicts(column_access(BufferGeometry(0, 32, 64, 2, mode), 0, 2)).max_way
        for mode in (0, 32, 64, 128)
    }
    # Unswizzled: every row hits bank 0. Each swizzle mode spreads the rows over 2, 4, 8 chunks.
    assert ways == {0: 32, 32: 16, 64: 8, 128: 4}


def test_wgmma_fragment_store_conflicts_without_swizzle_only() -> None:
    plain = BufferGeometry(0, 64, 64, 2, 0)
    swz = BufferGeometry(0, 64, 64, 2, 128)
    assert bank_conflicts(fragment_access(plain, 0, 0)).max_way == 8
    assert bank_conflicts(fragment_access(swz, 0, 0)).degree == 1.0
    # f32 accumulators: 8-byte pairs are served by half-warps; 4 rows share a bank in each.
    f32 = bank_conflicts(fragment_access(BufferGeometry(0, 64, 32, 4, 0), 0, 0))
    assert f32.ideal_wavefronts == 2 and f32.wavefronts == 8


def test_row_access_is_conflict_free_with_and_without_swizzle() -> None:
    for mode in (0, 128):
        geom = BufferGeometry(0, 64, 64, 2, mode)
        for width in (4, 8, 16):
            report = bank_conflicts(row_access(geom, 3, width))
            assert report.degree == 1.0, (mode, width)
            assert report.ideal_wavefronts == width // 4


def test_broadcast_of_one_word_is_one_wavefront() -> None:
    report = bank_conflicts([Access(t, 64, 4) for t in range(32)])
    assert report.wavefronts == 1 and report.max_way == 1


def test_thread_wavefront_orders_conflicting_words() -> None:
    # Threads 0..3 hit bank 0 in four different words.
    report = bank_conflicts([Access(t, 128 * t, 4) for t in range(4)])
    assert report.thread_wavefront == (0, 1, 2, 3)
    assert report.word_conflicts == {0: 4, 32: 4, 64: 4, 96: 4}


def test_geometry_element_at_inverts_address() -> None:
    geom = BufferGeometry.from_shape(1024, (2, 64, 64), 2, 128)
    assert (geom.rows, geom.cols, geom.aligned) == (128, 64, True)
    rows, cols = np.meshgrid(np.arange(128), np.arange(64), indexing="ij")
    r, c = geom.element_at(geom.address(rows, cols))
    assert np.array_equal(r, rows) and np.array_equal(c, cols)
    assert not BufferGeometry(512, 8, 64, 2, 128).aligned
    assert bank_of(geom.address(1, 0)) == 4  # row 1, chunk 0 -> chunk 1: bytes 16..19


def test_pattern_accesses_dispatch_and_errors() -> None:
    geom = BufferGeometry(0, 64, 64, 2, 128)
    assert pattern_accesses(geom, "fragment", 9, 4) == fragment_access(geom, 8, 8)
    assert pattern_accesses(geom, "row", 2, 16) == row_access(geom, 2, 16)
    with pytest.raises(ValueError, match="unknown access pattern"):
        pattern_accesses(geom, "diagonal", 0, 4)
    with pytest.raises(ValueError, match="whole 4-byte elements"):
        row_access(BufferGeometry(0, 8, 8, 4, 0), 0, 2)
    with pytest.raises(ValueError, match="one access width"):
        bank_conflicts([Access(0, 0, 4), Access(1, 4, 8)])
