"""CPU tests of clusters: TMA multicast (collective= splits a box among the blocks of a cluster
axis; multicast_mask= sends a whole box to chosen ranks), cluster barriers, and mbarrier arrivals
on a peer block (mapa + shared::cluster). The kernel builders also run on the GPU
(test_multicast_gpu.py)."""

from __future__ import annotations

import re

import pytest

import mgpu_lab
from mgpu_lab import dsl
from mgpu_lab.builder.fragmented import FragmentedArray
from mgpu_lab.builder.ptx import inline_ptx
from mgpu_lab.builder.warpgroup import cluster_rank, cluster_sync, single_thread
from mgpu_lab.errors import KernelBuildError

TILE = (128, 64)  # bf16: 64 columns = one 128-byte swizzle span


def opcodes(sass: str) -> list[str]:
    return re.findall(r"\*/\s+(?:@!?U?P\w+\s+)?([A-Z][A-Z0-9_.]+)", sass)


def make_multicast_tile(cluster=(2, 1, 1), collective=("x",), mode: str = "collective", clusters: int = 2,
                        **options) -> mgpu_lab.Kernel:
    """Each cluster c loads tile x[c] (128, 64) bf16 once, shared by its blocks: with
    mode='collective' every block of the `collective` axes loads its slice multicast to all of
    them; with mode='mask' (a 2-block cluster) block r loads rows [64r, 64r + 64) and multicasts
    them with multicast_mask=0b11. Every block then writes its whole smem tile to out[block]."""
    grid = (cluster[0] * clusters, cluster[1], cluster[2])
    blocks = grid[0] * grid[1] * grid[2]
    x_sd = mgpu_lab.ShapeDtype((clusters, *TILE), "bfloat16")
    out_sd = mgpu_lab.ShapeDtype((blocks, *TILE), "bfloat16")

    def multicast_tile(ctx, x, out, smem):
        buf, bars = smem
        bars.init(1, sync="cluster")  # peers multicast into our buffer and signal our barrier
        cluster_idx = dsl.arith.divui(dsl.block_idx("x"), dsl.c(cluster[0]))
        if mode == "collective":
            ctx.async_copy(src_ref=x, dst_ref=buf, gmem_slice=(cluster_idx,), barrier=bars[0], swizzle=128,
                           collective=collective)
        else:
            half = TILE[0] // 2
            with single_thread("warpgroup"):
                bars[0].arrive_expect_tx(TILE[0] * TILE[1] * 2)  # both halves land here
                row = dsl.arith.muli(dsl.cluster_block_idx("x"), dsl.c(half))
                ctx.async_copy(src_ref=x, dst_ref=dsl.memref_slice(buf, dsl.ds(row, half)), barrier=bars[0],
                               gmem_slice=(cluster_idx, dsl.ds(row, half)), swizzle=128, multicast_mask=0b11,
                               arrive=False, uniform=False)
        bars[0].wait(0)
        linear = dsl.arith.addi(dsl.block_idx("x"), dsl.arith.muli(dsl.c(grid[0]),
                                dsl.arith.addi(dsl.block_idx("y"), dsl.arith.muli(dsl.c(grid[1]), dsl.block_idx("z")))))
        ctx.async_copy(src_ref=buf, dst_ref=out, gmem_slice=(linear,), swizzle=128)
        ctx.await_async_copy(0)
        cluster_sync()  # no block exits while its multicast may still write a peer's smem

    name = f"multicast_{mode}_{'x'.join(map(str, cluster))}_{''.join(collective)}"
    return mgpu_lab.kernel(multicast_tile, grid=grid, block=128, cluster=cluster, in_shapes=x_sd, out_shapes=out_sd,
                           smem=(mgpu_lab.ShapeDtype(TILE, "bfloat16"), mgpu_lab.Barriers(1)), name=name,
                           **options)


def make_multicast_pipeline(iterations: int = 4, clusters: int = 2, **options) -> mgpu_lab.Kernel:
    """A 2-block cluster streams x[c, it] (it < iterations) through ONE smem slot: each iteration,
    one thread per block waits until the slot is free in both blocks (`empty`: 4 warps x 2 blocks
    arrive), expects the tile's bytes on `full` and loads its half multicast to both; all threads
    wait on `full`, copy the tile to out[it, block], and lane 0 of each warp releases the slot in
    both blocks (`empty[0].arrive(cta=rank)` on the peer via mapa)."""
    x_sd = mgpu_lab.ShapeDtype((clusters, iterations, *TILE), "bfloat16")
    out_sd = mgpu_lab.ShapeDtype((iterations, 2 * clusters, *TILE), "bfloat16")
    tile_bytes = TILE[0] * TILE[1] * 2

    def multicast_pipeline(ctx, x, out, smem):
        buf, full, empty = smem
        full.init(1, sync=False)
        empty.init(4 * 2, sync="cluster")  # every warp of both blocks releases the slot
        cluster_idx = dsl.arith.divui(dsl.block_idx("x"), dsl.c(2))
        lane0 = dsl.arith.cmpi(dsl.arith.CmpIPredicate.eq, dsl.lane_idx(), dsl.c(0))

        @dsl.for_range(0, iterations)
        def _(it):
            with single_thread("block"):
                empty.wait_for_iteration(it, flip=True)  # both blocks are done with the slot
                bar, _ = full.for_iteration(it)
                bar.arrive_expect_tx(tile_bytes)
                ctx.async_copy(src_ref=x, dst_ref=buf, gmem_slice=(cluster_idx, it), barrier=bar, arrive=False,
                               collective="x", uniform=False)
            full.wait_for_iteration(it)
            FragmentedArray.load(buf).store(dsl.memref_slice(out, (it, dsl.block_idx("x"))))
            inline_ptx("bar.warp.sync -1;")  # the warp's reads are done before lane 0 releases the slot
            with dsl.when(lane0):
                for peer in range(2):
                    empty[0].arrive(cta=peer)

        cluster_sync()  # peers may still arrive on our `empty` barrier

    return mgpu_lab.kernel(multicast_pipeline, grid=2 * clusters, block=128, cluster=(2, 1, 1), in_shapes=x_sd,
                           out_shapes=out_sd, name="multicast_pipeline",
                           smem=(mgpu_lab.ShapeDtype(TILE, "bfloat16"), mgpu_lab.Barriers(1), mgpu_lab.Barriers(1)),
                           **options)


@pytest.mark.parametrize("cluster, collective, mode", [
    ((2, 1, 1), ("x",), "collective"), ((2, 2, 1), ("y",), "collective"), ((2, 2, 1), ("x", "y"), "collective"),
    ((4, 1, 1), "x", "collective"), ((2, 1, 1), ("x",), "mask"),
])
def test_multicast_tile_sass(cluster, collective, mode):
    k = make_multicast_tile(cluster, collective, mode)
    ptx, ops = k.compiled.ptx, opcodes(k.compiled.sass)
    assert ".multicast::cluster" in ptx
    assert any(op.startswith("UTMALDG.") and op.endswith(".MULTICAST") for op in ops), sorted(set(ops))
    assert "UCGABAR_ARV" in ops and "UCGABAR_WAIT" in ops  # barrier.cluster.arrive / wait
    assert k.compiled.cluster == cluster
    count = 1
    for axis in collective:
        count *= cluster["xyz".index(axis)]
    part = TILE[0] // count if mode == "collective" else TILE[0] // 2
    boxes = [d.box_shape for d in k.compiled.tma_descriptors]
    assert (TILE[1], part, 1) in boxes  # the per-block slice of the box (innermost first)
    r = k.compiled.resources
    assert r.spill_stores_bytes == r.spill_loads_bytes == 0


def test_collective_mask_arithmetic_in_ptx():
    """(2, 2, 1) with collective 'y': blocks x, x + 2 share, mask 0b0101 << x."""
    k = make_multicast_tile((2, 2, 1), ("y",), use_cache=False)
    ptx = k.compiled.ptx
    assert re.search(r"mov\.b(16|32)\s+%r\w+, 5;", ptx) and re.search(r"shl\.b(16|32)\s+%r\w+, %r", ptx)
    assert "%cluster_ctarank" in ptx and "%cluster_ctaid" not in ptx  # coordinates from the rank: no division


def test_peer_arrivals_and_cluster_sync():
    k = make_multicast_pipeline()
    ptx, ops = k.compiled.ptx, opcodes(k.compiled.sass)
    assert "mapa.shared::cluster.u32" in ptx
    assert "mbarrier.arrive.shared::cluster.b64 _," in ptx  # release at cta scope: no wait for this thread's writes
    assert "barrier.cluster.arrive.release.aligned;" in ptx and "barrier.cluster.wait.acquire.aligned;" in ptx
    assert any(op.startswith("SYNCS.ARRIVE.TRANS64.RED") for op in ops), sorted(set(ops))  # remote arrive
    assert any(op.startswith("UTMALDG.") and op.endswith(".MULTICAST") for op in ops)
    assert not any(op.startswith(("LDL", "STL")) for op in ops)


def test_cluster_rank_reads_ctarank():
    sd = mgpu_lab.ShapeDtype((4,), "int32")

    def body(ctx, out, smem):
        with dsl.when(dsl.arith.cmpi(dsl.arith.CmpIPredicate.eq, dsl.thread_idx(), dsl.c(0))):
            dsl.memref.store(cluster_rank(), out, [dsl.block_idx("x")])

    k = mgpu_lab.kernel(body, grid=4, block=32, cluster=(2, 1, 1), out_shapes=sd)
    assert "%cluster_ctarank" in k.compiled.ptx


# -- errors ---------------------------------------------------------------------------------------

def _build_copy(cluster=(2, 1, 1), smem_shape=TILE, **copy):
    sd = mgpu_lab.ShapeDtype(TILE, "bfloat16")

    def body(ctx, x, y, smem):
        buf, bars = smem
        bars.init(1, sync="cluster")
        kwargs = {"src_ref": x, "dst_ref": buf, "barrier": bars[0], "swizzle": 128}
        kwargs.update(copy)
        if kwargs.get("dst_ref") is None:
            kwargs["dst_ref"] = y
            kwargs["src_ref"] = buf
            kwargs.pop("barrier")
        ctx.async_copy(**kwargs)

    return mgpu_lab.kernel(body, grid=cluster[0] * 2, block=128, cluster=cluster, in_shapes=sd, out_shapes=sd,
                           smem=(mgpu_lab.ShapeDtype(smem_shape, "bfloat16"), mgpu_lab.Barriers(1)))


@pytest.mark.parametrize("cluster, copy, message", [
    ((1, 1, 1), {"collective": "x"}, r"multicast within a cluster; build the kernel with cluster=\(2, 1, 1\)"),
    ((2, 1, 1), {"collective": "y"}, r"collective axis 'y' has cluster size 1 \(cluster=\(2, 1, 1\)\)"),
    ((2, 1, 1), {"collective": "w"}, r"collective must name distinct cluster axes 'x', 'y', 'z'"),
    ((2, 1, 1), {"collective": "x", "multicast_mask": 3}, r"pass collective= or multicast_mask=, not both"),
    ((2, 1, 1), {"multicast_mask": 4}, (r"multicast_mask must select blocks of the 2-block cluster: an int in "
                                        r"\[1, 3\], got 0x4")),
    ((2, 1, 1), {"collective": "x", "dst_ref": None}, r"apply to GMEM -> SMEM copies \(TMA multicast loads\) only"),
])
def test_multicast_errors(cluster, copy, message):
    with pytest.raises(KernelBuildError, match=message):
        _build_copy(cluster, **copy)


def test_collective_split_must_respect_the_swizzle_period():
    with pytest.raises(KernelBuildError, match=r"collective=\('x',\): each block's part is 4 rows = 512 bytes; it "
                                               r"must be a multiple of 1024 bytes \(the swizzle period's alignment\)"):
        _build_copy((2, 1, 1), smem_shape=(8, 64), gmem_slice=(slice(0, 8),), collective="x")


def test_arrive_cluster_needs_a_selection():
    sd = mgpu_lab.ShapeDtype((128,), "float32")

    def body(ctx, x, y, smem):
        smem[0].init(1)
        smem[0][0].arrive_cluster()

    with pytest.raises(KernelBuildError, match=r"arrive_cluster: pass ctas= \(ranks or a bit mask\) or cluster_size="):
        mgpu_lab.kernel(body, grid=2, block=128, cluster=(2, 1, 1), in_shapes=sd, out_shapes=sd,
                        smem=(mgpu_lab.Barriers(1),))


@pytest.mark.parametrize("scope, sem", [("cta", ""), ("cluster", ".release.cluster")])
def test_peer_arrival_scope(scope, sem):
    """A peer arrival releases at cta scope unless asked for cluster scope (which waits for the
    thread's own writes to reach the peer first)."""
    sd = mgpu_lab.ShapeDtype((128,), "float32")

    def body(ctx, x, y, smem):
        smem[0].init(2, sync="cluster")
        smem[0][0].arrive(cta=1 - dsl.cluster_rank(), scope=scope)
        dsl.cluster_sync()

    k = mgpu_lab.kernel(body, grid=2, block=128, cluster=(2, 1, 1), in_shapes=sd, out_shapes=sd,
                        smem=(mgpu_lab.Barriers(1),), use_cache=False)
    assert f"mbarrier.arrive{sem}.shared::cluster.b64 _," in k.compiled.ptx


def test_peer_arrival_scope_is_checked():
    sd = mgpu_lab.ShapeDtype((128,), "float32")

    def body(ctx, x, y, smem):
        smem[0].init(1)
        smem[0][0].arrive(cta=0, scope="gpu")

    with pytest.raises(KernelBuildError, match=r"BarrierRef.arrive: scope must be 'cta' or 'cluster', got 'gpu'"):
        mgpu_lab.kernel(body, grid=2, block=128, cluster=(2, 1, 1), in_shapes=sd, out_shapes=sd,
                        smem=(mgpu_lab.Barriers(1),))
