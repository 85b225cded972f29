"""CPU tests of the Hopper building blocks: warpgroup helpers, wgmma descriptors and
instructions, and a single-warpgroup TMA + WGMMA tile kernel (also run on the GPU by
test_hopper_gpu.py)."""

from __future__ import annotations

import re

import pytest

import mgpu_lab
from mgpu_lab import dsl
from mgpu_lab.builder.fragmented import FragmentedArray, WGStridedLayout
from mgpu_lab.builder.warpgroup import setmaxnreg, single_thread, warpgroup_barrier
from mgpu_lab.builder.wgmma import (
    WGMMAAccumulator,
    wgmma,
    wgmma_commit_group,
    wgmma_wait_group,
)
from mgpu_lab.errors import KernelBuildError

_NAN_BITS = {"bfloat16": ("uint16", 0x7FC0), "float16": ("uint16", 0x7E00), "float32": ("uint32", 0x7FC00000)}


def poison(cupy, shape, dtype: str):
    """A device array of `dtype` filled with NaN through an integer view (CuPy has no bf16 kernels)."""
    from mgpu_lab.builder.dtypes import numpy_dtype

    out = cupy.empty(shape, numpy_dtype(dtype))
    bits_dtype, bits = _NAN_BITS[dtype]
    out.view(bits_dtype).fill(bits)
    return out


def host_f32(x):
    """A device array (any float dtype, bf16 included) as a float32 host array."""
    import numpy as np

    return x.get().astype(np.float32)


def opcodes(sass: str) -> list[str]:
    return re.findall(r"\*/\s+(?:@!?U?P\w+\s+)?([A-Z][A-Z0-9_.]+)", sass)


def make_wgmma_tile(n: int = 128, b_major: str = "k", accumulate: bool = True, epilogue: bool = False,
                    init_with: str = "ones", **options) -> mgpu_lab.Kernel:
    """One warpgroup: TMA-load a (64, 64) A and B (b_major 'k': B.T is (n, 64); 'mn': B is (64, n)),
    then C (64, n) f32 = A @ B with 4 wgmma k-steps. accumulate=False starts from an accumulator
    of ones that the first step must ignore (init_with="ones"), or from WGMMAAccumulator.uninitialized
    (init_with="uninitialized"). epilogue=True: C (bf16) = relu(0.5 * A @ B + 1)
    through a FragmentedArray."""
    a_sd = mgpu_lab.ShapeDtype((64, 64), "bfloat16")
    b_sd = mgpu_lab.ShapeDtype((n, 64) if b_major == "k" else (64, n), "bfloat16")
    b_smem = mgpu_lab.ShapeDtype((n, 64) if b_major == "k" else (n // 64, 64, 64), "bfloat16")
    copies = 1 + (1 if b_major == "k" else n // 64)

    def wgmma_tile(ctx, a, b, out, smem):
        a_s, b_s, bars = smem
        bars.init(copies)  # every copy below arrives once (with its expected bytes)
        ctx.async_copy(src_ref=a, dst_ref=a_s, barrier=bars[0], swizzle=128)
        if b_major == "k":
            ctx.async_copy(src_ref=b, dst_ref=b_s, barrier=bars[0], swizzle=128)
        else:
            for j in range(n // 64):
                ctx.async_copy(src_ref=b, dst_ref=dsl.memref_slice(b_s, j), barrier=bars[0], swizzle=128,
                               gmem_slice=(slice(None), dsl.ds(j * 64, 64)))
        bars[0].wait(0)
        init = WGMMAAccumulator.zeros(n)
        if not accumulate:
            init = WGMMAAccumulator([dsl.c(1.0, "float32")] * (n // 2), n) if init_with == "ones" \
                else WGMMAAccumulator.uninitialized(n)
        acc = wgmma(init, a_s, b_s, b_major=b_major, accumulate=accumulate)
        wgmma_commit_group()
        acc = wgmma_wait_group(0, acc)
        if epilogue:
            (FragmentedArray.from_accumulator(acc) * 0.5 + 1.0).max(0.0).astype("bfloat16").store(out)
        else:
            acc.store(out)

    return mgpu_lab.kernel(wgmma_tile, grid=1, block=128, in_shapes=(a_sd, b_sd),
                           out_shapes=mgpu_lab.ShapeDtype((64, n), "bfloat16" if epilogue else "float32"),
                           smem=(a_sd, b_smem, mgpu_lab.Barriers(1)), name=f"wgmma_tile_{b_major}_{n}", **options)


@pytest.mark.parametrize("n, b_major", [(64, "k"), (256, "k"), (64, "mn"), (256, "mn")])
def test_wgmma_tile_compiles_to_hgmma(n, b_major):
    k = make_wgmma_tile(n, b_major)
    ops = opcodes(k.compiled.sass)
    hgmma = re.findall(r"HGMMA\.(\w+\.F32\.BF16)", k.compiled.sass)
    assert hgmma == [f"64x{n}x16.F32.BF16"] * 4
    transposed = [line for line in k.compiled.sass.splitlines() if "HGMMA" in line and "tnspB" in line]
    assert len(transposed) == (4 if b_major == "mn" else 0)
    assert "WARPGROUP.ARRIVE" in ops and any(op.startswith("WARPGROUP.DEPBAR") for op in ops)
    r = k.compiled.resources
    assert r.spill_stores_bytes == r.spill_loads_bytes == r.stack_frame_bytes == 0
    assert "serialized" not in k.compiled.ptxas_log  # no wgmma serialization warning


def test_an_uninitialized_accumulator_moves_no_zeros_in():
    """accumulate=False ignores the accumulator: WGMMAAccumulator.uninitialized gives it registers
    with no value, so the PTX copies nothing into them (ones: the constant copied into each of
    the 64 registers but the one holding it)."""
    def register_copies(kern):
        return len(re.findall(r"mov\.b32\s+%r\d+, %r\d+;", kern.compiled.ptx))

    ones = make_wgmma_tile(128, "k", accumulate=False)
    undefined = make_wgmma_tile(128, "k", accumulate=False, init_with="uninitialized")
    assert register_copies(ones) >= 63 and register_copies(undefined) == 0
    assert re.findall(r"HGMMA\.(\w+\.F32\.BF16)", undefined.compiled.sass) == ["64x128x16.F32.BF16"] * 4
    with pytest.raises(ValueError, match=r"dtype must be 'float32' or 'float16', got 'bfloat16'"):
        WGMMAAccumulator.uninitialized(64, "bfloat16")


def test_wgmma_descriptor_bits():
    k = make_wgmma_tile(256, "mn")
    ptx = k.compiled.ptx
    # A: LBO 16 B, SBO 1024 B, 128B swizzle; B (MN-major): LBO 8192 B (next 64 columns), SBO 1024 B.
    a_static = (1 << 16) | (64 << 32) | (1 << 62)
    b_static = (512 << 16) | (64 << 32) | (1 << 62)
    assert str(a_static) in ptx and str(b_static) in ptx


def test_wgmma_checks_operand_shapes():
    with pytest.raises(KernelBuildError, match=r"with b_major='mn', n must be a multiple of 64"):
        _bad_wgmma()


def _bad_wgmma():
    sd = mgpu_lab.ShapeDtype((64, 64), "bfloat16")

    def body(ctx, a, out, smem):
        a_s, b_s = smem
        wgmma(WGMMAAccumulator.zeros(32), a_s, b_s, b_major="mn")

    mgpu_lab.kernel(body, grid=1, block=128, in_shapes=sd, out_shapes=sd,
                    smem=(sd, mgpu_lab.ShapeDtype((1, 64, 64), "bfloat16")))


def test_wgmma_rejects_other_types():
    sd = mgpu_lab.ShapeDtype((64, 32), "float32")

    def body(ctx, a, out, smem):
        wgmma(WGMMAAccumulator.zeros(64), smem[0], smem[1])

    with pytest.raises(KernelBuildError, match="a must be bf16 or f16 in shared memory, got f32"):
        mgpu_lab.kernel(body, grid=1, block=128, in_shapes=sd, out_shapes=sd, smem=(sd, sd))


def test_warpgroup_helpers():
    sd = mgpu_lab.ShapeDtype((128,), "float32")

    def body(ctx, x, y, smem):
        wg = dsl.warpgroup_idx()
        is_first = dsl.arith.cmpi(dsl.arith.CmpIPredicate.eq, wg, dsl.c(0))

        def first():
            setmaxnreg(40)
            with single_thread("warpgroup"):
                dsl.memref.store(dsl.c(1.0, "float32"), y, [dsl.c(0)])

        def rest():
            setmaxnreg(232)
            warpgroup_barrier()

        dsl.if_else(is_first, first, rest)

    k = mgpu_lab.kernel(body, grid=1, block=384, in_shapes=sd, out_shapes=sd)
    ops = opcodes(k.compiled.sass)
    assert "setmaxnreg.dec.sync.aligned.u32 40;" in k.compiled.ptx  # ptxas may drop it in a tiny kernel
    assert "setmaxnreg.inc.sync.aligned.u32 232;" in k.compiled.ptx
    assert "ELECT" in ops
    assert "BAR.SYNC.DEFER_BLOCKING" in ops
    with pytest.raises(ValueError, match="multiple of 8"):
        setmaxnreg(100)


def test_mbarrier_timeout_traps_instead_of_hanging(monkeypatch):
    monkeypatch.setenv("MGPU_LAB_MBARRIER_TIMEOUT_S", "2")
    k = make_wgmma_tile(64, "k", use_cache=False)
    assert "%globaltimer" in k.compiled.ptx and "trap;" in k.compiled.ptx
    assert str(2_000_000_000) in k.compiled.ptx


def make_fragmented_elementwise(shape=(256, 64), **options) -> mgpu_lab.Kernel:
    """out (bf16) = exp(x * 2 - y).astype(bf16), one warpgroup, strided-layout FragmentedArrays."""
    sd = mgpu_lab.ShapeDtype(shape, "float32")

    def fragmented(ctx, x, y, out, smem):
        fx, fy = FragmentedArray.load(x), FragmentedArray.load(y)
        (fx * 2 - fy).exp().astype("bfloat16").store(out)

    return mgpu_lab.kernel(fragmented, grid=1, block=128, in_shapes=(sd, sd),
                           out_shapes=mgpu_lab.ShapeDtype(shape, "bfloat16"), **options)


def test_fragmented_array_elementwise_and_epilogue():
    k = make_fragmented_elementwise()
    ops = opcodes(k.compiled.sass)
    assert ops.count("LDG.E.128") == 2 * 256 * 64 // (128 * 4)
    assert any(op.startswith("MUFU.EX2") for op in ops)
    k = make_wgmma_tile(128, "k", epilogue=True)
    assert any(op.startswith("F2FP") and "BF16" in op for op in opcodes(k.compiled.sass))
    with pytest.raises(ValueError, match="do not split into 128 threads"):
        WGStridedLayout((10, 10), 4)
