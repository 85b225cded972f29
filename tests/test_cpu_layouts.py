"""Register layouts, checked thread by thread on the host.

A layout's `indices()` and `owner()` compute on whatever `thread_in_warpgroup()` and `lane_idx()`
return; typed index values and Python ints share the operators. Here those two return the ints
of one thread at a time, so the very arithmetic a kernel emits is run for all 128 threads of
the warpgroup and compared with the layouts' documented mapping (see builder/layouts.py).
"""

from __future__ import annotations

from collections import Counter

import numpy as np
import pytest

from mgpu_lab.builder import layouts
from mgpu_lab.builder.layouts import M_TILE, WGMMAColLayout, WGMMAFragLayout, WGMMARowLayout, WGStridedLayout


def per_thread(monkeypatch, layout) -> list[tuple[list[list[int]], object]]:
    """[(indices, owner)] of every thread 0..127 of the warpgroup."""
    out = []
    for tid in range(128):
        monkeypatch.setattr(layouts, "thread_in_warpgroup", lambda tid=tid: tid)
        monkeypatch.setattr(layouts, "lane_idx", lambda tid=tid: tid % 32)
        out.append((layout.indices(), layout.owner()))
    return out


@pytest.mark.parametrize("shape, vec", [((4, 8, 32), 4), ((16, 64), 2), ((2048,), 8)])
def test_strided_layout_is_row_major_vec_elements_per_thread(monkeypatch, shape, vec) -> None:
    layout = WGStridedLayout(shape, vec)
    held = Counter()
    for tid, (indices, owner) in enumerate(per_thread(monkeypatch, layout)):
        assert owner is None and len(indices) == layout.registers
        for i, index in enumerate(indices):
            flat = (i * 128 + tid) * vec
            assert [int(v) for v in index] == [int(v) for v in np.unravel_index(flat, shape)]
            held.update(range(flat, flat + vec))
    assert held == Counter(range(int(np.prod(shape))))  # every element once


@pytest.mark.parametrize("m, n", [(64, 8), (128, 32)])
def test_wgmma_fragment_layout_holds_each_column_pair_once(monkeypatch, m, n) -> None:
    layout = WGMMAFragLayout(n, m)
    held = Counter()
    for tid, (indices, owner) in enumerate(per_thread(monkeypatch, layout)):
        warp, lane = divmod(tid, 32)
        assert owner is None and len(indices) == layout.registers
        for i in range(m // M_TILE):
            for j in range(n // 8):
                for h in range(2):
                    row, col = indices[layout.index(i, j, h)]
                    assert (row, col) == (M_TILE * i + 16 * warp + lane // 4 + 8 * h, 8 * j + 2 * (lane % 4))
                    held.update([(row, col), (row, col + 1)])
    assert held == Counter((r, c) for r in range(m) for c in range(n))


def test_wgmma_row_layout_one_storing_copy_per_row(monkeypatch) -> None:
    m = 128
    layout = WGMMARowLayout(m)
    holders, owners = Counter(), Counter()
    for tid, (indices, owner) in enumerate(per_thread(monkeypatch, layout)):
        warp, lane = divmod(tid, 32)
        rows = [index[0] for index in indices]
        assert rows == [M_TILE * i + 16 * warp + lane // 4 + 8 * h for i in range(m // M_TILE) for h in range(2)]
        assert owner == (lane % 4 == 0)
        holders.update(rows)
        if owner:
            owners.update(rows)
    assert holders == Counter({r: 4 for r in range(m)})  # the 4 lanes sharing a row
    assert owners == Counter(range(m))


def test_wgmma_col_layout_one_storing_copy_per_column_pair(monkeypatch) -> None:
    n = 32
    layout = WGMMAColLayout(n)
    owners = Counter()
    for tid, (indices, owner) in enumerate(per_thread(monkeypatch, layout)):
        lane = tid % 32
        cols = [index[0] for index in indices]
        assert cols == [8 * j + 2 * (lane % 4) for j in range(n // 8)]
        assert owner == (tid < 4)
        if owner:
            owners.update(cols)
    assert owners == Counter(range(0, n, 2))


@pytest.mark.parametrize("make, name", [(lambda: WGMMAFragLayout(12), "WGMMAFragLayout: n"),
                                        (lambda: WGMMAFragLayout(8, 96), "WGMMAFragLayout: m"),
                                        (lambda: WGMMARowLayout(32), "WGMMARowLayout: m"),
                                        (lambda: WGMMAColLayout(4), "WGMMAColLayout: n")])
def test_layout_errors_name_the_layout(make, name) -> None:
    with pytest.raises(ValueError, match=f"^{name} "):
        make()
