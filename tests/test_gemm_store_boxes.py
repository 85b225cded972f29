"""The boxes a persistent GEMM tile stores C in (GemmTiling.store_boxes, MGPU_LAB_GEMM_STORE_BOXES):
"uniform" boxes of the widest power of two dividing tile_n, or "mixed" 128-byte spans and then the
rest in halving widths. CPU: tilings, and kernels built for sm_90a (their SASS, spills and TMA
descriptors); the GPU test (test_gemm_store_boxes_gpu.py) checks what they compute."""

from __future__ import annotations

import warnings

import pytest

from mgpu_lab.kernels.gemm import make_gemm, pieces, resolve_tiling
from mgpu_lab.kernels.gemm.epilogues import fused

SHAPE = (2048, 5632, 2048)


def _tiling(tile_n, persistent="pingpong", **kw):
    return resolve_tiling(*SHAPE, transpose_b=True, tile_m=128, tile_n=tile_n, persistent=persistent, **kw)


@pytest.fixture
def mixed(monkeypatch):
    monkeypatch.setattr(pieces, "STORE_BOXES", "mixed")


def test_uniform_boxes_are_the_default_and_all_one_width():
    assert pieces.STORE_BOXES == "uniform"
    t = _tiling(176)
    assert t.store_boxes == tuple((16 * i, 16) for i in range(11)) and not t.mixed_store_boxes
    assert t.epilogue_pieces == 11 and t.store_width == t.out_width == 16


@pytest.mark.parametrize("tile_n, persistent, widths", [
    (176, "pingpong", (16, 32, 32, 32, 32, 32)),  # a 176-register accumulator: half-span boxes
    (176, True, (16, 32, 64, 64)),  # two consumers of 64 rows: 88 registers
    (160, "pingpong", (32, 64, 64)),
    (144, "pingpong", (16, 64, 64)),
    (224, True, (32, 64, 64, 64)),
    (160, "stream_k", (32, 64, 64)),
])
def test_mixed_boxes_cover_the_tile_narrow_ones_first(mixed, tile_n, persistent, widths):
    t = _tiling(tile_n, persistent)
    boxes = t.store_boxes
    assert tuple(w for _, w in boxes) == widths and t.mixed_store_boxes
    assert [start for start, _ in boxes] == [sum(widths[:i]) for i in range(len(widths))]
    assert sum(widths) == tile_n and t.epilogue_pieces == len(widths) and t.store_width == max(widths)


@pytest.mark.parametrize("kw", [
    dict(tile_n=192),  # 64 divides it: the same boxes either way
    dict(tile_n=176, persistent=False),  # one tile a block writes the tile at once over the ring
    dict(tile_n=176, persistent=False, split_k=2),  # cluster split-K parks and sums uniform pieces
])
def test_mixed_leaves_other_tiles_uniform(mixed, kw):
    t = _tiling(**kw)
    assert len({w for _, w in t.store_boxes}) == 1 and not t.mixed_store_boxes
    assert t.store_boxes == tuple((s, t.out_width) for s in range(0, t.tile_n, t.out_width))


def _build(**kw):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        return make_gemm(*SHAPE, transpose_b=True, tile_m=128, target="sm_90a", use_cache=False, **kw).compiled


@pytest.mark.parametrize("kw", [
    dict(tile_n=176, persistent="pingpong"),
    dict(tile_n=176, persistent="pingpong", cluster_m=2),
    dict(tile_n=160, persistent="pingpong", cluster_m=2),
    dict(tile_n=176, persistent=True),
    dict(tile_n=224, persistent="stream_k"),
], ids=lambda kw: "-".join(f"{v}" for v in kw.values()))
def test_mixed_boxes_build_one_store_a_box_without_spills(mixed, kw):
    """One TMA store per box in the SASS (uniform 128 x 176: eleven), a descriptor of C per box
    width with that width's swizzle, and no spills, with and without a bias epilogue."""
    t = _tiling(**kw)
    widths = sorted({w for _, w in t.store_boxes})
    for epilogue in (None, fused(SHAPE[0], SHAPE[1], bias="bfloat16")):
        extra = {} if epilogue is None else dict(epilogue=epilogue, epilogue_inputs=epilogue.inputs)
        compiled = _build(**kw, **extra)
        assert compiled.sass.count("UTMASTG") == t.epilogue_pieces
        r = compiled.resources
        assert r.spill_stores_bytes == r.spill_loads_bytes == 0, (kw, epilogue)
        c = max(d.array for d in compiled.tma_descriptors if d.box_shape[0] in widths)
        boxes = sorted((d.box_shape[0], d.swizzle) for d in compiled.tma_descriptors if d.array == c)
        assert boxes == [(w, 2 * w) for w in widths]


def test_the_variable_is_refused_by_name():
    with pytest.raises(ValueError, match=r"^MGPU_LAB_GEMM_STORE_BOXES must be 'uniform' or 'mixed' \(the widths "
                                         r"of the boxes a persistent tile stores C in\), got 'wide'$"):
        pieces._store_boxes_policy("wide")


def test_the_probe_times_only_the_drawn_picks_mixed_boxes_change():
    """benchmarks/probe_store_boxes.py --random: each case is a drawn shape whose library pick
    mixed changes, the pick (with mixed boxes) as its one candidate; builds restore the policy."""
    import sys
    from pathlib import Path

    sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "benchmarks"))
    from bench_gemm_options import model_pick, name_of
    from probe_store_boxes import build, changed_by_mixed, drawn_cases

    cases, drawn = drawn_cases(16, [741, 742])
    assert drawn >= 30 and 0 < len(cases) < drawn
    for p, [config] in cases:
        pick = model_pick(p)
        assert config == {**pick, "store_boxes": "mixed"} and name_of(config) == name_of(pick) + "_store_boxesmixed"
        assert changed_by_mixed(p, pick) and pieces.STORE_BOXES == "uniform"
    p, [config] = cases[0]
    options = {k: v for k, v in config.items() if k != "store_boxes"}
    compiled = build(p.m, p.n, p.k, store_boxes="mixed", transpose_b=p.transpose_b, target="sm_90a",
                     use_cache=False, **options).compiled
    assert pieces.STORE_BOXES == "uniform"
    t = resolve_tiling(p.m, p.n, p.k, transpose_b=p.transpose_b, **options)
    assert compiled.sass.count("UTMASTG") < t.epilogue_pieces  # built with fewer, wider boxes
    with pytest.raises(ValueError):
        build(p.m, p.n, p.k, store_boxes="mixed", transpose_b=p.transpose_b, tile_n=7)
    assert pieces.STORE_BOXES == "uniform"


def test_n16_tiles_with_wide_pingpong_offer_176_wide_pingpong_tiles(monkeypatch):
    """The A / B of mixed boxes' tiles (`MGPU_LAB_GEMM_STORE_BOXES=mixed ... --offer n16_tiles`):
    n16_tiles adds 128 x 144 and 128 x 176 pingpong tiles (and pairs) over B (n, k) to
    wide_pingpong's 160 and 192; without it, and over B (k, n), none."""
    from mgpu_lab.kernels.gemm import model

    p = model.Problem(5097, 10808, 264, transpose_b=True, sms=132)
    monkeypatch.setattr(model, "OFFER_WIDE_PINGPONG", True)
    monkeypatch.setattr(model, "OFFER_N16_TILES", False)

    def pingpong(problem):
        return {(c["tile_n"], c.get("cluster_m", 1)) for c in model.candidates(problem)
                if c.get("persistent") == "pingpong" and c["tile_m"] == 128 and not c.get("swap_ab")}

    before = pingpong(p)
    assert not any(n in (144, 176) for n, _ in before)
    monkeypatch.setattr(model, "OFFER_N16_TILES", True)
    assert pingpong(p) - before == {(144, 1), (144, 2), (176, 1), (176, 2)}
    nn = model.Problem(5097, 10808, 264, transpose_b=False, sms=132)
    assert not any(n in (144, 176) for n, _ in pingpong(nn))
