"""Smem layout transforms on the CPU: the index arithmetic they emit, evaluated on the host."""

from __future__ import annotations

import pytest
from host_arith import evaluate
from test_builder import block, layout  # noqa: F401 - the fixture and the layout reader

from mgpu_lab import dsl
from mgpu_lab.dsl import c


@pytest.mark.parametrize("index", [(37, 50, 123), (0, 7, 15), (5, 63, 127)])
def test_tile_transform_index_matches_its_shape(block, index):  # noqa: F811 - the fixture
    tile = dsl.TileTransform((8, 16))
    assert tile.transform_shape((9, 64, 128)) == (9, 8, 8, 8, 16)
    got = [evaluate(v) for v in tile.transform_index([c(i) for i in index])]
    b, row, col = index
    assert got == [b, row // 8, col // 16, row % 8, col % 16]


def test_tile_transform_index_of_exactly_the_tiled_dims(block):  # noqa: F811
    tile = dsl.TileTransform((4,))
    assert [evaluate(v) for v in tile.transform_index([c(2), c(9)])] == [2, 2, 1]
    assert [evaluate(v) for v in dsl.TileTransform((4, 8)).transform_index([c(9), c(21)])] == [2, 2, 1, 5]


def test_tile_transform_shape_errors():
    with pytest.raises(ValueError, match=r"^TileTransform\(8, 16\): shape \(64,\) has fewer than 2 dims$"):
        dsl.TileTransform((8, 16)).transform_shape((64,))
    with pytest.raises(ValueError, match=r"^TileTransform\(8, 16\): dimension 100 is not a multiple of 16$"):
        dsl.TileTransform((8, 16)).transform_shape((64, 100))


def test_transpose_transform_index_shape_and_view(block):  # noqa: F811
    t = dsl.TransposeTransform((1, 0))
    assert [evaluate(v) for v in t.transform_index([c(3), c(11)])] == [11, 3]
    assert t.transform_shape((64, 128)) == (128, 64)
    assert layout(t.apply(block)) == ([128, 64], [1, 128], 0)
    with pytest.raises(ValueError, match="is not a permutation"):
        dsl.TransposeTransform((0, 2))


def test_memref_view_errors_in_full(block):  # noqa: F811
    with pytest.raises(ValueError, match=r"^memref_unfold: factors \[3, None\] do not divide dimension 1 of size 128$"):
        dsl.memref_unfold(block, 1, [3, None])
    with pytest.raises(IndexError, match=r"^memref_unsqueeze: dim must be in \[0, 2\], got 3$"):
        dsl.memref_unsqueeze(block, 3)
    with pytest.raises(IndexError, match=r"^memref_slice: 3 indices for a rank-2 memref$"):
        dsl.memref_slice(block, (0, 0, 0))


def test_index_operators_emit_arith_in_operand_order(block):  # noqa: F811
    """Typed index values (builder/values.py): a Python int on either side is coerced and stays on
    its side of the emitted op (12 ^ x and x ^ 12 agree, 7 - x is not x - 7)."""
    x = c(10)
    for result, expected in ((3 * x, 30), (x * 3, 30), (12 ^ x, 6), (x ^ 12, 6), (7 + x, 17), (x // 3, 3),
                             (x % 3, 1), (x & 6, 2), (100 * (x + 1), 1100), (13 - x, 3), (x - 4, 6)):
        assert evaluate(result) == expected
    product = (3 * x).owner  # the int operand stays on its side
    assert product.name == "arith.muli" and evaluate(product.operands[0]) == 3
    difference = (13 - x).owner
    assert difference.name == "arith.subi" and evaluate(difference.operands[0]) == 13


def test_wgmma_row_and_column_layouts_have_one_index_per_register(block):  # noqa: F811
    from mgpu_lab.builder.layouts import WGMMAColLayout, WGMMARowLayout

    for n in (8, 16, 64, 256):
        assert len(WGMMAColLayout(n).indices()) == WGMMAColLayout(n).registers == n // 8
    for m in (64, 128):
        assert len(WGMMARowLayout(m).indices()) == WGMMARowLayout(m).registers
