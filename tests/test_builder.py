"""The DSL helpers: memref views, transforms, smem planning, loops and conditionals."""

from __future__ import annotations

import pytest

import mgpu_lab
from mgpu_lab import dsl
from mgpu_lab._mlir import ir
from mgpu_lab.builder.smem import plan_smem
from mgpu_lab.dsl import Barriers, ShapeDtype, Union, arith, c, memref


@pytest.fixture
def block():
    """An insertion point inside a function with a (64, 128) f32 memref argument."""
    with ir.Context(), ir.Location.unknown():
        module = ir.Module.create()
        from mgpu_lab._mlir import gpu

        with ir.InsertionPoint(module.body):
            ref_t = ir.MemRefType.get([64, 128], ir.F32Type.get())
            f = gpu.GPUFuncOp(ir.FunctionType.get([ref_t], []), sym_name="f", kernel=True)
            entry = f.add_entry_block()
        with ir.InsertionPoint(entry):
            yield entry.arguments[0]


def layout(value):
    t = ir.MemRefType(value.type)
    strides, offset = t.get_strides_and_offset()
    return list(t.shape), list(strides), offset


def test_memref_slice_static_and_dynamic(block):
    assert layout(dsl.memref_slice(block, (slice(8, 24), 5))) == ([16], [128], 8 * 128 + 5)
    dyn = dsl.memref_slice(block, (dsl.ds(arith.muli(dsl.block_idx(), c(16)), 16), slice(None)))
    shape, strides, offset = layout(dyn)
    assert shape == [16, 128] and strides == [128, 1] and offset == ir.ShapedType.get_dynamic_stride_or_offset()
    with pytest.raises(IndexError, match=r"dimension 1: \[120, 136\) is outside \[0, 128\)"):
        dsl.memref_slice(block, (0, dsl.ds(120, 16)))
    with pytest.raises(ValueError, match="only step 1 is supported"):
        dsl.memref_slice(block, slice(0, 64, 2))


def test_unfold_transpose_unsqueeze(block):
    assert layout(dsl.memref_unfold(block, 1, [None, 32])) == ([64, 4, 32], [128, 32, 1], 0)
    assert layout(dsl.memref_transpose(block, [1, 0])) == ([128, 64], [1, 128], 0)
    assert layout(dsl.memref_unsqueeze(block, 0)) == ([1, 64, 128], [8192, 128, 1], 0)
    assert layout(dsl.memref_unsqueeze(block, 2))[0] == [64, 128, 1]
    with pytest.raises(ValueError, match="do not divide dimension 1 of size 128"):
        dsl.memref_unfold(block, 1, [3, None])
    with pytest.raises(ValueError, match="is not a permutation of 2 dims"):
        dsl.memref_transpose(block, [0, 0])


def test_tile_and_transpose_transforms(block):
    tile = dsl.TileTransform((8, 32))
    assert tile.transform_shape((64, 128)) == (8, 4, 8, 32)
    assert layout(tile.apply(block)) == ([8, 4, 8, 32], [1024, 32, 128, 1], 0)
    assert dsl.TransposeTransform((1, 0)).transform_shape((64, 128)) == (128, 64)
    with pytest.raises(ValueError, match="dimension 100 is not a multiple of 8"):
        tile.transform_shape((100, 128))
    with pytest.raises(ValueError, match="is not a permutation"):
        dsl.TransposeTransform((0, 2))


def test_loops_and_conditionals_build_valid_ir(block):
    total = dsl.for_range(0, 8, carry=c(0.0, "float32"))(
        lambda i, acc: arith.addf(acc, memref.load(block, [i, c(0)])))
    assert str(total.type) == "f32"
    pair = dsl.for_range(0, 4, carry=(c(0), c(1)))(lambda i, carry: (carry[1], carry[0]))
    assert isinstance(pair, tuple) and len(pair) == 2
    picked = dsl.if_else(arith.cmpi(arith.CmpIPredicate.eq, dsl.thread_idx(), c(0)),
                         lambda: c(1.0, "float32"), lambda: c(2.0, "float32"))
    assert str(picked.type) == "f32"
    with dsl.when(arith.cmpi(arith.CmpIPredicate.eq, dsl.thread_idx(), c(0))):
        memref.store(total, block, [c(0), c(0)])
    unrolled = dsl.for_range(0, 3, carry=c(0), unroll=True)(lambda i, acc: arith.addi(acc, i))
    assert str(unrolled.type) == "index"
    with pytest.raises(TypeError, match="the body must return a carry of the same types"):
        dsl.for_range(0, 2, carry=c(0))(lambda i, acc: c(1.0, "float32"))
    with pytest.raises(TypeError, match="if_else: branches return different types"):
        dsl.if_else(arith.cmpi(arith.CmpIPredicate.eq, dsl.thread_idx(), c(0)),
                    lambda: c(1.0, "float32"), lambda: c(1))


def test_for_range_with_a_32_bit_counter(block):
    """for_range(dtype="int32"): the counter and bounds are i32 (index bounds cast, ints made
    constants); the default stays index; a non-integer dtype or bound is refused."""
    seen = []
    total = dsl.for_range(dsl.thread_idx(), 40, 3, carry=c(0, "int32"), dtype="int32")(
        lambda i, acc: seen.append(i) or acc + i)
    assert str(seen[0].type) == "i32" and str(total.type) == "i32"
    loop = seen[0].owner.owner  # the block argument's block's parent op: the scf.for
    assert [str(v.type) for v in list(loop.operands)[:3]] == ["i32"] * 3
    dsl.for_range(0, 4)(lambda i: seen.append(i))
    assert str(seen[-1].type) == "index"
    with pytest.raises(ValueError, match="dtype must be an integer dtype name such as 'int32', got 'float32'"):
        dsl.for_range(0, 4, dtype="float32")(lambda i: None)
    with pytest.raises(TypeError, match="stop must be an int or an integer/index value, got a value of type f32"):
        dsl.for_range(0, c(1.0, "float32"), dtype="int32")(lambda i: None)


def test_for_range_int32_counter_compiles_to_32_bit_ptx():
    sd = mgpu_lab.ShapeDtype((128,), "int32")

    def body(ctx, n, out, smem):
        tid = dsl.thread_idx()
        stop = memref.load(n, [tid])
        total = dsl.for_range(0, stop, carry=c(0, "int32"), dtype="int32")(lambda i, acc: acc + i * i)
        memref.store(total, out, [tid])

    k = mgpu_lab.kernel(body, grid=1, block=128, in_shapes=sd, out_shapes=sd)
    assert "add.s32" in k.compiled.ptx or "add.u32" in k.compiled.ptx
    assert "setp.lt.s32" in k.compiled.ptx  # the loop test compares 32-bit counters (signed: scf.for)


def test_for_range_rolled_keeps_a_short_static_loop():
    """rolled=True: a 4-iteration loop LLVM would unroll in full stays one loop in PTX (with the
    nounroll pragma) and SASS; unroll and rolled together are refused."""
    sd = mgpu_lab.ShapeDtype((128,), "float32")

    def body(rolled):
        def trace(ctx, a, out, smem):
            tid = dsl.thread_idx()
            total = dsl.for_range(0, 4, carry=c(0.0, "float32"), rolled=rolled)(
                lambda i, acc: arith.addf(acc, memref.load(a, [arith.remui(arith.addi(tid, i), c(128))])))
            memref.store(total, out, [tid])
        return trace

    plain = mgpu_lab.kernel(body(False), grid=1, block=128, in_shapes=sd, out_shapes=sd, target="sm_90a",
                            use_cache=False).compiled
    rolled = mgpu_lab.kernel(body(True), grid=1, block=128, in_shapes=sd, out_shapes=sd, target="sm_90a",
                             use_cache=False).compiled
    assert '.pragma "nounroll"' in rolled.ptx and '.pragma "nounroll"' not in plain.ptx
    assert plain.ptx.count("ld.global") == 4 and rolled.ptx.count("ld.global") == 1
    with pytest.raises(ValueError, match="for_range: unroll=True traces the body once per iteration; rolled=True"):
        dsl.for_range(0, 4, unroll=True, rolled=True)


@pytest.mark.gpu
def test_for_range_int32_counter_computes():
    import cupy
    import numpy as np

    sd = mgpu_lab.ShapeDtype((128,), "int32")

    def body(ctx, n, out, smem):
        tid = dsl.thread_idx()
        total = dsl.for_range(1, memref.load(n, [tid]), 2, carry=c(0, "int32"), dtype="int32")(
            lambda i, acc: acc + i)
        memref.store(total, out, [tid])

    k = mgpu_lab.kernel(body, grid=1, block=128, in_shapes=sd, out_shapes=sd)
    n = np.arange(128, dtype=np.int32) - 3
    expected = np.array([sum(range(1, x, 2)) for x in n], dtype=np.int32)
    np.testing.assert_array_equal(k(cupy.asarray(n)).get(), expected)


def test_smem_plan_aligns_and_overlays_unions():
    tree = {"a": ShapeDtype((128, 64), "bfloat16"),  # 16 KiB
            "bars": Barriers(4),
            "scratch": Union((ShapeDtype((256,), "float32"), ShapeDtype((64, 64), "float16"))),
            "tiny": ShapeDtype((3,), "float32")}
    plan = plan_smem(tree)
    recs = {r.path: r for r in plan.records}
    assert recs["a"].offset == 0 and recs["a"].nbytes == 16384
    assert recs["bars"].offset == 16384 and recs["bars"].kind == "barrier" and recs["bars"].nbytes == 32
    u0, u1 = recs["scratch.0"], recs["scratch.1"]
    assert u0.offset == u1.offset == 17408 and u0.union == u1.union == 0
    assert recs["tiny"].offset == 17408 + 8192  # after the larger union member, 128-aligned
    assert plan.total_bytes == 17408 + 8192 + 12


def test_union_members_share_memory_in_a_kernel():
    def body(ctx, a, out, smem):
        x, y = smem.members if hasattr(smem, "members") else smem
        memref.store(memref.load(a, [c(0)]), x, [c(0)])

    sd = mgpu_lab.ShapeDtype((128,), "float32")
    k = mgpu_lab.kernel(body, grid=1, block=32, in_shapes=sd, out_shapes=sd,
                        smem=Union((ShapeDtype((64,), "float32"), ShapeDtype((16,), "int32"))))
    offsets = {b.path: b.offset for b in k.compiled.smem_layout}
    assert offsets == {"0": 0, "1": 0}
    assert k.compiled.dynamic_smem_bytes == 256
