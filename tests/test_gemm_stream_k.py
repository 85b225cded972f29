"""CPU tests of the stream-K GEMM (persistent='stream_k'): the schedule covers every k-step of
every tile exactly once, each split tile's owner sums exactly the partials written for it; the
kernels compile clean (no spills) with the hand-over in the SASS (16-byte partial stores, bulk
copies, acquire/release flags); bad arguments are refused by name."""

from __future__ import annotations

import collections
import itertools
import re

import pytest
from test_gemm import assert_clean, opcodes

from mgpu_lab.kernels.gemm import gemm_definition, make_gemm, resolve_tiling
from mgpu_lab.kernels.gemm.stream_k import MAX_CONTRIBUTORS, SIGNAL_BARRIER, StreamKPlan, _Unit, stream_k_inputs


def _simulate(plan: StreamKPlan) -> None:
    """Replay the kernel's decisions on the host and check the hand-over is consistent."""
    ks = plan.k_steps
    covered = collections.Counter()
    written = collections.defaultdict(list)  # split item -> units that parked a partial of it
    owned, sums = {}, {}
    for u in range(plan.units):
        me = _Unit(plan, u, plan.start(u), plan.start(u + 1))
        segments = plan.segments(u)
        if not plan.sk_steps:
            assert not segments and not me.writes_partial and not me.owns_split_tile
            continue
        assert segments, f"unit {u} has no k-steps"
        assert [item for item, _, _ in segments] == sorted((item for item, _, _ in segments), reverse=True)
        for i, (item, k_first, steps) in enumerate(segments):
            assert steps > 0 and 0 <= k_first and k_first + steps <= ks
            assert i == 0 or k_first + steps == ks, "only the first segment a unit runs may stop inside a tile"
            assert i == 0 or k_first == 0 or i == len(segments) - 1
            for kk in range(k_first, k_first + steps):
                covered[item, kk] += 1
            if k_first + steps < ks:
                written[item].append(u)
            elif k_first > 0:
                assert i == len(segments) - 1, "an owned split tile is the last segment a unit runs"
                owned[item] = u
        assert bool(me.writes_partial) == (segments[0][1] + segments[0][2] < ks)
        last_item, last_first, last_steps = segments[-1]
        assert bool(me.owns_split_tile) == (last_first > 0 and last_first + last_steps == ks)
        if me.owns_split_tile:
            contributors = [d for d in range(1, plan.max_contributors + 1) if me.contributes(d)]
            assert contributors == list(range(1, len(contributors) + 1))  # a prefix: the kernels loop over a count
            assert me.contributor_count == len(contributors)
            sums[last_item] = [u - d for d in contributors]
        # the kernels' one loop over jobs: the unit's whole tiles, then its segments, with the
        # pipeline iterations running on from one job to the next
        whole = [(u + r * plan.units, 0, ks) for r in range(plan.dp_rounds)]
        split = [(plan.dp_items + item, k_first, steps) for item, k_first, steps in segments]
        jobs = [me.job(j) for j in range(me.job_count)]
        assert [job[:3] for job in jobs] == whole + split
        assert [job[3] for job in jobs] == list(itertools.accumulate([0] + [job[2] for job in jobs[:-1]]))
    assert sums == {item: written[item][::-1] for item in owned}, "an owner sums other partials than were written"
    split_items = plan.items - plan.dp_items
    assert covered == {(item, kk): 1 for item in range(split_items) for kk in range(ks)}
    assert set(written) <= set(owned), "a partial nobody sums"
    assert all(len(units) <= plan.max_contributors <= MAX_CONTRIBUTORS for units in written.values())
    assert plan.max_steps >= max(plan.dp_rounds * ks + sum(s for _, _, s in plan.segments(u))
                                 for u in range(plan.units))


@pytest.mark.parametrize("units, items, k_steps", [
    (132, 512, 64), (132, 2048, 128), (132, 128, 128), (66, 896, 64), (132, 16, 20), (132, 133, 3),
    (132, 264, 7), (5, 9, 4), (132, 132, 1), (66, 65, 2), (132, 3584, 64), (132, 128, 2),
])
def test_schedule_covers_every_k_step_once(units, items, k_steps):
    _simulate(StreamKPlan(units, items, k_steps))


def test_schedule_balances_the_units():
    """512 tiles of 64 k-steps on 132 SMs: 3 whole rounds, then 116 tiles' k-steps shared evenly:
    each unit does at most 249 k-steps where whole tiles would take 256 (4 tiles)."""
    plan = StreamKPlan(132, 512, 64)
    assert (plan.dp_rounds, plan.dp_items, plan.sk_steps) == (3, 396, 116 * 64)
    per_unit = [plan.dp_rounds * 64 + sum(s for _, _, s in plan.segments(u)) for u in range(132)]
    assert max(per_unit) - min(per_unit) <= 1 and max(per_unit) == 249
    assert plan.max_contributors == 2  # 56.2 k-steps a unit: some tiles in three pieces
    assert StreamKPlan(132, 128, 128).max_contributors == 1  # fewer tiles than units: each cut in two
    assert StreamKPlan(132, 264, 64).sk_steps == 0  # two exact rounds: nothing to split
    # 4 tiles left of 3584 would be cut in 33 pieces: one round fewer is split instead
    few = StreamKPlan(132, 3568, 64)
    assert few.items - few.dp_items == 3568 - 26 * 132 and few.max_contributors <= MAX_CONTRIBUTORS


def test_exhaustive_small_schedules():
    for units, items, k_steps in itertools.product((1, 2, 3, 7, 12), (1, 2, 5, 13, 30), (1, 2, 3, 8)):
        plan = StreamKPlan(units, items, k_steps)
        if not 0 < plan.sk_steps < units:  # what check_stream_k admits
            _simulate(plan)


@pytest.mark.parametrize("kwargs, chunks, spill", [
    ({"tile_m": 128, "tile_n": 256}, 4, 0),
    # one 4-byte value spilled around the owner's sum (two 64-row wgmma tiles a consumer), outside any k-loop
    ({"tile_m": 256, "tile_n": 128, "transpose_b": True}, 8, 4),
    ({"tile_m": 128, "tile_n": 256, "cluster_m": 2}, 4, 0),
    ({"tile_m": 256, "tile_n": 128, "transpose_b": True, "cluster_n": 2}, 8, 4),  # pairs sharing A
    ({"tile_m": 64, "tile_n": 256}, 2, 0),
    ({"tile_m": 128, "tile_n": 256, "team_m": 4}, 4, 0),  # teams of four blocks down a column
])
def test_stream_k_gemm_compiles(kwargs, chunks, spill):
    k = make_gemm(4000, 4000, 4000, persistent="stream_k", **kwargs)
    assert [s.name for s in k.program.scratch] == ["stream_k_partials", "stream_k_flags"]
    assert [s.zeroed for s in k.program.scratch] == [False, True]
    r = k.compiled.resources
    assert r.spill_stores_bytes <= spill and r.spill_loads_bytes <= spill
    if spill:
        loop = re.search(r"HGMMA.*?WARPGROUP\.DEPBAR", k.compiled.sass, re.S).group(0)
        assert "LDL" not in loop and "STL" not in loop
    else:
        assert_clean(k, rf"HGMMA\.64x{kwargs['tile_n']}x16")
    ops = opcodes(k.compiled.sass)
    assert k.compiled.grid == (132, 1, 1)
    paired = bool(kwargs.get("cluster_m") or kwargs.get("cluster_n"))
    assert k.compiled.cluster == ((2, 1, 1) if paired else (1, 1, 1))  # a team is no cluster
    assert bool(re.search(r"\bUTMALDG\.2D\.MULTICAST\b", k.compiled.sass)) == paired
    t = k.config["tiling"]
    # the workspace and the flags are the kernel's last inputs, not the caller's
    assert [tuple(i.shape) for i in k.compiled.inputs[2:]] == [s.shape for s in stream_k_inputs(t)]
    assert len(k.inputs) == 2
    sass = k.compiled.sass
    # each consumer parks its partial with 16-byte stores; the owner bulk-copies a chunk per slot,
    # in a loop over the contributors (one copy of the code however many there may be)
    assert ops.count("STG.E.128") == t.partial_chunks * t.partial_groups
    assert StreamKPlan.of(t).max_contributors >= 2 and ops.count("UBLKCP.S.G") == chunks
    assert re.search(r"LDG\.E\.STRONG\.GPU", sass), "no acquire load of a flag"
    assert "MEMBAR.ALL.GPU" in sass, "no release fence before a flag"
    # the consumers arrive (bar.arrive: no wait) where the signaller warp syncs
    assert re.search(r"BAR\.ARV R\d+, 0xa0", sass)
    assert re.search(rf"BAR\.SYNC\.DEFER_BLOCKING {SIGNAL_BARRIER:#x}, 0xa0", sass)


@pytest.mark.parametrize("m, n, tile_m, tile_n, team_m", [
    (634, 3584, 128, 256, 5),  # 5 row tiles, one team per column: 26 teams (130 blocks) over 14 columns
    (409, 3584, 128, 192, 4),
    (1044, 4096, 128, 256, 3),  # 9 row tiles in 3 teams a column: whole rounds, then split ones
    (600, 2000, 128, 128, 3),  # 5 row tiles in teams of 3: the second team's last tile is past m
    (4000, 4000, 256, 128, 2),
])
def test_stream_k_teams_cover_every_tile_once(m, n, tile_m, tile_n, team_m):
    """Every block of a team runs its own tile over the same pieces of K as its team: each k-step
    of each tile inside C once, each partial summed by the block in the same place of the owning
    team (the kernel's `tile_origin` and flag arithmetic, replayed on the host)."""
    from mgpu_lab.kernels.gemm.pieces import tile_origin

    t = resolve_tiling(m, n, 8192, tile_m=tile_m, tile_n=tile_n, persistent="stream_k", team_m=team_m)
    plan = StreamKPlan.of(t)
    assert t.grid == 132 // team_m * team_m and plan.units == 132 // team_m
    assert plan.items == -(-t.tiles_m // team_m) * t.tiles_n
    _simulate(plan)
    covered = collections.Counter()
    for block in range(t.grid):
        unit, member = block // team_m, block % team_m
        me = _Unit(plan, unit, plan.start(unit), plan.start(unit + 1))
        for j in range(me.job_count):
            item, k_first, steps, _ = me.job(j)
            row0, col0 = tile_origin(t, item, member)
            assert row0 % tile_m == 0 and col0 % tile_n == 0 and col0 < n
            for kk in range(k_first, k_first + steps):
                covered[row0, col0, kk] += 1
        if me.owns_split_tile:  # its partials come from the block in its place of earlier teams
            for d in range(1, me.contributor_count + 1):
                assert (unit - d) * t.unit_blocks + member == block - d * team_m
    inside = {(r, c, kk): 1 for r in range(0, m, tile_m) for c in range(0, n, tile_n) for kk in range(t.k_steps)}
    assert {key: v for key, v in covered.items() if key[0] < m} == inside
    past = {key for key in covered if key[0] >= m}  # a last team's blocks below C: their tiles load zeros
    assert len(past) == (-(-t.tiles_m // team_m) * team_m - t.tiles_m) * t.tiles_n * t.k_steps


def test_fp8_stream_k_compiles():
    from mgpu_lab.kernels.gemm.fp8 import make_fp8_gemm

    k = make_fp8_gemm(4096, 4096, 4096, tile_m=128, tile_n=256, persistent="stream_k")
    assert [s.name for s in k.program.scratch] == ["stream_k_partials", "stream_k_flags"]
    assert_clean(k, r"QGMMA\.64x256x32")


def test_a_tuned_stream_k_entry_gives_way_in_a_definition(monkeypatch):
    """gemm_definition's body takes (a, b, *epilogue arrays): a tuned stream-K entry runs as the
    plain persistent kernel there; asking for it gives the body the workspace and flags too."""
    from mgpu_lab.kernels.gemm import kernel as gemm_module

    monkeypatch.setattr(gemm_module, "gemm_config", lambda *a, **k: {
        "tile_m": 128, "tile_n": 256, "persistent": "stream_k", "group_m": 8, "source": "tuned"})
    plain = gemm_definition(4096, 4096, 4096)
    assert len(plain["in_shapes"]) == 2 and plain["grid"] == 132
    asked = gemm_definition(4096, 4096, 4096, persistent="stream_k")
    assert [tuple(s.shape) for s in asked["in_shapes"][2:]] == [(132, 4, 2, 8, 128, 4), (132,)]


@pytest.mark.parametrize("shape, kwargs, message", [
    ((4096, 4096, 4096), {"tile_m": 128, "tile_n": 48, "transpose_b": True},
     r"persistent='stream_k' hands partial tiles over in slices of tile_n \* 32 / tile_m columns \(a multiple of 8\), "
     r"16 bytes per thread: tile_n must be a multiple of 32 for tile_m=128, got tile_n=48"),
    ((4096, 4096, 4096), {"tile_m": 256, "tile_n": 32},
     r"tile_n must be a multiple of 64 for tile_m=256, got tile_n=32"),
    ((128, 128, 64), {"tile_m": 128, "tile_n": 128},
     r"persistent='stream_k' gives each of the 132 persistent units at least one k-step; 128x128x64 in 128x128 "
     r"tiles has 1: use persistent=False or split_k"),
    ((4096, 4096, 4096), {"tile_m": 128, "tile_n": 256, "split_k": 2},
     r"split_k=2 runs one tile slice per block; it cannot be combined with persistent='stream_k'"),
    ((4096, 4096, 4096), {"tile_m": 128, "tile_n": 256, "persistent": "streamk"},
     r"persistent must be False, True, 'pingpong' or 'stream_k', got 'streamk'"),
    ((4096, 4096, 4096), {"tile_m": 128, "tile_n": 256, "team_m": 9}, r"team_m must be an int from 1 to 8, got 9"),
    ((4096, 4096, 4096), {"tile_m": 128, "tile_n": 256, "team_m": 2.5},
     r"team_m must be an int from 1 to 8, got 2.5"),
    ((4096, 4096, 4096), {"tile_m": 128, "tile_n": 256, "team_m": 4, "persistent": True},
     r"team_m=4 \(stream-K units of 4 blocks on a column's tiles\) needs persistent='stream_k' without a "
     r"multicast cluster, got persistent=True, cluster_m=1, cluster_n=1"),
    ((4096, 4096, 4096), {"tile_m": 128, "tile_n": 256, "team_m": 2, "cluster_m": 2},
     r"team_m=2 .* needs persistent='stream_k' without a multicast cluster, got persistent='stream_k', cluster_m=2"),
    ((300, 4096, 4096), {"tile_m": 128, "tile_n": 256, "team_m": 4},
     r"team_m=4 puts 4 row tiles in a team, but m=300 makes only 3 of 128 rows: team_m must be at most 3"),
])
def test_stream_k_rejects_bad_arguments(shape, kwargs, message):
    kwargs = {"persistent": "stream_k", **kwargs}
    with pytest.raises(ValueError, match=message):
        make_gemm(*shape, **kwargs)


def test_stream_k_refuses_a_custom_mainloop():
    from mgpu_lab.kernels.gemm import tiled_gemm_definition

    t = resolve_tiling(4096, 4096, 4096, tile_m=128, tile_n=256, persistent="stream_k")
    with pytest.raises(ValueError, match=r"persistent='stream_k' need the built-in mainloop"):
        tiled_gemm_definition(t, mainloop=lambda *args: None)


@pytest.mark.parametrize("team_m", [1, 4])
def test_stream_k_exports_with_its_buffers_as_inputs(tmp_path, team_m):
    """The exported module's launcher takes the workspace and the flags after a and b (a team's
    grid, 33 teams of 4, as many blocks)."""
    import ast

    k = make_gemm(4096, 4096, 4096, tile_m=128, tile_n=256, persistent="stream_k", team_m=team_m)
    path = k.export(str(tmp_path / "gemm_sk.py"))
    source = open(path).read()
    ast.parse(source)
    for shape in ("(132, 4, 2, 8, 128, 4)", "(132,)"):
        assert shape in source.replace("[", "(").replace("]", ")")
