"""An analytical performance model of the library GEMM: the time of a configuration on a shape,
so shapes nobody tuned for get a configuration chosen for them (configs.gemm_config).

For a problem (m, n, k, B's layout, dtype, epilogue or not, SM count) `candidates` lists the
configurations the kernel can run (tile sizes, one tile per block / persistent / pingpong /
stream-K, multicast pairs, split-K and its reduce, swap-AB, raster groups; the deepest ring
that fits), `estimate_us` gives each a time, and `ranked` sorts them. The time is built from
what bounds a Hopper GEMM:

- the k-step of one block: the larger of its tensor-core time (2 * tile_m * tile_n * tile_k
  flops at an SM's share of the peak, times an efficiency per consumer layout and a penalty for
  narrow tiles) and its loads (the tile's bytes at an SM's L2 bandwidth, an operand whose row
  pitch is off the 128-byte line costing more per byte, and no faster than `stages` slots in
  flight over the load latency: Little's law), plus a fixed cost per step;
- all blocks' L2 -> SM reads together: every tile's k-steps read its A and B boxes (B once per
  multicast pair) at the L2's aggregate rate, which is 2.4x lower for rows off the line;
- waves and tail quantization: one tile per block runs ceil(blocks / resident blocks) waves,
  each as long as a whole tile (cluster split-K: as many clusters as fit at once); a persistent
  block runs ceil(work items / blocks) tiles; stream-K shares the last wave's k-steps out evenly
  and pays the partial tiles' hand-over (park ~2 us, sum ~2 us: the profile in
  benchmarks/README.md);
- per-tile fixed costs: pipeline fill and the epilogue's store (hidden partly by a persistent
  block, wholly by pingpong, from a block's second tile on: its first has nothing to overlap);
- DRAM: the bytes a wave of `sms` tiles reads (rows of A and columns of B of its group_m-high
  raster group; everything once when A and B fit in L2) at ~4 TB/s, against the compute;
- split-K's reduce: the cluster's sum through distributed shared memory, or a second kernel
  over the (split_k, m, n) f32 workspace; the padded path's copies (same for every
  configuration of a shape; part of the estimate only).

The constants (`Constants`) were fitted by `benchmarks/fit_gemm_model.py` on the timed records in
benchmarks/results/ (the sweeps' configurations, every timed alternative of the options runs,
the tuned table's winners): least squares on log time. That script prints how well the model
ranks the recorded alternatives. Evaluating every candidate of a shape takes a few ms of host
time and compiles nothing.
"""

from __future__ import annotations

import dataclasses
import functools
import heapq
import math
import os
from collections.abc import Iterator
from typing import Any

from . import local_calibration
from .cluster_shares import pairs_split_b
from .h200_limits import H200_CLUSTERS, H200_SMS
from .l2_replay import operand_reads
from .stream_k_plan import MAX_CONTRIBUTORS, MAX_TEAM, StreamKPlan
from .tile_limits import (MAX_ACCUMULATOR, MAX_PINGPONG_ACCUMULATOR, MAX_SWAP_AB_ACCUMULATOR, THREE_CONSUMER_MAX_N,
                          THREE_CONSUMER_ROWS, TILE_NS, TILE_NS_64_BOXES, consumer_count, valid_tile_n)

PEAK_TFLOPS = {"bfloat16": 790.0, "float16": 790.0, "float8_e4m3fn": 1580.0}  # H200 dense tensor-core peaks
ITEMSIZE = {"bfloat16": 2, "float16": 2, "float8_e4m3fn": 1}
SMEM_FLOP_PER_BYTE = 32  # dense bf16 tensor-core flop per byte shared memory delivers (4096 / 128 per clock)
SWIZZLE = 128  # bytes of K per pipeline step (tile_k = 64 bf16, 128 fp8)
L2_BYTES = 50 << 20
SPLITS = (2, 3, 4, 6, 8)
WORKSPACE_SPLITS = (2, 4, 8, 12, 16)
SPLIT_K_MIN_STEPS = 8  # split_k.SPLIT_K_MIN_STEPS: k-steps a slice keeps at least
SPLIT_WAVES = 2.1  # split-K blocks may take up to about two waves
GROUP_WAVES = 4  # group_m 16 is tried where the tiles take this many waves or more
SWAP_AB_MAX_M = 512  # swap-AB candidates up to this many rows of A (over 256: 2-4 column tiles of C.T)
# Configurations the model estimates and offers by switch: on by default those timed on the H200
# against the choice without them (DEFAULT_OFFERS), off the others. OFFER_ENV changes the set for
# a probe, read at import (so that the build workers a benchmark spawns pick as it does;
# benchmarks/bench_gemm.py --random): "wide_b_pairs" adds a switch, "-a_pairs" takes one away.
OFFER_ENV = "MGPU_LAB_GEMM_OFFER"
OFFERS = ("a_pairs", "wide_b_pairs", "swap_persistent", "swap_stream_k", "clusters_of_four", "swap_epilogue",
          "clusters_of_eight", "swap_clusters", "swap_clusters_wide", "n16_tiles", "narrow_stream_k", "row_raster",
          "stream_k_reads", "l2_reuse_bound", "partial_waves", "span_pairs", "pair_tile", "small_stream_k",
          "narrow_pairs", "stream_k_teams", "dram_rereads", "wide_pingpong", "local_calibration", "soft_step",
          "b_half_boxes", "swap_share_b", "three_consumers", "swap_clusters_share_b")
DEFAULT_OFFERS = ("clusters_of_four", "swap_epilogue", "swap_clusters", "swap_clusters_wide", "row_raster",
                  "stream_k_reads", "span_pairs", "narrow_pairs", "stream_k_teams", "wide_pingpong", "swap_share_b",
                  "three_consumers", "swap_clusters_share_b")


def _offered(value: str) -> set[str]:
    """The switches on: DEFAULT_OFFERS with `value`'s comma-separated names added and its
    "-name"s taken away."""
    names = [name.strip() for name in value.split(",") if name.strip()]
    unknown = [name for name in names if name.lstrip("-") not in OFFERS]
    if unknown:
        raise ValueError(f"{OFFER_ENV} must name switches among {', '.join(OFFERS)} (comma-separated, "
                         f"-name to switch one off), got {value!r}")
    on = set(DEFAULT_OFFERS)
    for name in names:
        if name.startswith("-"):
            on.discard(name[1:])
        else:
            on.add(name)
    return on


_OFFERED = _offered(os.environ.get(OFFER_ENV, ""))

# Pairs sharing A by multicast (make_gemm's cluster_n=2). Off: on the H200's seeds 21-23 (the runs
# that chose them, 2026-12-05) the model's picks of them ran x1.02-1.08 persistent, x0.98-1.04
# stream-K, but on held-out seeds 24-27 (an H100, against the switch off) persistent ones ran
# x0.90 / x0.99 / x0.93 / x0.92 and stream-K ones x0.99 / x0.99 / x0.99 / x1.11.
OFFER_A_PAIRS = "a_pairs" in _OFFERED
# The one kind of A-sharing pair kept apart from a_pairs: stream-K pairs (cluster_n=2) whose two
# tiles span all of n (ceil(n / tile_n) == 2), so every panel of A is read from DRAM once, where
# the other grids of a tall, narrow, long-K problem read it once per column of tiles at k-steps
# too far apart for L2 to keep it. Offered also over fewer tiles than half the SMs (where no other
# persistent grid is), as long as no tile is cut into more than MAX_CONTRIBUTORS + 1 pieces. On the
# H100 (2026-12-06, gemm_options_2026-12-06T103846Z_9a2d5163.json) they ran x1.57 over the model's
# pick on 6330x352x25840, x1.16 on 1162x480x12944, x1.36 on 2911x472x24064, x1.09 on
# 3523x488x14592, x0.91 on 5738x272x20040 and, on seeds 151-156, x1.26 on 5685x264x20416, while
# A-sharing pairs as a whole ran x0.957 (58 moved picks). Against it off (`--versus`, H100) its
# moved picks ran x1.119 on fresh seeds 151-190 (14 of 2379) and x1.151 on 191-260 (24 of 4039);
# the losses (x0.83-0.95) displaced 1 x 4 / 2 x 2 clusters or short-K grids. Untimed on the H200.
OFFER_SPAN_PAIRS = "span_pairs" in _OFFERED
# Pairs sharing B (cluster_m=2) at tile_n 160, 192 and 224 (cluster_shares.pairs_split_b: the B tile
# split in 8-row halves of B (n, k), or two and one 64-column boxes of B (k, n)): a narrow n
# (536, 848) in three or four such tiles wastes less than in 128- or 256-wide ones. Off: on seeds
# 21-23 the model's picks of them ran x0.72-x1.17 (no better in geomean); 128 and 256 always.
OFFER_WIDE_B_PAIRS = "wide_b_pairs" in _OFFERED
# Persistent swapped tiles (swap_ab with persistent=True): C.T's tile_n runs over m in even
# shares (m = 530: three 184-wide tiles, 96% used, where 128-row tiles use 83%), so rows up to
# SWAP_PERSISTENT_MAX_M get them, as cuBLAS tiles its N side. Off: seeds 21-23 (H200, the runs
# that chose it) x1.03-1.22, held-out seeds 24-27 (H100) x0.97 / x0.89 / x0.86 / none picked.
OFFER_SWAP_PERSISTENT = "swap_persistent" in _OFFERED
# The same with stream-K (with OFFER_SWAP_PERSISTENT): timed on seeds 21-23 (2026-12-05) the model's
# eight picks of it ran x0.96 in geomean against main's picks (x0.875-x1.065), so it is a switch
# of its own.
OFFER_SWAP_STREAM_K = "swap_stream_k" in _OFFERED
# Clusters of four blocks (persistent=True): 2 x 2 quads (cluster_m=2 with cluster_n=2), each
# block reading half of its A tile and half of its B tile from L2, what a block off the 128-byte
# line is short of (cuBLAS runs 2 x 1, 1 x 2 and 4 x 2 clusters there); four tiles in a column
# sharing B (cluster_m=4) or in a row sharing A (cluster_n=4), a quarter each. 30 resident on an
# H200 (120 SMs). On: seeds 21-23, 2 x 2 x1.39 on 1161x1424x11496, 1 x 4 of 128 x 256 x1.12;
# held-out seeds 24-27 (H100) x0.96 / x1.10 / x1.21 / x0.96.
OFFER_CLUSTERS_OF_FOUR = "clusters_of_four" in _OFFERED
# Swapped tiles for a kernel whose epilogue applies to C.T as well (`fused`'s bias / activation /
# residual / scale, read through EpilogueTile's loaders): an nn.Linear with a bias at decode sizes
# gets what one without gets. On: timed on the H200 (2026-12-05, bench_gemm.py --random 64
# --epilogue bias against torch.addmm): seeds 21-22 x1.060 / x1.048, m <= 64 from 0.91-0.93x to
# 1.04-1.05x (gemm_random_2026-12-05T103227Z_a3e16fc.json, ..103720Z..; main's ..103008Z..,
# ..103314Z..). Off, an epilogue runs on C's own tiles.
OFFER_SWAP_EPILOGUE = "swap_epilogue" in _OFFERED
# Clusters of eight blocks (persistent=True): 2 x 4 (two tile rows sharing B, four tile columns
# sharing A) and 4 x 2, each block reading a quarter of one operand's tile and half of the
# other's. cuBLAS runs 4 x 2 clusters where even our best alternative trailed it on the H200
# (64 x 168 on 325x3736x2488: ours 0.80x; 128 x 176 on 342x7144x5792). 15 resident on an H200
# (120 SMs, as clusters of four). Off: timed on an H100 (2026-12-05, gemm_options_2026-12-05T173640Z)
# named outright they ran 1.32x the model's pick on 325x3736x2488 (4 x 2 of 128 x 128) and 1.15x on
# 726x5992x800 (2 x 4), 0.62x on 550x11008x8192; switched on, the model picked none on seed 30.
OFFER_CLUSTERS_OF_EIGHT = "clusters_of_eight" in _OFFERED
# Swapped persistent tiles in multicast clusters (swap_ab with persistent=True and cluster_m /
# cluster_n): what cuBLAS runs on the mid-m shapes where ours trail (its 64 x 168 tiles in 4 x 2
# clusters on 325x3736x2488 are 64 rows of n by 168 of m: our swapped tiles), each block loading
# its share of the swapped B tile (the caller's A rows) and of A (the caller's B rows, B (n, k)
# only), for up to SWAP_CLUSTERS_MAX_M rows. Timed on an H100 (2026-12-05, 909db3f), the
# model's picks of them on eight mid-m shapes ran x0.92-1.34 against its picks without (x1.16 in
# geomean; 325x3736x2488 0.605x cuBLAS -> 0.802x, 550x11008x8192 0.66x -> 0.89x), on seed 30 x1.009
# (six changed: x0.81-1.35), seed 32 x1.000; over 576 rows they lost as often as they won (822 x 18944
# x 3584 x0.81: C written from the registers), so they stop there. On: capped so, held out on seeds
# 33 / 34 / 35 (H100, interleaved with the switch off, 35cc281) x1.004 / x1.010 / x1.002 (the shapes
# changed x1.007 / x1.064 / x1.011: 576x11008x8192 x1.28, 132x3320x2224 x0.88), FP8 seed 33 0.989 ->
# 0.990, seed 33 with a bias x1.000.
OFFER_SWAP_CLUSTERS = "swap_clusters" in _OFFERED
# The same up to SWAP_CLUSTERS_WIDE_MAX_M rows (with OFFER_SWAP_CLUSTERS): the losses over 576 rows
# were timed when persistent swapped tiles still wrote C from the registers; since they stream it
# out by TMA (2026-12-05 evening, x1.039 over the 22 such picks of seeds 31 / 33 / 36 / 37 on an
# H100) the cap is a probe of its own. On since 2026-12-06: against main's picks on fresh seeds
# 109-130 (H100, f8d4900, `bench_gemm_options --versus`, rounds A B B A) it moved 42 of 1346 drawn
# picks and they ran x1.053 in geomean (28 faster; x0.78-x1.53): 593x8192x18944 0.75 -> 0.92 of
# cuBLAS, 908x11008x3584 0.77 -> 0.91, 784x4560x3288 0.81 -> 1.18; its losses were 64-row tiles in
# pairs (723x1440x1344 x0.78, 699x14384x3008 x0.82) and 592x28672x4096 x0.88.
OFFER_SWAP_CLUSTERS_WIDE = "swap_clusters_wide" in _OFFERED
SWAP_CLUSTERS_MAX_M = 576
SWAP_CLUSTERS_WIDE_MAX_M = 1024
# C's own tiles over B (n, k) at the odd multiples of 16 from 144 to 240 as well as multiples of
# 32: a width that divides n into a whole number of waves (2048x5632x2048: 128 x 176 makes 512
# tiles, 3.9 waves on 132 SMs, where 128 x 256 makes 352, 2.7; cuBLAS runs 176 x 128 there). Their
# C goes out in 16-column boxes (GemmTiling.out_width). Off: timed on an H100 (45d0a73) 128 x 176
# ran 0.975x main's pick on 2048x5632x2048 (a tile's epilogue 2.0 us against 1.1 for 128 x 256:
# eleven 16-column boxes; and about 20% fewer flops per us in the mainloop), 128 x 144 0.76x on
# 341x18944x8192; seed 43 x0.999 (886x11008x3584 x0.959).
OFFER_N16_TILES = "n16_tiles" in _OFFERED
N16_TILE_NS = (144, 176, 208, 240)
# Stream-K over 128 x 128 tiles one to a block (NARROW_STREAM_K_AREA or less; multicast pairs of
# them stay). Off since 2026-12-06 (`narrow_stream_k` offers them again). Over every timed
# alternative (`fit_gemm_model.py --by-family`) the model rates stream-K 128 x 128 faster than it
# runs, against the other kinds: estimate / measured 0.76-0.92 where the other kinds read
# 0.98-1.14. As picks on drawn shapes they ran 0.59x cuBLAS on an H100; a profile of
# 787x4096x28672 (H100) shows their consumers waiting for data 35% of the time (1.5x the L2 -> SM
# bytes per flop of 128 x 256). Timed on an H100 against the pick they displace (13fe12f, rounds
# interleaved): 347x3584x18944 x1.48; in pairs the picks split, x1.09 and x1.17 against x0.86 and
# x0.86, so pairs stay. A first probe took every stream-K tile under 128 x 256 away and moved a
# 128 x 192 pick, which lost x0.92: those stay too.
NARROW_STREAM_K_AREA = 128 * 128
OFFER_NARROW_STREAM_K = "narrow_stream_k" in _OFFERED
# Single blocks of stream-K (no team, no pair) need a tile larger than this (128 x 160 is not):
# of 34 timed alternatives over 128 x 160 (`gemm_options_*`, 2026-12-04..07, both GPUs) none was
# the fastest of its group; on 1538x1080x20352 it was the pick (0.55-0.71 of cuBLAS on an H100,
# 0.659 on an H200, seed 116's slowest shape), and the runner-up, 128 x 224 split-K 2 in clusters,
# ran x1.14-1.15 over it in the same rounds three times (H100: a73dbc3, a9919a3, 8a3e92d). Teams
# of such tiles stay (they were the fastest of their groups on 362-380 x 3584 x 14336-28672).
# `narrow_stream_k` offers them again.
SINGLE_STREAM_K_MIN_AREA = 128 * 160
# Tiles numbered along rows (group_m=1) where A is the large operand and B small enough to stay in
# L2 (`rastered`): the blocks that read one panel of A then take adjacent block numbers. With
# group_m 8 they are 8 numbers apart, and their reads of the panel did not share: timed on an
# H100 (434399a, gemm_options_2026-12-06T060419Z), swapped 128 x 96 over 173-181 rows of
# 8192 x 11008-14336 (A: 180-235 MB, B: 4-5 MB) ran 0.96-1.01 of cuBLAS numbered along rows,
# 0.76-0.77 / 0.71-0.77 / 0.67-0.75 at group_m 4 / 8 / 64. The other way round holds too: 64 x 192
# there (B the large operand) ran 0.90-0.99 at group_m 8 (the three tiles of one B panel
# adjacent) and 0.55-0.61 numbered along rows. The model does not estimate the order: the switch
# moves no pick, only its raster. On: on fresh seeds 68 / 69 (H100, 3d763ec, rounds A B B A) the
# one-tile grids it renumbered ran x1.664 (313x4096x11008, swapped 128 x 80 over four column
# tiles: 0.72 -> 1.20 of cuBLAS), x1.057 and x1.024 (6578x568x744, 3009x1320x368); persistent,
# stream-K and split-K grids so numbered ran x0.94-x1.00, so they keep theirs (`rastered`).
OFFER_ROW_RASTER = "row_raster" in _OFFERED
ROW_RASTER_B_BYTES = L2_BYTES // 4  # B at most this large: it stays in L2 while A streams past
# Stream-K's reads of A and B from DRAM as the kernel's schedule makes them (`l2_replay`), not once:
# over fewer tiles than units every tile is cut into pieces that start at different k-steps, and
# over a long K the panels the pieces of one column share leave L2 between them (572x3584x28672 in
# 128 x 256: 3.1 reads). The replayed DRAM time bounds the estimate from below. On the H100's
# records the stream-K picks ran slower than the estimate as that time grew (measured / estimated
# 1.10 / 1.21 / 1.35 where it reached 0.5-0.8 / 0.8-1.0 / 1.0-1.3 of the estimate, 0.93 below; the
# H200's 1.04 at 0.5-0.8). Ranking every timed group with it (2026-12-06): H200 84 of 116 picks
# within 3% of the best, as without (it never binds at the H200's 4.18 TB/s); H100 16 of 68 against
# 14 (1.141x the best against 1.157x) with the H100's copy rate (gemm_constants/h100_copy_rate.json:
# Constants.copy_bw 2.97 TB/s), none moved with the H200's. Counted in the overlap term instead it ranked the
# H100 19 and the H200 83 (547x4096x28672's stream-K, fastest on both, lost to a pick 1.41-1.51x
# slower). On since 2026-12-06: with the H100's copy rate it moved 3 of 1234 drawn picks (seeds
# 83-102) and each ran faster, x1.096 / x1.066 / x1.416 (`bench_gemm_options --versus`), as did
# every shape it moved before (x1.003-x1.310, seeds 67-82); with the H200's it moves none of 1353.
# A replay takes 5-60 ms; `ranked_lazily` runs it only for a stream-K candidate about to be picked.
OFFER_STREAM_K_READS = "stream_k_reads" in _OFFERED
# The L2-to-SM bound (Constants.l2_bw) only where the blocks read more from L2 than from DRAM (1.25x):
# where they read each byte once (a decode's weights) DRAM bounds the time, and counting the L2's
# time as work beside it (the overlap term) moved decode picks when l2_bw was lowered to the H100's
# 9 TB/s (seed 49: 128 x 8 to 256 x 8 swapped split-K, x0.89-0.96). Neutral on the records at the
# built-in 18.6 TB/s (H200 115 of 165 groups' picks within 3% of the best, H100 16 of 76).
OFFER_L2_REUSE_BOUND = "l2_reuse_bound" in _OFFERED
L2_REUSE = 1.25  # L2 bytes over DRAM bytes above which the L2 bound counts (OFFER_L2_REUSE_BOUND)
# A one-tile-per-block grid that fills only a share f of the SMs runs faster per block than a
# full one: its compute time is scaled by 1 - PARTIAL_WAVE * (1 - f). Over every timed group such
# grids filling 40-60% of the SMs ran 0.81-0.95 of their estimate on both GPUs (the constants are
# fitted mostly on full waves), and on the H100's named long-K shapes one-wave 128 x 160 / 128 x 192
# grids (95-115 blocks) ran 1.25-1.50x faster than the stream-K picks rated above them. Ranking the
# records with it (0.3): H200 116 of 165 picks within 3% of the best (against 115), 1.036x the
# best (1.038x); H100 24 of 76 (18), 1.132x (1.145x). Off until timed on fresh seeds.
OFFER_PARTIAL_WAVES = "partial_waves" in _OFFERED
PARTIAL_WAVE = 0.3
# A multicast cluster's tiles cost more than the model's per-tile terms: its blocks share every
# ring slot, so one block's epilogue holds back its peer's next loads (the peer's producer waits
# for the slot's release from both), once per tile. PAIR_TILE_US per tile of a persistent or
# stream-K cluster. The timed groups where pairs and single blocks of one tile ran side by side
# (2026-12-06): persistent, K <= 4096, pairs ran 0.998 (H200, 31) / 1.077 (H100, 6) of single
# blocks' time where the model said 0.954 / 0.940; the HF prefill's 2048x5632x2048 and
# 2048x2048x5632 picks (pairs) ran 1.03 of the best single blocks on the H100. Ranking every
# timed group with it (1.5 us): H200 86 of 116 within 3% of the best (84 without; 1.031x the best
# against 1.033x), H100 27 of 97 (25; 1.138x against 1.142x). Off: on fresh seeds 301-306 (H100,
# `--versus`) its 54 moved picks of 382 ran x0.991 (x0.73-x1.19; single blocks displacing pairs
# on short K lost most, 13607x5552x296 x0.73), `gemm_options_2026-12-06T134715Z_80298abe.json`.
OFFER_PAIR_TILE = "pair_tile" in _OFFERED
PAIR_TILE_US = 1.5
# Stream-K over tiles smaller than 128 x 256 runs slower against its estimate than over 128 x 256
# ones, on both GPUs and whether single blocks or pairs (estimate / measured over the timed groups,
# 2026-12-06: 128 x 128 0.87-0.92 on the H200 and 0.79-0.86 on the H100, 128 x 256 1.00-1.06): a
# smaller tile cuts a unit's share of the k-loop at more tile edges, each a partial's park or sum.
# The compute of such a grid is scaled by (128 * 256 / area) ** SMALL_STREAM_K (128 x 128: x1.23).
# Ranking every timed group with it: H200 85 of 116 picks within 3% of the best (84 without;
# 1.031x the best against 1.033x), H100 32 of 101 (25; 1.121x against 1.142x). Off until timed
# on fresh seeds against the picks without it.
OFFER_SMALL_STREAM_K = "small_stream_k" in _OFFERED
SMALL_STREAM_K = 0.3
# Persistent 64-row tiles in clusters of two run slower against their estimate than the other
# kinds timed beside them, on both GPUs, plain or swapped (estimate / measured over the timed
# groups, relative to each group's geomean, without the switch, 2026-12-06: H100 geomean 0.89 over
# 54 samples, 0.73-1.12; H200 0.88 over 18, 0.72-1.06; 64-row quads 1.03 / 1.00, single blocks
# 1.02-1.07): with one consumer warpgroup a block has nothing
# to run while the pair's shared ring slot waits for its peer. On the H100's swapped mid-m shapes
# such picks ran 0.72-0.77 of cuBLAS where 128- and 256-row swapped tiles ran 0.95-1.01
# (276x28672x8192, 544x14336x8192). Their compute is scaled by NARROW_PAIR. Ranking every timed
# group with it: H200 84 of 116 picks within 3% of the best, as without (1.0323x the best against
# 1.0326x); H100 28 of 106 (26; 1.136x against 1.143x), the same from 1.05 to 1.3. It moves 5 of
# 740 drawn picks (seeds 401-412). On since 2026-12-06: against the H100's picks without it on
# fresh seeds 401-470 (d73ad60 / d3d0ca1, `bench_gemm_options --versus`, rounds A B B A) it moved
# 41 of 4134 drawn picks and they ran x1.079 (8) and x1.059 (33) in geomean: 309x28672x4096 0.71
# -> 0.96 of cuBLAS (256 x 160 swapped pairs), 210x28672x8192 0.69 -> 0.99 (128 x 216 swapped, one
# tile a block), 209x20904x15296 0.77 -> 0.93; its losses x0.92-0.98 (278x3584x11008 x0.916).
OFFER_NARROW_PAIRS = "narrow_pairs" in _OFFERED
NARROW_PAIR = 1.1
# Stream-K in teams (make_gemm's team_m): units of team_m single blocks on a column's row tiles,
# running the same k-steps at the same time, so the tiles sharing a panel of B read it from L2
# together. Stream-K over fewer tiles than units cuts every tile into pieces that start at
# different k-steps; the tiles of a column then read B's panels at different times and, over a
# long K, from DRAM again (572x3584x28672 in 128 x 256 tiles: 3.1 reads of A and B replayed; teams
# of its 5 row tiles: 1.0). Offered for stream-K tiles (as `_stream_k_ok`) of 2-16 row tiles, in
# teams of all of them (up to MAX_TEAM) or of a divisor of their count, where the team grid has
# at most REPLAY_ROUNDS rounds (the long-K mid-m shapes whose single-block pieces the replay
# prices), in place of the single blocks. Both are estimated alike (units = SMs // team_m, each
# floored at its replayed reads), and the floor seldom binds, so offered side by side the model
# would keep the single blocks; counting every stream-K grid's rereads as DRAM time instead
# (switch dram_rereads) moved other picks too, and those lost on the H100 (x0.92, 23 picks of
# seeds 121-150). On the H100 (3c6a8d2 / d8e5c88, rounds A B B A) teams ran x1.2-x1.35 over single
# blocks of the same tiles on 572-1859 x 3584-4096 x 11008-28672, and the 8 of 1804 drawn picks
# (seeds 121-150) that went to them ran x1.02-x1.48 (x1.16). On since 2026-12-07: on the H200
# (8cfff85, fresh seeds 121-170, rounds A B B A, `bench_gemm_options --versus`) the 32 of 2931
# drawn picks it moved ran x1.030 against the library's (gemm_options_2026-12-07T060542Z_8cfff85.json);
# on the H100 on fresh seeds 171-200 (f07a2c4) its 9 of 1815 moved picks ran x1.121.
OFFER_STREAM_K_TEAMS = "stream_k_teams" in _OFFERED
# Pingpong tiles of 128 rows and 160-192 columns (tiling.MAX_PINGPONG_ACCUMULATOR: a consumer owns
# whole tiles with 232 registers), what cuBLAS runs on 2048x5632x2048 (a 176 x 128 pingpong),
# where the 4 waves of 128 x 176 tiles fill the SMs better than 128 x 256's 2.7. Only without an
# epilogue (a bias fits, but the model does not tell a bias from GELU + residual, which spills);
# also in pairs sharing B (cluster_m=2), cuBLAS's 1 x 2 cluster. 16-bit inputs only: FP8's scales
# (and block scales' second accumulator) take registers the wider accumulator needs. On since
# 2026-12-07, for the H200: there (8cfff85, fresh seeds 171-200, rounds A B B A) the 48 of 1815
# picks it moved ran x1.020 against the library's (gemm_options_2026-12-07T060428Z_8cfff85.json);
# on an H100 (381f7b7, the same seeds) its 55 moved picks ran x0.995 (24 faster: 7583x4544x280
# x1.19; 5336x3768x392 x0.78), a loss of about 0.0002 over all drawn picks.
OFFER_WIDE_PINGPONG = "wide_pingpong" in _OFFERED
# Each estimate scaled by the model's own error on nearby shapes for its kind of configuration
# (local_calibration: a kernel-weighted mean of log(measured / estimated) over the timed samples of
# the same kind, shrunk toward none where few are near), where a calibration file was taken
# against the constants in use (the H200's built-in ones: h200_local.json). Left out of
# fit_gemm_model's ranking of the groups it was fitted on, with each record's commit held out in
# turn (and every shape it timed), it ranked the H200's 136 timed groups' picks at 1.029 of the
# best in geomean against 1.040 (103 of them within 3% against 94; the 90th percentile 1.089
# against 1.128); the H100's 138 groups 1.112 -> 1.084. Off: on an H100 (fcaa213, its own file,
# fresh seeds 601-630, rounds A B B A) the 152 of 1821 drawn picks it moved ran x0.979 against the
# library's (87 with m <= 64 x0.965: swapped split-K picks, whose errors the drawn picks' records
# make look worse than they are -- a pick is the candidate the model rated fastest -- gave way to
# plain tiles), and seeds 631 / 632 ran 0.983 / 0.973 of cuBLAS against 0.989 / 0.985 without it.
OFFER_LOCAL_CALIBRATION = "local_calibration" in _OFFERED
# A k-step's time as a soft maximum of its tensor-core time and its loads, (t_mma^P + t_load^P)^(1/P)
# with P = SOFT_STEP_POWER, not the larger of the two: where they are near equal, the consumers wait
# on data part of the time (1041x1272x2352 on an H100, both operands' rows off the 128-byte line:
# profiled, one-tile 128 x 128 blocks ended between 13.7 and 21.9 us, their consumers 28% of the time
# waiting on data; 128 x 128 pairs sharing B, whose loads the model puts at 0.97 of their tensor-core
# time, ran x0.86 of the 2 x 2 clusters that halve both operands' loads, which the maximum tied them
# with). Ranking the timed groups with the constants fitted under the plain maximum, P = 3 picked 1.027 of the best in geomean against 1.040 on the H200 (136 groups;
# 99 within 3% against 94) and 1.085 against 1.113 on the H100 (172 groups; 73 against 57); P = 4 and 6
# ranked alike, P = 10 closer to the maximum (`MGPU_LAB_GEMM_OFFER=soft_step python
# benchmarks/fit_gemm_model.py [--device H100]`); on the H200's newest 20 groups (8cfff85) 1.030
# against 1.082, where refitting the constants under the maximum without them reached 1.044. Off:
# on an H100 the 106 picks it moved of seeds 601-630 ran x0.994 against the library's
# (gemm_options_2026-12-07T092911Z_ebcf272.json); untimed on the H200 (scripts/steps/next_steps_h200_soft.txt).
OFFER_SOFT_STEP = "soft_step" in _OFFERED
SOFT_STEP_POWER = 3.0
# C's own tiles over B (k, n) 96, 160 and 224 wide as well as the multiples of 64: B loaded in
# 32-column boxes (64-byte swizzle; tile_limits.TILE_NS). Where n is not near a multiple of 64 they
# waste fewer columns: 13056x280x26728 takes three 96-wide tiles (288) against three 128-wide (384),
# where the H100 ran 256 x 128 stream-K at 0.585 of cuBLAS (seed 633) and 3604x592x10640 at 0.623
# (seed 632). Off: on an H100 the 113 picks it moved of seeds 601-630 ran x0.915 against the
# library's (96: x0.926, 160: x0.945, 224: x0.877; gemm_options_2026-12-07T093947Z_33e74d1.json);
# on 3604x592x10640 128 x 160 persistent in 1 x 4 clusters ran x1.25 over the library's pick.
OFFER_B_HALF_BOXES = "b_half_boxes" in _OFFERED
# Swapped persistent tiles over B (k, n) in clusters sharing it along m (cluster_n over the MN-major
# wgmma A: each block loads a share of every box's k rows), past the swapped rows' limit, over
# SWAP_SHARE_B_WIDTHS of m: what cuBLAS runs on the narrow B (k, n) shapes (3604x592x10640: 128 x 152
# in 1 x 4 clusters; 1041x1272x2352: 128 x 88 in 2 x 4; probe_cublas_kernels, e591b1e). Below that
# limit the swapped clusters over B (k, n) stay as they were (the model rates sharing B along m as
# sharing A down n: offered there too, it only flipped ties). Timed on an
# H100 (9b8a4b7) beside the library's picks: 3604x592x10640 128 x 152 1 x 4 x1.429 (0.912 of
# cuBLAS), 1041x1272x2352 128 x 88 1 x 4 x1.447 (0.869), 9405x504x1328 256 x 160 1 x 2 x1.267
# (0.945), 4822x904x3600 256 x 160 1 x 2 x1.203 (0.902); on 1528x1872x2792 128 x 256 persistent
# pairs stayed ahead. Past the swapped rows' limit only for n up to SWAP_SHARE_B_MAX_N: where n is
# large the library's tiles of C already ran near cuBLAS, and the model's estimates of these clusters
# are untried there. On since 2026-12-07 (H100 only: no H200 was lent to time it): on an H100
# (1d4ad1f, fresh seeds 601-630; gemm_options_2026-12-07T155535Z_1d4ad1f.json) the 29 drawn picks it
# moved ran x1.048 against the library's (19 faster; 6738x296x9584 x1.39, 8147x688x1248 x0.86), and
# again x1.048 at 8a3e92d (`..T162625Z..`).
OFFER_SWAP_SHARE_B = "swap_share_b" in _OFFERED
# Tiles of 192 rows (three consumer warpgroups of 64 rows; tile_limits.THREE_CONSUMER_MAX_N columns at
# most): C's one per block, persistent or stream-K, alone or in multicast clusters, and swapped ones
# (192 of n) where swapped tiles are offered. What cuBLAS runs on many of the drawn shapes where ours
# trail (probe_cublas_kernels: 4822x904 in 192 x 192 pairs, 130 tiles for 132 SMs; 163x18944 in
# swapped 192 x 176, 99 tiles in one wave; 1528x1872 in swapped 192 x 128 2 x 4; 2053x1088, 338x5704,
# 517x1712 in 192-row tiles). Without an epilogue (a fused bias + GELU + residual spilled at 192 x 192)
# and 16-bit inputs only. On since 2026-12-07 (H100 only: no H200 was lent to time it): on an H100
# (1d4ad1f, its constants, fresh seeds 601-630, rounds A B B A; gemm_options_2026-12-07T155443Z_1d4ad1f.json)
# the first 77 of the 319 drawn picks it moved (a --budget-s stopped there) ran x1.028 against the
# library's (47 faster; 8433x352x22072 0.75 -> 1.19 of cuBLAS, 8691x536x5040 0.68 -> 0.89; slowest
# 343x18944x8192 swapped 192 x 88 x0.81), x1.030 again at 8a3e92d; with swap_share_b and
# swap_clusters_share_b on fresh seeds 671-700 (af4c042, `..T165117Z..`) the first 130 moved ran
# x1.025 (85 faster; 192-row tiles of C x1.02-1.08 by kind, swapped ones x1.03).
OFFER_THREE_CONSUMERS = "three_consumers" in _OFFERED
# Swapped clusters over B (k, n) within the swapped rows (with OFFER_SWAP_CLUSTERS): blocks along
# C.T's columns (cluster_n) share B's tile, each loading a share of every box's k rows, as
# OFFER_SWAP_SHARE_B does past those rows; before, only B (n, k) problems had them. cuBLAS's own
# configurations on the slowest drawn shapes, timed on an H100 (8fa0449, rounds interleaved,
# gemm_options_2026-12-07T1641*Z_8fa0449.json; vs the library's pick): 431x5704x8968 swapped 192 x 112
# in 2 x 4 clusters x1.36 (0.94 of cuBLAS), 203x19264x1256 192 x 104 in 1 x 2 x1.14 (0.94),
# 153x3152x4304 64 x 80 in 2 x 2 x1.12 (0.85); the model rates each faster than its pick but
# never saw them. Against the library's picks on fresh seeds 641-670 (H100, af4c042, rounds A B B A,
# gemm_options_2026-12-07T164813Z_af4c042.json) its 68 moved picks ran x1.020 (36 faster): tiles of
# 128 rows and more x1.01-1.06 by kind (281x7976x20160 x1.40, 529x14336x3584 x1.33), 64-row ones
# in 2 x 2 clusters x0.918 (10; 525x1160x25880 x0.80). So 64-row tiles are left out; on since
# 2026-12-07 (H100 only).
OFFER_SWAP_CLUSTERS_SHARE_B = "swap_clusters_share_b" in _OFFERED
SWAP_SHARE_B_WIDTHS = (88, 96, 112, 128, 144, 152, 160, 176, 192, 208, 224, 256)
SWAP_SHARE_B_MAX_N = 1536
# by transpose_b: the widths from 160 up to the limit the tiling takes (B (k, n): 160 with
# b_half_boxes, and 192), multiples of 32 only. 128 x 176 (C in eleven 16-column store boxes,
# GemmTiling.out_width; n16_tiles' cost) is left out: its epilogue is not hidden when K is short,
# and the model, which has no term for a tile's store boxes, rated it ahead of 128 x 192 / 160.
# Its moved picks in the wide_pingpong A / Bs (all at K <= 1024) ran x0.858 of the library's on
# the H100 (5; 381f7b7) and x0.92 on the H200 (4; 8cfff85), and it was the pick of the slowest
# drawn shapes of seeds 703 (H100, 7a48d84): 5097x10808x264 0.68 and 5925x3832x320 0.73 of cuBLAS.
WIDE_PINGPONG_NS = {transpose_b: tuple(n for n in range(160, MAX_PINGPONG_ACCUMULATOR // 128 + 1, 32)
                                       if valid_tile_n(n, transpose_b)
                                       and (transpose_b or OFFER_B_HALF_BOXES or n in TILE_NS_64_BOXES))
                    for transpose_b in (True, False)}


def _wide_pingpong_ns(transpose_b: bool) -> tuple[int, ...]:
    """wide_pingpong's tile widths; with n16_tiles (whose C tiles are odd multiples of 16 wide),
    128 x 144 and 128 x 176 over B (n, k) as well (with MGPU_LAB_GEMM_STORE_BOXES=mixed, 128 x 176
    stores C in six boxes)."""
    extra = tuple(n for n in N16_TILE_NS if n * 128 <= MAX_PINGPONG_ACCUMULATOR and valid_tile_n(n, transpose_b)) \
        if OFFER_N16_TILES and transpose_b else ()
    return tuple(sorted(WIDE_PINGPONG_NS[transpose_b] + extra))


# A stream-K grid's replayed DRAM reads (OFFER_STREAM_K_READS) counted as its DRAM traffic, beside
# the compute as any grid's (launch + max + overlap * min), not only as a floor under the estimate.
OFFER_DRAM_REREADS = "dram_rereads" in _OFFERED
L2_RESIDENT_BYTES = 0.6 * L2_BYTES  # A and B up to this large stay in L2 whatever the order: read once
# Replayed only over up to this many rounds of items per unit: where the split pieces are a large
# share of the work, and the replay's cost (items x k-steps) stays ~25 ms; past it whole rounds
# run in step, as _dram_bytes counts them (8192^3 replayed in full: 1.2 s of ranking).
REPLAY_ROUNDS = 2


def _swap_clusters_rows() -> int:
    """Rows of A up to which swapped persistent clusters are offered (with OFFER_SWAP_CLUSTERS)."""
    return SWAP_CLUSTERS_WIDE_MAX_M if OFFER_SWAP_CLUSTERS_WIDE else SWAP_CLUSTERS_MAX_M

SWAPPABLE = "swappable"  # Problem.epilogue of an epilogue that applies to C.T too (swap_safe)


def switches_on() -> tuple[str, ...]:
    """The names of OFFERS switched on now (in OFFERS' order): what a benchmark record names."""
    return tuple(name for name in OFFERS if globals()[f"OFFER_{name.upper()}"])


# Persistent swapped tiles from SWAP_AB_MAX_M up to this many rows: the model's picks of them on
# seeds 21-23 ran x1.03-1.22 against main's at 525-1043 rows, x0.935-0.947 at 1434 and 1942.
SWAP_PERSISTENT_MAX_M = 1024
# H200_SMS, H200_CLUSTERS (h200_limits.py): the clusters an H200 keeps resident, where the problem
# carries no device's own count (configs.py asks the device itself where there is one).


@dataclasses.dataclass(frozen=True)
class Problem:
    """What the configuration depends on."""

    m: int
    n: int
    k: int
    transpose_b: bool = False
    dtype: str = "bfloat16"
    epilogue: bool | str = False  # an epilogue: True (on C's own tiles) or SWAPPABLE (on C.T too)
    sms: int = 132
    out_dtype: str = "bfloat16"
    clusters: tuple[int, ...] = ()  # clusters of 1, 2, ... one-SM blocks resident at once (() : H200_CLUSTERS)


@dataclasses.dataclass(frozen=True)
class Constants:
    """The model's efficiency constants (times in us, bandwidths in bytes per us), fitted by
    `benchmarks/fit_gemm_model.py --fit --random` on 2227 timed samples (2026-12-05): 811 options
    alternatives in 111 groups timed together on one lease (most on shapes drawn at run time by
    `bench_gemm_options.py --random` or named from the slowest drawn shapes), the sweeps'
    configurations since 2026-12-01T14, the tuned table's winners, and the random-shape
    benchmark's picks of seeds 7-17, with the cluster counts the H200 reports
    (`H200_CLUSTERS`). Least squares on log time plus the log times relative to each drawn
    group's mean (what ranking alternatives needs), Nelder-Mead within physical bounds, started
    from the previous constants. Log-time rms error 0.140 (median |error| 10%); its pick is
    within 3% of the measured best in 82 of 111 groups, 1.032x the best's time in geomean (the
    constants before: 76 and 1.044x). Held out (`--hold-out`), seeds 18-20's 192 picks, timed
    with the cluster counts but never fitted on: rms 0.113 (0.117 before).

    Rows off the 128-byte line (a row pitch not a multiple of 128 bytes) cost twice:
    - `misaligned` (1.55): each block's loads of such an operand take that much longer per byte.
      With both operands off the line our time over the model's grew with the tile's bytes per
      flop (1.1x at 128 x 256, 1.5-1.8x at 128 x 128 and 256 x 96).
    - `l2_bw_misaligned` (6.5 TB/s, against `l2_bw` 18.6 TB/s on the line): all blocks' L2 -> SM
      reads together. The compute-bound drawn shapes off the line all ran at 5.5-5.8 TB/s of box
      reads, whatever the tile (128 x 256, 128 x 128, 256 x 96, pingpong 64 x 192), and 0.54-0.70x
      cuBLAS; shapes on the line reach 9-16. A multicast pair reads B once for two blocks, so the
      model now sends such shapes to `cluster_m=2`.
    Held out (fitted without seeds 12-14's records, scored on them), the cap cut the log-time rms
    on those picks from 0.133 to 0.129, and on the FP8 per-tensor drawn picks (never fitted on)
    from 0.131 to 0.124. `benchmarks/probe_gemm_alignment.py` measures the pitch effect directly.

    Shared memory (`smem_eff`, 0.8): wgmma reads A, and B once per 64 rows of A, from shared
    memory at 128 B per clock; a 128 x 64 tile needs the port's whole rate, and compute-bound
    records of such tiles ran 1.25-1.45x the tensor-core estimate (a pair of 128 x 64 tiles on
    791x3584x14336 ran 2x the pick it displaced). Set by hand from a scan (2026-12-05, all records,
    the other constants kept): 0.8 keeps the log-time rms (0.1200 against 0.1199 without the term)
    and ranks better (69 of 85 groups' picks within 3% of the best, against 67; 1.019x the best in
    geomean, against 1.024x); 0.7 ranks 71 at rms 0.125. A full refit with it (0.68) ranked worse
    (68, 1.025x, worst pick 1.49x), so the other constants stay. Scanned again on every record
    (2026-12-06): 0.65 ranks 92 of 116 H200 groups within 3% (84 at 0.8; 1.025x the best against
    1.033x) and 18 of 68 H100 ones (14), at rms 0.138 (0.123); timed against 0.8 on fresh seeds
    79-82 (H100, A B B A, `benchmarks/gemm_constants/smem_eff065.json`) it ran x0.995 / x1.003 /
    x1.006 / x0.999, so 0.8 stays.

    Tried and left out: a DRAM latency bound (bytes in flight over a fitted latency), for narrow
    tiles over few rows that run 1.1-1.5x the estimate; held out it scored 0.130 against 0.134 on
    seeds 13-14 and 0.136 against 0.129 on FP8. Also left out: a tensor-core efficiency factor
    for swap-AB tiles (the records run them ~7% under the estimate; fitted 1.39), which held out
    scored 0.132 against 0.130 on seeds 12-14 and 0.122 against 0.125 on FP8. Earlier, drawn
    shapes showed pingpong with narrow tiles (`pp_narrow`) and cluster split-K (a costlier
    reduce: `reduce_growth`). Clusters of 3+ fill fewer SMs: that was a fitted share
    (`cluster_fill`) until the device's own counts replaced it (`Problem.clusters`). The
    random-shape benchmark on seeds not fitted on is the held-out measure.

    Also tried and left out (2026-12-05): a refit on 24 more H200 options groups of the slowest
    65-1024-row shapes, with two more terms (clusters of four's own multicast factor, fitted 0.896,
    and a last cluster along m holding fewer tiles than blocks, x1.10 per k-step). In sample it
    ranked better (87 of 113 groups' picks within 3% of the best, against 83; 1.024x the best in
    geomean, against 1.031x); held out, timed against these constants in one call on an H100
    (`MGPU_LAB_GEMM_CONSTANTS=benchmarks/gemm_constants/h200_a1bbde0.json`), seeds 32-34 ran
    x0.991 / x0.985 / x0.996 and FP8 seed 32 x0.991: it sent shapes to 1 x 4 clusters that lost
    to the pairs it displaced (x0.78-0.90). Its constants: `benchmarks/gemm_constants/refit_75a267b.json`
    (that commit's model reads them).

    Also tried and left out (2026-12-06, H100): a factor on the time of stream-K's shared-out
    k-steps (the last round's pieces). 1.3 ranked the H100's 83 timed groups better (27 picks within
    3% of the best against 18) and the H200's worse (80 of 116 against 84); as an H100 calibration
    (`copy_bw` with it) its 109 moved picks of fresh seeds 131-150 ran x0.955 against main's (33
    faster), most lost where it sent 128 x 256 stream-K to 128 x 128 pairs (1424x4472x8192 x0.75)."""

    launch_us: float = 1.556  # a launch's fixed GPU time (first block start, last block end)
    eff_two: float = 1.002  # tensor-core efficiency: two consumer warpgroups (tile_m 128, 256)
    eff_one: float = 0.9004  # one consumer (tile_m 64)
    eff_pingpong: float = 0.9944  # pingpong: consumers alternate whole tiles
    narrow: float = 0.5532  # tensor-core time * (1 + narrow / tile_n): narrow tiles feed the wgmma worse
    latency_us: float = 1.225  # a slot's load round trip: stages / latency bounds the step rate
    sm_bw: float = 111968.7  # L2 -> SM bytes per us of one block
    step_us: float = 0.0008712  # fixed cost per k-step (barrier waits, issue)
    tile_us: float = 3.376  # per tile, one tile per block: prologue and the epilogue's store
    persist_tile_us: float = 0.442  # per tile, persistent (the epilogue overlaps the next tile's loads)
    pingpong_tile_us: float = 0.07264  # per tile, pingpong
    stream_k_us: float = 6.525  # stream-K's partial tiles: park ~2 us + sum ~2 us
    cluster_reduce_us: float = 3.883  # split-K summed in the cluster (per 128 x 128 f32 tile)
    workspace_us: float = 1.808  # split-K's second kernel: its launch
    dram_bw: float = 4208000.0  # DRAM bytes per us (4.04 TB/s copy)
    multicast: float = 0.9846  # tensor-core time factor of a multicast pair (cta-scope peer arrivals)
    swap_us: float = 0.1314  # per 128 x 128 tile, swap-AB's transposed stores (fitted on register stores)
    overlap: float = 0.3419  # share of the shorter of compute and DRAM time that does not overlap the longer
    pp_narrow: float = 9.748  # pingpong's narrow-tile penalty (one consumer's wgmma at a time): * (1 + pp_narrow / tile_n)
    cluster_fill: float = 1.0  # share of the SMs clusters of 3+ occupy, where neither the device nor H200_CLUSTERS says
    reduce_growth: float = 0.08285  # cluster split-K's reduce grows by this share per split past 2
    misaligned: float = 1.553  # L2 -> SM cost per byte of an operand whose row pitch is not a multiple of 128 bytes
    l2_bw: float = 18612000.0  # L2 -> SM bytes per us, all SMs together, of rows on the 128-byte line
    l2_bw_misaligned: float = 6485000.0  # the same of rows off the line
    smem_eff: float = 0.8  # share of shared memory's 128 B per clock the wgmma operand reads reach
    # DRAM bytes per us of a device copy (the H200's 4.18 TB/s; bench_gemm.py records the device's
    # as device_copy_bytes_per_s): the floor OFFER_STREAM_K_READS puts under a stream-K estimate.
    # Measured, not fitted (dram_bw is the fit's, and absorbs more than the copy rate).
    copy_bw: float = 4180000.0
    # A stream-K grid with no whole round (fewer work items than units: every tile is cut into
    # pieces) has its compute scaled by this. Over the timed groups such grids ran slower against
    # their estimates than stream-K grids of whole rounds: H200 0.99 against 0.91-0.94 (measured /
    # estimated), H100 1.13 against 0.90-1.01. 1.0 for the H200: 1.1-1.5 ranks its groups worse (84
    # of 116 picks within 3% of the best, then 82-83: 547x4096x28672's split grid is fastest there).
    # A trial calibration for the H100 (benchmarks/gemm_constants/h100_split_stream_k.json, 1.2)
    # ranks its groups better (32 of 97 within 3% against 25, 1.125x the best against 1.142x) but
    # its 37 moved picks of 1795 (fresh seeds 311-340) ran x0.973 against the H100's calibration:
    # wins where one-tile grids replaced split grids (492x3584x11008 x1.31), losses where 128 x 128
    # stream-K pairs did (10042x280x26624 x0.72), `gemm_options_2026-12-06T134816Z_80298abe.json`.
    # So the H100 keeps 1.0 too.
    split_stream_k: float = 1.0

    def as_vector(self) -> list[float]:
        return [getattr(self, f.name) for f in dataclasses.fields(self)]

    @classmethod
    def from_vector(cls, values: list[float]) -> Constants:
        return cls(*values)


CONSTANTS_ENV = "MGPU_LAB_GEMM_CONSTANTS"


def constants_from_file(path: str, base: Constants | None = None) -> Constants:
    """`base` (default: the built-in constants) with the fields a JSON object in `path` names
    replaced: a calibration for another GPU (`fit_gemm_model.py --fit --write PATH`), or the
    constants of an earlier release to time against. ValueError naming CONSTANTS_ENV, the file
    and the field for anything else."""
    import json

    base = base or Constants()
    where = f"{CONSTANTS_ENV}={path!r}"
    try:
        with open(path) as f:
            values = json.load(f)
    except (OSError, ValueError) as e:
        raise ValueError(f"{where}: expected a readable JSON file of GEMM model constants, got "
                         f"{type(e).__name__}: {e}") from None
    if not isinstance(values, dict):
        raise ValueError(f"{where}: expected a JSON object {{name: number}}, got {type(values).__name__}")
    names = [f.name for f in dataclasses.fields(Constants)]
    for name, value in values.items():
        if name not in names:
            raise ValueError(f"{where}: {name!r} is not a model constant (expected names among {', '.join(names)})")
        if isinstance(value, bool) or not isinstance(value, (int, float)) or not math.isfinite(value) or value <= 0:
            raise ValueError(f"{where}: {name} must be a finite number above 0, got {value!r}")
    return dataclasses.replace(base, **{name: float(value) for name, value in values.items()})


# The built-in constants, or a calibration file's (read at import, like OFFER_ENV, so build
# workers pick the same): what estimate_us and ranked use unless told otherwise.
CONSTANTS = constants_from_file(os.environ[CONSTANTS_ENV]) if os.environ.get(CONSTANTS_ENV) else Constants()

# Each GPU's calibration, by a part of its name: a file beside this module (`fit_gemm_model.py
# --device GPU --fit --write`), or None for the built-in constants (an H200's). The H100 keeps the
# built-in fitted ones: an H100 fit (benchmarks/gemm_constants/h100_fit2_0a55cfa.json) predicted the
# H100's times better (log rms 0.082 against 0.183 held out) but its picks ran x0.981 / x0.999 /
# x0.998 / x0.981 on seeds 40 / 41 / 38 / 39 against the built-in constants' (H100, c3000be). A
# second fit (h100_fit3_0ae916d.json, 2026-12-06: 8343 H100 samples, DRAM 3.18 TB/s against the
# measured copy's 2.97) ranked held-out groups better (16 of 39 within 3% against 8; 1.09x the best
# against 1.20x) yet ran x1.001 / x1.010 / x0.991 / x0.998 on fresh seeds 75-78 (372a05a). So the
# H100's file (h100_measured.json; not c3000be's retired constants_h100.json) holds only what was
# measured, not fitted: its copy rate (2.97 TB/s, `fit_gemm_model.MEASURED`), which stream-K's
# replayed reads are timed at (OFFER_STREAM_K_READS); and since 2026-12-06 one consumer
# warpgroup's rate (eff_one) at 0.85 of two's, not 0.90, chosen by an A / B on the H100: on fresh
# seeds 431-450 (c4d3597, `bench_gemm_options --versus benchmarks/gemm_constants/h100_eff_one085.json`,
# rounds A B B A) it moved 20 of 1225 drawn picks and they ran x1.033 in geomean (541x3584x11008
# x1.46, 1914x792x4160 x1.35; 10771x424x1112 x0.77); in sample the H100 ranks 32 of 108 groups'
# picks within 3% of the best (30 at 0.90). The H200 keeps 0.90: there the same file's picks ran
# x1.032 on seeds 431-450 (20 moved) and x0.977 on fresh seeds 451-480 (25 moved; b74efe4,
# `benchmarks/gemm_constants/h200_eff_one085.json`), about x1.00 together.
DEVICE_CONSTANTS: dict[str, str | None] = {"H200": None, "H100": "h100_measured.json"}


def device_constants_path(gpu: str) -> str | None:
    """The calibration file DEVICE_CONSTANTS names for `gpu` (a key), as a path (a name is beside
    this module); None: built in."""
    name = DEVICE_CONSTANTS[gpu]
    return os.path.join(os.path.dirname(os.path.abspath(__file__)), name) if name else None


def _calibration_file(device: str) -> str | None:
    """The calibration file of the first DEVICE_CONSTANTS key `device` contains, where it exists."""
    for gpu in DEVICE_CONSTANTS:
        path = device_constants_path(gpu)
        if gpu in device and path and os.path.exists(path):
            return path
    return None


@functools.lru_cache(maxsize=16)
def constants_for(device: str) -> Constants:
    """The constants to pick with on `device` (a CUDA device name, e.g. "NVIDIA H100 80GB HBM3"):
    MGPU_LAB_GEMM_CONSTANTS's file where set (whatever the device), else the calibration of the
    first DEVICE_CONSTANTS key the name contains, else the built-in (an H200's)."""
    if os.environ.get(CONSTANTS_ENV):
        return CONSTANTS
    path = _calibration_file(device)
    return constants_from_file(path) if path else Constants()


BUILT_IN_CALIBRATION = "built-in (H200)"  # calibration_of's words for the built-in constants


def calibration_of(device: str) -> str:
    """What constants_for(device) reads, in words a record can keep: the variable's file, the
    calibration file's name, or BUILT_IN_CALIBRATION."""
    if os.environ.get(CONSTANTS_ENV):
        return f"{CONSTANTS_ENV}={os.environ[CONSTANTS_ENV]}"
    path = _calibration_file(device)
    return os.path.basename(path) if path else BUILT_IN_CALIBRATION


def _tile_ns(transpose_b: bool) -> tuple[int, ...]:
    """B (k, n) loads 64-column boxes (tile_limits.TILE_NS_64_BOXES), and with OFFER_B_HALF_BOXES
    32-column ones (TILE_NS); B (n, k) takes any multiple of 16: the multiples of 32 are offered,
    and with OFFER_N16_TILES the odd multiples of 16 from 144 on."""
    if transpose_b:
        return tuple(sorted((32, 64, 96, 128, 160, 192, 224, 256) + (N16_TILE_NS if OFFER_N16_TILES else ())))
    return TILE_NS if OFFER_B_HALF_BOXES else TILE_NS_64_BOXES


def _b_pair_widths(transpose_b: bool) -> tuple[int, ...]:
    """tile_n values offered with cluster_m=2 (among _tile_ns: cluster_shares.pairs_split_b takes them)."""
    if not OFFER_WIDE_B_PAIRS:
        return (128, 256)
    return (128, 160, 192, 224, 256) if transpose_b else (128, 192, 256)


def _clusters_of_four(p: Problem, tm: int, tn: int, group_m: int) -> Iterator[dict[str, Any]]:
    """Persistent clusters of four blocks on these tiles where the problem has the tiles for
    them: 2 x 2 quads, four tiles in a column sharing B (cluster_shares.pairs_split_b: a quarter of B
    each), four in a row sharing A (a quarter of A's rows each, tiles at least 128 x 128)."""
    rows, cols = _ceil(p.m, tm), _ceil(p.n, tn)
    config = {"tile_m": tm, "tile_n": tn, "persistent": True, "group_m": group_m}
    if tm >= 128 and tn in _b_pair_widths(p.transpose_b) and rows >= 2 and cols >= 2:
        yield {**config, "cluster_m": 2, "cluster_n": 2}
    if rows >= 4 and pairs_split_b(tn, p.transpose_b, 4):
        yield {**config, "cluster_m": 4}
    if tm >= 128 and tn >= 128 and cols >= 4:  # 128 x 64 ones ran x0.74 / x0.96 / x1.06 (seeds 21-23)
        yield {**config, "cluster_n": 4}


def _clusters_of_eight(p: Problem, tm: int, tn: int, group_m: int) -> Iterator[dict[str, Any]]:
    """Persistent clusters of eight blocks on these tiles where the problem has the tiles for
    them: 2 x 4 (B halves as a pair's, A quarters: tiles at least 128 x 128) and 4 x 2 (B
    quarters as four in a column, A halves)."""
    rows, cols = _ceil(p.m, tm), _ceil(p.n, tn)
    config = {"tile_m": tm, "tile_n": tn, "persistent": True, "group_m": group_m}
    if tm >= 128 and tn >= 128 and tn in _b_pair_widths(p.transpose_b) and rows >= 2 and cols >= 4:
        yield {**config, "cluster_m": 2, "cluster_n": 4}
    if tm >= 128 and rows >= 4 and cols >= 2 and pairs_split_b(tn, p.transpose_b, 4):
        yield {**config, "cluster_m": 4, "cluster_n": 2}


def _fits_accumulator(tile_m: int, tile_n: int, pingpong: bool = False, limit: int = MAX_ACCUMULATOR) -> bool:
    """A consumer's accumulator (its rows by tile_n; a pingpong consumer's whole tile) within `limit`
    f32 elements, and within THREE_CONSUMER_MAX_N columns for 192-row tiles."""
    if tile_m == THREE_CONSUMER_ROWS and tile_n > THREE_CONSUMER_MAX_N:
        return False
    rows = tile_m if pingpong else tile_m // consumer_count(tile_m)
    return rows * tile_n <= limit


def _three_consumers_ok(p: Problem) -> bool:
    """Whether OFFER_THREE_CONSUMERS offers 192-row tiles for p: no epilogue, 16-bit inputs."""
    return OFFER_THREE_CONSUMERS and not p.epilogue and p.dtype in ("bfloat16", "float16")


def _tile_ms(p: Problem) -> tuple[int, ...]:
    """Row counts of the tiles offered: 64, 128, 256, and 192 where _three_consumers_ok."""
    return (64, 128, THREE_CONSUMER_ROWS, 256) if _three_consumers_ok(p) else (64, 128, 256)


def _ceil(a: int, b: int) -> int:
    return -(-a // b)


def candidates(p: Problem) -> Iterator[dict[str, Any]]:
    """Every configuration worth a time estimate (make_gemm keyword arguments). Structurally
    valid as far as cheap checks go; configs.py still validates the pick with resolve_tiling."""
    tk = SWIZZLE // ITEMSIZE[p.dtype]
    k_tiles = _ceil(p.k, tk)
    for tm in _tile_ms(p):
        for tn in _tile_ns(p.transpose_b):
            rows, cols = _ceil(p.m, tm), _ceil(p.n, tn)
            tiles = rows * cols
            if tm > 128 * _ceil(p.m, 128) or tn > 128 * _ceil(p.n, 128):
                continue  # a tile more than a 128 block past the problem's edge is only waste
            if tm == THREE_CONSUMER_ROWS:
                if tn >= 64 and _fits_accumulator(tm, tn):
                    yield from _three_consumer_tiles(p, tm, tn, rows, cols, k_tiles)
                continue
            if _fits_accumulator(tm, tn):
                yield {"tile_m": tm, "tile_n": tn, "persistent": False}
                if tiles < p.sms and tn >= 64:  # split-K where the tiles fill fewer than the SMs
                    for s in _splits(tiles, k_tiles, p.sms, SPLITS):
                        yield {"tile_m": tm, "tile_n": tn, "persistent": False, "split_k": s,
                               "split_k_reduce": "cluster"}
                    if not p.epilogue and p.dtype in ("bfloat16", "float16"):
                        for s in _splits(tiles, k_tiles, p.sms, WORKSPACE_SPLITS):
                            if s > 2:
                                yield {"tile_m": tm, "tile_n": tn, "persistent": False, "split_k": s,
                                       "split_k_reduce": "workspace"}
                if tiles > p.sms // 2:  # persistence pays only where blocks take several tiles
                    groups = (8, 16) if tiles >= GROUP_WAVES * p.sms else (8,)
                    for g in groups:
                        yield {"tile_m": tm, "tile_n": tn, "persistent": True, "group_m": g}
                        if tm >= 128 and tn >= 128 and _stream_k_ok(tm, tn, rows, cols, k_tiles, p.sms):
                            teams = _teams(p, tm, tn, k_tiles) if OFFER_STREAM_K_TEAMS else []
                            singles = [1] if OFFER_NARROW_STREAM_K or tm * tn > SINGLE_STREAM_K_MIN_AREA else []
                            for team in teams or singles:  # teams take the single blocks' place
                                yield {"tile_m": tm, "tile_n": tn, "persistent": "stream_k", "group_m": g,
                                       **({"team_m": team} if team > 1 else {})}
                        if tn in _b_pair_widths(p.transpose_b) and rows >= 2:
                            yield {"tile_m": tm, "tile_n": tn, "persistent": True, "cluster_m": 2, "group_m": g}
                            if tm >= 128 and _stream_k_ok(tm, tn, rows, cols, k_tiles, p.sms, cluster_m=2):
                                yield {"tile_m": tm, "tile_n": tn, "persistent": "stream_k", "cluster_m": 2,
                                       "group_m": g}
                        if OFFER_A_PAIRS and tm >= 128 and cols >= 2:
                            yield {"tile_m": tm, "tile_n": tn, "persistent": True, "cluster_n": 2, "group_m": g}
                            if tn >= 128 and _stream_k_ok(tm, tn, rows, cols, k_tiles, p.sms, cluster_n=2):
                                yield {"tile_m": tm, "tile_n": tn, "persistent": "stream_k", "cluster_n": 2,
                                       "group_m": g}
                        elif _spans_n_in_pairs(p, tm, tn, tiles, k_tiles):
                            yield {"tile_m": tm, "tile_n": tn, "persistent": "stream_k", "cluster_n": 2, "group_m": g}
                        if OFFER_CLUSTERS_OF_FOUR:
                            yield from _clusters_of_four(p, tm, tn, g)
                        if OFFER_CLUSTERS_OF_EIGHT:
                            yield from _clusters_of_eight(p, tm, tn, g)
                elif _spans_n_in_pairs(p, tm, tn, tiles, k_tiles):  # few tiles: each split over several pairs
                    yield {"tile_m": tm, "tile_n": tn, "persistent": "stream_k", "cluster_n": 2, "group_m": 8}
            if tm in (64, 128) and _fits_accumulator(tm, tn, pingpong=True) and tiles > p.sms // 2:
                yield {"tile_m": tm, "tile_n": tn, "persistent": "pingpong"}
    if OFFER_WIDE_PINGPONG and not p.epilogue and p.dtype in ("bfloat16", "float16"):
        for tn in _wide_pingpong_ns(p.transpose_b):
            if tn <= 128 * _ceil(p.n, 128) and _ceil(p.m, 128) * _ceil(p.n, tn) > p.sms // 2:
                yield {"tile_m": 128, "tile_n": tn, "persistent": "pingpong"}
                if _ceil(p.m, 128) >= 2 and pairs_split_b(tn, p.transpose_b, 2):
                    yield {"tile_m": 128, "tile_n": tn, "persistent": "pingpong", "cluster_m": 2}
    swap_rows = SWAP_PERSISTENT_MAX_M if OFFER_SWAP_PERSISTENT else \
        _swap_clusters_rows() if OFFER_SWAP_CLUSTERS else SWAP_AB_MAX_M
    if p.m <= swap_rows and p.epilogue in (False, SWAPPABLE) and (p.transpose_b or ITEMSIZE[p.dtype] == 2):
        yield from _swap_candidates(p, k_tiles)
    elif OFFER_SWAP_SHARE_B and not p.transpose_b and p.n <= SWAP_SHARE_B_MAX_N and p.epilogue in (False, SWAPPABLE) \
            and ITEMSIZE[p.dtype] == 2:
        yield from _swap_sharing_b(p)


def _three_consumer_tiles(p: Problem, tm: int, tn: int, rows: int, cols: int, k_tiles: int
                          ) -> Iterator[dict[str, Any]]:
    """OFFER_THREE_CONSUMERS: C's 192-row tiles, one per block, persistent or stream-K (no split-K
    or pingpong: the kernel runs neither with three consumers), alone, in pairs sharing B or A and
    in the clusters of four and eight the others get."""
    yield {"tile_m": tm, "tile_n": tn, "persistent": False}
    tiles = rows * cols
    if tiles <= p.sms // 2:
        return
    for g in (8, 16) if tiles >= GROUP_WAVES * p.sms else (8,):
        config = {"tile_m": tm, "tile_n": tn, "persistent": True, "group_m": g}
        yield config
        if _stream_k_ok(tm, tn, rows, cols, k_tiles, p.sms):
            yield {**config, "persistent": "stream_k"}
        if rows >= 2 and pairs_split_b(tn, p.transpose_b, 2):
            yield {**config, "cluster_m": 2}
            if _stream_k_ok(tm, tn, rows, cols, k_tiles, p.sms, cluster_m=2):
                yield {**config, "persistent": "stream_k", "cluster_m": 2}
        if cols >= 2:
            yield {**config, "cluster_n": 2}
        if OFFER_CLUSTERS_OF_FOUR:
            yield from _clusters_of_four(p, tm, tn, g)
        if OFFER_CLUSTERS_OF_EIGHT:
            yield from _clusters_of_eight(p, tm, tn, g)


def _swap_sharing_b(p: Problem) -> Iterator[dict[str, Any]]:
    """OFFER_SWAP_SHARE_B past the swapped rows' limit (n up to SWAP_SHARE_B_MAX_N): persistent
    swapped tiles over B (k, n), SWAP_SHARE_B_WIDTHS of m each (evened over their count: m = 3604
    at 152 is 24 tiles of 152), in the multicast clusters _swapped_clusters offers (along m
    sharing B among them)."""
    widths = {}
    for width in SWAP_SHARE_B_WIDTHS:
        parts = _ceil(p.m, width)
        widths[_ceil(_ceil(p.m, parts), 8) * 8] = parts
    for width, parts in sorted(widths.items()):
        for tm in (tm for tm in _tile_ms(p) if tm >= 128):
            if _fits_accumulator(tm, width, limit=MAX_SWAP_AB_ACCUMULATOR) and _ceil(p.n, tm) * parts > p.sms // 4:
                yield from _swapped_clusters(p, tm, width, parts, share_b_k_n=True)


def _spans_n_in_pairs(p: Problem, tm: int, tn: int, tiles: int, k_tiles: int) -> bool:
    """Whether OFFER_SPAN_PAIRS offers stream-K pairs sharing A over tm x tn tiles: two tiles
    cover all of n (ceil(n / tn) == 2), without OFFER_A_PAIRS (which offers them already), and
    the pairs (one per row of tiles) are enough that no tile is cut into more than
    stream_k_plan.MAX_CONTRIBUTORS + 1 pieces (the model's stream_k_us prices a few partials)."""
    pairs, units = _ceil(p.m, tm), p.sms // 2
    return OFFER_SPAN_PAIRS and not OFFER_A_PAIRS and tm >= 128 and tn >= 128 and _ceil(p.n, tn) == 2 \
        and pairs * (MAX_CONTRIBUTORS + 1) >= units and _stream_k_ok(tm, tn, pairs, 2, k_tiles, p.sms, cluster_n=2)


def _splits(tiles: int, k_tiles: int, sms: int, splits: tuple[int, ...]) -> list[int]:
    """split_k values whose slices take at most SPLIT_WAVES waves and keep SPLIT_K_MIN_STEPS steps."""
    out = set()
    for s in splits:
        if tiles * s <= SPLIT_WAVES * sms and k_tiles // s >= SPLIT_K_MIN_STEPS:
            steps = _ceil(k_tiles, s)
            out.add(_ceil(k_tiles, steps))  # split_k.even_split_k: no empty slice
    return sorted(out - {1})


def _stream_k_ok(tm: int, tn: int, rows: int, cols: int, k_tiles: int, sms: int, cluster_m: int = 1,
                 cluster_n: int = 1) -> bool:
    """stream_k.check_stream_k's cheap part for rows x cols tiles in clusters of cluster_m x
    cluster_n: 16-byte slices, every unit at least one k-step (the kernel's own plan, over its
    work items: a pair's two tiles are one); and a tile larger than NARROW_STREAM_K_AREA, or a
    multicast pair, unless OFFER_NARROW_STREAM_K."""
    if not OFFER_NARROW_STREAM_K and cluster_m * cluster_n == 1 and tm * tn <= NARROW_STREAM_K_AREA:
        return False
    step = math.lcm(16 * consumer_count(tm), tm // 4)
    if tn % step:
        return False
    items = _ceil(rows, cluster_m) * _ceil(cols, cluster_n)  # pieces.GemmTiling.work_items
    return StreamKPlan(sms // (cluster_m * cluster_n), items, k_tiles).every_unit_splits


def _teams(p: Problem, tm: int, tn: int, k_tiles: int) -> list[int]:
    """team_m values OFFER_STREAM_K_TEAMS offers for these tiles: all of 2-16 row tiles in one
    team (up to MAX_TEAM), or a divisor of their count, where the teams' grid is stream-K's (at
    least one k-step a unit) in at most REPLAY_ROUNDS rounds."""
    rows, cols = _ceil(p.m, tm), _ceil(p.n, tn)
    if not 2 <= rows <= 2 * MAX_TEAM:
        return []
    out = []
    for team in range(2, min(rows, MAX_TEAM) + 1):
        if rows % team:
            continue
        units, items = p.sms // team, rows // team * cols
        if items <= REPLAY_ROUNDS * units and StreamKPlan(units, items, k_tiles).every_unit_splits:
            out.append(team)
    return out


def _swap_candidates(p: Problem, k_tiles: int) -> Iterator[dict[str, Any]]:
    """C.T = B @ A.T: tile_m over n (B's rows, or with B (k, n) its columns, read MN-major),
    tile_n all of m, or an even share of it over 2-4 column tiles (m = 257: two 136-wide tiles,
    not three 128-row ones), rounded up to 8 (and 16), at most 256. One tile per block up to
    SWAP_AB_MAX_M rows; with OFFER_SWAP_PERSISTENT, persistent ones too (over the fewest column
    tiles of 256 and the next two counts, up to SWAP_PERSISTENT_MAX_M rows; with
    OFFER_SWAP_STREAM_K, stream-K ones beside them); with OFFER_SWAP_CLUSTERS, persistent ones in
    multicast clusters up to SWAP_CLUSTERS_MAX_M rows (SWAP_CLUSTERS_WIDE_MAX_M with
    OFFER_SWAP_CLUSTERS_WIDE); with OFFER_SWAP_CLUSTERS_SHARE_B, over B (k, n) along C.T's columns
    too (tiles of 128 rows or more)."""
    widths = {}
    # an epilogue's registers beside 128 x 160 f32 spill (bias + GELU + residual did): 128 x 128 then
    limit = MAX_ACCUMULATOR if p.epilogue else MAX_SWAP_AB_ACCUMULATOR
    fewest = _ceil(p.m, 256)
    for parts in range(1, 5) if fewest == 1 else range(fewest, fewest + 3):
        for step in (8, 16):
            width = _ceil(_ceil(p.m, parts), step) * step
            if width <= 256 and _ceil(p.m, width) == parts:
                widths[width] = parts
    for width, parts in sorted(widths.items()):
        for tm in _tile_ms(p):
            if not _fits_accumulator(tm, width, limit=limit):
                continue
            tiles = _ceil(p.n, tm) * parts
            three = tm == THREE_CONSUMER_ROWS  # one tile per block or persistent only
            if p.m <= SWAP_AB_MAX_M:
                yield {"tile_m": tm, "tile_n": width, "persistent": False, "swap_ab": True}
                if tiles < p.sms and not three:
                    for s in _splits(tiles, k_tiles, p.sms, SPLITS):
                        yield {"tile_m": tm, "tile_n": width, "persistent": False, "swap_ab": True, "split_k": s,
                               "split_k_reduce": "cluster"}
            if OFFER_SWAP_PERSISTENT and tm >= 128 and tiles > p.sms // 2:
                yield {"tile_m": tm, "tile_n": width, "persistent": True, "swap_ab": True, "group_m": 8}
                if OFFER_SWAP_STREAM_K and not three and _stream_k_ok(tm, width, _ceil(p.n, tm), parts, k_tiles,
                                                                      p.sms):
                    yield {"tile_m": tm, "tile_n": width, "persistent": "stream_k", "swap_ab": True, "group_m": 8}
            if OFFER_SWAP_CLUSTERS and p.m <= _swap_clusters_rows() and tiles > p.sms // 4:
                yield from _swapped_clusters(p, tm, width, parts, share_b_k_n=OFFER_SWAP_CLUSTERS_SHARE_B and tm >= 128)


def _swapped_clusters(p: Problem, tm: int, width: int, parts: int, share_b_k_n: bool = False
                      ) -> Iterator[dict[str, Any]]:
    """Persistent swapped tiles (tile_m over n, `width` over m in `parts` column tiles of C.T) in
    the multicast clusters the problem has the tiles for: down C.T's rows sharing the caller's A
    rows (cluster_shares.pairs_split_b: 8-row shares), along them sharing B (n, k)'s rows (B (k, n) is
    read MN-major: with share_b_k_n, a share of each box's k rows), both in quads and in clusters
    of eight."""
    rows = _ceil(p.n, tm)
    config = {"tile_m": tm, "tile_n": width, "persistent": True, "swap_ab": True, "group_m": 8}
    down = [c for c in (2, 4) if rows >= c and pairs_split_b(width, True, c)]  # B here is the caller's A: K-major
    along = [c for c in (2, 4) if (p.transpose_b or share_b_k_n) and parts >= c]
    for cluster_m in [1, *down]:
        for cluster_n in [1, *along]:
            if 1 < cluster_m * cluster_n <= 8:
                yield {**config, "cluster_m": cluster_m, "cluster_n": cluster_n}


@functools.lru_cache(maxsize=4096)
def ring_stages(tile_m: int, tile_n: int, dtype: str, persistent: bool | str, cluster_split: bool,
                out_dtype: str = "bfloat16", swap_ab: bool = False) -> int:
    """The deepest ring (resolve_tiling's default) of these tiles: smem of the ring, the
    epilogue's buffer (a persistent swapped tile's slots are sized after the ring) and, for a
    cluster split, the parked partial tile."""
    from .pieces import GemmTiling, deepest_ring  # the kernel's own rule (pieces loads MLIR: not at import)

    return deepest_ring(GemmTiling(4096, 4096, 1 << 20, tile_m=tile_m, tile_n=tile_n, stages=2, dtype=dtype,
                                   out_dtype=out_dtype, persistent=persistent, split_k=2 if cluster_split else 1,
                                   split_k_reduce="cluster" if cluster_split else "workspace", swap_ab=swap_ab))


def clusters_resident(size: int, p: Problem, fill: float = CONSTANTS.cluster_fill) -> int:
    """Clusters of `size` one-SM blocks resident at once: the device's own count where the problem
    carries one (`Problem.clusters`), else the H200's measured one, else a share `fill` of the
    SMs (clusters do not straddle GPCs, so larger ones leave SMs of a GPC idle)."""
    if size <= 1:
        return p.sms
    if len(p.clusters) >= size:
        return max(1, p.clusters[size - 1])
    if p.sms == H200_SMS and size in H200_CLUSTERS:
        return H200_CLUSTERS[size]
    if size == 2:
        return p.sms // 2
    return max(1, int(fill * p.sms / size))


def _cluster_capacity(split: int, p: Problem, fill: float) -> int:
    """Blocks of (1, split) clusters resident at once."""
    return split * clusters_resident(split, p, fill)


def estimate_us(p: Problem, config: dict[str, Any], c: Constants = CONSTANTS, replay: bool = True) -> float:
    """The model's time in us of `config` (make_gemm keyword arguments) on problem p. replay=False
    leaves out stream-K's replayed DRAM reads (OFFER_STREAM_K_READS), a floor that only raises the
    estimate: a lower bound `ranked_lazily` replays only where it could change the order."""
    swap = bool(config.get("swap_ab"))
    m, n = (p.n, p.m) if swap else (p.m, p.n)
    tm, tn = config["tile_m"], config["tile_n"]
    persistent = config.get("persistent", False)
    split = config.get("split_k", 1) or 1
    reduce = config.get("split_k_reduce") or ("cluster" if split <= 8 else "workspace")
    cluster_m = config.get("cluster_m", 1) or 1
    cluster_n = config.get("cluster_n", 1) or 1
    pair = cluster_m * cluster_n  # blocks per multicast cluster
    team = config.get("team_m", 1) or 1  # blocks of a stream-K team (no cluster)
    group_m = config.get("group_m", 8) or 8
    isz = ITEMSIZE[p.dtype]
    osz = ITEMSIZE.get(p.out_dtype, 4)
    tk = SWIZZLE // isz
    k_tiles = _ceil(p.k, tk)
    steps = _ceil(k_tiles, split)
    split = _ceil(k_tiles, steps)
    tiles_m, tiles_n = _ceil(m, tm), _ceil(n, tn)
    tiles = tiles_m * tiles_n
    pingpong = persistent == "pingpong"
    stages = config.get("stages") or ring_stages(tm, tn, p.dtype if p.dtype in ITEMSIZE else "bfloat16",
                                                 persistent, split > 1 and reduce == "cluster", swap_ab=swap)

    # one k-step of one block
    rate = PEAK_TFLOPS.get(p.dtype, 790.0) * 1e6 / p.sms  # flop per us of one SM
    eff = c.eff_pingpong if pingpong else c.eff_two if tm > 64 else c.eff_one
    t_mma = 2.0 * tm * tn * tk / (rate * eff) * (1.0 + (c.pp_narrow if pingpong else c.narrow) / tn)
    # wgmma reads its operands from shared memory, 128 B per clock against 4096 dense bf16 flop:
    # A once, B once per 64 rows of A (one wgmma's rows), so narrow tiles reach the port's limit
    # (128 x 64: 1 B per 32 flop) and ran 1.25-1.45x the tensor-core estimate when compute-bound.
    smem_bytes = tk * isz * tm * (1.0 + tn / 64.0)
    smem_rate = PEAK_TFLOPS["bfloat16"] * 1e6 / p.sms / SMEM_FLOP_PER_BYTE  # bytes per us of one SM
    t_mma = max(t_mma, smem_bytes / (smem_rate * c.smem_eff))
    if pair > 1:
        t_mma *= c.multicast
    rows_a, rows_b = _misaligned_rows(p)
    if swap:
        rows_a, rows_b = rows_b, rows_a
    stage_bytes = (tm / cluster_n * (c.misaligned if rows_a else 1.0)
                   + tn / cluster_m * (c.misaligned if rows_b else 1.0)) * tk * isz
    t_load = max(stage_bytes / c.sm_bw, c.latency_us / stages)
    if OFFER_SOFT_STEP:
        t_step = (t_mma ** SOFT_STEP_POWER + t_load ** SOFT_STEP_POWER) ** (1.0 / SOFT_STEP_POWER) + c.step_us
    else:
        t_step = max(t_mma, t_load) + c.step_us

    # the epilogue's store of one tile (C, or the split's f32 partial into the workspace)
    store_bytes = tm * tn * (4 if split > 1 and reduce == "workspace" else osz)
    t_store = store_bytes / c.sm_bw
    t_swap = c.swap_us * tm * tn / 16384 if swap else 0.0  # swap-AB's transposed stores
    # of a persistent grid: units (blocks, clusters or teams) and what they loop over (tiles, pairs,
    # quads or a team's tiles)
    units = clusters_resident(pair, p, c.cluster_fill) if pair > 2 else p.sms // (pair * team)
    items = _ceil(tiles_n, cluster_n) * _ceil(tiles_m, cluster_m * team)
    if not persistent:
        per_tile = c.tile_us + t_store + t_swap
        if split > 1 and reduce == "cluster":
            per_tile += c.cluster_reduce_us * (tm * tn / 16384) * (1.0 + c.reduce_growth * (split - 2))
        capacity = _cluster_capacity(split, p, c.cluster_fill) if split > 1 and reduce == "cluster" else p.sms
        waves = _ceil(tiles * split, capacity)
        compute = waves * (steps * t_step + per_tile)
        if OFFER_PARTIAL_WAVES and tiles * split < p.sms:
            compute *= 1.0 - PARTIAL_WAVE * (1.0 - tiles * split / p.sms)
    elif persistent == "stream_k":
        whole = items // units
        rest = items - whole * units
        unit_steps = whole * steps + _ceil(rest * steps, units)
        held = whole + (1 if rest else 0)
        compute = unit_steps * t_step + _first_tile_us(held, c.persist_tile_us, c) + held * (t_store * 0.5 + t_swap)
        compute += c.latency_us + (c.stream_k_us if rest else 0.0) + _pair_tiles_us(pair, held)
        if not whole:
            compute *= c.split_stream_k
        if OFFER_SMALL_STREAM_K:
            compute *= (128 * 256 / (tm * tn)) ** SMALL_STREAM_K
    elif pingpong:  # a unit's two consumers take every other item (a tile, or a pair's two)
        per_block = _ceil(items, min(_ceil(items, 2), units))
        compute = per_block * steps * t_step + _first_tile_us(per_block, c.pingpong_tile_us, c) \
            + c.latency_us + t_store
    else:
        per_block = _ceil(items, units)
        compute = per_block * (steps * t_step + t_store * 0.5 + t_swap) \
            + _first_tile_us(per_block, c.persist_tile_us, c) + c.latency_us + _pair_tiles_us(pair, per_block)
        if OFFER_NARROW_PAIRS and pair == 2 and tm == 64:
            compute *= NARROW_PAIR

    # All blocks together: every tile's k-steps load its A and B boxes (B, or A, once per multicast pair).
    box_bytes = tiles * k_tiles * tk * isz  # per row of a box, over every tile's k-steps
    t_l2 = box_bytes * (tm / cluster_n / (c.l2_bw_misaligned if rows_a else c.l2_bw)
                        + tn / cluster_m / (c.l2_bw_misaligned if rows_b else c.l2_bw))
    dram = _dram_bytes(m, n, p.k, tm, tn, isz, osz, group_m, p.sms, tiles_m, tiles_n)
    if not OFFER_L2_REUSE_BOUND or box_bytes * (tm / cluster_n + tn / cluster_m) > L2_REUSE * dram:
        compute = max(compute, t_l2)

    if replay and _replays(p, config, m, n, isz, items, units):
        reads = operand_reads(_ceil(tiles_m, cluster_m * team), _ceil(tiles_n, cluster_n), k_tiles,
                              tm * cluster_m * team, tn * cluster_n, group_m, units, True, L2_BYTES)
        reread_us = (reads * (m + n) * p.k * isz + m * n * osz) / c.copy_bw
        if OFFER_DRAM_REREADS:
            dram = max(dram, reads * (m + n) * p.k * isz + m * n * osz)
    else:
        reread_us = 0.0  # A and B read once: t_dram counts them
    if split > 1 and reduce == "workspace":
        dram += split * m * n * 4  # the partials written
    t_dram = dram / c.dram_bw
    t = max(c.launch_us + max(compute, t_dram) + c.overlap * min(compute, t_dram), c.launch_us + reread_us)
    if split > 1 and reduce == "workspace":  # the second kernel reads the partials, writes C
        t += c.workspace_us + (split * m * n * 4 + m * n * osz) / c.dram_bw
    return t + _padding_us(p, c)


def _replays(p: Problem, config: dict[str, Any], m: int, n: int, isz: int, items: int, units: int) -> bool:
    """Whether estimate_us floors `config` at its replayed DRAM reads (OFFER_STREAM_K_READS): a
    stream-K grid over operands larger than L2_RESIDENT_BYTES in at most REPLAY_ROUNDS rounds."""
    return config.get("persistent") == "stream_k" and OFFER_STREAM_K_READS \
        and (m + n) * p.k * isz > L2_RESIDENT_BYTES and items <= REPLAY_ROUNDS * units


def _misaligned_rows(p: Problem) -> tuple[bool, bool]:
    """Whether A's and B's rows start off the 128-byte lines a k-step's box rows span (a row pitch
    not a multiple of 128 bytes): such a box row touches two lines, and the records show the loads
    of those operands running slower (`Constants.misaligned`)."""
    isz = ITEMSIZE[p.dtype]
    a = (p.k * isz) % SWIZZLE != 0
    b = (p.k if p.transpose_b else p.n) * isz % SWIZZLE != 0
    return a, b


def _pair_tiles_us(pair: int, tiles: int) -> float:
    """OFFER_PAIR_TILE's cost of `tiles` tiles run one after another by a cluster of `pair` blocks."""
    return PAIR_TILE_US * tiles if OFFER_PAIR_TILE and pair > 1 else 0.0


def _first_tile_us(tiles: int, later_tile_us: float, c: Constants) -> float:
    """Fixed costs of `tiles` tiles run one after another by a block: its first pays a one-tile
    block's prologue and epilogue (nothing before it to overlap with), the later ones only what
    the epilogue does not hide behind the next tile's loads."""
    return c.tile_us + max(tiles - 1, 0) * later_tile_us if tiles else 0.0


def _dram_bytes(m: int, n: int, k: int, tm: int, tn: int, isz: int, osz: int, group_m: int, sms: int,
                tiles_m: int, tiles_n: int) -> float:
    """Bytes read from and written to DRAM: A and B once when they fit in L2, else what each
    wave of `sms` tiles reads (a raster group of group_m tile rows by sms / group_m columns)."""
    once = (m * k + n * k) * isz
    out = m * n * osz
    tiles = tiles_m * tiles_n
    if once <= L2_RESIDENT_BYTES or tiles <= sms:
        return once + out
    rows = min(group_m, tiles_m)
    cols = min(tiles_n, _ceil(sms, rows))
    wave = (min(rows * tm, m) + min(cols * tn, n)) * k * isz
    return max(once, tiles / sms * wave) + out


def _padding_us(p: Problem, c: Constants) -> float:
    """The padded path's copies (padding.py): A and B into padded buffers, C's columns out."""
    isz, osz = ITEMSIZE[p.dtype], ITEMSIZE.get(p.out_dtype, 4)
    aligned = (p.k * isz) % 16 == 0 and (p.n * osz) % 16 == 0 and (p.transpose_b or (p.n * isz) % 16 == 0)
    if aligned:
        return 0.0
    copies = 2 * (p.m * p.k + p.n * p.k) * isz + 2 * p.m * p.n * osz
    return 3 * c.launch_us + copies / c.dram_bw


def rastered(p: Problem, config: dict[str, Any]) -> dict[str, Any]:
    """`config` numbered along rows (group_m=1) where OFFER_ROW_RASTER is on and it is a grid of
    one tile per block without split-K whose tiles span 2+ columns, A (in the kernel's own terms:
    C.T's where swapped) is more than twice B's bytes and B is at most ROW_RASTER_B_BYTES; else
    `config` itself. Persistent, stream-K and split-K grids keep their order: on seeds 68 / 69
    (H100) their picks so numbered ran x0.94-x1.00."""
    if not OFFER_ROW_RASTER or config.get("persistent") or (config.get("split_k") or 1) > 1:
        return config
    m, n = (p.n, p.m) if config.get("swap_ab") else (p.m, p.n)
    a_bytes, b_bytes = m * p.k * ITEMSIZE[p.dtype], n * p.k * ITEMSIZE[p.dtype]
    if n <= config["tile_n"] or a_bytes <= 2 * b_bytes or b_bytes > ROW_RASTER_B_BYTES:
        return config
    return {**config, "group_m": 1}


def ranked(p: Problem, c: Constants = CONSTANTS) -> list[tuple[float, dict[str, Any]]]:
    """(estimated us, config) of every candidate, fastest first (ties: the earlier candidate);
    each estimated as the model writes it, then `rastered`."""
    return list(ranked_lazily(p, c))


def ranked_lazily(p: Problem, c: Constants = CONSTANTS) -> Iterator[tuple[float, dict[str, Any]]]:
    """`ranked`'s order, one candidate at a time: stream-K's replay (5-60 ms each) runs only for a
    candidate about to come out, whose estimate without it (a lower bound) leads the rest; a
    pick needs one or two replays instead of every stream-K candidate's (0.17 s on 1384x4096x28672)."""
    scale = _local_scale(p, c)
    heap = []
    for i, cfg in enumerate(candidates(p)):
        base = estimate_us(p, cfg, c, replay=False) * scale(cfg)
        heap.append((base, i, not OFFER_STREAM_K_READS or cfg.get("persistent") != "stream_k", cfg))
    heapq.heapify(heap)
    while heap:
        t, i, final, cfg = heapq.heappop(heap)
        if final:
            yield t, rastered(p, cfg)
        else:  # the replay only raises it (by the same scale): back in line at its full estimate
            heapq.heappush(heap, (estimate_us(p, cfg, c) * scale(cfg), i, True, cfg))


def _local_scale(p: Problem, c: Constants):
    """config -> what its estimate on `p` is scaled by: OFFER_LOCAL_CALIBRATION's factor where a
    local calibration was taken against `c` and `p` is 16-bit, else 1."""
    local = local_calibration.for_constants(c) if OFFER_LOCAL_CALIBRATION and p.dtype in local_calibration.SIXTEEN_BIT \
        else None
    if local is None:
        return lambda config: 1.0
    factors: dict[str, float] = {}

    def scale(config: dict[str, Any]) -> float:
        kind = local_calibration.error_kind(config)  # one factor per kind: candidates of a kind share it
        if kind not in factors:
            factors[kind] = local.factor(p.m, p.n, p.k, p.transpose_b, config)
        return factors[kind]

    return scale
