"""What keeps a GEMM's first build short (CPU: compile for sm_90a, read PTX and SASS).

ptxas and LLVM take most of a build, in proportion to the code: each kernel traces its
mainloop once, and a k-loop of a few steps known at build time is not unrolled in full.
"""

from __future__ import annotations

import warnings

from mgpu_lab.kernels.gemm import make_gemm


def build(m, n, k, **kw):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        return make_gemm(m, n, k, target="sm_90a", use_cache=False, **kw).compiled


def test_stream_k_traces_its_mainloop_once():
    # whole tiles and split segments share one loop: as many wgmmas in the SASS as the plain
    # persistent kernel of the same tiles (LLVM peels the first k-step of each)
    tiles = {"tile_m": 128, "tile_n": 256}
    stream_k = build(5259, 12944, 13448, transpose_b=True, persistent="stream_k", **tiles)
    persistent = build(5259, 12944, 13448, transpose_b=True, persistent=True, **tiles)
    assert stream_k.sass.count("HGMMA") == persistent.sass.count("HGMMA") > 0
    # the split tiles' partials add code of their own, one copy (with a copy of the mainloop
    # and of the sum per possible contributor, this kernel's PTX was 4.4x the persistent one's)
    assert len(stream_k.ptx.splitlines()) < 2.5 * len(persistent.ptx.splitlines())


def test_a_short_static_k_loop_stays_a_loop():
    # K = 352: 6 k-steps of 4 wgmmas (a consumer's 64 x 256 rows); LLVM unrolled all 24
    short = build(6292, 512, 352, persistent=False, tile_m=128, tile_n=256)
    assert '.pragma "nounroll"' in short.ptx
    assert short.sass.count("HGMMA") == 4
    # a long static loop keeps LLVM's peeled first step (and no pragma on it; the one pragma is
    # the producer's loop, always rolled)
    long = build(6292, 512, 4096, persistent=False, tile_m=128, tile_n=256)
    assert long.ptx.count('.pragma "nounroll"') == 1 and long.sass.count("HGMMA") == 8


def test_a_short_static_k_loop_stays_a_loop_in_the_producer_too():
    # K = 472: 8 k-steps. Unrolled in full, the producer of a multicast pair (a box of A and half
    # of B's, both blocks' barriers, per step) spilled 76 bytes of its 40 registers.
    pair = build(3009, 3296, 472, transpose_b=True, persistent=True, cluster_m=2, tile_m=128, tile_n=128)
    assert pair.ptx.count('.pragma "nounroll"') >= 2  # the producer's loop and the consumers'
    assert pair.resources.spill_stores_bytes == pair.resources.spill_loads_bytes == 0
    assert pair.sass.count("UTMALDG") <= 4  # one step's boxes (A, half of B), not eight steps'


def test_two_row_tiles_per_consumer_start_without_a_drain():
    # tile_m 256: each consumer issues two 64-row wgmmas per k-step. Their zeros used to be
    # materialized between the two, and ptxas waited for the first group there (C7517) in every
    # tile's first k-step; the 13743x14952x15208 stream-K kernel also spilled 32 bytes.
    for shape, tiles in (((5854, 552, 2896), {"persistent": False}), ((2949, 4224, 2488), {"persistent": True}),
                         ((13743, 14952, 15208), {"persistent": "stream_k"})):
        k = build(*shape, transpose_b=True, tile_m=256, tile_n=128, **tiles)
        assert "C7517" not in k.ptxas_log, shape
        assert k.resources.spill_stores_bytes == 0, shape


def test_the_producers_static_k_loop_stays_a_loop_past_a_few_steps():
    # K = 536: 9 k-steps, past what the consumers keep rolled. LLVM's partial unroll of the
    # producer's loop spilled pairs sharing A (56 bytes at 128 x 192, 84 at 128 x 128, B (k, n);
    # 112 bytes at 128 x 192 B (n, k) in 192-wide B pairs): the producer's loop is always rolled.
    for tiles, b in (({"tile_n": 192, "cluster_n": 2}, False), ({"tile_n": 128, "cluster_n": 2}, False),
                     ({"tile_n": 192, "cluster_m": 2}, True)):
        pair = build(2142, 20288, 536, transpose_b=b, persistent=True, tile_m=128, **tiles)
        assert pair.resources.spill_stores_bytes == pair.resources.spill_loads_bytes == 0, tiles
        assert pair.sass.count("UTMALDG") <= 4, tiles  # one step's boxes
