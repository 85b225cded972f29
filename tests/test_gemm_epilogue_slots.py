"""How many smem slots a persistent GEMM consumer streams its C tile out through
(GemmTiling.epilogue_slots, MGPU_LAB_GEMM_EPILOGUE_SLOTS) and how long each box waits for its slot
(epilogue_pending). CPU: tilings, and PTX built for sm_90a; the GPU tests of the persistent
tiles (test_gemm_persistent_gpu.py) run under either policy."""

from __future__ import annotations

import re
import warnings

import pytest

from mgpu_lab.kernels.gemm import make_gemm, pieces, resolve_tiling

WAIT_READ = re.compile(r"cp\.async\.bulk\.wait_group\.read\s+(\d+)")
TMA_STORE = re.compile(r"cp\.async\.bulk\.tensor\.2d\.global\.shared")


class _Boxes:
    """A stand-in tiling with `pieces` boxes a tile and `slots` slots, for epilogue_pending."""

    def __init__(self, pieces: int, slots: int):
        self.epilogue_pieces, self.epilogue_slots = pieces, slots


@pytest.mark.parametrize("boxes, slots", [(b, s) for b in range(1, 17) for s in range(1, 9) if s <= b])
def test_no_box_is_written_into_a_slot_a_store_may_still_read(boxes, slots):
    """Over three tiles in a row, box g (counted over the consumer's tiles) waits until at most
    epilogue_pending stores are outstanding: never more than were issued after the slot's last
    store, and within a tile (past its first `slots` boxes) exactly slots - 1. (A tile never has
    more slots than boxes.)"""
    tiling = _Boxes(boxes, slots)
    slot_of = [(g % boxes) % slots for g in range(3 * boxes)]
    for g in range(boxes, 3 * boxes):
        p = g % boxes
        last = max(h for h in range(g) if slot_of[h] == slot_of[g])
        pending = pieces.GemmTiling.epilogue_pending(tiling, p)
        assert 0 <= pending <= g - last - 1
        if p >= slots:
            assert pending == slots - 1
    if boxes % slots == 0:  # the boxes alternate evenly: every box may leave slots - 1 stores reading
        assert all(pieces.GemmTiling.epilogue_pending(tiling, p) == slots - 1 for p in range(boxes))


def _tiling(tile_n, **kw):
    return resolve_tiling(2048, 5632, 2048, transpose_b=True, tile_m=128, tile_n=tile_n, persistent=True, **kw)


@pytest.mark.parametrize("tile_n, even, fill", [
    (256, 2, 2), (128, 2, 2), (96, 1, 3), (224, 1, 4), (176, 1, 8), (240, 1, 8),
    (192, 1, 1),  # a second 8 KB slot a consumer would cost the ring a stage
])
def test_fill_gives_a_tile_as_many_slots_as_fit_without_a_shallower_ring(monkeypatch, tile_n, even, fill):
    monkeypatch.setattr(pieces, "EPILOGUE_SLOTS", "even")  # (a property: read while the policy holds)
    before = _tiling(tile_n)
    before_slots = before.epilogue_slots
    monkeypatch.setattr(pieces, "EPILOGUE_SLOTS", "fill")
    after = _tiling(tile_n)
    assert (before_slots, after.epilogue_slots) == (even, fill)
    assert after.stages == before.stages and after.smem_bytes <= pieces.SMEM_LIMIT
    piece = after.consumer_rows * after.out_width * 2
    assert after.epilogue_slots * piece <= pieces.EPILOGUE_SLOTS_BYTES


@pytest.mark.parametrize("m, n, k, config", [
    (2048, 2048, 2048, {"tile_m": 64, "tile_n": 256, "persistent": "pingpong"}),  # the tuned 2048^3 pick
    (2048, 5632, 2048, {"tile_m": 128, "tile_n": 256, "persistent": True, "cluster_m": 2}),
    (4096, 4096, 4096, {"tile_m": 128, "tile_n": 128, "persistent": True}),
])
def test_fill_keeps_the_ring_and_slots_even_gives_and_only_adds(monkeypatch, m, n, k, config):
    """Fill sized after the deepest ring gave the 64 x 256 pingpong tile a fifth stage and one
    slot (a kernel nobody timed); it must be even's kernel wherever even's slots are not one."""
    tilings = {}
    for policy in ("even", "fill"):
        monkeypatch.setattr(pieces, "EPILOGUE_SLOTS", policy)
        t = resolve_tiling(m, n, k, **config)
        tilings[policy] = (t.stages, t.epilogue_slots, t.smem_bytes <= pieces.SMEM_LIMIT)
    assert tilings["fill"][0] == tilings["even"][0] and tilings["fill"][1] >= tilings["even"][1] == 2
    assert tilings["fill"][2]


def test_fill_never_changes_a_ring_or_takes_a_slot_away_over_many_tilings(monkeypatch):
    """The invariant behind the default, over persistent, pingpong and stream-K tilings of every
    tile side, both B layouts, bf16 and f32 C and multicast clusters: fill's ring is even's and
    its slots are at least even's (so each of its kernels is one that ran before: even's, or
    where even gives one slot, the first fill's)."""
    import itertools

    checked = 0
    for tile_m, tile_n, persistent, transpose_b, out_dtype, cluster_m in itertools.product(
            (64, 128, 256), range(16, 257, 16), (True, "pingpong", "stream_k"), (True, False),
            ("bfloat16", "float32"), (1, 2)):
        kw = dict(tile_m=tile_m, tile_n=tile_n, persistent=persistent, transpose_b=transpose_b,
                  out_dtype=out_dtype, cluster_m=cluster_m)
        got = {}
        for policy in ("even", "fill"):
            monkeypatch.setattr(pieces, "EPILOGUE_SLOTS", policy)
            try:
                t = resolve_tiling(4096, 4096, 4096, **kw)
            except ValueError:
                break
            got[policy] = (t.stages, t.epilogue_slots, t.smem_bytes)
        if len(got) < 2:
            continue
        checked += 1
        assert got["fill"][0] == got["even"][0] and got["fill"][1] >= got["even"][1], kw
        assert got["fill"][2] <= pieces.SMEM_LIMIT, kw
    assert checked > 200


def test_fill_builds_a_kernel_whose_boxes_wait_only_for_their_slot(monkeypatch):
    """128 x 176 (eleven 16-column boxes a consumer tile): with eight slots its boxes wait for at
    most seven stores (two at a tile's first box, whose slot the previous tile's ninth box used)
    where with one each waits for the last."""
    waits = {}
    for policy in ("even", "fill"):
        monkeypatch.setattr(pieces, "EPILOGUE_SLOTS", policy)
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            kern = make_gemm(2048, 5632, 2048, transpose_b=True, tile_m=128, tile_n=176, persistent=True,
                             target="sm_90a", use_cache=False)
        code = kern.compiled.ptx
        assert len(TMA_STORE.findall(code)) == 11
        waits[policy] = {int(n) for n in WAIT_READ.findall(code)}
    assert waits["even"] == {0}
    assert {7, 2} <= waits["fill"] and max(waits["fill"]) == 7


def test_a_bad_policy_is_refused_naming_the_variable():
    import os
    import subprocess
    import sys

    env = {**os.environ, "PYTHONPATH": os.pathsep.join(sys.path), pieces.EPILOGUE_SLOTS_ENV: "many"}
    out = subprocess.run([sys.executable, "-c", "import mgpu_lab.kernels.gemm"], env=env, capture_output=True,
                         text=True, timeout=120)
    assert out.returncode != 0 and ("MGPU_LAB_GEMM_EPILOGUE_SLOTS must be 'even' or 'fill' (how many smem slots "
                                    "a persistent tile streams C through), got 'many'") in out.stderr
