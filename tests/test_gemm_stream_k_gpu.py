"""GPU tests of the stream-K GEMM (persistent='stream_k': the last waves' tiles split over K
between the persistent blocks, partial tiles handed over through a global workspace and flags):
bf16 on ragged, aligned and fewer-tiles-than-SMs shapes, B (k, n) and (n, k), multicast pairs,
teams (team_m), 256-row tiles, fused epilogues and FP8; repeated launches (the flags must be zero again after
each) give the same bits, and every flag is back at zero."""

from __future__ import annotations

import numpy as np
import pytest
from test_gemm_epilogues_gpu import _check
from test_gemm_fp8_gpu import _run as _run_fp8
from test_gemm_gpu import _run, random_operands, reference, relative_error
from test_hopper import host_f32, poison

from mgpu_lab.kernels.gemm import make_gemm

pytestmark = pytest.mark.gpu


@pytest.mark.parametrize("m, n, k, tiles", [
    (4096, 4096, 4096, {"tile_m": 128, "tile_n": 256}),  # 512 tiles: 2 whole rounds, 248 split
    (4000, 4000, 4000, {"tile_m": 128, "tile_n": 256}),  # ragged M, N and a K tail
    (2048, 2048, 8192, {"tile_m": 256, "tile_n": 128}),  # 128 tiles on 132 blocks: every tile split
    (1000, 3000, 640, {"tile_m": 128, "tile_n": 128}),  # short K: tiles cut into three
    (3000, 3000, 1000, {"tile_m": 64, "tile_n": 256}),  # one consumer
    (1024, 1024, 8192, {"tile_m": 128, "tile_n": 256}),  # 32 tiles on 132 units: owners sum up to 4 partials
    (512, 1024, 8192, {"tile_m": 128, "tile_n": 256}),  # 16 tiles: up to 8 (MAX_CONTRIBUTORS)
])
@pytest.mark.parametrize("transpose_b", [False, True], ids=["nn", "nt"])
def test_stream_k_gemm(m, n, k, tiles, transpose_b, rng):
    assert _run(m, n, k, rng, transpose_b, runs=1, persistent="stream_k", **tiles) <= 1e-2


@pytest.mark.parametrize("m, n, k, tiles", [
    (4096, 4096, 4096, {"tile_m": 128, "tile_n": 256}),
    (2944, 4000, 1000, {"tile_m": 128, "tile_n": 256}),  # 23 row tiles: the last pair's lower tile is past M
    (2100, 3000, 1000, {"tile_m": 256, "tile_n": 128}),
    # rows of A and of B (k, n) off the 128-byte line (k and n not multiples of 64), ragged
    # everywhere: what the model's L2 cap sends to multicast pairs
    (1310, 1960, 2136, {"tile_m": 128, "tile_n": 256}),
])
@pytest.mark.parametrize("transpose_b", [False, True], ids=["nn", "nt"])
def test_stream_k_multicast_pairs(m, n, k, tiles, transpose_b, rng):
    assert _run(m, n, k, rng, transpose_b, runs=1, persistent="stream_k", cluster_m=2, **tiles) <= 1e-2


@pytest.mark.parametrize("m, n, k, tiles, team_m", [
    (634, 3584, 4096, {"tile_m": 128, "tile_n": 256}, 5),  # one team a column, every tile split
    (600, 2000, 3000, {"tile_m": 128, "tile_n": 128}, 3),  # the second team's last tile is past m
    (1044, 4096, 2048, {"tile_m": 128, "tile_n": 256}, 3),  # whole rounds, then split ones
    (409, 1920, 8200, {"tile_m": 128, "tile_n": 192}, 4),  # ragged m and a K tail
])
@pytest.mark.parametrize("transpose_b", [False, True], ids=["nn", "nt"])
def test_stream_k_teams(m, n, k, tiles, team_m, transpose_b, rng):
    assert _run(m, n, k, rng, transpose_b, runs=1, persistent="stream_k", team_m=team_m, **tiles) <= 1e-2


@pytest.mark.parametrize("m, n, k, tile_n, transpose_b", [
    (5286, 536, 8656, 192, False),  # B (k, n)'s three boxes as two and one
    (7900, 848, 2504, 160, True),  # rows of A off the 128-byte line
])
def test_stream_k_multicast_pairs_of_other_widths(m, n, k, tile_n, transpose_b, rng):
    assert _run(m, n, k, rng, transpose_b, runs=1, persistent="stream_k", cluster_m=2, tile_m=128,
                tile_n=tile_n) <= 1e-2


@pytest.mark.parametrize("m, n, k, tiles", [
    (4096, 4096, 4096, {"tile_m": 256, "tile_n": 128}),
    (4000, 2816, 1000, {"tile_m": 128, "tile_n": 256}),  # 11 column tiles: the last pair's right tile is past N
    (1310, 1960, 2136, {"tile_m": 256, "tile_n": 128}),  # rows off the 128-byte line, ragged everywhere
    (1024, 1024, 8192, {"tile_m": 128, "tile_n": 256}),  # few pairs: owners sum several partials
    (3000, 352, 9216, {"tile_m": 128, "tile_n": 192}),  # span_pairs: one pair spans n, rows off the line
])
@pytest.mark.parametrize("transpose_b", [False, True], ids=["nn", "nt"])
def test_stream_k_multicast_a_pairs(m, n, k, tiles, transpose_b, rng):
    """cluster_n=2 with stream-K: pairs of column tiles share A; a split tile pair's partials
    hand over between the pairs' same-rank blocks."""
    assert _run(m, n, k, rng, transpose_b, runs=1, persistent="stream_k", cluster_n=2, **tiles) <= 1e-2


def test_stream_k_fused_epilogue_and_fp8(rng):
    """The owner applies the epilogue (and FP8's scales) to the summed tile."""
    assert _check(3000, 4104, 1000, rng, tiles={"tile_m": 128, "tile_n": 256, "persistent": "stream_k"},
                  bias="bfloat16", activation="gelu", residual="bfloat16", scale=True) <= 1e-2
    assert _run_fp8(4000, 4000, 4096, rng, tiles={"tile_m": 128, "tile_n": 256, "persistent": "stream_k"}) <= 2e-2
    assert _run_fp8(4096, 4096, 4096, rng, tiles={"tile_m": 128, "tile_n": 256, "persistent": "stream_k",
                                                  "cluster_m": 2}) <= 2e-2


def test_stream_k_repeats_bit_for_bit_and_leaves_the_flags_zero(rng):
    """Each partial is summed in a fixed order, so launches agree to the bit; each owner resets
    the flags it waited for, so a second launch cannot read a stale one."""
    import cupy

    m, n, k = 4096, 4096, 4096
    kern = make_gemm(m, n, k, tile_m=128, tile_n=256, persistent="stream_k")
    a, b = random_operands(m, n, k, rng, False, "bfloat16")
    a, b = cupy.asarray(a), cupy.asarray(b)
    outs = []
    for _ in range(3):
        out = poison(cupy, (m, n), "bfloat16")
        kern(a, b, out=out)
        outs.append(out)
    workspace, flags = kern.scratch_buffers()
    assert int(cupy.count_nonzero(flags)) == 0
    bits = [o.view(cupy.uint16).get() for o in outs]
    np.testing.assert_array_equal(bits[0], bits[1])
    np.testing.assert_array_equal(bits[0], bits[2])
    assert relative_error(host_f32(outs[0]), reference(a.get(), b.get(), False)) <= 1e-2


def test_stream_k_as_a_torch_op(rng):
    """The op keeps its workspace and zeroed flags per stream (torch's allocator, zero-filled once):
    calls back to back, each on the flags the one before left zero, and a CUDA graph replay (its
    own buffers, taken during capture) each give the product."""
    torch = pytest.importorskip("torch")
    m, n, k = 2048, 4096, 1024
    op = make_gemm(m, n, k, transpose_b=True, tile_m=128, tile_n=256, persistent="stream_k").as_torch_op(
        "mgpu_stream_k_test::linear")
    a = torch.from_numpy(rng.standard_normal((m, k), dtype=np.float32)).to("cuda", torch.bfloat16)
    b = torch.from_numpy(rng.standard_normal((n, k), dtype=np.float32)).to("cuda", torch.bfloat16)
    want = a.float() @ b.float().T
    for _ in range(3):
        got = op(a, b)
        assert float((got.float() - want).norm() / want.norm()) <= 1e-2
    graph = torch.cuda.CUDAGraph()
    with torch.cuda.graph(graph):
        captured = op(a, b)
    captured.fill_(float("nan"))
    graph.replay()
    torch.cuda.synchronize()
    assert float((captured.float() - want).norm() / want.norm()) <= 1e-2
