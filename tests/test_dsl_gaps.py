"""The gaps a new author hit (issue 11, item 3): each has a test here (GPU ones carry the marker)."""

from __future__ import annotations

import numpy as np
import pytest

import mgpu_lab
from mgpu_lab import dsl
from mgpu_lab.widgets.bank_model import swizzle_address


# -- swizzle helper: logical (row, col) -> its swizzled smem position ----------------------

@pytest.mark.parametrize("swizzle", [32, 64, 128])
@pytest.mark.parametrize("itemsize", [1, 2, 4])
def test_swizzled_position_is_where_tma_puts_the_element(swizzle, itemsize):
    m, n = 16, 2 * swizzle // itemsize  # two column chunks
    width = swizzle // itemsize
    for row in range(m):
        for col in range(n):
            chunk, r, pcol = dsl.swizzled_position(row, col, swizzle=swizzle, itemsize=itemsize)
            logical = (col // width) * m * swizzle + row * swizzle + (col % width) * itemsize
            assert chunk * m * swizzle + r * swizzle + pcol * itemsize == swizzle_address(logical, swizzle)


def test_swizzled_position_checks_its_arguments():
    assert dsl.swizzled_position(3, 5, swizzle=0, itemsize=2) == (0, 3, 5)
    with pytest.raises(ValueError, match="swizzle: expected 0, 32, 64 or 128"):
        dsl.swizzled_position(0, 0, swizzle=16, itemsize=2)
    with pytest.raises(ValueError, match="itemsize: expected 1, 2, 4 or 8"):
        dsl.swizzled_position(0, 0, swizzle=128, itemsize=3)


def _transpose_kernel(swizzle: int = 128):
    """out = x.T for a (64, 64) bf16 tile: TMA-load x swizzled, read it transposed with
    swizzled_position, store plainly. The index math is the helper's, not the kernel's."""
    sd = mgpu_lab.ShapeDtype((64, 64), "bfloat16")
    width = swizzle // 2

    def transpose(ctx, x, out, smem):
        tile, bars = smem
        bars.init(1)
        for j in range(64 // width):
            ctx.async_copy(src_ref=x, dst_ref=dsl.memref_slice(tile, j), barrier=bars[0], swizzle=swizzle,
                           gmem_slice=(slice(None), dsl.ds(j * width, width)))
        bars[0].wait(0)
        tid = dsl.thread_idx()
        for p in range(64 * 64 // 128):
            flat = tid + p * 128
            i, j = flat // 64, flat % 64  # out[i, j] = x[j, i]
            where = [dsl.as_index(v) for v in dsl.swizzled_position(j, i, swizzle=swizzle, itemsize=2)]
            dsl.memref.store(dsl.memref.load(tile, where), out, [i, j])

    smem = (mgpu_lab.ShapeDtype((64 // width, 64, width), "bfloat16"), mgpu_lab.Barriers(1))
    return mgpu_lab.kernel(transpose, grid=1, block=128, in_shapes=sd, out_shapes=sd, smem=smem, target="sm_90a")


def test_transpose_with_swizzled_position_compiles():
    assert "UTMALDG" in _transpose_kernel().compiled.sass


@pytest.mark.gpu
def test_transpose_with_swizzled_position_is_right(rng):
    import ml_dtypes

    x = rng.standard_normal((64, 64)).astype(ml_dtypes.bfloat16)
    out = mgpu_lab.to_device(np.full((64, 64), np.nan, dtype=ml_dtypes.bfloat16))  # poisoned
    got = _transpose_kernel()(mgpu_lab.to_device(x), out=out)
    np.testing.assert_array_equal(mgpu_lab.to_host(got, "bfloat16").astype(np.float32), x.T.astype(np.float32))


# -- explicit FMA on FragmentedArray --------------------------------------------------------

def _fma_kernel():
    sd = mgpu_lab.ShapeDtype((128, 8), "float32")

    def body(ctx, a, b, out, smem):
        x, y = dsl.FragmentedArray.load(a), dsl.FragmentedArray.load(b)
        x.fma(y, 1.0).store(out)

    return mgpu_lab.kernel(body, grid=1, block=128, in_shapes=(sd, sd), out_shapes=sd, target="sm_90a")


def test_fragmented_fma_is_one_ffma_per_element():
    k = _fma_kernel()
    assert "math.fma" in k.compiled.mlir
    assert k.compiled.sass.count("FFMA") == 8 and "FMUL" not in k.compiled.sass


def test_fragmented_fma_rejects_integer_arrays():
    sd = mgpu_lab.ShapeDtype((128, 8), "int32")

    def body(ctx, a, out, smem):
        x = dsl.FragmentedArray.load(a)
        x.fma(x, 1).store(out)

    with pytest.raises(mgpu_lab.errors.KernelBuildError, match="fma: needs an f32/f16/bf16 array, got i32"):
        mgpu_lab.kernel(body, grid=1, block=128, in_shapes=sd, out_shapes=sd, target="sm_90a")


@pytest.mark.gpu
def test_fragmented_fma_computes(rng):
    import cupy

    a, b = (rng.standard_normal((128, 8)).astype(np.float32) for _ in range(2))
    got = _fma_kernel()(cupy.asarray(a), cupy.asarray(b)).get()
    np.testing.assert_allclose(got, a.astype(np.float64) * b + 1.0, rtol=1e-6, atol=1e-6)


# -- nested loop carries ------------------------------------------------------------------------

def test_nested_carries_flatten_and_rebuild():
    """A tuple holding an accumulator, a FragmentedArray, a dict of scalars and a static number
    is carried through for_range and if_else without any flattening by hand."""
    seen = {}
    sd = mgpu_lab.ShapeDtype((128, 8), "float32")

    def body(ctx, a, out, smem):
        frag = dsl.FragmentedArray.load(a)
        start = (dsl.WGMMAAccumulator.zeros(64), frag, {"count": dsl.c(0, "int32"), "scale": dsl.c(1.0, "float32")}, 7)

        @dsl.for_range(0, 4, carry=start)
        def state(k, state):
            acc, f, scalars, static = state
            seen["inside"] = (type(acc).__name__, type(f).__name__, sorted(scalars), static)
            return acc, f + 1.0, {"count": scalars["count"] + 1, "scale": scalars["scale"] * 2.0}, static

        acc, f, scalars, static = state
        picked = dsl.if_else(scalars["count"] > 2, lambda: (f, scalars["scale"]), lambda: (f * 0.0, scalars["scale"]))
        seen["after"] = (type(acc).__name__, static, type(picked[0]).__name__)
        (picked[0] * 1.0).store(out)

    mgpu_lab.kernel(body, grid=1, block=128, in_shapes=sd, out_shapes=sd, target="sm_90a", use_cache=False)
    assert seen["inside"] == ("WGMMAAccumulator", "FragmentedArray", ["count", "scale"], 7)
    assert seen["after"] == ("WGMMAAccumulator", 7, "FragmentedArray")


def test_own_class_with_the_flatten_protocol():
    class Pair:
        def __init__(self, x, y):
            self.x, self.y = x, y

        def flatten_values(self):
            return [self.x, self.y], lambda vals: Pair(*vals)

    # numbers, strings and None are static: rebuilt as they were, never carried
    values, rebuild = dsl.flatten_values(((1, None, "s"), Pair("x", "y"), {"k": Pair("z", "w")}))
    assert values == ["x", "y", "z", "w"]
    again = rebuild(["a", "b", "c", "d"])
    assert again[0] == (1, None, "s") and again[1].y == "b" and again[2]["k"].x == "c"
    with pytest.raises(TypeError, match="carry: expected None, MLIR values.*got object"):
        dsl.flatten_values(object())


@pytest.mark.gpu
def test_nested_carry_loop_computes(rng):
    import cupy

    sd = mgpu_lab.ShapeDtype((128, 8), "float32")

    def body(ctx, a, out, smem):
        @dsl.for_range(0, 5, carry=(dsl.FragmentedArray.load(a), {"s": dsl.c(1.0, "float32")}))
        def state(k, state):
            f, d = state
            return f * 2.0, {"s": d["s"] + 1.0}
        f, d = state
        (f + dsl.FragmentedArray.splat(d["s"], f.layout)).store(out)

    k = mgpu_lab.kernel(body, grid=1, block=128, in_shapes=sd, out_shapes=sd)
    x = rng.standard_normal((128, 8)).astype(np.float32)
    out = cupy.full((128, 8), np.nan, dtype=cupy.float32)
    np.testing.assert_allclose(k(cupy.asarray(x), out=out).get(), x.astype(np.float64) * 32 + 6.0, rtol=1e-6)


# -- warp-, block- and layout-level reductions ----------------------------------------------------

def _reductions_kernel(rows: int = 64, cols: int = 32):
    """out[r, :] = x[r, :] - mean(x[r, :]) (a strided-layout row reduction, layernorm's first
    step); totals = [sum(x) via FragmentedArray.reduce, via block_reduce, max of x via warps]."""
    sd = mgpu_lab.ShapeDtype((rows, cols), "float32")
    totals = mgpu_lab.ShapeDtype((3,), "float32")

    def body(ctx, x, out, tot, smem):
        wg_scratch, block_scratch = smem
        frag = dsl.FragmentedArray.load(x)  # WGStridedLayout, 4 floats per thread per register
        (frag - frag.reduce("sum", axis=-1) * (1.0 / cols)).store(out)
        total = frag.reduce("sum", scratch=wg_scratch)
        tid = dsl.thread_idx()
        mine = dsl.memref.load(x, [tid // (cols // 4) % rows, tid % (cols // 4) * 4])  # one value per thread
        block_total = dsl.block_reduce(mine, "sum", block_scratch)
        warp_max = dsl.warp_reduce(mine, "max")
        with dsl.when(tid == 0):
            dsl.memref.store(total, tot, [dsl.c(0)])
            dsl.memref.store(block_total, tot, [dsl.c(1)])
            dsl.memref.store(warp_max, tot, [dsl.c(2)])

    smem = (mgpu_lab.ShapeDtype((4,), "float32"), mgpu_lab.ShapeDtype((4,), "float32"))
    return mgpu_lab.kernel(body, grid=1, block=128, in_shapes=sd, out_shapes=(sd, totals), smem=smem,
                           target="sm_90a")


def test_reductions_compile_to_shuffles():
    sass = _reductions_kernel().compiled.sass
    assert sass.count("SHFL.BFLY") >= 3 + 5 + 5 + 5  # row groups of 8 lanes, then three 32-lane butterflies


@pytest.mark.parametrize("make, message", [
    (lambda f, s: f.reduce("sum"), r"pass scratch=, a \(4,\) smem ref of f32"),
    (lambda f, s: f.reduce("prod", scratch=s), "op: expected one of sum, max, min, got 'prod'"),
    (lambda f, s: f.astype("float16").reduce("sum", scratch=s), "reduces 32-bit elements"),
    (lambda f, s: dsl.warp_reduce(dsl.c(1.0, "float16")), "expected a 32-bit scalar value"),
    (lambda f, s: dsl.warp_reduce(dsl.c(1.0, "float32"), lanes=6), "lanes must be a power of two up to 32"),
    (lambda f, s: dsl.block_reduce(dsl.c(1, "int32"), "sum", s), "scratch must be a 1-D smem ref of i32"),
])
def test_reduction_misuse_names_the_problem(make, message):
    sd = mgpu_lab.ShapeDtype((128, 8), "float32")

    def body(ctx, x, out, scratch):
        make(dsl.FragmentedArray.load(x), scratch).store(out)

    with pytest.raises(mgpu_lab.errors.KernelBuildError, match=message):
        mgpu_lab.kernel(body, grid=1, block=128, in_shapes=sd, out_shapes=sd,
                        smem=mgpu_lab.ShapeDtype((4,), "float32"), target="sm_90a")


def test_row_reduction_needs_rows_within_a_warp():
    sd = mgpu_lab.ShapeDtype((4, 256), "float32")  # a row is 64 threads of 4

    def body(ctx, x, out, smem):
        f = dsl.FragmentedArray.load(x)
        (f - f.reduce("sum", axis=-1)).store(out)

    with pytest.raises(mgpu_lab.errors.KernelBuildError, match="spans 64 threads of 4"):
        mgpu_lab.kernel(body, grid=1, block=128, in_shapes=sd, out_shapes=sd, target="sm_90a")


@pytest.mark.gpu
def test_reductions_compute(rng):
    import cupy

    x = rng.standard_normal((64, 32)).astype(np.float32)
    out = cupy.full((64, 32), np.nan, dtype=cupy.float32)
    tot = cupy.full((3,), np.nan, dtype=cupy.float32)
    got, totals = _reductions_kernel()(cupy.asarray(x), out=(out, tot))
    x64 = x.astype(np.float64)
    np.testing.assert_allclose(got.get(), x64 - x64.mean(axis=1, keepdims=True), rtol=1e-5, atol=1e-5)
    per_thread = np.array([x[t // 8 % 64, t % 8 * 4] for t in range(128)], dtype=np.float64)
    np.testing.assert_allclose(totals.get()[:2], [x64.sum(), per_thread.sum()], rtol=1e-5, atol=1e-4)
    assert totals.get()[2] == np.float32(per_thread[:32].max())
