"""GPU tests of clusters: TMA multicast tiles (every block of a cluster must hold the whole tile
though each loaded only its part), and a one-slot multicast pipeline whose consumers release the
slot in both blocks with peer mbarrier arrivals. Fresh random inputs, NaN-poisoned outputs."""

from __future__ import annotations

import numpy as np
import pytest
from test_multicast import TILE, make_multicast_pipeline, make_multicast_tile

from mgpu_lab.builder.dtypes import numpy_dtype

pytestmark = pytest.mark.gpu
BF16 = numpy_dtype("bfloat16")


def _poisoned(cupy, shape):
    out = cupy.empty(shape, BF16)
    out.view(np.uint16).fill(0x7FC0)
    return out


@pytest.mark.parametrize("cluster, collective, mode", [
    ((2, 1, 1), ("x",), "collective"), ((2, 2, 1), ("y",), "collective"), ((2, 2, 1), ("x", "y"), "collective"),
    ((4, 1, 1), "x", "collective"), ((2, 1, 1), ("x",), "mask"),
])
def test_multicast_tile(cluster, collective, mode, rng):
    import cupy

    clusters = 2
    k = make_multicast_tile(cluster, collective, mode, clusters=clusters)
    x = rng.standard_normal((clusters, *TILE)).astype(BF16)
    grid = (cluster[0] * clusters, cluster[1], cluster[2])
    blocks = grid[0] * grid[1] * grid[2]
    out = _poisoned(cupy, (blocks, *TILE))
    k(cupy.asarray(x), out=out)
    got = out.get()
    for block in range(blocks):
        bx = block % grid[0]
        want = x[bx // cluster[0]]  # the tile of this block's cluster
        np.testing.assert_array_equal(got[block].view(np.uint16), want.view(np.uint16), err_msg=f"block {block}")


def test_multicast_pipeline_with_peer_release(rng):
    import cupy

    iterations, clusters = 6, 2
    k = make_multicast_pipeline(iterations, clusters)
    for _ in range(2):
        x = rng.standard_normal((clusters, iterations, *TILE)).astype(BF16)
        out = _poisoned(cupy, (iterations, 2 * clusters, *TILE))
        k(cupy.asarray(x), out=out)
        got = out.get()
        for it in range(iterations):
            for block in range(2 * clusters):
                np.testing.assert_array_equal(got[it, block].view(np.uint16), x[block // 2, it].view(np.uint16),
                                              err_msg=f"iteration {it}, block {block}")
