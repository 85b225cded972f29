"""CPU tests of FragmentedArray layouts and operations: reductions (shuffles + smem across
warps), broadcasts, exp2/log, comparisons and where, astype (f32/bf16/f16/f8), swizzled smem
tiles (bank-conflict free, checked with the bank model on the arithmetic the kernel emits),
and the softmax example. The kernel builders here also run on the GPU (test_fragmented_ops_gpu.py)."""

from __future__ import annotations

import collections
import re

import pytest

import mgpu_lab
from mgpu_lab import dsl
from mgpu_lab.builder.fragmented import FragmentedArray, where
from mgpu_lab.builder.layouts import (
    WGMMAColLayout,
    WGMMAFragLayout,
    WGMMARowLayout,
    WGStridedLayout,
    tiled_accesses,
)
from mgpu_lab.builder.warpgroup import commit_shared
from mgpu_lab.compiler.compiled_kernel import dtype_itemsize
from mgpu_lab.errors import KernelBuildError
from mgpu_lab.examples.softmax import make_softmax
from mgpu_lab.widgets.bank_model import Access, bank_conflicts, swizzle_address

CONVERSIONS = ("bfloat16", "float16", "float8_e4m3fn", "float8_e5m2")


def opcodes(sass: str) -> list[str]:
    return re.findall(r"\*/\s+(?:@!?U?P\w+\s+)?([A-Z][A-Z0-9_.]+)", sass)


def assert_clean(k: mgpu_lab.Kernel) -> None:
    ops = opcodes(k.compiled.sass)
    assert not any(op.startswith(("LDL", "STL")) for op in ops), "local memory"
    r = k.compiled.resources
    assert r.spill_stores_bytes == r.spill_loads_bytes == r.stack_frame_bytes == 0


# -- kernels (also used by the GPU tests) -----------------------------------------------------

def make_reductions(m: int = 128, n: int = 64, **options) -> mgpu_lab.Kernel:
    """x (m, n) f32 loaded from GMEM in the WGMMA layout. Outputs: row max, row sum (m,),
    column sum, column max (n,), z = where(x > column mean, exp2(x), log(x*x + 1)), and a
    comparison code: sum over k of 2**k where comparison k holds (<, <=, >, >=, ==, != against
    the row mean, a scalar, or x itself)."""
    sd = mgpu_lab.ShapeDtype((m, n), "float32")
    rows, cols = mgpu_lab.ShapeDtype((m,), "float32"), mgpu_lab.ShapeDtype((n,), "float32")

    def reductions(ctx, x, row_max, row_sum, col_sum, col_max, z, code, smem):
        (scratch,) = smem
        fx = FragmentedArray.load(x, layout=WGMMAFragLayout(n, m))
        fx.reduce_max(axis=1).store(row_max)
        rsum = fx.reduce_sum(axis=1)
        rsum.store(row_sum)
        csum = fx.reduce_sum(axis=0, scratch=scratch)
        csum.store(col_sum)
        fx.reduce_max(axis=0, scratch=scratch).store(col_max)
        mean_c = (csum * (1.0 / m)).broadcast((m, n))
        where(fx > mean_c, fx.exp2(), (fx * fx + 1.0).log()).store(z)
        mean_r = (rsum * (1.0 / n)).broadcast((m, n))
        tests = [fx < mean_r, fx <= 0.25, fx > mean_r, fx >= -0.25, fx == fx.max(0.0), fx != fx.min(0.0)]
        total = FragmentedArray.splat(0.0, fx.layout, "float32")
        for bit, cond in enumerate(tests):
            total = total + cond.select(float(1 << bit), 0.0, "float32")
        total.store(code)

    return mgpu_lab.kernel(reductions, grid=1, block=128, in_shapes=sd,
                           out_shapes=(rows, rows, cols, cols, sd, sd),
                           smem=(mgpu_lab.ShapeDtype((4, n), "float32"),), name=f"reductions_{m}x{n}", **options)


def make_exp2_fma(m: int = 64, n: int = 64, fractions=(1.0, 0.5), **options) -> mgpu_lab.Kernel:
    """x (m, n) f32 in the WGMMA layout -> x.exp2(fma_fraction=f) for each f (one output each)."""
    sd = mgpu_lab.ShapeDtype((m, n), "float32")

    def exp2_fma(ctx, x, *outs):
        fx = FragmentedArray.load(x, layout=WGMMAFragLayout(n, m))
        for f, out in zip(fractions, outs):
            fx.exp2(fma_fraction=f).store(out)

    return mgpu_lab.kernel(exp2_fma, grid=1, block=128, in_shapes=sd, out_shapes=(sd,) * len(fractions),
                           name="exp2_fma", **options)


def make_conversions(shape=(64, 64), **options) -> mgpu_lab.Kernel:
    """x (f32, WGMMA layout) -> x.astype(t) for t in CONVERSIONS (stored as t) and back to
    f32; also f16 -> e4m3 (packed f16x2 cvt), bf16 -> e5m2, e4m3 -> bf16 -> f32, e5m2 -> e4m3."""
    m, n = shape
    sd = mgpu_lab.ShapeDtype(shape, "float32")
    outs = [mgpu_lab.ShapeDtype(shape, t) for t in CONVERSIONS] + [sd] * (len(CONVERSIONS) + 4)

    def conversions(ctx, x, *refs):
        fx = FragmentedArray.load(x, layout=WGMMAFragLayout(n, m))
        direct, back = refs[:len(CONVERSIONS)], refs[len(CONVERSIONS):-1]
        for t, ref, ref_back in zip(CONVERSIONS, direct, back):
            y = fx.astype(t)
            y.store(ref)
            y.astype("float32").store(ref_back)
        extra = back[len(CONVERSIONS):]
        fx.astype("float16").astype("float8_e4m3fn").astype("float32").store(extra[0])
        fx.astype("bfloat16").astype("float8_e5m2").astype("float32").store(extra[1])
        fx.astype("float8_e4m3fn").astype("bfloat16").astype("float32").store(extra[2])
        fx.astype("float8_e5m2").astype("float8_e4m3fn").astype("float32").store(extra[3])

    return mgpu_lab.kernel(conversions, grid=1, block=128, in_shapes=sd, out_shapes=tuple(outs),
                           name="conversions", **options)


def make_tiled_roundtrip(dtype: str, swizzle: int, m: int = 64, chunks: int = 2, **options) -> mgpu_lab.Kernel:
    """TMA-load an (m, n) tile swizzled as (chunks, m, w); load_tiled it; store it to GMEM in
    the WGMMA layout (out 0) and store_tiled + TMA-store it (out 1). Both must equal x."""
    width = swizzle // dtype_itemsize(dtype)
    n = chunks * width
    sd = mgpu_lab.ShapeDtype((m, n), dtype)
    tile = mgpu_lab.ShapeDtype((chunks, m, width), dtype)

    def tiled_roundtrip(ctx, x, direct, tiled, smem):
        src, dst, bars = smem
        bars.init(chunks)
        for j in range(chunks):
            ctx.async_copy(src_ref=x, dst_ref=dsl.memref_slice(src, j), barrier=bars[0], swizzle=swizzle,
                           gmem_slice=(slice(None), dsl.ds(j * width, width)))
        bars[0].wait(0)
        arr = FragmentedArray.load_tiled(src, swizzle)
        arr.store(direct)
        arr.store_tiled(dst, swizzle)
        commit_shared()
        for j in range(chunks):
            ctx.async_copy(src_ref=dsl.memref_slice(dst, j), dst_ref=tiled, swizzle=swizzle,
                           gmem_slice=(slice(None), dsl.ds(j * width, width)))
        ctx.await_async_copy(0, await_read_only=True)

    return mgpu_lab.kernel(tiled_roundtrip, grid=1, block=128, in_shapes=sd, out_shapes=(sd, sd),
                           smem=(tile, tile, mgpu_lab.Barriers(1)), name=f"tiled_{dtype}_{swizzle}_{m}", **options)


def make_peer_exchange(m: int = 128, n: int = 64, start: int = 16, width: int = 32, pack: int = 1,
                       **options) -> mgpu_lab.Kernel:
    """Two blocks in a (2, 1, 1) cluster. Block r loads x[r] (m, n) in the WGMMA layout, parks
    its columns [start, start + width) in smem (`store_by_thread`), the cluster meets, and it
    writes the piece block 1 - r parked (`load_by_thread(cta=1 - r)`, distributed shared memory)
    to out[r] and its own piece read back locally to own[r]. out[r] must equal x[1 - r][:, piece],
    own[r] x[r][:, piece]. pack: registers parked (and read) that many side by side."""
    layout = WGMMAFragLayout(width, m)
    parked = mgpu_lab.ShapeDtype((layout.registers // pack, 128, 2 * pack), "float32")
    piece = mgpu_lab.ShapeDtype((2, m, width), "float32")

    def peer_exchange(ctx, x, out, own, smem):
        (park,) = smem
        rank = dsl.cluster_rank()
        arr = FragmentedArray.load(dsl.memref_slice(x, rank), layout=WGMMAFragLayout(n, m))
        arr.columns(start, width).store_by_thread(park, pack=pack)
        dsl.cluster_sync()
        FragmentedArray.load_by_thread(park, layout, cta=1 - rank, pack=pack).store(dsl.memref_slice(out, rank))
        FragmentedArray.load_by_thread(park, layout, pack=pack).store(dsl.memref_slice(own, rank))
        dsl.cluster_sync()  # the peer has read this block's smem before it exits

    return mgpu_lab.kernel(peer_exchange, grid=2, cluster=2, block=128,
                           in_shapes=mgpu_lab.ShapeDtype((2, m, n), "float32"), out_shapes=(piece, piece),
                           smem=(parked,), name=f"peer_exchange_pack{pack}", **options)


# -- layouts and smem access patterns ---------------------------------------------------------

def _warp_instructions(layout, itemsize, swizzle, warp):
    """Per access instruction of `warp`: [(lane, access)] with Python-int indices."""
    per_lane = [tiled_accesses(layout, itemsize, swizzle, 16 * warp + lane // 4, 2 * (lane % 4))
                for lane in range(32)]
    return [[(lane, per_lane[lane][k]) for lane in range(32)] for k in range(len(per_lane[0]))]


def _byte_address(access, m, swizzle, itemsize):
    chunk, row, col = access.index
    return chunk * m * swizzle + row * swizzle + col * itemsize


@pytest.mark.parametrize("itemsize", [4, 2, 1])
@pytest.mark.parametrize("swizzle", [32, 64, 128])
@pytest.mark.parametrize("m", [64, 128])
def test_tiled_accesses_are_conflict_free_and_land_where_tma_puts_them(itemsize, swizzle, m):
    width = swizzle // itemsize
    layout = WGMMAFragLayout(2 * width, m)
    offsets = layout.offsets()
    for warp in range(4):
        for instruction in _warp_instructions(layout, itemsize, swizzle, warp):
            nbytes = itemsize if instruction[0][1].element is not None else 2 * itemsize
            report = bank_conflicts([Access(lane, _byte_address(a, m, swizzle, itemsize), nbytes)
                                     for lane, a in instruction])
            assert report.degree == 1.0, (warp, instruction[0][1], report.max_way)
            for lane, a in instruction:  # the element this access moves sits where TMA put it
                dr, dc = offsets[a.register]
                elements = [a.element] if a.element is not None else [0, 1]
                for k, e in enumerate(elements):
                    row, col = 16 * warp + lane // 4 + dr, 2 * (lane % 4) + dc + e
                    logical = (col // width) * m * swizzle + row * swizzle + (col % width) * itemsize
                    assert swizzle_address(logical, swizzle) == _byte_address(a, m, swizzle, itemsize) + k * itemsize


def test_f32_pairs_would_conflict_two_ways():
    """Why f32 tiles with 64/128-byte swizzles move one element per access: 8-byte pairs hit
    every bank twice (with the 32-byte swizzle they do not, and pairs are kept)."""
    for swizzle, degree in ((32, 1.0), (64, 2.0), (128, 2.0)):
        pairs = []
        for lane in range(32):
            row, col = lane // 4, 2 * (lane % 4)
            pairs.append(Access(lane, swizzle_address(row * swizzle + col * 4, swizzle), 8))
        assert bank_conflicts(pairs).degree == degree
        accesses = tiled_accesses(WGMMAFragLayout(swizzle // 4), 4, swizzle, 0, 0)
        assert all((a.element is None) == (swizzle == 32) for a in accesses)


def test_layout_shapes_and_checks():
    assert WGMMAFragLayout(64).shape == (64, 64) and WGMMAFragLayout(64).registers == 16
    assert WGMMAFragLayout(256, 128).registers == 128
    assert WGMMARowLayout(128).registers == 4 and WGMMAColLayout(64).registers == 8
    with pytest.raises(ValueError, match=r"WGMMAFragLayout: m \(rows\) must be a positive multiple of 64, got 96"):
        WGMMAFragLayout(64, 96)
    with pytest.raises(ValueError, match=r"WGMMAColLayout: n \(columns\) must be a positive multiple of 8, got 12"):
        WGMMAColLayout(12)
    with pytest.raises(ValueError, match="do not split into 128 threads"):
        WGStridedLayout((10, 10), 4)


# -- kernels compile to the expected instructions ------------------------------------------------

def test_softmax_example_sass():
    k = make_softmax(256, 256)
    ops = collections.Counter(opcodes(k.compiled.sass))
    assert_clean(k)
    half = 64 * 256 // 128  # values per thread per 64-row half (the loop body is traced once)
    assert ops["MUFU.EX2"] == half  # exp2 with ftz: one MUFU op per element, no range fix-up
    assert ops["LDS"] == ops["STS"] == half  # one 4-byte conflict-free access per element, no LDS.64
    assert ops["SHFL.BFLY"] == 2 * 2 * 2  # (max, sum) x 2 row halves x 2 butterfly steps
    assert ops["UTMALDG.2D"] == ops["UTMASTG.2D"] == 8
    assert ops["FMNMX.NAN"] >= half  # the row maximum: max.NaN (NaN propagates)


def test_reductions_sass():
    k = make_reductions()
    ops = collections.Counter(opcodes(k.compiled.sass))
    assert_clean(k)
    # axis 1: 2 shuffles per row value; axis 0: 3 per column value, for both halves of each pair
    rows, cols = 2 * 2, 64 // 8 * 2
    assert ops["SHFL.BFLY"] == 2 * (2 * rows) + 2 * (3 * cols)
    assert ops["BAR.SYNC.DEFER_BLOCKING"] == 4  # 2 per column reduction (write, then read scratch)
    assert ops["MUFU.EX2"] == 64 * 128 // 128
    assert ops["MUFU.LG2"] == 0  # log() is the accurate polynomial; log(approx=True) uses MUFU.LG2
    assert "FSETP.GT.AND" in ops and "FSEL" in ops


def test_approximate_log_uses_mufu():
    def kernel(ctx, x, y, smem):
        FragmentedArray.load(x).log(approx=True).store(y)

    k = _build(kernel)
    assert collections.Counter(opcodes(k.compiled.sass))["MUFU.LG2"] == 64 * 64 // 128


@pytest.mark.parametrize("fraction", [1.0, 0.5, 0.25, 0.0])
def test_exp2_fma_fraction_moves_exponentials_off_mufu(fraction):
    per_thread = 64 * 64 // 128
    k = make_exp2_fma(fractions=(fraction,))  # one kernel each: ptxas merges equal MUFU ops of one input
    ops = collections.Counter(opcodes(k.compiled.sass))
    assert_clean(k)
    polynomial = int(per_thread * fraction)
    assert ops["MUFU.EX2"] == per_thread - polynomial
    assert ops["FADD.FTZ.RM"] == polynomial  # floor by the 1.5 * 2**23 rounding trick, one per element
    assert ops["FFMA.FTZ"] >= 3 * polynomial  # the degree-3 polynomial (Horner)
    assert ops["LEA"] + ops["IMAD.SHL.U32"] + ops["SHF.L.U32"] >= polynomial  # n into the exponent field


def test_conversions_sass():
    k = make_conversions()
    ops = set(opcodes(k.compiled.sass))
    assert_clean(k)
    for expected in ("F2FP.BF16.F32.PACK_AB", "F2FP.F16.F32.PACK_AB", "F2FP.SATFINITE.E4M3.F32.PACK_AB_MERGE_C",
                     "F2FP.SATFINITE.E5M2.F32.PACK_AB_MERGE_C", "F2FP.SATFINITE.E4M3.F16.UNPACK_B_MERGE_C"):
        assert expected in ops, (expected, sorted(o for o in ops if o.startswith("F2")))
    assert any(op.startswith("F2FP.F16.E4M3.UNPACK_B") for op in ops)
    assert any(op.startswith("F2FP.F16.E5M2.UNPACK_B") for op in ops)
    ptx = k.compiled.ptx
    assert "cvt.rn.satfinite.e4m3x2.f16x2" in ptx and "cvt.rn.f16x2.e5m2x2" in ptx


@pytest.mark.parametrize("dtype", ["float32", "bfloat16", "float8_e4m3fn"])
@pytest.mark.parametrize("swizzle", [32, 64, 128])
def test_tiled_roundtrip_sass(dtype, swizzle):
    k = make_tiled_roundtrip(dtype, swizzle)
    ops = collections.Counter(opcodes(k.compiled.sass))
    assert_clean(k)
    values = 64 * 2 * (swizzle // dtype_itemsize(dtype)) // 128
    lds = {4: "LDS", 2: "LDS", 1: "LDS.U16"}[dtype_itemsize(dtype)]
    sts = {4: "STS", 2: "STS", 1: "STS.U16"}[dtype_itemsize(dtype)]
    accesses = values if dtype == "float32" and swizzle > 32 else values // 2
    if dtype == "float32" and swizzle == 32:
        lds, sts = "LDS.64", "STS.64"
    assert ops[lds] == accesses and ops[sts] == accesses


# -- errors name the argument, the expected and the given -----------------------------------------

def _build(body, smem=None, shape=(64, 64), dtype="float32"):
    sd = mgpu_lab.ShapeDtype(shape, dtype)
    return mgpu_lab.kernel(body, grid=1, block=128, in_shapes=sd, out_shapes=sd, smem=smem)


@pytest.mark.parametrize("body, smem, message", [
    (lambda x: x.reduce_sum(axis=0), None,
     r"reduce_sum\(axis=0\): the 4 warps combine through shared memory: pass scratch=, a \(4, 64\) smem ref of f32"),
    (lambda x, s: x.reduce_max(axis=0, scratch=s), (4, 32),
     r"scratch must be a \(4, 64\) smem ref of f32, got \(4, 32\) of f32"),
    (lambda x: x.reduce_sum(axis=2), None, r"axis must be 0 or 1 for an \(m, n\) array, got 2"),
    (lambda x: x.reduce_sum(axis=1).broadcast((128, 64)), None,
     r"a row vector of 64 values broadcasts to \(64, n\), got shape \(128, 64\)"),
    (lambda x: x.reduce_sum(axis=1) + x, None, r"layouts differ: WGMMARowLayout\(m=64\) and WGMMAFragLayout"),
    (lambda x: x.astype("float8_e4m3fn") * 2.0, None, r"f8E4M3FN is a storage type; convert with astype"),
    (lambda x: where(x, x, x), None, r"where: condition must be an i1 FragmentedArray"),
    (lambda x: x.astype("bfloat16").reduce_sum(axis=1), None, r"reduces 32-bit elements \(f32, i32\), got bf16"),
])
def test_fragmented_errors(body, smem, message):
    def kernel(ctx, x, y, refs):
        fx = FragmentedArray.load(x, layout=WGMMAFragLayout(64))
        body(fx, refs[0]) if refs else body(fx)

    smem_tree = (mgpu_lab.ShapeDtype(smem, "float32"),) if smem else None
    with pytest.raises(KernelBuildError, match=message):
        _build(kernel, smem_tree)


@pytest.mark.parametrize("body, message", [
    (lambda x: x.exp2(fma_fraction=1.5), r"exp2: fma_fraction must be a number in \[0, 1\], got 1.5"),
    (lambda x: x.exp2(fma_fraction="half"), r"exp2: fma_fraction must be a number in \[0, 1\], got 'half'"),
    (lambda x: x.exp2(ftz=False, fma_fraction=0.25), r"exp2\(fma_fraction=0.25\): needs an f32 array and ftz=True, got f32 "
                                                     r"with ftz=False"),
    (lambda x: x.astype("bfloat16").exp2(fma_fraction=0.25), r"needs an f32 array and ftz=True, got bf16"),
])
def test_exp2_fma_fraction_errors(body, message):
    def kernel(ctx, x, y, smem):
        body(FragmentedArray.load(x, layout=WGMMAFragLayout(64)))

    with pytest.raises(KernelBuildError, match=message) as info:
        _build(kernel)
    assert "test_fragmented_ops.py" in str(info.value)  # points at the user's line


def test_peer_exchange_sass():
    """Registers parked with one 64-bit store each, read back from the peer with one generic
    64-bit load each (the cluster window), between two cluster barriers."""
    k = make_peer_exchange()
    assert_clean(k)
    ops = collections.Counter(opcodes(k.compiled.sass))
    registers = WGMMAFragLayout(32, 128).registers
    assert ops["STS.64"] == registers and ops["LDS.64"] == registers and ops["LD.E.64"] == registers
    assert ops["UCGABAR_ARV"] == 2


def test_peer_exchange_packs_register_pairs():
    """pack=2: register pairs parked with one 128-bit store and read back (here and from the
    peer) with one 128-bit load each: half the accesses (how split-K partials cross the cluster)."""
    k = make_peer_exchange(pack=2)
    assert_clean(k)
    ops = collections.Counter(opcodes(k.compiled.sass))
    pairs = WGMMAFragLayout(32, 128).registers // 2
    assert ops["STS.128"] == pairs and ops["LDS.128"] == pairs and ops["LD.E.128"] == pairs
    assert not ops["STS.64"] and not ops["LD.E.64"]


@pytest.mark.parametrize("body, message", [
    (lambda x, s: x.columns(4, 16), r"columns: start must be an int multiple of 8 \(a column group\), got 4"),
    (lambda x, s: x.columns(0, 12), r"columns: width must be an int multiple of 8 \(a column group\), got 12"),
    (lambda x, s: x.columns(48, 32), r"columns \[48, 80\) must lie inside the array's 64 columns"),
    (lambda x, s: x.reduce_sum(axis=1).columns(0, 8), r"columns: needs an array in WGMMAFragLayout, got WGMMARowLayout"),
    (lambda x, s: x.store_by_thread(s), r"store_by_thread: ref must be a \(16, 128, 2\) array of f32 \(registers, "
                                        r"warpgroup threads, elements per register\), got \(8, 128, 2\) of f32"),
    (lambda x, s: FragmentedArray.load_by_thread(s, WGMMAFragLayout(64), cta=1),
     r"load_by_thread: ref must be a \(16, 128, 2\) array of f32 .*, got \(8, 128, 2\) of f32"),
    (lambda x, s: x.store_by_thread(s, pack=3), r"store_by_thread: pack must be a positive int dividing the 16 "
                                                r"registers, got 3"),
    (lambda x, s: x.columns(0, 32).store_by_thread(s, pack=2),
     r"store_by_thread: ref must be a \(4, 128, 4\) array of f32 \(registers / pack, warpgroup threads, "
     r"elements per register x pack\), got \(8, 128, 2\) of f32"),
    (lambda x, s: x.store_transposed(s, 0, 0), r"store_transposed: ref must be a 2-d array of f32, got \(8, 128, 2\)"),
    (lambda x, s: x.reduce_sum(axis=1).store_transposed(s, 0, 0),
     r"store_transposed: needs an array in WGMMAFragLayout, got WGMMARowLayout"),
])
def test_column_and_parking_errors(body, message):
    def kernel(ctx, x, y, smem):
        body(FragmentedArray.load(x, layout=WGMMAFragLayout(64)), smem[0])

    with pytest.raises(KernelBuildError, match=message) as info:
        _build(kernel, (mgpu_lab.ShapeDtype((8, 128, 2), "float32"),))
    assert "test_fragmented_ops.py" in str(info.value)  # points at the user's line


def test_strided_reduction_is_refused():
    def kernel(ctx, x, y, smem):
        FragmentedArray.load(x).reduce_sum(axis=1)

    with pytest.raises(KernelBuildError, match=r"reductions need an array in WGMMAFragLayout, got WGStridedLayout"):
        _build(kernel)


@pytest.mark.parametrize("tile, swizzle, message", [
    ((2, 64, 16), 128, r"expected a \(n // 32, m, 32\) smem tile .* got \(2, 64, 16\)"),
    ((2, 64, 32), 96, r"swizzle must be 32, 64 or 128 \(bytes\), got 96"),
    ((2, 48, 32), 128, r"expected a \(n // 32, m, 32\) smem tile \(m a multiple of 64"),
])
def test_tiled_errors(tile, swizzle, message):
    def kernel(ctx, x, y, smem):
        FragmentedArray.load_tiled(smem[0], swizzle)

    with pytest.raises(KernelBuildError, match=message):
        _build(kernel, (mgpu_lab.ShapeDtype(tile, "float32"),))


def test_tiled_refuses_misaligned_views():
    def kernel(ctx, x, y, smem):
        FragmentedArray.load_tiled(dsl.memref_slice(smem[0], (slice(None), slice(4, 68))), 128)

    with pytest.raises(KernelBuildError, match=r"the tile starts 512 bytes into its buffer; a 128-byte swizzle "
                                               r"repeats every 1024 bytes"):
        _build(kernel, (mgpu_lab.ShapeDtype((2, 128, 32), "float32"),))


def test_softmax_checks_its_shape():
    with pytest.raises(ValueError, match=r"n must be a multiple of 32 in \[32, 256\], got 300"):
        make_softmax(128, 300)
    with pytest.raises(ValueError, match=r"m must be a positive multiple of 128, got 100"):
        make_softmax(100, 256)


def test_reading_a_peer_block_needs_32_bit_elements():
    def kernel(ctx, x, y, smem):
        piece = FragmentedArray.load(x, layout=WGMMAFragLayout(64)).columns(0, 32).astype("bfloat16")
        piece.store_by_thread(smem[0])
        FragmentedArray.load_by_thread(smem[0], WGMMAFragLayout(32), cta=1)

    with pytest.raises(KernelBuildError, match=r"load_by_thread: reading a peer block needs 32-bit elements, 1, 2 or "
                                               r"4 per access \(register width x pack\); got 2 x 1 x bf16") as info:
        _build(kernel, (mgpu_lab.ShapeDtype((8, 128, 2), "bfloat16"),))
    assert "test_fragmented_ops.py" in str(info.value)  # points at the user's line


def test_elements_of_a_splat_or_a_built_register_are_its_operands_not_new_extracts():
    """A 128 x 256 accumulator's zeros were 256 `vector.extract`s of one splat per consumer, a
    fifth of a stream-K GEMM's IR before the passes folded them away. The traced IR now reads
    no element of a `vector.broadcast` or `vector.from_elements` through an extract."""
    from mgpu_lab.kernels.gemm import make_gemm

    kernel = make_gemm(256, 512, 256, transpose_b=True, tile_m=128, tile_n=256, target="sm_90a",
                       use_cache=False, keep_passes=True)
    traced = dict(kernel.compiled.passes)["input"]
    built = set(re.findall(r"(%[\w.]+) = vector\.(?:broadcast|from_elements) ", traced))
    extracted = re.findall(r"vector\.extract (%[\w.]+)\[", traced)
    assert built and not built & set(extracted), sorted(built & set(extracted))[:5]
