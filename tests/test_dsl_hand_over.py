"""CPU tests of the DSL pieces blocks use to hand data to each other (what stream-K is built
on): `dsl.signal` / `dsl.wait_signal` (release / acquire flags in global memory),
`dsl.async_bulk_load` (one bulk copy of contiguous bytes into smem), `store_by_thread` /
`load_by_thread` on global memory, `FragmentedArray.from_columns` and
`dsl.optimization_barrier`: the PTX and SASS they emit, and the errors that name what is wrong."""

from __future__ import annotations

import re

import pytest

import mgpu_lab
from mgpu_lab import dsl
from mgpu_lab.errors import KernelBuildError

F32 = "float32"


def _hand_over_kernel(**options) -> mgpu_lab.Kernel:
    """Block 0 parks a (64, 64) f32 register tile in global memory by thread and signals; block 1
    waits for the signal, bulk-copies the parked bytes into smem, reads them back by thread,
    adds its own tile and stores the sum."""
    layout = dsl.WGMMAFragLayout(64)
    parked = mgpu_lab.ShapeDtype((layout.registers // 2, 128, 4), F32)

    def body(ctx, x, work, flags, y, smem):
        landing, bar = smem
        bar.init(1)
        tile = dsl.FragmentedArray.load(x, layout=layout)
        block = dsl.block_idx()

        def first():
            tile.store_by_thread(work, pack=2)
            dsl.named_barrier(1, 128)
            with dsl.when(dsl.thread_idx() == 0):
                dsl.signal(flags, 0)

        def second():
            with dsl.single_thread("block"):
                dsl.wait_signal(flags, 0)
                dsl.async_bulk_load(src_ref=work, dst_ref=landing, barrier=bar[0], arrive=True)
            bar[0].wait(0)
            got = dsl.FragmentedArray.load_by_thread(landing, layout, pack=2)
            halves = [(got + tile).columns(0, 32), (got + tile).columns(32, 32)]
            dsl.optimization_barrier(*halves)
            dsl.FragmentedArray.from_columns(halves).store(y)

        dsl.if_else(block == 0, first, second)

    return mgpu_lab.kernel(body, grid=2, block=128,
                           in_shapes=(mgpu_lab.ShapeDtype((64, 64), F32), parked, mgpu_lab.ShapeDtype((1,), "int32")),
                           out_shapes=mgpu_lab.ShapeDtype((64, 64), F32), smem=(parked, mgpu_lab.Barriers(1)),
                           name="hand_over", **options)


def test_hand_over_emits_release_acquire_and_a_bulk_copy():
    k = _hand_over_kernel()
    ptx, sass = k.compiled.ptx, k.compiled.sass
    assert "fence.acq_rel.gpu;" in ptx and "st.relaxed.gpu.global.u32" in ptx
    assert "ld.acquire.gpu.global.u32" in ptx and "fence.proxy.async.global;" in ptx
    assert "cp.async.bulk.shared::cluster.global.mbarrier::complete_tx::bytes" in ptx
    assert "UBLKCP.S.G" in sass and "LDG.E.STRONG.GPU" in sass and "MEMBAR.ALL.GPU" in sass
    assert len(re.findall(r"STG\.E\.128", sass)) == 8  # 16 registers of 2 parked in pairs: 16-byte stores
    assert k.compiled.resources.spill_stores_bytes == 0
    assert "trap" not in ptx  # no timeout unless asked for


def test_wait_signal_traps_after_the_mbarrier_timeout():
    k = _hand_over_kernel(mbarrier_timeout_s=2.0)
    assert re.search(r"setp\.lt\.u64\s+done, now, 2000000000;\s*@!done trap;", k.compiled.ptx)


def _build(body, in_shapes, smem=()):
    return mgpu_lab.kernel(body, grid=1, block=128, in_shapes=in_shapes,
                           out_shapes=mgpu_lab.ShapeDtype((64, 64), F32), smem=smem or None)


def test_flags_must_be_a_1d_array_of_32_bit_ints():
    def body(ctx, x, flags, y, smem):
        dsl.signal(flags, 0)

    with pytest.raises(KernelBuildError, match=r"signal: flags must be a 1-d global array of 32-bit ints, got "
                                               r"memref<4xf32>") as info:
        _build(body, (mgpu_lab.ShapeDtype((64, 64), F32), mgpu_lab.ShapeDtype((4,), F32)))
    assert "test_dsl_hand_over.py" in str(info.value)  # points at the user's line

    def waiter(ctx, x, flags, y, smem):
        dsl.wait_signal(flags, 1)

    with pytest.raises(KernelBuildError, match=r"wait_signal: flags must be a 1-d global array of 32-bit ints, got "
                                               r"memref<2x2xi32>"):
        _build(waiter, (mgpu_lab.ShapeDtype((64, 64), F32), mgpu_lab.ShapeDtype((2, 2), "int32")))


@pytest.mark.parametrize("smem_shape, message", [
    ((32, 64), r"async_bulk_load: src_ref and dst_ref must hold the same bytes, a multiple of 16; got 16384 and 8192"),
    ((64, 64), None),
])
def test_bulk_load_checks_sizes(smem_shape, message):
    def body(ctx, x, y, smem):
        landing, bar = smem
        dsl.async_bulk_load(src_ref=x, dst_ref=landing, barrier=bar[0])

    build = lambda: _build(body, mgpu_lab.ShapeDtype((64, 64), F32),  # noqa: E731
                           (mgpu_lab.ShapeDtype(smem_shape, F32), mgpu_lab.Barriers(1)))
    if message is None:
        assert "UBLKCP.S.G" in build().compiled.sass
        return
    with pytest.raises(KernelBuildError, match=message):
        build()


@pytest.mark.parametrize("body, message", [
    (lambda x, s, bar: dsl.async_bulk_load(src_ref=s, dst_ref=x, barrier=bar[0]),
     r"async_bulk_load: src_ref must be a global and dst_ref a shared-memory memref"),
    (lambda x, s, bar: dsl.async_bulk_load(src_ref=x, dst_ref=s, barrier=bar),
     r"async_bulk_load: barrier must be a BarrierRef \(e.g. barriers\[i\]\), got BarrierArray"),
    (lambda x, s, bar: dsl.async_bulk_load(src_ref=dsl.memref_slice(x, (dsl.ds(0, 64), dsl.ds(0, 32))),
                                           dst_ref=dsl.memref_slice(s, (dsl.ds(0, 64), dsl.ds(0, 32))), barrier=bar[0]),
     r"async_bulk_load: src_ref must be a contiguous row-major view"),
])
def test_bulk_load_errors(body, message):
    def kernel(ctx, x, y, smem):
        landing, bar = smem
        body(x, landing, bar)

    with pytest.raises(KernelBuildError, match=message):
        _build(kernel, mgpu_lab.ShapeDtype((64, 64), F32), (mgpu_lab.ShapeDtype((64, 64), F32), mgpu_lab.Barriers(1)))


@pytest.mark.parametrize("body, message", [
    (lambda t, w: dsl.FragmentedArray.load_by_thread(w, dsl.WGMMAFragLayout(64), cta=1),
     r"load_by_thread: reading a peer block \(cta=\) needs a shared-memory ref, got memref<16x128x2xf32>"),
    (lambda t, w: dsl.FragmentedArray.from_columns([]),
     r"from_columns: needs one or more arrays in WGMMAFragLayout, got \[\]"),
    (lambda t, w: dsl.FragmentedArray.from_columns([t.reduce_sum(axis=1)]),
     r"from_columns: needs one or more arrays in WGMMAFragLayout, got \[WGMMARowLayout\(m=64\)\]"),
    (lambda t, w: dsl.FragmentedArray.from_columns([t.columns(0, 32), t.columns(0, 32).astype("bfloat16")]),
     r"from_columns: the pieces must have the same rows and element type, got \[\(\(64, 32\), 'f32'\), "
     r"\(\(64, 32\), 'bf16'\)\]"),
    (lambda t, w: dsl.optimization_barrier(t.astype("bfloat16")),
     r"optimization_barrier: expected FragmentedArrays of 32-bit elements, got bf16"),
])
def test_register_tile_errors(body, message):
    def kernel(ctx, x, work, y, smem):
        body(dsl.FragmentedArray.load(x, layout=dsl.WGMMAFragLayout(64)), work)

    with pytest.raises(KernelBuildError, match=message) as info:
        _build(kernel, (mgpu_lab.ShapeDtype((64, 64), F32), mgpu_lab.ShapeDtype((16, 128, 2), F32)))
    assert "test_dsl_hand_over.py" in str(info.value)


def test_from_columns_puts_a_tile_back_together():
    """columns() then from_columns() is the same registers in the same order: the stored tile
    is the loaded one (the kernel's PTX stores exactly the loaded values, no arithmetic)."""
    def kernel(ctx, x, y, smem):
        t = dsl.FragmentedArray.load(x, layout=dsl.WGMMAFragLayout(64, 128))
        pieces = [t.columns(0, 16), t.columns(16, 32), t.columns(48, 16)]
        back = dsl.FragmentedArray.from_columns(pieces)
        assert back.layout == t.layout and back.registers == t.registers
        back.store(y)

    k = mgpu_lab.kernel(kernel, grid=1, block=128, in_shapes=mgpu_lab.ShapeDtype((128, 64), F32),
                        out_shapes=mgpu_lab.ShapeDtype((128, 64), F32))
    assert "add.f32" not in k.compiled.ptx
