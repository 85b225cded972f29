"""benchmarks/probe_stream_k_reads.py: the library's tile order and stream-K plan replayed against
an LRU model of L2 (CPU only)."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).parent.parent / "benchmarks"))
from probe_stream_k_reads import _shape, dram_reads, unit_jobs  # noqa: E402

from mgpu_lab.kernels.gemm.pieces import GemmTiling  # noqa: E402

MB = 1 << 20


def _tiling(m: int, n: int, k: int, persistent: bool | str = "stream_k", **kw) -> GemmTiling:
    return GemmTiling(m, n, k, tile_m=128, tile_n=256, persistent=persistent, **kw)


@pytest.mark.parametrize("persistent", ["stream_k", False])
def test_the_replay_runs_every_k_step_of_every_tile_once(persistent):
    t = _tiling(640, 3584, 8192, persistent)  # 70 tiles: fewer than the 132 units, every tile cut
    steps = [(tile, k) for jobs in unit_jobs(t) for tile, first, count in jobs for k in range(first, first + count)]
    assert len(steps) == len(set(steps)) == t.tiles_m * t.tiles_n * t.k_steps


def test_with_room_for_everything_each_box_is_read_once():
    for persistent in ("stream_k", False):
        assert dram_reads(_tiling(640, 3584, 8192, persistent), 1 << 40) == pytest.approx(1.0)


def test_stream_k_pieces_out_of_step_read_the_shared_panels_again():
    """70 tiles on 132 units: the pieces of one column's tiles start at different k-steps, so the
    panel of B they share is read again once L2 cannot hold it between them; a one-tile grid runs
    in step and reads it once."""
    t_sk, t_grid = _tiling(640, 3584, 28672), _tiling(640, 3584, 28672, False)
    assert dram_reads(t_grid, 50 * MB) == pytest.approx(1.0)
    assert dram_reads(t_sk, 50 * MB) > 2.5
    # the same schedule over a short K fits its panels in L2
    assert dram_reads(_tiling(640, 3584, 8192), 50 * MB) < 1.2


def test_whole_rounds_run_in_step():
    """With more tiles than units the whole-tile rounds run side by side like a one-tile grid."""
    t = _tiling(4096, 4096, 4096, sms=64)  # 512 tiles on 64 units: 8 whole rounds, no split
    assert dram_reads(t, 50 * MB) == pytest.approx(dram_reads(_tiling(4096, 4096, 4096, False, sms=64), 50 * MB),
                                                   rel=0.05)


def test_clusters_are_refused_by_name():
    with pytest.raises(ValueError, match="cluster_m=2"):
        unit_jobs(_tiling(640, 3584, 8192, cluster_m=2))


def test_a_bad_shape_names_the_option():
    with pytest.raises(argparse.ArgumentTypeError, match=r"--shapes: expected MxNxK .*'572x3584'"):
        _shape("572x3584")
