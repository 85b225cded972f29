"""l2_replay: the kernel's tile order and stream-K plan replayed against an LRU model of L2, and the
probe that prints it (benchmarks/probe_stream_k_reads.py). CPU only."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

import pytest

from mgpu_lab.kernels.gemm import l2_replay
from mgpu_lab.kernels.gemm.l2_replay import operand_reads, unit_jobs
from mgpu_lab.kernels.gemm.pieces import GemmTiling, tile_origin
from mgpu_lab.kernels.gemm.tile_order import tile_position

sys.path.insert(0, str(Path(__file__).parent.parent / "benchmarks"))
from probe_stream_k_reads import _shape  # noqa: E402

MB = 1 << 20


def _reads(m: int, n: int, k: int, stream_k: bool = True, l2: int = 50 * MB, units: int = 132,
           tile_m: int = 128, tile_n: int = 256) -> float:
    return operand_reads(-(-m // tile_m), -(-n // tile_n), -(-k // 64), tile_m, tile_n, 8, units, stream_k, l2)


@pytest.mark.parametrize("tiles_m,tiles_n,group_m", [(5, 14, 8), (13, 7, 8), (16, 16, 16), (3, 40, 1), (9, 2, 4)])
def test_the_replay_numbers_tiles_as_the_kernel_does(tiles_m, tiles_n, group_m):
    t = GemmTiling(tiles_m * 128, tiles_n * 128, 1024, tile_m=128, tile_n=128, group_m=group_m)
    for tile in range(tiles_m * tiles_n):
        row, col = tile_position(tile, tiles_m, tiles_n, group_m)
        assert tile_origin(t, tile) == (row * 128, col * 128)
    assert len({tile_position(tile, tiles_m, tiles_n, group_m) for tile in range(tiles_m * tiles_n)}) \
        == tiles_m * tiles_n


@pytest.mark.parametrize("stream_k", [True, False])
def test_every_k_step_of_every_tile_runs_once(stream_k):
    jobs = unit_jobs(70, 448, 132, stream_k)  # 70 tiles on 132 units: every stream-K tile cut
    steps = [(tile, k) for unit in jobs for tile, first, count in unit for k in range(first, first + count)]
    assert len(steps) == len(set(steps)) == 70 * 448


def test_with_room_for_everything_each_box_is_read_once():
    for stream_k in (True, False):
        assert _reads(640, 3584, 8192, stream_k, l2=1 << 40) == pytest.approx(1.0)


def test_stream_k_pieces_out_of_step_read_the_shared_panels_again():
    """70 tiles on 132 units: the pieces of one column's tiles start at different k-steps, so the
    panel of B they share is read again once L2 cannot hold it between them; a one-tile grid runs
    in step and reads it once; over a short K the panels stay in L2."""
    assert _reads(640, 3584, 28672, stream_k=False) == pytest.approx(1.0)
    assert _reads(640, 3584, 28672) > 2.5
    assert _reads(640, 3584, 8192) < 1.2


def test_whole_rounds_run_in_step():
    """With more tiles than units the whole-tile rounds run side by side like a one-tile grid."""
    assert _reads(4096, 4096, 4096, units=64) == pytest.approx(_reads(4096, 4096, 4096, False, units=64), rel=0.05)


def test_chunks_read_as_single_steps_do(monkeypatch):
    """CHUNK_STEPS k-steps replayed at once keep what a step-by-step replay finds."""
    chunked = _reads(572, 3584, 28672)
    operand_reads.cache_clear()
    monkeypatch.setattr(l2_replay, "CHUNK_STEPS", 1)
    try:
        assert chunked == pytest.approx(_reads(572, 3584, 28672), rel=0.05)
    finally:
        operand_reads.cache_clear()


def test_the_probe_names_a_bad_shape():
    with pytest.raises(argparse.ArgumentTypeError, match=r"--shapes: expected MxNxK .*'572x3584'"):
        _shape("572x3584")
