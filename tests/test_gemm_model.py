"""The GEMM configuration model (mgpu_lab/kernels/gemm/model.py, configs.model_config), CPU only:
what it prefers where the physics is clear, that every pick passes the kernel's checks, the
tuned table's switch, tune='auto' without a GPU, the random-shape benchmark's generator, and
clear errors for bad input."""

from __future__ import annotations

import dataclasses
import math
import random
import sys
import time
from pathlib import Path

import pytest

from mgpu_lab.kernels.gemm import make_gemm, resolve_tiling
from mgpu_lab.kernels.gemm import model
from mgpu_lab.kernels.gemm.configs import (
    CONFIG_KEYS,
    MODEL_ENV,
    SMS,
    TABLE_ENV,
    gemm_config,
    kernel_options,
    model_config,
    model_ranking,
    table_enabled,
)
from mgpu_lab.runtime.device import has_gpu

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "benchmarks"))


@pytest.fixture(autouse=True)
def _model_default(monkeypatch):
    monkeypatch.delenv(MODEL_ENV, raising=False)


@pytest.fixture
def before_192_rows(monkeypatch):
    """The model without the switches turned on 2026-12-07 (192-row tiles, swapped clusters sharing
    B (k, n)): tests that pin an older choice among the candidates it competed with then (the new
    switches' own tests cover what they add)."""
    for name in ("three_consumers", "swap_share_b", "swap_clusters_share_b"):
        monkeypatch.setattr(model, f"OFFER_{name.upper()}", False)


@pytest.fixture
def no_switches(monkeypatch):
    """The model with every switch of model.OFFERS off: the candidates the switches add to."""
    for name in model.OFFERS:
        monkeypatch.setattr(model, f"OFFER_{name.upper()}", False)


def test_the_model_is_the_default_and_can_be_switched_off(monkeypatch):
    assert gemm_config(3072, 3072, 3072)["source"] == "model"
    assert gemm_config(3072, 3072, 3072, model=False)["source"] == "heuristic"
    monkeypatch.setenv(MODEL_ENV, "0")
    assert gemm_config(3072, 3072, 3072)["source"] == "heuristic"
    assert gemm_config(3072, 3072, 3072, model=True)["source"] == "model"


def _plain_tail(m: int, n: int, tile_m: int = 128, tile_n: int = 256) -> float:
    """Share of the plain grid's last wave left empty."""
    tiles = -(-m // tile_m) * -(-n // tile_n)
    waves = tiles / SMS
    return math.ceil(waves) - waves


@pytest.mark.parametrize("m, n, k, transpose_b", [
    (3072, 3072, 3072, False), (5000, 3000, 2000, False), (2048, 5120, 5120, True), (1536, 8960, 1536, True),
    (4096, 4096, 1024, False)])
def test_partial_last_waves_get_persistent_or_stream_k(m, n, k, transpose_b):
    """Where one tile per block leaves a last wave more than 25% empty, blocks loop over tiles."""
    assert _plain_tail(m, n) > 0.25 or -(-m // 128) * -(-n // 256) > SMS  # the premise
    pick = model_config(m, n, k, transpose_b=transpose_b)
    assert pick["persistent"] in (True, "stream_k", "pingpong"), pick


@pytest.mark.parametrize("m, n, k, transpose_b", [
    (512, 512, 16384, False), (256, 1024, 32768, True), (384, 768, 24576, False)])
def test_small_mn_long_k_splits_k(m, n, k, transpose_b):
    pick = model_config(m, n, k, transpose_b=transpose_b)
    assert pick.get("split_k", 1) > 1, pick


@pytest.mark.parametrize("m, n, k", [(1, 4096, 4096), (16, 6144, 4096), (32, 14336, 4096), (48, 3584, 18944),
                                     (64, 11008, 4096)])
def test_few_rows_swap_ab_in_either_layout(m, n, k):
    """Rows that would leave a 64-row tile a quarter empty or more swap A and B (on the drawn
    shapes' timings, 64 rows run as fast in a plain 64-row tile: the model may pick either).
    B (k, n) swaps too (the wgmma reads it MN-major); an epilogue's tiles never do."""
    if m <= 48:
        assert model_config(m, n, k, transpose_b=True).get("swap_ab") is True
        assert model_config(m, n, k, transpose_b=False).get("swap_ab") is True
    assert not model_config(m, n, k, transpose_b=True, epilogue=True).get("swap_ab")
    assert not model_config(m, n, k, transpose_b=False, epilogue=True).get("swap_ab")


def _random_shape(rng: random.Random) -> tuple[int, int, int, bool]:
    m = round(math.exp(rng.uniform(0, math.log(16384))))
    n, k = (8 * round(math.exp(rng.uniform(math.log(256), math.log(32768))) / 8) for _ in range(2))
    return m, n, k, rng.random() < 0.5


@pytest.mark.parametrize("dtype", ["bfloat16", "float8_e4m3fn"])
def test_every_pick_passes_the_kernels_checks(dtype):
    """The model's pick (and its next two) resolve to a checked tiling for 150 random shapes."""
    rng = random.Random(1)
    for _ in range(150):
        m, n, k, transpose_b = _random_shape(rng)
        transpose_b = transpose_b or dtype != "bfloat16"  # FP8 wgmma reads B (n, k) only
        for epilogue in (False, True):
            picks = model_ranking(m, n, k, transpose_b=transpose_b, dtype=dtype, epilogue=epilogue, count=3)
            assert picks and all(p["source"] == "model" for p in picks), (m, n, k)
            for pick in picks:
                settings = {key: pick[key] for key in CONFIG_KEYS if key in pick}
                settings.setdefault("split_k", 1)
                t = resolve_tiling(m, n, k, transpose_b=transpose_b, dtype=dtype, unswapped=epilogue,
                                   input_dtypes=(dtype,), **settings)
                assert t.tile_m == pick["tile_m"] and t.tile_n == pick["tile_n"]
                assert not (epilogue and t.swap_ab)


@pytest.mark.parametrize("dtype", ["bfloat16", "float8_e4m3fn"])
def test_every_candidate_of_every_switch_passes_the_kernels_checks(monkeypatch, dtype):
    """Every configuration the model estimates, with every switch of OFFERS on, is one the kernel
    takes: the model reads the tile and accumulator limits from tile_limits, as the tiling's
    check does, and counts stream-K's work items as the kernel does (a pair's two tiles are one
    item: FP8 stream-K pairs on 1373x3582x385 left 24 split k-steps for 66 pairs, and were offered)."""
    for name in model.OFFERS:
        monkeypatch.setattr(model, f"OFFER_{name.upper()}", True)
    rng = random.Random(11)
    shapes = [(1373, 3582, 385, True), (2048, 5632, 2048, True)] + [_random_shape(rng) for _ in range(24)]
    for m, n, k, transpose_b in shapes:
        transpose_b = transpose_b or dtype != "bfloat16"  # FP8 wgmma reads B (n, k) only
        for epilogue in (False, True):
            p = model.Problem(m, n, k, transpose_b=transpose_b, dtype=dtype, epilogue=epilogue)
            for candidate in model.candidates(p):
                settings = {"split_k": 1, **{key: candidate[key] for key in CONFIG_KEYS if key in candidate}}
                try:
                    resolve_tiling(m, n, k, transpose_b=transpose_b, dtype=dtype, input_dtypes=(dtype,),
                                   **settings)
                except ValueError as error:
                    pytest.fail(f"{m}x{n}x{k} transpose_b={transpose_b} epilogue={epilogue}: {candidate}: {error}")


def test_the_models_stream_k_check_is_the_kernels(monkeypatch):
    """The model offers a stream-K grid exactly where the kernel takes it, both ways: it reads the
    kernel's own plan (StreamKPlan.every_unit_splits) over the kernel's work items. A count of its
    own refused grids the kernel takes (3155x18944x4096 in 128 x 256 tiles: the kernel shortens
    the whole rounds there) and offered FP8 pairs the kernel refuses (1373x3582x385)."""
    monkeypatch.setattr(model, "OFFER_NARROW_STREAM_K", True)  # the area rule is the model's alone
    rng = random.Random(13)
    shapes = [(3155, 18944, 4096), (1373, 3582, 385), (1598, 32312, 3504)] + [_random_shape(rng)[:3]
                                                                             for _ in range(40)]
    seen = set()
    for m, n, k in shapes:
        for tm, tn in ((128, 128), (128, 256), (256, 128)):
            rows, cols, k_tiles = -(-m // tm), -(-n // tn), -(-k // 64)
            for cluster_m, cluster_n in ((1, 1), (2, 1), (1, 2)):
                if rows < cluster_m or cols < cluster_n:
                    continue
                offered = model._stream_k_ok(tm, tn, rows, cols, k_tiles, SMS, cluster_m=cluster_m,
                                             cluster_n=cluster_n)
                try:
                    resolve_tiling(m, n, k, transpose_b=True, tile_m=tm, tile_n=tn, persistent="stream_k",
                                   cluster_m=cluster_m, cluster_n=cluster_n, split_k=1)
                    takes = True
                except ValueError as error:
                    if "at least one k-step" not in str(error):
                        continue  # refused for another reason, which the model checks elsewhere
                    takes = False
                assert offered == takes, (m, n, k, tm, tn, cluster_m, cluster_n)
                seen.add(takes)
    assert seen == {True, False}  # both answers occur among the shapes


@pytest.mark.parametrize("transpose_b", [True, False])
def test_one_given_tile_side_gets_a_partner_it_builds_with(transpose_b):
    """make_gemm(..., tile_n=256) on a shape whose tuned or modelled pick is 256 x 128 used to pair
    the given 256 with tile_m=256 and fail; now each side a user may give resolves to a checked
    tiling with that side, on the notebook's shape and on drawn ones."""
    from mgpu_lab.kernels.gemm.tiling import TILE_MS
    from mgpu_lab.kernels.gemm.model import _tile_ns

    rng = random.Random(3)
    shapes = [(4096, 4096, 4096)] + [_random_shape(rng)[:3] for _ in range(12)]
    for m, n, k in shapes:
        for side, values in (("tile_m", TILE_MS), ("tile_n", _tile_ns(transpose_b))):
            for value in values:
                t = resolve_tiling(m, n, k, transpose_b=transpose_b, **{side: value})
                assert getattr(t, side) == value and not t.swap_ab, (m, n, k, side, value)


@pytest.mark.parametrize("given", [
    {"split_k": 4, "split_k_reduce": "workspace"}, {"split_k": 4, "split_k_reduce": "cluster"},
    {"persistent": True}, {"cluster_m": 2, "persistent": True}, {"swap_ab": False}, {"split_k": 16}])
def test_the_block_scheme_a_user_gives_builds_on_any_shape(given):
    """make_gemm(64, 256, 4096, split_k=4, split_k_reduce='workspace') took the model's pick for
    the rest, which swaps A and B (a swap sums slices only in a cluster), and refused the user's
    own valid request. Settings given without tile sizes now get the fastest configuration that
    takes them, on the few-row shapes whose pick swaps and on drawn ones."""
    from mgpu_lab.kernels.gemm.split_k import even_split_k

    rng = random.Random(5)
    shapes = [(64, 256, 4096), (32, 4096, 4096), (7, 14336, 4096)] + [_random_shape(rng)[:3] for _ in range(8)]
    for m, n, k in shapes:
        if given.get("cluster_m") and m < 129 or given.get("split_k", 1) > -(-k // 64):
            continue  # a pair of row tiles needs two of them; a split, as many k-steps
        t = resolve_tiling(m, n, k, transpose_b=True, **{"split_k": None, **given})
        for key, value in given.items():
            have = t.cluster_split if key == "split_k_reduce" and value == "cluster" else getattr(t, key)
            want = True if key == "split_k_reduce" and value == "cluster" else value
            if key == "split_k_reduce" and value == "workspace":
                have, want = t.cluster_split, False
            if key == "split_k":  # as many slices as leave none empty (split_k.even_split_k)
                want = even_split_k(t.k_tiles, value)
            assert have == want, (m, n, k, key, have, want)


def test_the_model_is_cheap():
    """No compilation to decide: a new shape's ranking costs milliseconds of host time."""
    model_config(1000, 1000, 1000)  # imports
    t0 = time.perf_counter()
    model_config(7777, 5432, 3216, transpose_b=True)
    assert time.perf_counter() - t0 < 0.1


def test_the_table_switch(monkeypatch):
    monkeypatch.delenv(TABLE_ENV, raising=False)
    assert table_enabled() and not table_enabled(False)
    assert gemm_config(4096, 4096, 4096, transpose_b=True)["source"] == "tuned"
    assert gemm_config(4096, 4096, 4096, transpose_b=True, table=False)["source"] == "model"
    assert gemm_config(3072, 3072, 3072)["source"] == "model"  # untuned: the model
    for off in ("0", "off", "false", "no"):
        monkeypatch.setenv(TABLE_ENV, off)
        assert not table_enabled() and gemm_config(4096, 4096, 4096, transpose_b=True)["source"] == "model"
    assert gemm_config(4096, 4096, 4096, transpose_b=True, table=True)["source"] == "tuned"
    monkeypatch.setenv(TABLE_ENV, "1")
    assert gemm_config(4096, 4096, 4096, transpose_b=True)["source"] == "tuned"


def test_the_estimate_follows_waves():
    """Physics the constants cannot undo: one more full wave costs time, a longer K costs time."""
    p1, p2 = model.Problem(128 * 12, 256 * 11, 4096), model.Problem(128 * 12, 256 * 22, 4096)  # 1 and 2 waves
    config = {"tile_m": 128, "tile_n": 256, "persistent": False}
    assert model.estimate_us(p2, config) > 1.8 * model.estimate_us(p1, config)
    assert model.estimate_us(model.Problem(4096, 4096, 8192), config) > model.estimate_us(
        model.Problem(4096, 4096, 4096), config)


def test_rows_off_the_128_byte_line_make_load_heavy_tiles_slower():
    """The drawn-shape records: with rows off the line, tiles that load more bytes per flop lose
    most. The same k-steps (k 4136 and 4160 both take 65), only the pitch differs."""
    assert model._misaligned_rows(model.Problem(64, 64, 4136, transpose_b=True)) == (True, True)
    assert model._misaligned_rows(model.Problem(64, 4104, 4160, transpose_b=False)) == (False, True)
    assert model._misaligned_rows(model.Problem(64, 4104, 4160, transpose_b=True)) == (False, False)
    assert model._misaligned_rows(model.Problem(64, 64, 4160, dtype="float8_e4m3fn", transpose_b=True)) \
        == (True, True)  # 64 bytes of FP8 rows: half a line
    assert model.CONSTANTS.misaligned > 1.0
    off, on = model.Problem(2048, 2816, 4136, transpose_b=True), model.Problem(2048, 2816, 4160, transpose_b=True)
    heavy = {"tile_m": 128, "tile_n": 128, "persistent": True}  # 16 KB + 16 KB for 2 Mflop a step
    light = {"tile_m": 128, "tile_n": 256, "persistent": True}  # 16 KB + 32 KB for 4 Mflop
    assert model.estimate_us(off, heavy) > 1.1 * model.estimate_us(on, heavy)
    assert model.estimate_us(off, heavy) / model.estimate_us(on, heavy) > \
        model.estimate_us(off, light) / model.estimate_us(on, light)
    # swap-AB: the tile's rows are B's, its columns A's; B (n, k) shares A's pitch, so only the
    # tile sizes decide, and the estimate still grows off the line
    swap = {"tile_m": 128, "tile_n": 16, "persistent": False, "swap_ab": True}
    assert model.estimate_us(model.Problem(16, 8192, 4136, transpose_b=True), swap) > \
        model.estimate_us(model.Problem(16, 8192, 4160, transpose_b=True), swap) * 0.99


def test_rows_off_the_line_cap_all_blocks_l2_reads_and_multicast_halves_them(before_192_rows):
    """The drawn-shape records: compute-bound shapes with both operands off the line ran at
    5.5-5.8 TB/s of L2 -> SM reads whatever the tile (128 x 256, 128 x 128, 256 x 96, pingpong
    64 x 192), where aligned ones reach 9-16. All blocks together are capped, so a multicast pair,
    which reads B once for two blocks, is what such a shape needs."""
    c = model.CONSTANTS
    assert c.l2_bw_misaligned < 0.6 * c.l2_bw
    off = model.Problem(1310, 19640, 21416)  # k and n off the line (B (k, n)): both operands
    assert model._misaligned_rows(off) == (True, True)
    single = {"tile_m": 128, "tile_n": 256, "persistent": "stream_k"}
    pair = {**single, "cluster_m": 2}
    tiles, k_tiles = -(-1310 // 128) * -(-19640 // 256), -(-21416 // 64)
    reads = tiles * k_tiles * 64 * 2 * (128 + 256)  # bytes of A and B boxes, every tile's k-steps
    assert model.estimate_us(off, single) >= reads / c.l2_bw_misaligned
    assert model.estimate_us(off, pair) < 0.85 * model.estimate_us(off, single)
    assert model.ranked(off)[0][1].get("cluster_m") == 2
    # on the line the same cap is far from binding: the pair gains little
    on = model.Problem(1280, 19712, 21504)
    assert model._misaligned_rows(on) == (False, False)
    assert model.estimate_us(on, pair) > 0.9 * model.estimate_us(on, single)


def test_pairs_sharing_a_are_estimated_and_offered_only_when_switched_on(monkeypatch, no_switches):
    """cluster_n=2 pairs read A once for two blocks: the estimate of a tall tile (256 x 128, where
    A is two thirds of the bytes) drops off the line. The model offers them only with
    OFFER_A_PAIRS (off until measured on a GPU), and then every one it offers builds."""
    off = model.Problem(8192, 8192, 8232, transpose_b=True)  # both operands off the line, L2-bound
    single = {"tile_m": 256, "tile_n": 128, "persistent": True, "group_m": 8}
    a_pair, b_pair = {**single, "cluster_n": 2}, {**single, "cluster_m": 2}
    assert model.estimate_us(off, a_pair) < model.estimate_us(off, b_pair) < model.estimate_us(off, single)
    assert not any(config.get("cluster_n") for config in model.candidates(off))
    monkeypatch.setattr(model, "OFFER_A_PAIRS", True)
    offered = [config for config in model.candidates(off) if config.get("cluster_n")]
    assert {config["persistent"] for config in offered} == {True, "stream_k"}
    for config in offered:
        settings = {key: config[key] for key in CONFIG_KEYS if key in config}
        t = resolve_tiling(off.m, off.n, off.k, transpose_b=True, split_k=1, **settings)
        assert t.cluster_n == 2 and t.grid % 2 == 0


@pytest.mark.parametrize("transpose_b", [False, True])
def test_clusters_of_four_are_offered_only_when_switched_on_take_nothing_away_and_all_build(monkeypatch, no_switches,
                                                                                             transpose_b):
    """2 x 2 quads (cluster_m=2 with cluster_n=2): each block reads half of A and half of B, so
    off the line the estimate drops below both pairs'; at most 30 clusters of four run at once
    (120 SMs). Off until timed on a GPU; on, the switch adds clusters of four (quads, 4 x 1, 1 x 4)
    and nothing else, and every one offered builds."""
    off = model.Problem(1161, 1424, 11496, transpose_b=transpose_b)  # both operands off the line
    quad = {"tile_m": 128, "tile_n": 128, "persistent": True, "group_m": 8, "cluster_m": 2, "cluster_n": 2}
    pairs = [{**quad, "cluster_n": 1}, {**quad, "cluster_m": 1}]
    assert all(model.estimate_us(off, quad) < model.estimate_us(off, pair) for pair in pairs)
    before = [c for c in model.candidates(off)]
    assert not any(c.get("cluster_m", 1) * c.get("cluster_n", 1) == 4 for c in before)
    monkeypatch.setattr(model, "OFFER_CLUSTERS_OF_FOUR", True)
    after = [c for c in model.candidates(off)]
    added = [c for c in after if c not in before]
    assert all(c.get("cluster_m", 1) * c.get("cluster_n", 1) == 4 and c["persistent"] is True for c in added)
    assert {(c.get("cluster_m", 1), c.get("cluster_n", 1)) for c in added} == {(2, 2), (4, 1), (1, 4)}
    assert [c for c in after if c not in added] == before
    for config in added:
        settings = {key: config[key] for key in CONFIG_KEYS if key in config}
        t = resolve_tiling(off.m, off.n, off.k, transpose_b=transpose_b, split_k=1, **settings)
        assert t.cluster_size == 4 and t.grid % 4 == 0 and t.grid <= 120


def test_swapped_tiles_for_a_swap_safe_epilogue_only_when_switched_on_or_asked_for(monkeypatch):
    """`fused`'s epilogues apply to C.T's tiles too (OFFER_SWAP_EPILOGUE is on since it was timed).
    With OFFER_SWAP_EPILOGUE off the choice for a
    kernel with one is the same as for any epilogue (C's own tiles); on, the model may swap for it
    (a decode-sized nn.Linear with a bias, 4 x 4096 x 4096, swaps as one without does), never
    through a workspace and never above 128 x 128 f32 a consumer. swap_ab=True asked for is
    given either way; an unmarked epilogue never swaps."""
    from mgpu_lab.kernels.gemm import fused, make_gemm

    assert model.OFFER_SWAP_EPILOGUE
    monkeypatch.setattr(model, "OFFER_SWAP_EPILOGUE", False)
    e = fused(4, 4096, bias="bfloat16")
    plain = resolve_tiling(4, 4096, 4096, transpose_b=True, split_k=None)
    assert plain.swap_ab  # without an epilogue
    off = resolve_tiling(4, 4096, 4096, transpose_b=True, split_k=None, swappable_epilogue=True)
    assert not off.swap_ab and off == resolve_tiling(4, 4096, 4096, transpose_b=True, split_k=None, unswapped=True)
    asked = resolve_tiling(4, 4096, 4096, transpose_b=True, split_k=None, swappable_epilogue=True, swap_ab=True)
    assert asked.swap_ab and (asked.split_k == 1 or asked.cluster_split)
    monkeypatch.setattr(model, "OFFER_SWAP_EPILOGUE", True)
    on = resolve_tiling(4, 4096, 4096, transpose_b=True, split_k=None, swappable_epilogue=True)
    assert on.swap_ab and (on.split_k == 1 or on.cluster_split)
    assert make_gemm(4, 4096, 4096, transpose_b=True, epilogue=e, epilogue_inputs=e.inputs).name.endswith("_swapab")
    assert not make_gemm(4, 4096, 4096, transpose_b=True, epilogue=lambda acc, tile, bias: acc,
                         epilogue_inputs=e.inputs).name.endswith("_swapab")
    p = model.Problem(300, 3584, 18944, transpose_b=True, epilogue=model.SWAPPABLE)
    swapped = [c for c in model.candidates(p) if c.get("swap_ab")]
    assert swapped and all((c["tile_m"] // 2 if c["tile_m"] > 64 else c["tile_m"]) * c["tile_n"] <= 128 * 128
                           and c.get("split_k_reduce", "cluster") == "cluster" for c in swapped)


def test_pairs_sharing_b_are_offered_persistent_and_stream_k_whatever_else_is_switched_off(no_switches):
    """The switches for new pairs add candidates and take none away: with both off, a large
    problem still gets B pairs both ways (a misplaced switch once hid the stream-K ones)."""
    offered = {(c["persistent"], c["tile_n"]) for c in model.candidates(model.Problem(8192, 8192, 8192))
               if c.get("cluster_m") == 2}
    assert offered == {(True, 128), (True, 256), ("stream_k", 128), ("stream_k", 256)}


def test_the_model_offers_clusters_by_the_rule_the_tiling_checks():
    """One rule of which B tiles a cluster's blocks split (cluster_shares.pairs_split_b), read by
    the tiling's check and the model's offers alike (no copy to drift); tiling's name still works."""
    from mgpu_lab.kernels.gemm import cluster_shares, tiling

    assert tiling.pairs_split_b is cluster_shares.pairs_split_b is model.pairs_split_b
    assert [w for w in range(8, 257, 8) if cluster_shares.pairs_split_b(w, True, 4)] == list(range(64, 257, 32))
    assert [w for w in range(8, 257, 8) if cluster_shares.pairs_split_b(w, False, 2)] == [128, 192, 256]


@pytest.mark.parametrize("transpose_b", [False, True])
def test_wide_pairs_sharing_b_are_offered_only_when_switched_on_and_all_build(monkeypatch, no_switches, transpose_b):
    """Pairs at tile_n 160, 192, 224 (B (n, k)) or 192 (B (k, n)): off until timed on a GPU; on,
    every width offered is one the kernel splits (tiling.pairs_split_b) and every pair builds."""
    from mgpu_lab.kernels.gemm.tiling import pairs_split_b

    narrow = model.Problem(8192, 536, 8192, transpose_b=transpose_b)  # 3 tiles of 192: 7% waste, not 30%
    assert {c["tile_n"] for c in model.candidates(narrow) if c.get("cluster_m")} <= {128, 256}
    monkeypatch.setattr(model, "OFFER_WIDE_B_PAIRS", True)
    pairs = [c for c in model.candidates(narrow) if c.get("cluster_m")]
    assert {c["tile_n"] for c in pairs} == ({128, 160, 192, 224, 256} if transpose_b else {128, 192, 256})
    assert all(pairs_split_b(c["tile_n"], transpose_b) for c in pairs)
    for config in pairs:
        settings = {key: config[key] for key in CONFIG_KEYS if key in config}
        t = resolve_tiling(narrow.m, narrow.n, narrow.k, transpose_b=transpose_b, split_k=1, **settings)
        assert t.cluster_m == 2 and t.grid % 2 == 0


@pytest.mark.parametrize("m, transpose_b", [(530, False), (1000, True), (300, True)])
def test_persistent_swapped_tiles_are_offered_only_when_switched_on_and_all_build(monkeypatch, no_switches, m,
                                                                                  transpose_b):
    """swap_ab with persistent blocks: C.T's tile_n over m in even shares (530: 184 or 192 wide,
    three tiles), offered with OFFER_SWAP_PERSISTENT up to SWAP_PERSISTENT_MAX_M rows, stream-K
    ones only with OFFER_SWAP_STREAM_K as well; one-tile swapped blocks stay where they were
    (m <= SWAP_AB_MAX_M) either way."""
    p = model.Problem(m, 5920, 3152, transpose_b=transpose_b)
    def swapped(persistent):
        return [c for c in model.candidates(p) if c.get("swap_ab") and bool(c["persistent"]) == persistent]
    one_tile = swapped(False)
    assert not swapped(True) and bool(one_tile) == (m <= model.SWAP_AB_MAX_M)
    monkeypatch.setattr(model, "OFFER_SWAP_PERSISTENT", True)
    assert swapped(False) == one_tile
    assert {c["persistent"] for c in swapped(True)} == {True}
    monkeypatch.setattr(model, "OFFER_SWAP_STREAM_K", True)
    offered = swapped(True)
    # stream-K where a width slices evenly (tile_n * 32 / tile_m columns): 192 of 530's
    kinds = {c["persistent"] for c in offered}
    assert kinds == {True, "stream_k"} if m == 530 else kinds <= {True, "stream_k"}
    widths = {c["tile_n"] for c in offered}
    assert all(-(-m // w) in range(-(-m // 256), -(-m // 256) + 3) for w in widths)
    if m == 530:
        assert widths & {184, 192}
    for config in offered:
        settings = {key: config[key] for key in CONFIG_KEYS if key in config}
        t = resolve_tiling(p.m, p.n, p.k, transpose_b=transpose_b, split_k=1, **settings)
        assert t.swap_ab and t.persistent == config["persistent"] and t.grid <= p.sms


@pytest.mark.skipif(has_gpu(), reason="checks the no-GPU error")
def test_tune_auto_without_a_gpu_says_so():
    with pytest.raises(RuntimeError, match=r"tune='auto' times candidates on the GPU, and no CUDA GPU"):
        make_gemm(3072, 3072, 3072, tune="auto")


def test_tune_auto_lays_what_the_user_gave_over_the_tuned_pick(monkeypatch):
    """make_gemm(..., tune="auto") unpacks auto_settings' answer in CONFIG_KEYS order: the tuned
    configuration, each setting the user gave on top (here without a GPU: the tuner's answer
    stands in)."""
    from mgpu_lab.kernels.gemm import configs

    tuned = {"tile_m": 128, "tile_n": 256, "persistent": True, "group_m": 16, "source": "auto-tuned"}
    monkeypatch.setattr(configs, "auto_tuned_config", lambda *args, **kwargs: dict(tuned))
    k = make_gemm(4096, 4096, 4096, transpose_b=True, tune="auto", cluster_n=2)
    settings = configs.auto_settings("auto", 4096, 4096, 4096, make=make_gemm, transpose_b=True, dtype="bfloat16",
                                     out_dtype="bfloat16", epilogue=False,
                                     given={"cluster_n": 2, "split_k": None, "cluster_m": None})
    assert dict(zip(configs.CONFIG_KEYS, settings)) == {
        "tile_m": 128, "tile_n": 256, "stages": None, "group_m": 16, "persistent": True, "split_k": 1,
        "split_k_reduce": None, "cluster_m": None, "swap_ab": None, "cluster_n": 2, "team_m": None}
    assert k.compiled.cluster == (2, 1, 1) and k.compiled.grid == (132, 1, 1)  # the tuned tiles, in pairs


def test_tune_auto_times_the_top_few_and_the_picks_cluster_twin(monkeypatch, before_192_rows):
    """tune='auto' times the model's TUNE_CANDIDATES fastest and its pick's cluster twin; on the
    Llama gate / up projection (2048x5632x2048, B (n, k)) the pick is a multicast pair and the
    twin its single-block grid, which ran faster on both GPUs. The tuner's answer is the
    candidate it timed fastest (here without a GPU: a stand-in tuner says which)."""
    from types import SimpleNamespace

    import mgpu_lab.runtime.device
    import mgpu_lab.tuning
    from mgpu_lab.kernels.gemm import configs

    # With wide_pingpong the pick is a 128 x 176 pingpong pair and its twin already the runner-up;
    # without it the pick is a 128 x 256 pair whose twin only the tuner's extra candidate times.
    monkeypatch.setattr(model, "OFFER_WIDE_PINGPONG", False)
    shape = dict(transpose_b=True, dtype="bfloat16", out_dtype="bfloat16", epilogue=False)
    top = [kernel_options(c) for c in model_ranking(2048, 5632, 2048, count=configs.TUNE_CANDIDATES, **shape)]
    candidates = configs.tune_candidates(2048, 5632, 2048, **shape)
    assert list(candidates[:len(top)]) == top and len(candidates) == len(top) + 1
    pick, twin = top[0], candidates[-1]
    assert pick.get("cluster_m", 1) * pick.get("cluster_n", 1) > 1, "the pick is a cluster"
    assert twin == {key: value for key, value in pick.items() if key not in ("cluster_m", "cluster_n")}
    assert configs.cluster_twin(twin) == {**twin, "cluster_m": 2}

    timed = {}

    def stand_in_tune(build, space, inputs, reference, progress):
        timed["configs"] = [dict(build.args[-1][choice]) for choice in space["choice"]]
        return SimpleNamespace(best=SimpleNamespace(config={"choice": len(space["choice"]) - 1}))

    monkeypatch.setattr(mgpu_lab.runtime.device, "has_gpu", lambda: True)
    monkeypatch.setattr(mgpu_lab.tuning, "tune", stand_in_tune)
    answer = configs.auto_tuned_config(2048, 5632, 2048, make=make_gemm, **shape)
    assert timed["configs"] == list(candidates)
    assert answer == {**twin, "source": "auto-tuned"}


def test_the_cluster_twin_is_offered_only_where_make_gemm_takes_it():
    """A pick that is not a persistent grid (one tile per block, split-K) has no cluster twin:
    clusters are of persistent grids."""
    from mgpu_lab.kernels.gemm import configs

    shape = dict(transpose_b=False, dtype="bfloat16", out_dtype="bfloat16", epilogue=False)
    for m, n, k in ((4096, 4096, 4096), (256, 256, 16384), (64, 4096, 4096), (2048, 512, 2048), (1289, 7208, 1728)):
        candidates = configs.tune_candidates(m, n, k, **shape)
        pick = kernel_options(model_ranking(m, n, k, **shape)[0])
        assert candidates[0] == pick
        twins = [c for c in candidates if c == configs.cluster_twin(pick)]
        assert len(twins) <= 1 and (not twins or pick.get("persistent") in (True, "stream_k"))
        assert len(candidates) <= configs.TUNE_CANDIDATES + 1
        for config in candidates:
            assert configs._valid(m, n, k, config, **shape)


def test_tune_spends_no_candidate_on_another_block_order_of_one_already_timed(before_192_rows):
    """Where the model's estimates tie at a bandwidth bound its next picks are often its first
    with another group_m (1289x7208x1728, B's rows off the 128-byte line: the top two); tune
    takes the next configuration that differs in more than that instead."""
    from mgpu_lab.kernels.gemm import configs

    shape = dict(transpose_b=False, dtype="bfloat16", out_dtype="bfloat16", epilogue=False)
    ranking = [kernel_options(c) for c in model_ranking(1289, 7208, 1728, count=configs.TUNE_SCAN, **shape)]
    assert configs._same_but_order(ranking[0], ranking[1]) and ranking[0] != ranking[1]
    candidates = configs.tune_candidates(1289, 7208, 1728, **shape)
    assert ranking[1] not in candidates and len(candidates) == configs.TUNE_CANDIDATES + 1
    timed = [c for c in candidates if c != configs.cluster_twin(ranking[0])]
    assert not any(configs._same_but_order(a, b) for i, a in enumerate(timed) for b in timed[i + 1:])
    assert timed == [c for c in ranking if not any(configs._same_but_order(c, d) for d in ranking[:ranking.index(c)])][
        :configs.TUNE_CANDIDATES]


def test_tune_takes_auto_or_none():
    with pytest.raises(ValueError, match=r"tune must be 'auto' or None, got 'fast'"):
        make_gemm(256, 256, 256, tune="fast")
    with pytest.raises(ValueError, match=r"tune must be 'auto' or None, got 'fast'"):
        make_gemm(256, 256, 256, tile_m=128, tile_n=128, tune="fast")


@pytest.mark.parametrize("kwargs, message", [
    ({"m": 0}, r"m must be"), ({"n": -8}, r"n must be"), ({"k": 2.5}, r"k must be"), ({"m": True}, r"m must be"),
    ({"dtype": "float32"}, r"dtype must be one of 'bfloat16', 'float16', got 'float32'"),
    ({"dtype": "float8_e4m3fn"}, r"dtype must be one of 'bfloat16', 'float16', got 'float8_e4m3fn'"),
    ({"out_dtype": "int8"}, r"out_dtype must be 'bfloat16', 'float16' or 'float32', got 'int8'"),
])
def test_bad_input_keeps_its_clear_errors(kwargs, message):
    args = {"m": 512, "n": 512, "k": 512} | kwargs
    m, n, k = args.pop("m"), args.pop("n"), args.pop("k")
    with pytest.raises(ValueError, match=message):
        make_gemm(m, n, k, **args)


def test_random_shapes_are_deterministic_and_skip_the_table():
    from gemm_random import random_problems, tuned_shapes

    tuned = tuned_shapes()
    assert (4096, 4096, 4096) in tuned and (16, 6144, 4096) in tuned
    first = random_problems(64, 7)
    assert first == random_problems(64, 7) and first != random_problems(64, 8)
    assert len(first) == 64 and len({(p.m, p.n, p.k, p.transpose_b) for p in first}) == 64
    assert not any((p.m, p.n, p.k) in tuned for p in first)
    for p in first:
        assert 1 <= p.m <= 16384 and p.n % 8 == 0 and p.k % 8 == 0 and 256 <= min(p.n, p.k) <= max(p.n, p.k) <= 32768
    assert 16 <= sum(p.transpose_b for p in first) <= 48  # half with B (n, k)
    llm = [p for p in first if p.label.startswith("llm")]
    assert 16 <= len(llm) <= 48 and all({p.n, p.k} <= {4096, 8192, 3584, 11008, 14336, 28672, 18944} for p in llm)
    # a shape excluded is never drawn
    drop = {(p.m, p.n, p.k) for p in first[:5]}
    assert not any((p.m, p.n, p.k) in drop for p in random_problems(64, 7, exclude=tuned | drop))


def test_random_summary_figures():
    """The record's totals: geomean, p10, min, the m <= 64 subset's bandwidth share."""
    from gemm_random import percentile, summarize, tag
    from gemm_sweep import Problem

    problems = [Problem(16, 4096, 4096, True, "a"), Problem(1024, 1024, 1024, False, "b"),
                Problem(2048, 2048, 2048, False, "c")]
    figures: dict = {}
    for p, ratio in zip(problems, (0.9, 1.0, 1.1)):
        figures[f"{tag(3, p)}_kernel_vs_cublas"] = ratio
        figures[f"{tag(3, p)}_call_vs_cublas"] = ratio
        figures[f"{tag(3, p)}_ours_us"] = 20.0
    summarize(3, problems, figures, [])
    assert figures["gemm_random_seed3_min_vs_cublas"] == 0.9
    assert figures["gemm_random_seed3_geomean_vs_cublas"] == pytest.approx((0.9 * 1.0 * 1.1) ** (1 / 3))
    assert figures["gemm_random_seed3_p10_vs_cublas"] == pytest.approx(percentile([0.9, 1.0, 1.1], 10))
    moved = (16 * 4096 + 4096 * 4096 + 16 * 4096) * 2
    assert figures["gemm_random_seed3_m64_bandwidth_share_of_copy_geomean"] == pytest.approx(
        moved / 20e-6 / 4.04e12)
    # the copy measured in the run (an H100's is slower than the H200's default) is the ceiling
    summarize(3, problems, figures, [], copy_bytes_per_s=3.0e12)
    assert figures["gemm_random_seed3_m64_bandwidth_share_of_copy_geomean"] == pytest.approx(moved / 20e-6 / 3.0e12)
    # a copy of as many bytes, timed beside the shape: its time over ours
    assert "gemm_random_seed3_m64_bandwidth_share_of_same_bytes_copy_geomean" not in figures
    figures[f"{tag(3, problems[0])}_same_bytes_copy_us"] = 15.0
    summarize(3, problems, figures, [])
    assert figures[f"{tag(3, problems[0])}_bandwidth_share_of_same_bytes_copy"] == 0.75
    assert figures["gemm_random_seed3_m64_bandwidth_share_of_same_bytes_copy_geomean"] == 0.75


def test_drawn_shapes_with_a_bias_build_the_users_kernel_and_name_their_figures():
    """bench_gemm.py --random N --seed S --epilogue bias: each shape's kernel is the one a user
    gets with a bias in the epilogue (the model's pick for a kernel with one: C's own tiles, no
    workspace split), built in the pool's worker function; figures under gemm_random_bias_seed<S>."""
    import subprocess
    import sys

    from gemm_random import _build, figure_prefix, make_ours, summarize, tag
    from gemm_sweep import Problem

    p = Problem(200, 1072, 27360, True, "drawn")  # plain: a 12-slice workspace split; with a bias: a cluster split
    config, seconds = _build(p.m, p.n, p.k, p.transpose_b, epilogue="bias")
    assert not config.get("swap_ab") and config.get("split_k_reduce", "cluster") == "cluster" and seconds > 0
    kern = make_ours(p.m, p.n, p.k, p.transpose_b, "bias")
    assert [s.shape for s in kern.compiled.inputs] == [(200, 27360), (1072, 27360), (1072,)]
    assert kern.compiled.grid[1] == config["split_k"] > 1 and len(kern.launches) == 1
    assert tag(5, p, "bias") == "gemm_random_bias_seed5_200x1072x27360_nt" and figure_prefix(5) == "gemm_random_seed5"
    figures = {f"{tag(5, p, 'bias')}_kernel_vs_cublas": 0.9, f"{tag(5, p, 'bias')}_call_vs_cublas": 0.8,
               f"{tag(5, p, 'bias')}_ours_us": 50.0}
    summarize(5, [p], figures, [], "bias")
    assert figures["gemm_random_bias_seed5_geomean_vs_cublas"] == 0.9 and "gemm_random_seed5_geomean_vs_cublas" not in figures
    with pytest.raises(ValueError, match=r"epilogue: expected one of \('bias',\) or None, got 'gelu'"):
        make_ours(p.m, p.n, p.k, p.transpose_b, "gelu")
    bench = str(Path(__file__).parent.parent / "benchmarks" / "bench_gemm.py")
    out = subprocess.run([sys.executable, bench, "--random", "4", "--fp8", "--epilogue", "bias"],
                         capture_output=True, text=True, timeout=120)
    assert out.returncode == 2 and "--epilogue goes with --random N, bf16 (not --fp8)" in out.stderr


def test_options_on_drawn_shapes_time_every_family_and_read_back_as_samples(tmp_path):
    # bench_gemm_options --random: the model's alternatives on drawn shapes, named so that
    # fit_gemm_model reads each back as the configuration that ran, with B's recorded layout.
    import json

    from bench_gemm_options import family, name_of, random_cases
    from fit_gemm_model import option_samples, parse_option

    from mgpu_lab.kernels.gemm import model

    cases = list(random_cases(6, [11], top=3))
    assert len(cases) == 6
    figures = {}
    for _, p, candidates in cases:
        ranked = [c for _, c in model.ranked(model.Problem(p.m, p.n, p.k, transpose_b=p.transpose_b))]
        assert ranked[0] not in candidates and ranked[1:3] == candidates[:2]
        assert {family(c) for c in ranked} == {family(c) for c in candidates} | {family(ranked[0])}
        figures[f"gemm_options_bf16_{p.key}_transpose_b"] = p.transpose_b
        for i, c in enumerate(candidates):
            assert parse_option(name_of(c)) == {k: v for k, v in c.items() if not (k == "persistent" and v is False)}
            figures[f"gemm_options_bf16_{p.key}_{name_of(c)}_tflops"] = 100.0 + i
    # The default (the model's own pick) is ranked too: its configuration is recorded beside it.
    from bench_gemm_options import model_pick

    _, first, _ = cases[0]
    figures[f"gemm_options_bf16_{first.key}_default_tflops"] = 99.0
    figures[f"gemm_options_bf16_{first.key}_default_config"] = model_pick(first)
    (tmp_path / "gemm_options_2026-12-04T000000Z_test.json").write_text(
        json.dumps({"figures": figures, "notes": {"random": 6, "seed": 11}}))
    samples = option_samples(tmp_path)
    assert len(samples) == sum(len(c) for _, _, c in cases) + 1
    assert all(s.drawn for s in samples)  # drawn shapes: the groups the fit ranks
    assert [s.config for s in samples if s.us == 2.0 * first.m * first.n * first.k / (99.0 * 1e6)] == [model_pick(first)]
    layouts = {(s.problem.m, s.problem.n, s.problem.k): s.problem.transpose_b for s in samples}
    assert layouts == {(p.m, p.n, p.k): p.transpose_b for _, p, _ in cases}


def test_the_fit_counts_rows_off_the_line_only_at_the_promotion_they_ran_with(tmp_path):
    # TMA L2 promotion changes times off the 128-byte line (8-17% at 128 vs 256 bytes), not on it:
    # a record names its promotion (none named: 256 bytes, the old default), and the fit keeps an
    # off-line sample only at the promotion asked for, an aligned one whatever its record's.
    import json

    from common import run_identity
    from fit_gemm_model import at_promotion, option_samples

    from mgpu_lab.runtime.tma_descriptor import l2_promotion

    assert run_identity()["tma_l2_promotion"] == l2_promotion() == "L2_128B"
    figures = {"gemm_options_bf16_2048x2816x4136_128x256_tflops": 400.0,  # K off the line
               "gemm_options_bf16_2048x2816x4136_transpose_b": True,
               "gemm_options_bf16_2048x2816x4160_128x256_tflops": 500.0,  # on it
               "gemm_options_bf16_2048x2816x4160_transpose_b": True}
    for name, extra in (("old", {}), ("probe", {"notes": {"l2_promotion": "L2_128B"}}),
                        ("new", {"tma_l2_promotion": "L2_128B"})):
        (tmp_path / f"gemm_options_2026-12-05T000000Z_{name}.json").write_text(json.dumps({"figures": figures,
                                                                                         **extra}))
    samples = option_samples(tmp_path)
    assert sorted((s.group.split(".json")[0].split("_")[-1], s.promotion) for s in samples if s.problem.k == 4136) == [
        ("new", "L2_128B"), ("old", "L2_256B"), ("probe", "L2_128B")]
    kept, left = at_promotion(samples, "L2_128B")
    assert {(s.problem.k, s.promotion) for s in left} == {(4136, "L2_256B")}
    assert len(kept) == 5 and at_promotion(samples, None) == (samples, [])
    kept, left = at_promotion(samples, "L2_256B")
    assert {(s.problem.k, s.promotion) for s in left} == {(4136, "L2_128B")} and len(left) == 2


def test_narrow_tiles_are_bound_by_shared_memory_reads_when_compute_bound():
    """wgmma reads A, and B once per 64 rows of A, from shared memory at 128 B per clock against
    4096 bf16 flop: a 128 x 64 tile needs 1 B per 32 flop, the port's whole rate, and the records
    ran such tiles 1.25-1.45x the tensor-core estimate on long K (791x3584x14336: a pair of
    128 x 64 tiles 241 us where 128 x 256 stream-K ran 123 us). A wide tile stays under the port."""
    c = model.CONSTANTS
    assert c.smem_eff < 1.0
    p = model.Problem(791, 3584, 14336, transpose_b=True)
    narrow = {"tile_m": 128, "tile_n": 64, "persistent": True, "cluster_n": 2}
    off = dataclasses.replace(c, smem_eff=1e9)  # the port never binds
    assert model.estimate_us(p, narrow, c) > 1.15 * model.estimate_us(p, narrow, off)
    wide = {"tile_m": 128, "tile_n": 256, "persistent": "stream_k"}
    assert model.estimate_us(p, wide, c) == pytest.approx(model.estimate_us(p, wide, off))
    assert model.ranked(p)[0][1]["tile_n"] >= 128


@pytest.mark.parametrize("device, expected", [("H200", ["h200", "old"]), ("H100", ["h100"])])
def test_the_fit_reads_only_the_fitted_gpus_records(tmp_path, device, expected):
    """The built-in constants are an H200's: a record that names another GPU (an H100's run when no
    H200 was lent) is no sample; one that names none ran before records named their device.
    `fit_gemm_model.py --device H100`: an H100's calibration is fitted on its records alone."""
    import json

    from fit_gemm_model import on_model_device, random_samples

    figures = {"gemm_random_seed1_512x512x512_nt_config": {"tile_m": 128, "tile_n": 128},
               "gemm_random_seed1_512x512x512_nt_ours_us": 10.0}
    for name, gpu in (("h200", "NVIDIA H200"), ("h100", "NVIDIA H100 80GB HBM3"), ("old", None)):
        (tmp_path / f"gemm_random_2026-12-05T00000{len(name)}Z_{name}.json").write_text(
            json.dumps({"figures": figures, **({"device": gpu} if gpu else {})}))
    kept = sorted(s.group.split("Z_")[1].split(".json")[0] for s in random_samples(tmp_path, device=device))
    assert kept == expected
    assert on_model_device({"device": "NVIDIA H100 80GB HBM3"}, device) == (device == "H100")
    # a probe that built other kernels (how they store C) timed no kernel the library builds
    gpu = {"H200": "NVIDIA H200", "H100": "NVIDIA H100 80GB HBM3"}[device]
    assert on_model_device({"device": gpu, "gemm_offer": "n16_tiles", "gemm_swap_store": "tma"}, device)
    assert not on_model_device({"device": gpu, "gemm_swap_store": "one-tile"}, device)
    assert not on_model_device({"device": gpu, "gemm_epilogue_slots": "even"}, device)
    assert not on_model_device({"device": gpu, "gemm_epilogue_slots_ran": "even"}, device)
    assert on_model_device({"device": gpu, "gemm_epilogue_slots_ran": "fill"}, device)
    if device == "H200":
        assert on_model_device({"device": "unavailable"}) and kept == sorted(
            s.group.split("Z_")[1].split(".json")[0] for s in random_samples(tmp_path))  # the default


def test_the_switches_can_be_turned_on_and_off_by_the_environment_and_name_a_bad_value():
    # MGPU_LAB_GEMM_OFFER (read at import, so that a benchmark's spawned build workers pick as it
    # does) adds switches to DEFAULT_OFFERS and takes "-name"s away; records name it and the switches
    # on. A name not among the switches is refused naming the variable.
    import os
    import subprocess
    import sys

    code = ("from mgpu_lab.kernels.gemm import model; from common import run_identity; "
            "print(model.OFFER_A_PAIRS, model.OFFER_WIDE_B_PAIRS, model.OFFER_CLUSTERS_OF_FOUR, "
            "run_identity().get('gemm_offer'), ','.join(run_identity()['gemm_switches']))")
    bench = str(Path(__file__).parent.parent / "benchmarks")
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([bench, *sys.path])}
    env.pop("MGPU_LAB_GEMM_OFFER", None)
    out = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True, timeout=120)
    assert out.stdout.split() == ["False", "False", "True", "None", ",".join(model.DEFAULT_OFFERS)], out.stderr
    env["MGPU_LAB_GEMM_OFFER"] = "a_pairs,-clusters_of_four"  # one on, one of the defaults off
    out = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True, timeout=120)
    assert out.stdout.split() == ["True", "False", "False", "a_pairs,-clusters_of_four",
                                  "a_pairs,swap_epilogue,swap_clusters,swap_clusters_wide,row_raster,stream_k_reads,span_pairs,"
                                  "narrow_pairs,stream_k_teams,wide_pingpong,swap_share_b,three_consumers,"
                                  "swap_clusters_share_b"], out.stderr
    env["MGPU_LAB_GEMM_OFFER"] = "a_pairs,b_pairs"
    out = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True, timeout=120)
    assert out.returncode != 0 and ("MGPU_LAB_GEMM_OFFER must name switches among a_pairs, wide_b_pairs, "
                                    "swap_persistent, swap_stream_k, clusters_of_four, swap_epilogue, "
                                    "clusters_of_eight, swap_clusters, swap_clusters_wide, n16_tiles, narrow_stream_k, "
                                    "row_raster, stream_k_reads, l2_reuse_bound, partial_waves, span_pairs, pair_tile, "
                                    "small_stream_k, narrow_pairs, stream_k_teams, dram_rereads, wide_pingpong, "
                                    "local_calibration, soft_step, b_half_boxes, swap_share_b, three_consumers, "
                                    "swap_clusters_share_b (comma-separated, "
                                    "-name to "
                                    "switch one off), "
                                    "got "
                                    "'a_pairs,b_pairs'") in out.stderr


def test_options_with_switches_on_time_the_switched_picks_beside_the_default(no_switches):
    # bench_gemm_options --offer: the alternatives ranked with the model's new switches on (the
    # switched pick first), the default's configuration not among them (it runs as "default"),
    # each name read back by fit_gemm_model as the configuration that ran; the switches restored.
    from bench_gemm_options import given_cases, model_pick, name_of
    from fit_gemm_model import parse_option

    [(_, p, plain)] = given_cases("530x5920x3152:nn", 3)
    [(_, _, switched)] = given_cases("530x5920x3152:nn", 3, ("a_pairs", "wide_b_pairs", "swap_persistent"))
    assert not (model.OFFER_A_PAIRS or model.OFFER_WIDE_B_PAIRS or model.OFFER_SWAP_PERSISTENT)  # restored
    assert name_of(model_pick(p)) not in {name_of(c) for c in switched}
    new = [c for c in switched if c.get("cluster_n") or (c.get("swap_ab") and c.get("persistent"))]
    assert new and not any(c.get("cluster_n") or (c.get("swap_ab") and c.get("persistent")) for c in plain)
    for c in switched:
        assert parse_option(name_of(c)) == {k: v for k, v in c.items() if not (k == "persistent" and v is False)}


def test_drawn_shape_records_read_back_per_dtype(tmp_path):
    # fit_gemm_model: bench_gemm.py --random's bf16 picks are fitted on; its FP8 per-tensor picks
    # are the held-out check (B (n, k), FP8 problems); block-scaled ones have nothing to choose.
    import json

    from fit_gemm_model import random_samples

    config = {"tile_m": 128, "tile_n": 256, "persistent": True, "source": "model", "model_us": 9.0}
    (tmp_path / "gemm_random_2026-12-04T000000Z_test.json").write_text(json.dumps({"figures": {
        "gemm_random_seed12_100x4104x4136_nn_config": config, "gemm_random_seed12_100x4104x4136_nn_ours_us": 10.0,
        "gemm_random_seed12_64x512x512_nt_config": config, "gemm_random_seed12_64x512x512_nt_ours_us": 5.0}}))
    (tmp_path / "gemm_fp8_random_2026-12-04T000000Z_test.json").write_text(json.dumps({"figures": {
        "gemm_fp8_tensor_random_seed12_300x4096x4160_config": config,
        "gemm_fp8_tensor_random_seed12_300x4096x4160_ours_us": 7.0,
        "gemm_fp8_block_random_seed12_300x4096x4224_config": {"tile_m": 128, "tile_n": 128},
        "gemm_fp8_block_random_seed12_300x4096x4224_ours_us": 8.0}}))
    bf16 = random_samples(tmp_path)
    assert sorted((s.problem.m, s.problem.transpose_b, s.problem.dtype, s.us) for s in bf16) == [
        (64, True, "bfloat16", 5.0), (100, False, "bfloat16", 10.0)]
    assert all("source" not in s.config and "model_us" not in s.config for s in bf16)
    [fp8] = random_samples(tmp_path, fp8=True)
    assert (fp8.problem.k, fp8.problem.transpose_b, fp8.problem.dtype, fp8.us) == (4160, True, "float8_e4m3fn", 7.0)
    assert model._misaligned_rows(fp8.problem) == (True, True)  # 4160 FP8 bytes: half a line over


def test_nvidia_heuristics_estimate_our_configurations_or_say_they_cannot():
    # benchmarks/compare_gemm_models.py scores NVIDIA's model on our timed records: a configuration
    # it models gets a positive time that grows with the problem; one it does not (a 136-wide tile)
    # is infinite, never picked, rather than a zero that would always win.
    pytest.importorskip("nvMatmulHeuristics")
    from compare_gemm_models import Heuristics
    from fit_gemm_model import rank_picks as ranking
    from fit_gemm_model import Sample

    h = Heuristics()
    tiles = {"tile_m": 128, "tile_n": 256, "persistent": False}
    small, big = (h.estimate_us(model.Problem(s, s, s, transpose_b=True), tiles) for s in (2048, 8192))
    assert 0 < small < big < float("inf") and 20 < big / small < 80  # 64x the flops; a small problem wastes more
    assert h.estimate_us(model.Problem(129, 4096, 4104, transpose_b=True),
                         {"tile_m": 256, "tile_n": 136, "split_k": 3}) == float("inf")
    p = model.Problem(4096, 4096, 4096, transpose_b=True)
    group = [Sample(p, {"tile_m": 128, "tile_n": 136}, 150.0, "g"), Sample(p, tiles, 160.0, "g"),
             Sample(p, {"tile_m": 64, "tile_n": 64}, 300.0, "g")]
    rank = ranking(group, h.estimate_us)  # the 136-wide tile it cannot model is not its pick
    assert rank["groups"] == 1 and rank["pick_over_best_geomean"] == pytest.approx(160.0 / 150.0)


def test_the_fit_scores_the_pick_the_model_makes_when_two_estimates_tie(no_switches):
    """64 x 128 and 128 x 64 one-tile blocks have the same estimate on 2048 x 512 x 2048; the
    model picks the earlier candidate (64 x 128), so the fit's ranking must too, whatever order
    the record lists them in (it scored the other, 1.21x slower, before)."""
    from fit_gemm_model import Sample, ranking

    p = model.Problem(2048, 512, 2048, transpose_b=True)
    wide, tall = {"tile_m": 64, "tile_n": 128}, {"tile_m": 128, "tile_n": 64}
    assert model.estimate_us(p, wide) == pytest.approx(model.estimate_us(p, tall), rel=1e-12)
    assert model.ranked(p)[0][1] == {**wide, "persistent": False}
    group = [Sample(p, tall, 13.2, "g"), Sample(p, {"tile_m": 128, "tile_n": 256, "split_k": 4,
                                                     "split_k_reduce": "workspace"}, 19.7, "g"),
             Sample(p, wide, 10.9, "g")]
    assert ranking(group, model.CONSTANTS)["pick_over_best_geomean"] == pytest.approx(1.0)


def test_options_on_named_shapes_take_both_layouts_and_refuse_bad_specs():
    # bench_gemm_options --shapes: the model's alternatives on a model's layers (the HF prefill's)
    from bench_gemm_options import given_cases

    cases = list(given_cases("2048x5632x2048, 129x28672x4096:nn", top=3))
    assert [(p.m, p.n, p.k, p.transpose_b) for _, p, _ in cases] == [(2048, 5632, 2048, True),
                                                                      (129, 28672, 4096, False)]
    assert all(dtype == "bf16" and candidates for dtype, _, candidates in cases)
    # --top 0: the default alone, so that --extra's configurations are all that run beside it
    assert [candidates for _, _, candidates in given_cases("2048x5632x2048", top=0)] == [[]]
    for spec, message in (("2048x2048", r"'2048x2048' is not MxNxK\[:nt\|:nn\]"),
                          ("2x2x2:tn", r"'2x2x2:tn': the layout after ':' must be nt or nn")):
        with pytest.raises(SystemExit, match=message):
            list(given_cases(spec, top=3))


def test_swap_ab_candidates_split_a_few_hundred_rows_evenly(no_switches):
    """Past 256 rows, C.T's columns (A's rows) split into 2-4 even tiles: m = 257 as two 136-wide
    tiles (6% waste), not three 128-row tiles (49%); past SWAP_AB_MAX_M, no swapping."""
    def widths(m, transpose_b=True):
        return {c["tile_n"] for c in model.candidates(model.Problem(m, 28672, 8192, transpose_b=transpose_b))
                if c.get("swap_ab")}

    assert 136 in widths(257) and 136 in widths(257, transpose_b=False) and max(widths(257)) <= 256
    assert widths(200) >= {200, 208} and 104 in widths(200)  # whole, or two 104-wide tiles
    assert all(-(-300 // w) <= 4 for w in widths(300))
    assert not widths(model.SWAP_AB_MAX_M + 1)


def test_cluster_split_k_counts_the_clusters_the_device_holds():
    """32 clusters of 4 (128 blocks) do not fit at once on an H200, which holds 30 (clusters do not
    straddle GPCs): the model counts two waves; a device's own count, when given, wins."""
    config = {"tile_m": 128, "tile_n": 128, "persistent": False, "split_k": 4, "split_k_reduce": "cluster"}
    fits, spills = model.Problem(64, 30 * 128, 8192), model.Problem(64, 32 * 128, 8192)
    per_tile = model.estimate_us(fits, config) / 30
    assert model.estimate_us(spills, config) > 1.6 * 32 * per_tile  # two waves, not 32/30 of one
    roomy = model.Problem(64, 32 * 128, 8192, clusters=(132, 66, 44, 33))
    assert model.estimate_us(roomy, config) < 1.2 * 32 * per_tile
    # Sizes the device count does not cover fall back to the H200's measured counts.
    assert model._cluster_capacity(3, model.Problem(1, 1, 1, clusters=(132, 66)), 1.0) == 3 * 39


def test_fit_holds_out_the_records_named():
    # fit_gemm_model --hold-out: a seed's run (its record file) is scored apart, never fitted on.
    from fit_gemm_model import Sample, split_held_out

    p = model.Problem(64, 512, 512)
    a = Sample(p, {"tile_m": 64, "tile_n": 64}, 5.0, "gemm_random_2026-12-05T040620Z_3e725ca.json:x")
    b = Sample(p, {"tile_m": 64, "tile_n": 64}, 6.0, "gemm_random_2026-12-05T041444Z_3e725ca.json:x")
    c = Sample(p, {"tile_m": 64, "tile_n": 64}, 7.0, "table:T040620Z")  # the text only in the shape part
    assert split_held_out([a, b, c], ["T040620Z"]) == ([b, c], [a])
    assert split_held_out([a, b, c], []) == ([a, b, c], [])


@pytest.mark.parametrize("kwargs, message", [
    ({"size": 0, "smem_bytes": 1024}, r"size.*an int from 1 to 16.*got 0"),
    ({"size": 2, "smem_bytes": -1}, r"smem_bytes.*an int >= 0.*got -1"),
    ({"size": 2, "smem_bytes": 1024, "threads": 2048}, r"threads.*an int from 1 to 1024.*got 2048"),
    ({"size": 2.5, "smem_bytes": 1024}, r"size.*got 2.5"),
])
def test_resident_clusters_names_a_bad_argument(kwargs, message):
    from mgpu_lab.runtime.device import resident_clusters

    with pytest.raises((ValueError, TypeError), match=message):
        resident_clusters(**kwargs)


def test_drawn_shape_records_name_the_configuration_the_kernel_was_built_with():
    """A record's `_config` is the built kernel's tiling (with the pick's estimate only where they
    agree): with an epilogue, or a model switch, the kernel may not be what gemm_config gives the
    plain problem (a branch's bias run once recorded the plain pick beside a swapped kernel)."""
    from gemm_random import _build, built_config

    from mgpu_lab.kernels.gemm import make_gemm

    config, _ = _build(200, 1072, 27360, True, "bias")
    assert config["split_k"] == 8 and config["split_k_reduce"] == "cluster" and "model_us" in config
    kernel = make_gemm(530, 5920, 3152, tile_m=128, tile_n=256)
    picked = {"tile_m": 64, "tile_n": 256, "persistent": True, "cluster_m": 2, "source": "model", "model_us": 50.0}
    assert built_config(kernel, picked) == {"tile_m": 128, "tile_n": 256, "persistent": False, "group_m": 8,
                                            "source": "model"}


def test_rows_past_swap_persistent_max_m_and_narrow_rows_of_four_are_not_offered(monkeypatch):
    """Timed on seeds 21-23: persistent swapped tiles lost at 1434 and 1942 rows (x0.94-0.95) and
    won at 525-1043, and four 128 x 64 tiles in a row sharing A lost twice of three, so with every
    switch on neither is offered, and a 1 x 4 cluster of 128 x 128 tiles still is."""
    for name in ("OFFER_SWAP_PERSISTENT", "OFFER_SWAP_STREAM_K", "OFFER_CLUSTERS_OF_FOUR"):
        monkeypatch.setattr(model, name, True)
    over = model.Problem(model.SWAP_PERSISTENT_MAX_M + 8, 8192, 4096, transpose_b=True)
    assert not any(c.get("swap_ab") for c in model.candidates(over))
    under = model.Problem(model.SWAP_PERSISTENT_MAX_M, 8192, 4096, transpose_b=True)
    assert any(c.get("swap_ab") and c["persistent"] for c in model.candidates(under))
    def rows_of_four(m, n, k):  # C's own tiles (swapped clusters share the other way round)
        return [(c["tile_m"], c["tile_n"]) for c in model.candidates(model.Problem(m, n, k, transpose_b=True))
                if c.get("cluster_n") == 4 and not c.get("swap_ab")]
    assert not rows_of_four(883, 840, 21872)  # its 128 x 64 pick ran x0.74
    wide = rows_of_four(1161, 1424, 11496)
    assert (128, 128) in wide and all(tm >= 128 and tn >= 128 for tm, tn in wide)


def test_a_constants_file_replaces_the_fields_it_names(tmp_path):
    path = tmp_path / "h100.json"
    path.write_text('{"l2_bw": 9000000, "dram_bw": 3.2e6}')
    c = model.constants_from_file(str(path))
    assert (c.l2_bw, c.dram_bw) == (9e6, 3.2e6)
    assert c.launch_us == model.Constants().launch_us  # the rest stay built-in
    p = model.Problem(4096, 4096, 4096)
    config = {"tile_m": 128, "tile_n": 256, "persistent": True}
    assert model.estimate_us(p, config, c) > model.estimate_us(p, config, model.Constants())  # less DRAM bandwidth


@pytest.mark.parametrize("text, message", [
    ('{"l2_bandwidth": 1e7}', "'l2_bandwidth' is not a model constant"),
    ('{"l2_bw": 0}', "l2_bw must be a finite number above 0, got 0"),
    ('{"l2_bw": true}', "l2_bw must be a finite number above 0, got True"),
    ('{"l2_bw": "fast"}', "l2_bw must be a finite number above 0, got 'fast'"),
    ('[1, 2]', "expected a JSON object {name: number}, got list"),
    ('{"l2_bw": ', "expected a readable JSON file of GEMM model constants"),
])
def test_a_bad_constants_file_names_the_variable_the_file_and_what_was_expected(tmp_path, text, message):
    path = tmp_path / "bad.json"
    path.write_text(text)
    with pytest.raises(ValueError, match="MGPU_LAB_GEMM_CONSTANTS=") as e:
        model.constants_from_file(str(path))
    assert message in str(e.value) and str(path) in str(e.value)


def test_the_constants_variable_is_read_at_import(tmp_path):
    import os
    import subprocess

    path = tmp_path / "c.json"
    path.write_text('{"tile_us": 7.5}')
    code = "from mgpu_lab.kernels.gemm import model; print(model.CONSTANTS.tile_us)"
    env = {**os.environ, model.CONSTANTS_ENV: str(path)}
    out = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True, check=True,
                         timeout=120)
    assert out.stdout.strip() == "7.5"
    env[model.CONSTANTS_ENV] = str(tmp_path / "missing.json")
    failed = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True, timeout=120)
    assert failed.returncode != 0 and "MGPU_LAB_GEMM_CONSTANTS=" in failed.stderr and "missing.json" in failed.stderr


H100_FIT = Path(__file__).parent.parent / "benchmarks" / "gemm_constants" / "h100_fit2_0a55cfa.json"


@pytest.fixture
def no_constants_variable(monkeypatch):
    monkeypatch.delenv(model.CONSTANTS_ENV, raising=False)
    model.constants_for.cache_clear()
    yield
    model.constants_for.cache_clear()


@pytest.fixture
def h100_calibrated(monkeypatch, no_constants_variable):
    """An H100 with a calibration file of its own (main's H100 keeps the built-in constants: the
    fit of its records picked slower on fresh seeds)."""
    monkeypatch.setitem(model.DEVICE_CONSTANTS, "H100", str(H100_FIT))
    model.constants_for.cache_clear()


def test_every_gpu_picks_with_the_built_in_fitted_constants_by_default(no_constants_variable):
    """The H200 and an unknown GPU take the built-in constants; the H100 the same fitted ones with
    only what was measured on it (h100_measured.json) in place of the H200's: its copy rate, and
    one consumer warpgroup's rate (eff_one) chosen by an A / B."""
    for device in ("NVIDIA H200", "unavailable"):
        assert model.constants_for(device) == model.Constants()
        assert model.calibration_of(device) == "built-in (H200)"
    h100 = model.constants_for("NVIDIA H100 80GB HBM3")
    assert model.calibration_of("NVIDIA H100 80GB HBM3") == "h100_measured.json"
    assert h100 == dataclasses.replace(model.Constants(), copy_bw=2.97e6, eff_one=0.85)


def test_each_gpu_picks_with_its_own_calibration(h100_calibrated):
    """A GPU that DEVICE_CONSTANTS gives a file (an H100's fit: 0.7x the H200's DRAM bandwidth)
    reads it; the H200, and a GPU the model has no file for, the built-in constants."""
    h100 = model.constants_for("NVIDIA H100 80GB HBM3")
    assert h100 == model.constants_from_file(model.device_constants_path("H100"))
    assert h100 != model.Constants() and h100.dram_bw < 0.85 * model.Constants().dram_bw
    assert model.constants_for("NVIDIA H200") == model.Constants() == model.constants_for("unavailable")
    assert model.calibration_of("NVIDIA H100 PCIe") == H100_FIT.name
    assert model.calibration_of("NVIDIA H200") == "built-in (H200)"
    # the calibration changes estimates, so picks: the same config costs more where DRAM is slower
    p, config = model.Problem(8, 8192, 8192, transpose_b=True), {"tile_m": 128, "tile_n": 128, "persistent": False}
    assert model.estimate_us(p, config, h100) > model.estimate_us(p, config, model.Constants())


def test_the_constants_variable_overrides_every_gpus_calibration(monkeypatch, tmp_path, no_constants_variable):
    path = tmp_path / "c.json"
    path.write_text('{"tile_us": 7.5}')
    monkeypatch.setenv(model.CONSTANTS_ENV, str(path))
    monkeypatch.setattr(model, "CONSTANTS", model.constants_from_file(str(path)))
    for device in ("NVIDIA H100 80GB HBM3", "NVIDIA H200"):
        assert model.constants_for(device).tile_us == 7.5
        assert model.calibration_of(device) == f"{model.CONSTANTS_ENV}={path}"


def test_the_library_picks_with_the_current_gpus_calibration(monkeypatch, h100_calibrated):
    """configs' model picks (make_gemm's default) estimate with constants_for(the device's name)."""
    from mgpu_lab.kernels.gemm import configs

    picks = {}
    for device in ("NVIDIA H100 80GB HBM3", "NVIDIA H200"):
        monkeypatch.setattr(configs, "device_name", lambda device=device: device)
        configs.model_ranking.cache_clear()
        picks[device] = configs.model_ranking(8, 8192, 8192, transpose_b=True, sms=132)[0]
    configs.model_ranking.cache_clear()
    for device, pick in picks.items():
        config = {key: value for key, value in pick.items() if key not in ("source", "model_us")}
        expected = model.estimate_us(model.Problem(8, 8192, 8192, transpose_b=True), config,
                                     model.constants_for(device))
        assert pick["model_us"] == pytest.approx(expected, abs=0.01)
    assert picks["NVIDIA H100 80GB HBM3"]["model_us"] != picks["NVIDIA H200"]["model_us"]


def test_the_ranking_cache_keeps_each_gpus_picks_apart(monkeypatch, h100_calibrated):
    """A process that ranks a shape on one GPU model and then on another (two unlike cards in one
    host) gets each device's own estimate, not the first one's from the cache."""
    from mgpu_lab.kernels.gemm import configs

    configs.model_ranking.cache_clear()
    picks = {}
    for device in ("NVIDIA H200", "NVIDIA H100 80GB HBM3", "NVIDIA H200"):
        monkeypatch.setattr(configs, "device_name", lambda device=device: device)
        picks.setdefault(device, []).append(configs.model_ranking(8, 8192, 8192, transpose_b=True, sms=132)[0])
    assert picks["NVIDIA H200"][0] == picks["NVIDIA H200"][1]
    assert picks["NVIDIA H100 80GB HBM3"][0]["model_us"] != picks["NVIDIA H200"][0]["model_us"]
    configs.model_ranking.cache_clear()


def test_records_name_the_epilogue_slot_policy_their_kernels_ran(monkeypatch):
    """common reads the policy without importing pieces: its default must be pieces' own."""
    import common

    from mgpu_lab.kernels.gemm import pieces

    monkeypatch.delenv(pieces.EPILOGUE_SLOTS_ENV, raising=False)
    assert common.run_identity()["gemm_epilogue_slots_ran"] == pieces.EPILOGUE_SLOTS == "fill"
    monkeypatch.setenv(pieces.EPILOGUE_SLOTS_ENV, "even")
    identity = common.run_identity()
    assert identity["gemm_epilogue_slots_ran"] == "even" and identity["gemm_epilogue_slots"] == "even"


def test_records_name_the_calibration_their_picks_used(monkeypatch, h100_calibrated):
    import common

    monkeypatch.setattr(common, "device_name", lambda: "NVIDIA H100 80GB HBM3")
    assert common.run_identity()["gemm_calibration"] == H100_FIT.name
    monkeypatch.setattr(common, "device_name", lambda: "unavailable")
    assert common.run_identity()["gemm_calibration"] == "built-in (H200)"


@pytest.mark.parametrize("transpose_b", [False, True])
def test_clusters_of_eight_are_offered_only_when_switched_on_take_nothing_away_and_all_build(monkeypatch, no_switches,
                                                                                              transpose_b):
    """2 x 4 and 4 x 2 clusters of eight (each block a quarter of one operand's tile, half of the
    other's): off until timed on a GPU; on, the switch adds those two and nothing else, 2 x 4
    estimated below one block a tile and no slower than its 2 x 2 quad where the rows are off the
    line (the model prices only L2 reads, which a quad already halves), and every one offered
    resolves to 15 clusters at most (120 SMs)."""
    off = model.Problem(1161, 11424, 11496, transpose_b=transpose_b)  # both operands off the line
    before = list(model.candidates(off))
    assert not any(c.get("cluster_m", 1) * c.get("cluster_n", 1) == 8 for c in before)
    monkeypatch.setattr(model, "OFFER_CLUSTERS_OF_EIGHT", True)
    after = list(model.candidates(off))
    added = [c for c in after if c not in before]
    assert {(c["cluster_m"], c["cluster_n"]) for c in added} == {(2, 4), (4, 2)}
    assert all(c["persistent"] is True for c in added) and [c for c in after if c not in added] == before
    eight = {"tile_m": 128, "tile_n": 256, "persistent": True, "group_m": 8, "cluster_m": 2, "cluster_n": 4}
    single = {key: value for key, value in eight.items() if not key.startswith("cluster")}
    assert model.estimate_us(off, eight) <= model.estimate_us(off, {**eight, "cluster_n": 2})
    assert model.estimate_us(off, eight) < 0.9 * model.estimate_us(off, single)
    for config in added:
        settings = {key: config[key] for key in CONFIG_KEYS if key in config}
        t = resolve_tiling(off.m, off.n, off.k, transpose_b=transpose_b, split_k=1, **settings)
        assert t.cluster_size == 8 and t.grid % 8 == 0 and t.grid <= 120


@pytest.mark.parametrize("transpose_b", [False, True])
def test_swapped_clusters_are_offered_only_when_switched_on_take_nothing_away_and_all_build(monkeypatch, no_switches,
                                                                                           transpose_b):
    """Swapped persistent tiles in multicast clusters (cuBLAS's mid-m kernels in our terms): off
    until timed on a GPU; on, the switch adds only swapped persistent clusters (B (k, n), read
    MN-major, shares only the caller's A: cluster_n stays 1), a pair estimated below its single
    block where L2 binds, and every one offered resolves to a tiling the kernel builds."""
    p = model.Problem(325, 3736, 2488, transpose_b=transpose_b)
    before = list(model.candidates(p))
    assert not any(c.get("swap_ab") and c.get("cluster_m", 1) * c.get("cluster_n", 1) > 1 for c in before)
    monkeypatch.setattr(model, "OFFER_SWAP_CLUSTERS", True)
    after = list(model.candidates(p))
    added = [c for c in after if c not in before]
    assert added and [c for c in after if c not in added] == before
    assert all(c["swap_ab"] is True and c["persistent"] is True and c["cluster_m"] * c["cluster_n"] > 1
               for c in added)
    shapes = {(c["cluster_m"], c["cluster_n"]) for c in added}
    assert shapes == ({(2, 1), (4, 1), (1, 2), (2, 2), (4, 2), (1, 4), (2, 4)} if transpose_b else {(2, 1), (4, 1)})
    pair = {"tile_m": 64, "tile_n": 176, "persistent": True, "swap_ab": True, "group_m": 8, "cluster_m": 2,
            "cluster_n": 1}
    assert pair in added
    assert model.estimate_us(p, pair) < model.estimate_us(p, {**pair, "cluster_m": 1})
    for config in added:
        settings = {key: config[key] for key in CONFIG_KEYS if key in config}
        t = resolve_tiling(p.m, p.n, p.k, transpose_b=transpose_b, split_k=1, **settings)
        assert t.swap_ab and t.cluster_size == config["cluster_m"] * config["cluster_n"]
    tall = model.Problem(model.SWAP_CLUSTERS_MAX_M + 1, 18944, 3584, transpose_b=transpose_b)
    assert not any(c.get("swap_ab") and c["persistent"] for c in model.candidates(tall))  # C from registers lost there
    monkeypatch.setattr(model, "OFFER_SWAP_CLUSTERS_WIDE", True)  # the probe past that cap, to its own
    assert any(c.get("swap_ab") and c["persistent"] and c["cluster_m"] * c["cluster_n"] > 1
               for c in model.candidates(tall))
    taller = model.Problem(model.SWAP_CLUSTERS_WIDE_MAX_M + 1, 18944, 3584, transpose_b=transpose_b)
    assert not any(c.get("swap_ab") and c["persistent"] for c in model.candidates(taller))


def test_swapped_clusters_reach_1024_rows_by_default(monkeypatch):
    """swap_clusters_wide is on by default: a 908-row problem (past SWAP_CLUSTERS_MAX_M) gets
    swapped persistent clusters among its candidates, and off it gets none."""
    assert "swap_clusters_wide" in model.DEFAULT_OFFERS and model.OFFER_SWAP_CLUSTERS_WIDE
    p = model.Problem(908, 11008, 3584, transpose_b=True, sms=132)

    def swapped_clusters() -> list[dict]:
        return [c for c in model.candidates(p) if c.get("swap_ab") and c["persistent"] is True
                and c["cluster_m"] * c["cluster_n"] > 1]

    assert swapped_clusters()
    monkeypatch.setattr(model, "OFFER_SWAP_CLUSTERS_WIDE", False)
    assert not swapped_clusters()


def test_pairs_spanning_n_share_a_by_default(monkeypatch, before_192_rows):
    """span_pairs is on by default: a tall, narrow problem gets stream-K pairs along n whose two
    tiles cover all of n (A read once), and no other A-sharing pair; off, it gets none. On the
    H200's constants the drawn 5685x264x20416 picks one."""
    assert "span_pairs" in model.DEFAULT_OFFERS and model.OFFER_SPAN_PAIRS and not model.OFFER_A_PAIRS
    p = model.Problem(5685, 264, 20416, transpose_b=True, sms=132)

    def a_pairs(problem: model.Problem) -> list[dict]:
        return [c for c in model.candidates(problem) if c.get("cluster_n") == 2 and not c.get("swap_ab")
                and not c.get("cluster_m")]

    spanning = a_pairs(p)
    assert spanning and all(c["persistent"] == "stream_k" and -(-p.n // c["tile_n"]) == 2 for c in spanning)
    assert {c["tile_n"] for c in spanning} >= {160, 192, 256}
    pick = model.ranked(p, model.Constants())[0][1]
    assert pick.get("cluster_n") == 2 and pick["persistent"] == "stream_k", pick
    wide = model.Problem(5685, 1344, 20416, transpose_b=True, sms=132)  # no two tiles span 1344
    assert not a_pairs(wide)
    # Fewer tiles than half the SMs (no persistent grid offered): still offered while each tile is
    # cut into at most MAX_CONTRIBUTORS + 1 pieces (10 pairs over 66 units), not for 3 pairs.
    few = model.Problem(1162, 480, 12944, sms=132)
    assert {(c["tile_m"], c["tile_n"]) for c in a_pairs(few)} == {(128, 256)}
    assert model.ranked(few, model.Constants())[0][1] == {"tile_m": 128, "tile_n": 256, "persistent": "stream_k",
                                                           "cluster_n": 2, "group_m": 8}
    assert not a_pairs(model.Problem(300, 480, 12944, sms=132))
    monkeypatch.setattr(model, "OFFER_SPAN_PAIRS", False)
    assert not a_pairs(p)


def test_family_bias_names_the_kind_the_model_rates_too_fast():
    """fit_gemm_model --by-family: estimate / measured per kind of configuration, most optimistic
    first; samples timed at twice the estimate make their family's ratio 0.5."""
    from fit_gemm_model import Sample, family, family_bias

    problem = model.Problem(787, 4096, 28672, transpose_b=True, sms=132)
    narrow = {"tile_m": 128, "tile_n": 128, "persistent": "stream_k", "group_m": 8}
    plain = {"tile_m": 128, "tile_n": 256, "persistent": True, "group_m": 8}
    pair = {**plain, "cluster_m": 2}
    assert (family(narrow), family(plain), family(pair)) == ("stream-K 128x128", "persistent", "persistent, cluster")
    samples = [Sample(problem, config, model.estimate_us(problem, config, model.CONSTANTS) * slower, "g")
               for config, slower in ((narrow, 2.0), (plain, 1.0), (pair, 1.25))
               for _ in range(4)]
    rows = family_bias(samples, model.CONSTANTS)
    assert [row[0] for row in rows] == ["stream-K 128x128", "persistent, cluster", "persistent"]
    assert [round(row[2], 6) for row in rows] == [0.5, 0.8, 1.0] and all(row[1] == 4 for row in rows)
    assert family_bias(samples[:3], model.CONSTANTS) == []  # fewer than `least` samples: no row


def test_narrow_stream_k_is_off_and_its_switch_offers_128x128_stream_k(monkeypatch):
    """Stream-K over 128 x 128 tiles one to a block (the model rates it faster than it runs) is
    not offered by default: on 787x4096x28672 128 x 128 stream-K comes only in multicast pairs,
    wider tiles (128 x 160 to 128 x 256) alone too; MGPU_LAB_GEMM_OFFER=narrow_stream_k offers
    128 x 128 alone again."""
    problem = model.Problem(787, 4096, 28672, transpose_b=True, sms=132)

    def stream_k_tiles():
        return {(c["tile_m"], c["tile_n"], max(c.get("cluster_m", 1), c.get("cluster_n", 1)))
                for c in model.candidates(problem) if c.get("persistent") == "stream_k"}

    assert "narrow_stream_k" not in model.DEFAULT_OFFERS and not model.OFFER_NARROW_STREAM_K
    off = stream_k_tiles()
    assert all(tm * tn > model.NARROW_STREAM_K_AREA for tm, tn, pair in off if pair == 1)
    assert {(128, 192, 1), (128, 256, 1), (128, 128, 2)} <= off
    monkeypatch.setattr(model, "OFFER_NARROW_STREAM_K", True)
    on = stream_k_tiles()
    assert on - off == {(128, 128, 1)}


def test_single_blocks_of_stream_k_need_tiles_larger_than_128_x_160(monkeypatch):
    """Stream-K over 128 x 160 tiles one to a block was never the fastest where it was timed:
    on 1538x1080x20352 it is not offered (nor picked) by default, `narrow_stream_k` offers it
    again, and teams of such tiles (362x3584x28672: three row tiles in one team) stay."""
    def single_stream_k(problem):
        return {(c["tile_m"], c["tile_n"]) for c in model.candidates(problem) if c.get("persistent") == "stream_k"
                and c.get("cluster_m", 1) * c.get("cluster_n", 1) * c.get("team_m", 1) == 1}

    long_k = model.Problem(1538, 1080, 20352, transpose_b=True, sms=132)
    assert not model.OFFER_NARROW_STREAM_K
    assert (128, 160) not in single_stream_k(long_k) and (128, 192) in single_stream_k(long_k)
    pick = model.ranked(long_k)[0][1]
    assert not (pick["persistent"] == "stream_k" and pick["tile_n"] == 160), pick
    teams = model.Problem(362, 3584, 28672, transpose_b=True, sms=132)
    assert any(c.get("persistent") == "stream_k" and (c["tile_m"], c["tile_n"], c.get("team_m")) == (128, 160, 3)
               for c in model.candidates(teams))
    monkeypatch.setattr(model, "OFFER_NARROW_STREAM_K", True)
    assert (128, 160) in single_stream_k(long_k)


def test_stream_k_reads_is_on_and_off_moves_no_estimate(no_switches):
    """The switch stream_k_reads is on by default; off it changes no estimate."""
    assert "stream_k_reads" in model.DEFAULT_OFFERS and not model.OFFER_STREAM_K_READS
    p = model.Problem(572, 3584, 28672, sms=132)
    config = {"tile_m": 128, "tile_n": 256, "persistent": "stream_k", "group_m": 8}
    slow_copy = dataclasses.replace(model.Constants(), copy_bw=2.97e6)
    assert model.estimate_us(p, config, slow_copy) == model.estimate_us(p, config)


def test_stream_k_reads_floors_stream_k_at_its_replayed_dram_time(monkeypatch, no_switches):
    """On: a stream-K estimate is at least the time the device's copy rate takes to read what the
    replayed schedule reads (572x3584x28672 in 128 x 256: 3.1 times A and B); at an H100's 2.97
    TB/s that moves the pick off such stream-K, at the H200's 4.18 it does not bind."""
    from mgpu_lab.kernels.gemm.l2_replay import operand_reads

    monkeypatch.setattr(model, "OFFER_STREAM_K_READS", True)
    p = model.Problem(572, 3584, 28672, sms=132)
    config = {"tile_m": 128, "tile_n": 256, "persistent": "stream_k", "group_m": 8}
    h100 = dataclasses.replace(model.Constants(), copy_bw=2.97e6)
    reads = operand_reads(5, 14, 448, 128, 256, 8, 132, True, model.L2_BYTES)
    assert reads > 2.5
    floor = (reads * (572 + 3584) * 28672 * 2 + 572 * 3584 * 2) / h100.copy_bw
    assert model.estimate_us(p, config, h100) == pytest.approx(h100.launch_us + floor)
    assert model.estimate_us(p, config) == pytest.approx(model.estimate_us(p, config, model.Constants()))
    picked = model.ranked(p, h100)[0][1]
    assert not (picked.get("persistent") == "stream_k" and picked["tile_n"] == 256)
    monkeypatch.setattr(model, "OFFER_STREAM_K_READS", False)
    assert model.ranked(p, h100)[0][1] == config
    # a one-tile grid runs in step: no floor
    one_tile = {"tile_m": 64, "tile_n": 256, "persistent": False}
    monkeypatch.setattr(model, "OFFER_STREAM_K_READS", True)
    on = model.estimate_us(p, one_tile, h100)
    monkeypatch.setattr(model, "OFFER_STREAM_K_READS", False)
    assert on == model.estimate_us(p, one_tile, h100)


def test_stream_k_teams_are_offered_and_replayed_as_one_unit_a_column(monkeypatch, no_switches):
    """stream_k_teams: stream-K grids of 2-16 row tiles come in teams of all of them (up to 8) or
    of a divisor of their count, in place of the single blocks; a team's estimate floors at its own
    replayed reads (A and B read about once where single blocks read them 3.1 times at
    572x3584x28672, an H100's copy rate) and each name reads back as the configuration that ran."""
    from bench_gemm_options import family, name_of
    from fit_gemm_model import parse_option

    monkeypatch.setattr(model, "OFFER_STREAM_K_READS", True)
    p = model.Problem(572, 3584, 28672, sms=132)
    assert not any(c.get("team_m") for c in model.candidates(p))
    monkeypatch.setattr(model, "OFFER_STREAM_K_TEAMS", True)
    teams = [c for c in model.candidates(p) if c.get("team_m")]
    assert {(c["tile_m"], c["team_m"]) for c in teams} == {(128, 5), (256, 3)}  # 5 row tiles of 128, 3 of 256
    assert {(c["tile_m"], c["team_m"]) for c in model.candidates(model.Problem(1000, 3584, 28672)) if c.get("team_m")} \
        == {(128, 2), (128, 4), (128, 8), (256, 2), (256, 4)}
    single = {"tile_m": 128, "tile_n": 256, "persistent": "stream_k", "group_m": 8}
    team = {**single, "team_m": 5}
    assert team in teams and single not in model.candidates(p)  # the team takes the single blocks' place
    h100 = dataclasses.replace(model.Constants(), copy_bw=2.97e6)
    assert model.estimate_us(p, team, h100) < 0.85 * model.estimate_us(p, single, h100)  # 203 against 251 us
    assert family(team) != family(single)
    assert parse_option(name_of(team)) == team
    # no team over one row tile, nor where the teams' grid would take more than REPLAY_ROUNDS rounds
    assert not any(c.get("team_m") for c in model.candidates(model.Problem(100, 3584, 28672)))
    assert not any(c.get("team_m") for c in model.candidates(model.Problem(2048, 16384, 4096)))


def test_row_raster_numbers_tiles_along_rows_where_a_is_the_large_operand(monkeypatch):
    """The switch row_raster (on by default): a one-tile-per-block grid without split-K whose
    tiles span 2+ columns, where A, in the kernel's own terms, is more than twice B and B stays in
    L2, takes group_m=1, so the blocks that read one panel of A take adjacent numbers; persistent,
    stream-K and split-K grids keep theirs, and no pick's tiles or estimate move."""
    def picks(p):
        return model.ranked(p)[:40]

    def one_tile(c):
        return not c.get("persistent") and (c.get("split_k") or 1) == 1

    problems = {"swapped": model.Problem(180, 8192, 14336, transpose_b=False, sms=132),  # C.T's A: 8192 x 14336
                "tall": model.Problem(6578, 568, 744, transpose_b=False, sms=132),
                "square": model.Problem(4096, 4096, 4096, transpose_b=True, sms=132),
                "big_b": model.Problem(8309, 4096, 4072, transpose_b=True, sms=132)}  # B 33 MB: past ROW_RASTER_B_BYTES
    assert "row_raster" in model.DEFAULT_OFFERS and model.OFFER_ROW_RASTER
    on = {name: picks(p) for name, p in problems.items()}
    monkeypatch.setattr(model, "OFFER_ROW_RASTER", False)
    off = {name: picks(p) for name, p in problems.items()}
    assert all(c.get("group_m", 8) != 1 for ranked in off.values() for _, c in ranked)
    for name in on:
        assert [us for us, _ in on[name]] == [us for us, _ in off[name]]
        assert [{**c, "group_m": 0} for _, c in on[name]] == [{**c, "group_m": 0} for _, c in off[name]]
    swapped = [c for _, c in on["swapped"] if c.get("swap_ab") and one_tile(c) and c["tile_n"] < 180]
    assert swapped and all(c["group_m"] == 1 for c in swapped)
    assert all(c.get("group_m", 8) != 1 for _, c in on["swapped"] if not c.get("swap_ab") or not one_tile(c))
    tall = [c for _, c in on["tall"] if one_tile(c) and not c.get("swap_ab") and c["tile_n"] < 568]
    assert tall and all(c["group_m"] == 1 for c in tall)
    assert all(c.get("group_m", 8) != 1 for _, c in on["tall"] if not one_tile(c))
    assert on["square"] == off["square"] and on["big_b"] == off["big_b"]


def test_row_raster_reaches_the_kernel_the_user_gets(monkeypatch):
    """make_gemm's default configuration (the model's pick, the table off) numbers its tiles along
    rows where the switch applies: the built kernel's tiling has group_m 1 and compiles."""
    assert model.OFFER_ROW_RASTER  # on by default
    model_ranking.cache_clear()
    try:
        pick = model_ranking(180, 8192, 14336, transpose_b=False)[0]
        assert pick.get("swap_ab") and pick["group_m"] == 1
        monkeypatch.setenv("MGPU_LAB_GEMM_TABLE", "0")
        kernel = make_gemm(180, 8192, 14336, transpose_b=False)
        tiling = kernel.program.notes["tiling"]
        assert tiling.group_m == 1 and tiling.swap_ab
        assert kernel.program.launches[0].compiled.sass
    finally:
        model_ranking.cache_clear()


def test_n16_tiles_offer_c_tiles_that_fill_whole_waves(monkeypatch, before_192_rows):
    """MGPU_LAB_GEMM_OFFER=n16_tiles: C's own tiles over B (n, k) 144, 176, 208 and 240 wide too,
    which the kernel takes (16-column store boxes); on the HF prefill's 2048x5632x2048 a 128 x 176
    tile makes 512 tiles (3.9 waves on 132 SMs) and the model picks it; B (k, n) gets none."""
    p = model.Problem(2048, 5632, 2048, transpose_b=True, sms=132)
    monkeypatch.setattr(model, "OFFER_WIDE_PINGPONG", False)  # its pingpong tiles are 160-192 wide too
    monkeypatch.setattr(model, "OFFER_N16_TILES", False)
    before = list(model.candidates(p))
    assert not any(c["tile_n"] in model.N16_TILE_NS and not c.get("swap_ab") for c in before)
    monkeypatch.setattr(model, "OFFER_N16_TILES", True)
    added = [c for c in model.candidates(p) if c not in before]
    assert {c["tile_n"] for c in added} == set(model.N16_TILE_NS) and not any(c.get("swap_ab") for c in added)
    us, pick = model.ranked(p)[0]
    assert (pick["tile_m"], pick["tile_n"]) == (128, 176)
    t = resolve_tiling(2048, 5632, 2048, transpose_b=True, **{k: v for k, v in pick.items() if k in CONFIG_KEYS})
    assert t.out_width == 16 and t.epilogue_pieces == 11
    nn = model.Problem(2048, 5632, 2048, transpose_b=False, sms=132)
    assert not any(c["tile_n"] in model.N16_TILE_NS for c in model.candidates(nn) if not c.get("swap_ab"))


def test_wide_pingpong_offers_no_tile_with_16_column_store_boxes(monkeypatch):
    """wide_pingpong's 128-row pingpong tiles are 160 and 192 wide over B (n, k) and 192 over
    B (k, n): 128 x 176 (eleven 16-column store boxes) lost where it moved picks on short K, so the
    short-K shape whose pick it was (5097x10808x264, 0.68 of cuBLAS on an H100) now gets a tile
    whose C goes out in boxes of 32 columns or more."""
    p = model.Problem(5097, 10808, 264, transpose_b=True, sms=132)
    monkeypatch.setattr(model, "OFFER_WIDE_PINGPONG", False)
    before = list(model.candidates(p))
    monkeypatch.setattr(model, "OFFER_WIDE_PINGPONG", True)
    added = [c for c in model.candidates(p) if c not in before]
    assert {(c["tile_m"], c["tile_n"], c["persistent"]) for c in added} == {(128, 160, "pingpong"), (128, 192, "pingpong")}
    assert any(c.get("cluster_m") == 2 for c in added)
    nn = model.Problem(5097, 10808, 264, transpose_b=False, sms=132)
    for problem in (p, nn):
        assert all(c["tile_n"] % 32 == 0 for c in model.candidates(problem)
                   if c.get("persistent") == "pingpong" and not c.get("swap_ab"))
    for problem in (p, nn):
        for _, pick in model.ranked(problem)[:3]:
            t = resolve_tiling(problem.m, problem.n, problem.k, transpose_b=problem.transpose_b,
                               **{k: v for k, v in pick.items() if k in CONFIG_KEYS})
            assert t.out_width >= 32, pick


def test_cross_validation_fits_without_each_fold_and_scores_its_groups(monkeypatch):
    """fit_gemm_model.py --fold: each fold's samples stay out of its fit; its timed groups are
    ranked with the starting constants and with the fit; the record pools every fold's groups."""
    import dataclasses
    import math

    import fit_gemm_model as fgm

    def group(record: str, shape: tuple[int, int, int], times: list[float]) -> list:
        configs = [{"tile_m": 128, "tile_n": 256, "persistent": True}, {"tile_m": 128, "tile_n": 128},
                   {"tile_m": 64, "tile_n": 128}]
        p = model.Problem(*shape, transpose_b=True)
        return [fgm.Sample(p, c, t, f"gemm_options_{record}.json:bf16_{shape}") for c, t in zip(configs, times)]

    options = group("T1_aaa", (4096, 4096, 4096), [200.0, 260.0, 400.0]) + \
        group("T2_bbb", (256, 4096, 8192), [40.0, 30.0, 35.0])
    seen = []

    def fake_fit(train, ranked, c0, iters, keep=()):
        seen.append({s.group.split(":")[0] for s in train})
        return dataclasses.replace(c0, dram_bw=c0.dram_bw * 0.5)

    monkeypatch.setattr(fgm, "fit", fake_fit)
    c0 = model.Constants()
    rows = fgm.cross_validate(options, options, [["aaa"], ["bbb"]], c0, iters=1)
    assert seen == [{"gemm_options_T2_bbb.json"}, {"gemm_options_T1_aaa.json"}]
    for row, held in zip(rows, (options[:3], options[3:])):
        start = fgm.ranking(held, c0)
        assert row["groups"] == 1 and row["samples"] == 3
        assert row["pick_over_best_start"] == start["pick_over_best_geomean"]
        assert row["within_3pct_start"] == start["within_3pct"]
    figures = fgm.cv_figures(rows, "h100")
    assert figures["gemm_model_cv_h100_groups"] == 2
    pooled = math.sqrt(rows[0]["pick_over_best_fitted"] * rows[1]["pick_over_best_fitted"])
    assert figures["gemm_model_cv_h100_pick_over_best_fitted"] == pytest.approx(pooled)
    assert figures["gemm_model_cv_h100_pick_over_best_fitted_vs_start"] == pytest.approx(
        pooled / math.sqrt(rows[0]["pick_over_best_start"] * rows[1]["pick_over_best_start"]))
    assert "gemm_model_cv_h100_aaa_rms_fitted" in figures


def test_a_fit_keeps_the_measured_copy_rate():
    """fit_gemm_model's fit moves the fitted constants but not the ones a device measures
    (MEASURED: the copy rate stream_k_reads floors stream-K with)."""
    import dataclasses

    import fit_gemm_model as fgm

    p = model.Problem(4096, 4096, 4096, transpose_b=True)
    configs = [{"tile_m": 128, "tile_n": 256, "persistent": True}, {"tile_m": 128, "tile_n": 128},
               {"tile_m": 64, "tile_n": 128}]
    samples = [fgm.Sample(p, c, t, "gemm_options_T1_aaa.json:bf16_4096") for c, t in zip(configs, (400.0, 520.0, 800.0))]
    c0 = dataclasses.replace(model.Constants(), copy_bw=2.97e6)
    fitted = fgm.fit(samples, samples, c0, iters=60)
    assert "copy_bw" in fgm.MEASURED and fitted.copy_bw == c0.copy_bw
    assert fitted != c0  # the rest moved toward times ~2x the estimates
    # --keep NAME holds a constant an A / B chose (the H200's eff_one) while the rest move
    kept = fgm.fit(samples, samples, c0, iters=60, keep=("eff_one",))
    assert kept.eff_one == c0.eff_one and kept.copy_bw == c0.copy_bw and kept != c0


def test_fit_refuses_to_keep_a_constant_the_model_does_not_have():
    """fit_gemm_model.py --keep names model.Constants fields; anything else is refused naming the
    argument, what it takes and what it got, before any record is read."""
    import subprocess
    import sys

    script = Path(__file__).parent.parent / "benchmarks" / "fit_gemm_model.py"
    out = subprocess.run([sys.executable, str(script), "--keep", "eff_three"], capture_output=True, text=True,
                         timeout=120)
    assert out.returncode == 2
    assert "--keep: expected names of model.Constants" in out.stderr and "got eff_three" in out.stderr
    assert "eff_one" in out.stderr and "samples" not in out.stdout


def test_versus_times_only_the_picks_a_trial_calibration_moves(tmp_path, no_switches):
    # bench_gemm_options --versus FILE: an A / B of a calibration under trial times the library's
    # pick and the trial's pick only where they differ; every other drawn shape is left out.
    import json

    from bench_gemm_options import drawn_problems, model_pick, name_of, versus_cases, versus_pick

    trial = tmp_path / "trial.json"
    trial.write_text(json.dumps({"l2_bw": 9.0e6, "copy_bw": 2.97e6}))
    constants = model.constants_from_file(str(trial))
    problems = drawn_problems(32, [86, 87])
    assert len({p.key for p in problems}) == len(problems) > 32  # two seeds, one problem per shape
    cases = list(versus_cases(problems, constants, ("stream_k_reads",)))
    assert not model.OFFER_STREAM_K_READS  # the switch is restored
    moved = {p.key for _, p, _ in cases}
    assert 0 < len(moved) < len(problems)
    for _, p, (config,) in cases:
        assert name_of(config) != name_of(model_pick(p))
        assert "source" not in config and "model_us" not in config  # make_gemm's keywords only
    for p in problems:
        if p.key not in moved:
            assert name_of(versus_pick(p, constants, ("stream_k_reads",))) == name_of(model_pick(p))
    # The library's own constants move nothing.
    assert list(versus_cases(problems, model.Constants())) == []


def test_explain_versus_moves_prints_both_picks_and_the_device_facts(tmp_path, capsys, monkeypatch):
    # benchmarks/explain_versus_moves.py: the library's pick beside the trial's per named shape, with
    # what the ranking read (device, SMs, clusters, calibration), to set a CPU's moves beside a GPU's
    import json

    import explain_versus_moves

    trial = tmp_path / "trial.json"
    trial.write_text(json.dumps({}))  # the built-in constants: the library's on a machine without a GPU
    monkeypatch.setattr(model, "OFFER_THREE_CONSUMERS", False)  # the library without the switch the trial offers
    monkeypatch.setattr(sys, "argv", ["x", "--versus", str(trial), "--shapes", "8433x352x22072,9x18944x4096:nn",
                                      "--offer", "three_consumers"])
    explain_versus_moves.main()
    lines = capsys.readouterr().out.splitlines()
    assert lines[0].startswith("device ") and " sms " in lines[0] and "calibration " in lines[0]
    assert lines[1] == "trial constants equal the library's"
    rows = {line.split()[0]: line.split() for line in lines[2:]}
    assert set(rows) == {"8433x352x22072", "9x18944x4096"}
    for key, row in rows.items():
        assert row[1] == "library" and row[3] == "trial"
    assert rows["8433x352x22072"][4].startswith("192x")  # the switch on offers 192-row tiles, and wins here
    assert not rows["8433x352x22072"][2].startswith("192x")


def test_versus_summary_and_seed_lists(tmp_path):
    from bench_gemm_options import Problem, parse_seeds, versus_summary

    assert parse_seeds("86") == [86] and parse_seeds("86-88") == [86, 87, 88] and parse_seeds("86,90") == [86, 90]
    for bad in ("x", "86-", "", "-3"):
        with pytest.raises(SystemExit, match="--seed: expected a seed, a list 86,88 or a range 86-93"):
            parse_seeds(bad)
    a, b = Problem(100, 4096, 4096, True, "t"), Problem(200, 4096, 4096, True, "t")
    trial = {"tile_m": 128, "tile_n": 128, "persistent": True}
    figures = {"gemm_options_bf16_100x4096x4096_128x128_persistent_vs_default": 1.21,
               "gemm_options_bf16_200x4096x4096_128x128_persistent_vs_default": 0.81}
    versus_summary(figures, [("bf16", a, [trial]), ("bf16", b, [trial])], drawn=64)
    assert figures["gemm_options_versus_moved"] == 2 and figures["gemm_options_versus_drawn"] == 64
    assert figures["gemm_options_versus_geomean_vs_default"] == pytest.approx(math.sqrt(1.21 * 0.81))
    assert figures["gemm_options_bf16_100x4096x4096_versus_pick"] == "128x128_persistent"
    # a --budget-s that stopped before every moved shape was timed: moved says how many moved, timed how many ran
    figures = {"gemm_options_bf16_100x4096x4096_128x128_persistent_vs_default": 1.21}
    versus_summary(figures, [("bf16", a, [trial])], drawn=64, moved=5)
    assert figures["gemm_options_versus_moved"] == 5 and figures["gemm_options_versus_timed"] == 1


def test_versus_refuses_what_it_cannot_compare(tmp_path):
    import os
    import subprocess

    bench = str(Path(__file__).parent.parent / "benchmarks" / "bench_gemm_options.py")
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(sys.path)}
    out = subprocess.run([sys.executable, bench, "--versus", str(tmp_path / "trial.json")], env=env,
                         capture_output=True, text=True, timeout=120)
    assert out.returncode != 0 and "--versus: needs --random or --shapes" in out.stderr
    out = subprocess.run([sys.executable, bench, "--random", "4", "--versus", str(tmp_path / "missing.json")],
                         env=env, capture_output=True, text=True, timeout=120)
    assert out.returncode != 0 and "--versus: expected a calibration file (JSON of model constants), got" in out.stderr
    out = subprocess.run([sys.executable, bench, "--shapes", "2048x5632x2048", "--top", "-1"], env=env,
                         capture_output=True, text=True, timeout=120)
    assert out.returncode != 0 and "--top: expected 0 or more (0: the default and --extra's configurations alone), " \
        "got -1" in out.stderr


def test_the_l2_bound_counts_only_where_blocks_reread_from_l2(monkeypatch, no_switches):
    """l2_reuse_bound: a decode's weights are read once (L2 bytes ~ DRAM bytes), so a lower L2 rate
    leaves its estimate alone; 64 x 256 tiles over a long K re-read B from L2 every row of tiles,
    so the L2 rate still bounds them. Off, the L2 rate raises both."""
    slow_l2 = dataclasses.replace(model.Constants(), l2_bw=9.0e6)
    fast_l2 = dataclasses.replace(model.Constants(), l2_bw=1.0e9, l2_bw_misaligned=1.0e9)
    decode = (model.Problem(1, 8192, 28672), {"tile_m": 128, "tile_n": 8, "split_k": 2, "swap_ab": True})
    reuse = (model.Problem(572, 3584, 28672), {"tile_m": 64, "tile_n": 256})
    off = {name: model.estimate_us(*case, slow_l2) / model.estimate_us(*case, fast_l2)
           for name, case in (("decode", decode), ("reuse", reuse))}
    assert off["decode"] > 1.01 and off["reuse"] > 1.2
    monkeypatch.setattr(model, "OFFER_L2_REUSE_BOUND", True)
    assert model.estimate_us(*decode, slow_l2) == pytest.approx(model.estimate_us(*decode, fast_l2))
    assert model.estimate_us(*reuse, slow_l2) / model.estimate_us(*reuse, fast_l2) == pytest.approx(off["reuse"])


def test_lazy_ranking_replays_only_what_it_hands_out_in_the_full_order(monkeypatch, no_switches):
    """ranked_lazily gives ranked's order (each estimate with stream-K's replayed reads) while
    replaying only the stream-K candidates it reaches: the library's pick replays one or two."""
    from mgpu_lab.kernels.gemm import l2_replay

    monkeypatch.setattr(model, "OFFER_STREAM_K_READS", True)
    h100 = dataclasses.replace(model.Constants(), copy_bw=2.97e6)
    replays = []
    real = model.operand_reads

    def counted(*args):
        replays.append(args)
        return real.__wrapped__(*args)

    monkeypatch.setattr(model, "operand_reads", counted)
    for shape in ((1384, 4096, 28672), (572, 3584, 28672), (6330, 352, 25840)):
        p = model.Problem(*shape, sms=132)
        everything = sorted(((model.estimate_us(p, c, h100), i, model.rastered(p, c))
                             for i, c in enumerate(model.candidates(p))), key=lambda x: (x[0], x[1]))
        replays.clear()
        full = model.ranked(p, h100)
        assert full == [(t, c) for t, _, c in everything]
        every_replay = len(replays)
        replays.clear()
        assert next(model.ranked_lazily(p, h100)) == full[0]
        assert 0 < len(replays) <= 3 < every_replay, (shape, len(replays), every_replay)
    assert l2_replay.operand_reads is real


def test_partial_waves_speed_up_only_grids_that_leave_sms_idle(monkeypatch, no_switches):
    """partial_waves (off): a one-tile-per-block grid over a share f of the SMs has its compute
    scaled by 1 - PARTIAL_WAVE * (1 - f); a grid of a full wave or more, and persistent ones, keep
    their estimates."""
    c = dataclasses.replace(model.Constants(), dram_bw=1.0e12, copy_bw=1.0e12)  # compute alone
    p = model.Problem(636, 3584, 18944, sms=132)
    one_wave = {"tile_m": 128, "tile_n": 192}  # 5 x 19 = 95 blocks
    full = {"tile_m": 64, "tile_n": 128}  # 10 x 28 = 280 blocks
    persistent = {"tile_m": 128, "tile_n": 192, "persistent": True}
    off = {name: model.estimate_us(p, cfg, c) for name, cfg in
           (("one_wave", one_wave), ("full", full), ("persistent", persistent))}
    monkeypatch.setattr(model, "OFFER_PARTIAL_WAVES", True)
    scale = 1.0 - model.PARTIAL_WAVE * (1.0 - 95 / 132)
    assert model.estimate_us(p, one_wave, c) - c.launch_us == pytest.approx((off["one_wave"] - c.launch_us) * scale)
    assert model.estimate_us(p, full, c) == off["full"]
    assert model.estimate_us(p, persistent, c) == off["persistent"]


def test_pair_tile_charges_clusters_per_tile_they_run(monkeypatch, no_switches):
    """pair_tile (off): a persistent or stream-K multicast cluster pays PAIR_TILE_US per tile each
    of its units runs; single blocks and one-tile-per-block grids keep their estimates."""
    c = dataclasses.replace(model.Constants(), dram_bw=1.0e12, copy_bw=1.0e12)  # compute alone
    p = model.Problem(2048, 5632, 2048, transpose_b=True, sms=132)
    pair = {"tile_m": 128, "tile_n": 256, "persistent": True, "cluster_m": 2, "group_m": 8}
    stream_k_pair = {**pair, "persistent": "stream_k"}
    single = {"tile_m": 128, "tile_n": 256, "persistent": True, "group_m": 8}
    grid = {"tile_m": 128, "tile_n": 256}
    configs = {"pair": pair, "stream_k_pair": stream_k_pair, "single": single, "grid": grid}
    off = {name: model.estimate_us(p, cfg, c) for name, cfg in configs.items()}
    monkeypatch.setattr(model, "OFFER_PAIR_TILE", True)
    on = {name: model.estimate_us(p, cfg, c) for name, cfg in configs.items()}
    # 16 x 22 = 352 tiles in 176 pair items over 66 pairs: 3 rounds persistent; stream-K holds 2 whole + 1 split
    assert on["pair"] - off["pair"] == pytest.approx(3 * model.PAIR_TILE_US)
    assert on["stream_k_pair"] - off["stream_k_pair"] == pytest.approx(3 * model.PAIR_TILE_US)
    assert on["single"] == off["single"] and on["grid"] == off["grid"]


def test_split_stream_k_scales_only_grids_without_a_whole_round(no_switches):
    """Constants.split_stream_k scales the compute of a stream-K grid whose work items are fewer
    than its units (every tile cut into pieces); one with a whole round keeps its estimate."""
    base = dataclasses.replace(model.Constants(), dram_bw=1.0e12, copy_bw=1.0e12)  # compute alone
    slow = dataclasses.replace(base, split_stream_k=1.2)
    config = {"tile_m": 128, "tile_n": 256, "persistent": "stream_k", "group_m": 8}
    split = model.Problem(595, 3584, 14336, sms=132)  # 5 x 14 = 70 tiles over 132 units
    whole = model.Problem(2048, 5632, 2048, sms=132)  # 16 x 22 = 352 tiles: two whole rounds
    assert model.estimate_us(split, config, slow) - slow.launch_us == pytest.approx(
        (model.estimate_us(split, config, base) - base.launch_us) * 1.2)
    assert model.estimate_us(whole, config, slow) == model.estimate_us(whole, config, base)
    trial_file = Path(__file__).resolve().parents[1] / "benchmarks" / "gemm_constants" / "h100_split_stream_k.json"
    h100_trial = model.constants_from_file(str(trial_file))
    assert h100_trial.split_stream_k == 1.2 and model.Constants().split_stream_k == 1.0


def test_small_stream_k_scales_stream_k_over_tiles_smaller_than_128_by_256(monkeypatch, no_switches):
    """small_stream_k (off): a stream-K grid over tiles smaller than 128 x 256 has its compute
    scaled by (128 * 256 / area) ** SMALL_STREAM_K, single blocks or pairs; 128 x 256 stream-K
    and persistent grids of small tiles keep their estimates."""
    c = dataclasses.replace(model.Constants(), dram_bw=1.0e12, copy_bw=1.0e12)  # compute alone
    p = model.Problem(2048, 5632, 2048, transpose_b=True, sms=132)
    small = {"tile_m": 128, "tile_n": 128, "persistent": "stream_k", "group_m": 8}
    configs = {"small": small, "small_pair": {**small, "cluster_m": 2}, "wide": {**small, "tile_n": 256},
               "persistent": {**small, "persistent": True}}
    off = {name: model.estimate_us(p, cfg, c) - c.launch_us for name, cfg in configs.items()}
    monkeypatch.setattr(model, "OFFER_SMALL_STREAM_K", True)
    on = {name: model.estimate_us(p, cfg, c) - c.launch_us for name, cfg in configs.items()}
    assert on["small"] == pytest.approx(off["small"] * 2 ** model.SMALL_STREAM_K, rel=1e-5)
    assert on["small_pair"] == pytest.approx(off["small_pair"] * 2 ** model.SMALL_STREAM_K, rel=1e-5)
    assert on["wide"] == off["wide"] and on["persistent"] == off["persistent"]


def test_narrow_pairs_scales_persistent_64_row_pairs_only(monkeypatch, no_switches):
    """narrow_pairs (on by default): a persistent grid of 64-row tiles in clusters of two, plain or
    swapped, has its compute scaled by NARROW_PAIR; 64-row quads, 64-row single blocks and
    128-row pairs keep their estimates."""
    c = dataclasses.replace(model.Constants(), dram_bw=1.0e12, copy_bw=1.0e12)  # compute alone
    p = model.Problem(544, 14336, 8192, transpose_b=True, sms=132)
    pair = {"tile_m": 64, "tile_n": 128, "persistent": True, "group_m": 8, "cluster_m": 2}
    configs = {"pair": pair, "swapped_pair": {**pair, "tile_n": 136, "swap_ab": True, "cluster_m": 1, "cluster_n": 2},
               "quad": {**pair, "cluster_m": 4}, "single": {**pair, "cluster_m": 1},
               "wide_pair": {**pair, "tile_m": 128}}
    off = {name: model.estimate_us(p, cfg, c) - c.launch_us for name, cfg in configs.items()}
    monkeypatch.setattr(model, "OFFER_NARROW_PAIRS", True)
    on = {name: model.estimate_us(p, cfg, c) - c.launch_us for name, cfg in configs.items()}
    assert model.NARROW_PAIR > 1 and "narrow_pairs" in model.DEFAULT_OFFERS
    assert on["pair"] == pytest.approx(off["pair"] * model.NARROW_PAIR, rel=1e-5)
    assert on["swapped_pair"] == pytest.approx(off["swapped_pair"] * model.NARROW_PAIR, rel=1e-5)
    assert (on["quad"], on["single"], on["wide_pair"]) == (off["quad"], off["single"], off["wide_pair"])


def test_the_ranking_cache_keeps_picks_per_set_of_switches(monkeypatch):
    """configs.model_ranking caches per set of switches on: turning one off (as a probe or
    bench_gemm_options --versus does) gets that set's pick, not the one cached before it."""
    slow_copy = dataclasses.replace(model.Constants(), copy_bw=2.97e6)
    monkeypatch.setattr(model, "OFFER_STREAM_K_TEAMS", False)  # teams would take this shape either way
    model_ranking.cache_clear()
    try:
        on = model_ranking(572, 3584, 28672, sms=132, constants=slow_copy)[0]
        monkeypatch.setattr(model, "OFFER_STREAM_K_READS", False)
        off = model_ranking(572, 3584, 28672, sms=132, constants=slow_copy)[0]
        assert (off["persistent"], off["tile_n"]) == ("stream_k", 256)
        assert (on.get("persistent"), on["tile_n"]) != ("stream_k", 256)
    finally:
        model_ranking.cache_clear()


def test_kernel_options_keeps_what_make_gemm_takes_and_drops_the_annotations():
    """The model's pick carries where it came from and its estimate beside the settings;
    kernel_options gives make_gemm the settings alone, every one of them."""
    picked = gemm_config(1000, 3000, 2000, transpose_b=True, table=False)
    assert picked["source"] == "model" and "model_us" in picked
    options = kernel_options(picked)
    assert "source" not in options and "model_us" not in options
    assert options == {key: value for key, value in picked.items() if key in CONFIG_KEYS}
    assert set(picked) - set(options) == {"source", "model_us"}


def test_the_soft_step_counts_loads_near_the_tensor_cores_time_and_breaks_the_pairs_tie(monkeypatch, before_192_rows):
    # 1041x1272x2352 with B (k, n), both operands' rows off the 128-byte line: under the plain
    # maximum 128 x 128 persistent pairs (2 x 1) and quads (2 x 2) tie, their tensor-core time
    # bounding both; the quads halve A's loads too, and on an H100 ran x1.16 over the pairs.
    p = model.Problem(1041, 1272, 2352, transpose_b=False)
    pair = {"tile_m": 128, "tile_n": 128, "persistent": True, "cluster_m": 2}
    quad = {**pair, "cluster_n": 2}
    monkeypatch.setattr(model, "OFFER_SOFT_STEP", False)
    plain = {name: model.estimate_us(p, config) for name, config in (("pair", pair), ("quad", quad))}
    assert plain["pair"] == pytest.approx(plain["quad"])
    monkeypatch.setattr(model, "OFFER_SOFT_STEP", True)
    soft = {name: model.estimate_us(p, config) for name, config in (("pair", pair), ("quad", quad))}
    assert soft["quad"] < soft["pair"]
    assert all(soft[name] > plain[name] for name in soft)  # a soft maximum is above the larger part
    pick = model.ranked(p)[0][1]
    assert (pick.get("cluster_m", 1) or 1) * (pick.get("cluster_n", 1) or 1) == 4
    # far from balance it is near the maximum: 128 x 256 pairs on 8192^3 load in 0.4 of their
    # tensor-core time (soft: 2.6% above)
    big = model.Problem(8192, 8192, 8192, transpose_b=True)
    wide = {"tile_m": 128, "tile_n": 256, "persistent": True, "cluster_m": 2}
    soft_big = model.estimate_us(big, wide)
    monkeypatch.setattr(model, "OFFER_SOFT_STEP", False)
    assert model.estimate_us(big, wide) < soft_big < 1.04 * model.estimate_us(big, wide)


def test_b_half_boxes_offers_tiles_96_160_224_wide_over_b_k_n_only_when_on(monkeypatch, before_192_rows):
    # 13056x280x26728 with B (k, n): 64-column multiples cover n = 280 with 320 or 384 columns; 96-
    # and 160-wide tiles with 288 and 320
    p = model.Problem(13056, 280, 26728, transpose_b=False)
    half = {96, 160, 224}
    monkeypatch.setattr(model, "OFFER_B_HALF_BOXES", False)
    assert not any(c["tile_n"] in half for c in model.candidates(p) if not c.get("swap_ab"))
    monkeypatch.setattr(model, "OFFER_B_HALF_BOXES", True)
    offered = {c["tile_n"] for c in model.candidates(p) if not c.get("swap_ab")}
    assert half <= offered
    assert model.ranked(p)[0][1]["tile_n"] in half
    # B (n, k) tiles took the multiples of 32 before: unchanged
    nt = model.Problem(13056, 280, 26728, transpose_b=True)
    assert model._tile_ns(True) == (32, 64, 96, 128, 160, 192, 224, 256)
    assert {96, 160} <= {c["tile_n"] for c in model.candidates(nt)}


def test_swap_share_b_offers_swapped_clusters_sharing_b_k_n_along_m_past_the_swapped_rows(monkeypatch):
    # 3604x592x10640 with B (k, n): cuBLAS runs 128 x 152 tiles (n by m) in 1 x 4 clusters sharing B
    # along m; an H100 ran ours so at x1.43 over the library's 256 x 128 stream-K pairs
    p = model.Problem(3604, 592, 10640, transpose_b=False)
    monkeypatch.setattr(model, "OFFER_SWAP_SHARE_B", False)
    assert not any(c.get("swap_ab") for c in model.candidates(p))
    monkeypatch.setattr(model, "OFFER_SWAP_SHARE_B", True)
    swapped = [c for c in model.candidates(p) if c.get("swap_ab")]
    assert {"tile_m": 128, "tile_n": 152, "persistent": True, "swap_ab": True, "group_m": 8, "cluster_m": 1,
            "cluster_n": 4} in swapped
    assert all(c["persistent"] is True and c["cluster_m"] * c["cluster_n"] > 1 for c in swapped)
    assert {c["tile_n"] for c in swapped} >= {88 + 8, 152, 160, 256 - 8}  # widths evened over m's tiles
    # n past SWAP_SHARE_B_MAX_N, and rows within the swapped limit, are offered as before
    for shape in ((3604, 4096, 10640), (431, 5704, 8968)):
        wide = model.Problem(*shape, transpose_b=False)
        monkeypatch.setattr(model, "OFFER_SWAP_SHARE_B", False)
        before = list(model.candidates(wide))
        monkeypatch.setattr(model, "OFFER_SWAP_SHARE_B", True)
        assert list(model.candidates(wide)) == before
    # B (n, k) problems past the swapped rows' limit get none; an epilogue a swapped tile cannot fuse none
    assert not any(c.get("swap_ab") for c in model.candidates(model.Problem(3604, 592, 10640, transpose_b=True)))
    assert not any(c.get("swap_ab") for c in model.candidates(
        model.Problem(3604, 592, 10640, transpose_b=False, epilogue=True)))


def test_swap_clusters_share_b_offers_swapped_clusters_along_c_t_over_b_k_n(monkeypatch):
    # cuBLAS's own configurations on drawn shapes where ours trailed, all swapped clusters along C.T's
    # columns over B (k, n), which only B (n, k) problems were offered: 431x5704x8968 192 x 112 in
    # 2 x 4 (x1.36 on an H100), 203x19264x1256 192 x 104 in 1 x 2, 281x7976x20160 128 x 144 in 1 x 2;
    # 64-row tiles so shared lost on drawn shapes (x0.92), so they are not offered
    from mgpu_lab.kernels.gemm.tiling import check_tiling, settle_tiling

    monkeypatch.setattr(model, "OFFER_THREE_CONSUMERS", True)
    wanted = {(431, 5704, 8968): (192, 112, 2, 4), (203, 19264, 1256): (192, 104, 1, 2),
              (281, 7976, 20160): (128, 144, 1, 2)}
    for shape, (tm, tn, cm, cn) in wanted.items():
        p = model.Problem(*shape, transpose_b=False)
        monkeypatch.setattr(model, "OFFER_SWAP_CLUSTERS_SHARE_B", False)
        before = list(model.candidates(p))
        assert not any(c.get("swap_ab") and c.get("cluster_n", 1) > 1 for c in before)
        monkeypatch.setattr(model, "OFFER_SWAP_CLUSTERS_SHARE_B", True)
        after = list(model.candidates(p))
        new = [c for c in after if c not in before]
        assert {"tile_m": tm, "tile_n": tn, "persistent": True, "swap_ab": True, "group_m": 8, "cluster_m": cm,
                "cluster_n": cn} in new
        assert all(c.get("swap_ab") and c["cluster_n"] > 1 and c["tile_m"] >= 128 for c in new)
        assert all(c in after for c in before)
        for c in new:  # every one a tiling the kernel takes
            check_tiling(settle_tiling(p.m, p.n, p.k, dict(c), transpose_b=False))
        # and the model, which rates the timed winner faster than its pick, now picks one of them
        pick = model.ranked(p)[0][1]
        assert pick.get("cluster_n", 1) > 1 and pick.get("swap_ab")
    # B (n, k) problems had them already: unchanged
    nt = model.Problem(431, 5704, 8968, transpose_b=True)
    monkeypatch.setattr(model, "OFFER_SWAP_CLUSTERS_SHARE_B", False)
    before = list(model.candidates(nt))
    monkeypatch.setattr(model, "OFFER_SWAP_CLUSTERS_SHARE_B", True)
    assert list(model.candidates(nt)) == before


def test_three_consumers_offers_192_row_tiles_the_kernel_runs(monkeypatch):
    # 4822x904x3600: cuBLAS runs 192 x 192 tiles in pairs (130 tiles for 132 SMs); 163x18944x4096
    # swapped 192 x 176 (99 tiles, one wave). The switch offers 192-row tiles of C and swapped ones,
    # never split or pingpong (the kernel refuses them with three consumers), never wider than
    # THREE_CONSUMER_MAX_N, and every one resolves to a tiling the kernel takes.
    from mgpu_lab.kernels.gemm.tiling import check_tiling, settle_tiling

    plain, swapped = model.Problem(4822, 904, 3600), model.Problem(163, 18944, 4096, transpose_b=True)
    monkeypatch.setattr(model, "OFFER_THREE_CONSUMERS", False)
    assert not any(c["tile_m"] == 192 for p in (plain, swapped) for c in model.candidates(p))
    monkeypatch.setattr(model, "OFFER_THREE_CONSUMERS", True)
    offered = {p: [c for c in model.candidates(p) if c["tile_m"] == 192] for p in (plain, swapped)}
    assert {"tile_m": 192, "tile_n": 192, "persistent": True, "group_m": 8, "cluster_n": 2} in offered[plain]
    assert {"tile_m": 192, "tile_n": 192, "persistent": True, "group_m": 8, "cluster_m": 2} in offered[plain]
    assert any(c.get("swap_ab") and c["tile_n"] in (168, 176) for c in offered[swapped])
    assert {"tile_m": 192, "tile_n": 192, "persistent": "stream_k", "group_m": 8, "cluster_m": 2} in offered[plain]
    for p, configs in offered.items():
        assert configs and all(c["persistent"] != "pingpong" and c.get("split_k", 1) == 1
                               and c["tile_n"] <= 192 for c in configs)
        for c in configs:
            settled = settle_tiling(p.m, p.n, p.k, dict(c), transpose_b=p.transpose_b)
            check_tiling(settled)
            assert settled.consumers == 3
    # with an epilogue (a fused GELU + residual spilled at 192 x 192) or FP8: none
    assert not any(c["tile_m"] == 192 for c in model.candidates(model.Problem(4822, 904, 3600, epilogue=True)))
    assert not any(c["tile_m"] == 192 for c in model.candidates(
        model.Problem(4822, 904, 3600, transpose_b=True, dtype="float8_e4m3fn")))
