"""CPU tests of the wgmma variants: A from registers, tf32 and f8 inputs (QGMMA), f16
accumulators, 32/64/128-byte swizzles per operand, transposed (MN-major) operands. Each
kernel is one warpgroup computing a (64, n) tile over two wgmma calls (k = 2 calls x the k
of one call); `make_wgmma_variant` is also run on the GPU (test_hopper_wgmma_variants_gpu.py)."""

from __future__ import annotations

import re

import pytest

import mgpu_lab
from mgpu_lab import dsl
from mgpu_lab.builder.fragmented import FragmentedArray
from mgpu_lab.builder.layouts import WGMMAFragLayout
from mgpu_lab.builder.wgmma import (
    WGMMAAccumulator,
    wgmma,
    wgmma_commit_group,
    wgmma_wait_group,
)
from mgpu_lab.compiler.compiled_kernel import dtype_itemsize
from mgpu_lab.errors import KernelBuildError

K_CALLS = 2


def opcodes(sass: str) -> list[str]:
    return re.findall(r"\*/\s+(?:@!?U?P\w+\s+)?([A-Z][A-Z0-9_.]+)", sass)


def variant_k(dtype: str, a_major: str, b_major: str, a_swizzle: int, b_swizzle: int, a_regs: bool) -> int:
    """k of one wgmma call: a K-major smem operand spans one swizzle; otherwise 64."""
    itemsize = dtype_itemsize(dtype)
    if not a_regs and a_major == "k":
        return a_swizzle // itemsize
    if b_major == "k":
        return b_swizzle // itemsize
    return 64


def variant_shapes(dtype: str, n: int, a_major: str = "k", b_major: str = "k", a_swizzle: int = 128,
                   b_swizzle: int = 128, a_regs: bool = False) -> tuple[tuple[int, int], tuple[int, int], int]:
    """(A's GMEM shape, B's GMEM shape, k): A is (64, K) or, MN-major, A.T (K, 64); B is B.T (n, K)
    when K-major, else B (K, n)."""
    k = K_CALLS * variant_k(dtype, a_major, b_major, a_swizzle, b_swizzle, a_regs)
    a_shape = (k, 64) if (a_major == "mn" and not a_regs) else (64, k)
    b_shape = (n, k) if b_major == "k" else (k, n)
    return a_shape, b_shape, k


def make_wgmma_variant(dtype: str = "bfloat16", n: int = 128, *, b_dtype: str | None = None,
                       acc: str = "float32", a_major: str = "k", b_major: str = "k", a_swizzle: int = 128,
                       b_swizzle: int = 128, a_regs: bool = False, **options) -> mgpu_lab.Kernel:
    """C (64, n) = A @ B over K_CALLS wgmma calls; operands TMA-loaded in the layout each major
    needs (A from GMEM straight into registers with a_regs=True). C is `acc`'s dtype."""
    b_dtype = b_dtype or dtype
    itemsize = dtype_itemsize(dtype)
    wa, wb = a_swizzle // itemsize, b_swizzle // itemsize
    k_call = variant_k(dtype, a_major, b_major, a_swizzle, b_swizzle, a_regs)
    a_shape, b_shape, _ = variant_shapes(dtype, n, a_major, b_major, a_swizzle, b_swizzle, a_regs)
    if a_regs:
        a_tile = None
    elif a_major == "k":
        a_tile = (64, wa)
    else:
        a_tile = (64 // wa, k_call, wa)
    b_tile = (n, wb) if b_major == "k" else (n // wb, k_call, wb)
    smem = [mgpu_lab.ShapeDtype((K_CALLS, *b_tile), b_dtype), mgpu_lab.Barriers(1)]
    if a_tile:
        smem.insert(0, mgpu_lab.ShapeDtype((K_CALLS, *a_tile), dtype))
    copies = K_CALLS * ((0 if a_regs else (1 if a_major == "k" else 64 // wa)) + (1 if b_major == "k" else n // wb))

    def wgmma_variant(ctx, a, b, out, smem_refs):
        *a_s, b_s, bars = smem_refs
        bars.init(copies)
        load = {"barrier": bars[0]}
        for kc in range(K_CALLS):
            k0 = kc * k_call
            if a_tile and a_major == "k":
                ctx.async_copy(src_ref=a, dst_ref=dsl.memref_slice(a_s[0], kc), swizzle=a_swizzle,
                               gmem_slice=(slice(None), dsl.ds(k0, wa)), **load)
            elif a_tile:
                for j in range(64 // wa):
                    ctx.async_copy(src_ref=a, dst_ref=dsl.memref_slice(a_s[0], (kc, j)), swizzle=a_swizzle,
                                   gmem_slice=(dsl.ds(k0, k_call), dsl.ds(j * wa, wa)), **load)
            if b_major == "k":
                ctx.async_copy(src_ref=b, dst_ref=dsl.memref_slice(b_s, kc), swizzle=b_swizzle,
                               gmem_slice=(slice(None), dsl.ds(k0, wb)), **load)
            else:
                for j in range(n // wb):
                    ctx.async_copy(src_ref=b, dst_ref=dsl.memref_slice(b_s, (kc, j)), swizzle=b_swizzle,
                                   gmem_slice=(dsl.ds(k0, k_call), dsl.ds(j * wb, wb)), **load)
        bars[0].wait(0)
        result = WGMMAAccumulator.zeros(n, acc)
        for kc in range(K_CALLS):
            if a_regs:
                a_op = FragmentedArray.load(dsl.memref_slice(a, (slice(None), dsl.ds(kc * k_call, k_call))),
                                            layout=WGMMAFragLayout(k_call))
            else:
                a_op = dsl.memref_slice(a_s[0], kc)
            result = wgmma(result, a_op, dsl.memref_slice(b_s, kc), a_major=a_major, b_major=b_major,
                           a_swizzle=a_swizzle, b_swizzle=b_swizzle, tf32=dtype == "float32")
        wgmma_commit_group()
        result = wgmma_wait_group(0, result)
        result.store(out)

    name = f"wgmma_{dtype}_{b_dtype}_{acc}_{n}_{a_major}{a_swizzle}_{b_major}{b_swizzle}{'_regs' if a_regs else ''}"
    return mgpu_lab.kernel(wgmma_variant, grid=1, block=128,
                           in_shapes=(mgpu_lab.ShapeDtype(a_shape, dtype), mgpu_lab.ShapeDtype(b_shape, b_dtype)),
                           out_shapes=mgpu_lab.ShapeDtype((64, n), acc), smem=tuple(smem),
                           name=re.sub(r"\W", "_", name), **options)


# (kwargs, the SASS MMA op, per-call instruction count) -- the GPU test runs the same list.
VARIANTS = [
    ({"dtype": "bfloat16", "n": 128}, "HGMMA.64x128x16.F32.BF16", 4),
    ({"dtype": "bfloat16", "n": 64, "a_swizzle": 64, "b_swizzle": 64}, "HGMMA.64x64x16.F32.BF16", 2),
    ({"dtype": "bfloat16", "n": 32, "a_swizzle": 32, "b_swizzle": 32}, "HGMMA.64x32x16.F32.BF16", 1),
    ({"dtype": "bfloat16", "n": 128, "a_major": "mn", "b_major": "k"}, "HGMMA.64x128x16.F32.BF16", 4),
    ({"dtype": "bfloat16", "n": 128, "a_major": "k", "b_major": "mn", "b_swizzle": 32}, "HGMMA.64x128x16.F32.BF16", 4),
    ({"dtype": "bfloat16", "n": 64, "a_major": "mn", "b_major": "mn", "a_swizzle": 64, "b_swizzle": 128},
     "HGMMA.64x64x16.F32.BF16", 4),
    ({"dtype": "bfloat16", "n": 256, "a_major": "mn", "b_major": "mn", "a_swizzle": 32, "b_swizzle": 64},
     "HGMMA.64x256x16.F32.BF16", 4),
    ({"dtype": "float16", "n": 128, "acc": "float16"}, "HGMMA.64x128x16.F16", 4),
    ({"dtype": "float16", "n": 64, "acc": "float16", "a_major": "mn", "b_major": "mn"}, "HGMMA.64x64x16.F16", 4),
    ({"dtype": "float16", "n": 128, "b_major": "mn"}, "HGMMA.64x128x16.F32", 4),
    ({"dtype": "float32", "n": 128}, "HGMMA.64x128x8.F32.TF32", 4),
    ({"dtype": "float32", "n": 64, "a_swizzle": 64, "b_swizzle": 64}, "HGMMA.64x64x8.F32.TF32", 2),
    ({"dtype": "float32", "n": 16, "a_swizzle": 32, "b_swizzle": 32}, "HGMMA.64x16x8.F32.TF32", 1),
    ({"dtype": "float8_e4m3fn", "n": 128}, "QGMMA.64x128x32.F32.E4M3.E4M3", 4),
    ({"dtype": "float8_e5m2", "n": 64, "a_swizzle": 64, "b_swizzle": 64}, "QGMMA.64x64x32.F32.E5M2.E5M2", 2),
    ({"dtype": "float8_e4m3fn", "b_dtype": "float8_e5m2", "n": 256}, "QGMMA.64x256x32.F32.E4M3.E5M2", 4),
    ({"dtype": "float8_e4m3fn", "n": 128, "acc": "float16"}, "QGMMA.64x128x32.F16.E4M3.E4M3", 4),
    ({"dtype": "float8_e5m2", "n": 32, "a_swizzle": 32, "b_swizzle": 32, "acc": "float16"},
     "QGMMA.64x32x32.F16.E5M2.E5M2", 1),
    ({"dtype": "bfloat16", "n": 128, "a_regs": True}, "HGMMA.64x128x16.F32.BF16", 4),
    ({"dtype": "bfloat16", "n": 128, "a_regs": True, "b_major": "mn"}, "HGMMA.64x128x16.F32.BF16", 4),
    ({"dtype": "float16", "n": 64, "a_regs": True, "acc": "float16", "b_swizzle": 64}, "HGMMA.64x64x16.F16", 2),
]


def variant_id(kwargs: dict) -> str:
    return "-".join(f"{v}" if k in ("dtype", "n") else f"{k}={v}" for k, v in kwargs.items())


@pytest.mark.parametrize("kwargs, mma, per_call", VARIANTS, ids=[variant_id(v[0]) for v in VARIANTS])
def test_wgmma_variant_sass(kwargs, mma, per_call):
    k = make_wgmma_variant(**kwargs)
    sass = k.compiled.sass
    lines = [line for line in sass.splitlines() if re.search(r"\b[HQ]GMMA\.", line)]
    assert [re.search(r"([HQ]GMMA\.\S+)", line).group(1) for line in lines] == [mma] * (per_call * K_CALLS)
    a_mn = kwargs.get("a_major") == "mn"
    b_mn = kwargs.get("b_major") == "mn"
    assert all(("tnspA" in line) == a_mn for line in lines)
    assert all(("tnspB" in line) == b_mn for line in lines)
    if kwargs.get("a_regs"):  # A from registers: the first source operand is a register
        assert all(re.search(r"GMMA\.\S+ R\d+, R\d+, gdesc", line) for line in lines), lines[0]
    else:
        assert all(re.search(r"GMMA\.\S+ R\d+, gdesc\[UR\d+\]", line) for line in lines), lines[0]
    ops = opcodes(sass)
    assert not any(op.startswith(("LDL", "STL")) for op in ops)
    r = k.compiled.resources
    assert r.spill_stores_bytes == r.spill_loads_bytes == r.stack_frame_bytes == 0
    assert "serialized" not in k.compiled.ptxas_log


def test_descriptor_fields_of_transposed_operands():
    """MN-major: LBO = the byte stride between column chunks, SBO = 8 swizzled rows."""
    k = make_wgmma_variant("bfloat16", 256, a_major="mn", b_major="mn", a_swizzle=32, b_swizzle=64)
    ptx = k.compiled.ptx
    # a: (4, 64, 16) chunks of 64 rows x 32 B: LBO 2048 B, SBO 256 B, 32B swizzle (mode 3)
    a_static = ((2048 >> 4) << 16) | ((256 >> 4) << 32) | (3 << 62)
    # b: (8, 64, 32) chunks of 64 rows x 64 B: LBO 4096 B, SBO 512 B, 64B swizzle (mode 2)
    b_static = ((4096 >> 4) << 16) | ((512 >> 4) << 32) | (2 << 62)
    for static in (a_static, b_static):
        signed = static - (1 << 64) if static >= 1 << 63 else static
        assert str(signed) in ptx, hex(static)


# -- errors ---------------------------------------------------------------------------------------

def _bad(a_sd, b_sd, n=64, acc="float32", a_regs=False, **wgmma_kwargs):
    def body(ctx, x, y, smem):
        a_s, b_s = smem
        a_op = FragmentedArray.load(x, layout=WGMMAFragLayout(64)) if a_regs else a_s
        wgmma(WGMMAAccumulator.zeros(n, acc), a_op, b_s, **wgmma_kwargs)

    sd = mgpu_lab.ShapeDtype((64, 64), "bfloat16")
    mgpu_lab.kernel(body, grid=1, block=128, in_shapes=sd, out_shapes=sd,
                    smem=(mgpu_lab.ShapeDtype(*a_sd), mgpu_lab.ShapeDtype(*b_sd)))


@pytest.mark.parametrize("a_sd, b_sd, kwargs, message", [
    (((64, 32), "float32"), ((64, 32), "float32"), {},
     r"a must be bf16 or f16 in shared memory, got f32; f32 operands multiply as tf32 .*: pass tf32=True"),
    (((64, 32), "float32"), ((64, 32), "float32"), {"tf32": True, "b_major": "mn"},
     r"b_major='mn' \(transposed\) needs 16-bit inputs \(bf16/f16\); tf32 and f8 operands must be K-major"),
    (((1, 128, 128), "float8_e4m3fn"), ((64, 128), "float8_e4m3fn"), {"a_major": "mn"},
     r"a_major='mn' \(transposed\) needs 16-bit inputs"),
    (((64, 64), "bfloat16"), ((64, 64), "float16"), {},
     r"a and b must have the same element type \(f8 may mix e4m3/e5m2\), got bf16 and f16"),
    (((64, 64), "bfloat16"), ((64, 32), "bfloat16"), {"b_swizzle": 64},
     r"a has k = 64 but b has k = 32"),
    (((64, 64), "bfloat16"), ((64, 64), "bfloat16"), {"acc": "float16"},
     r"an f16 accumulator needs f16 or f8 inputs, got bf16"),
    (((64, 64), "bfloat16"), ((64, 64), "bfloat16"), {"a_swizzle": 32},
     r"with a_major='k' and a_swizzle=32, a must be \(64, 16\) .* got \(64, 64\)"),
    (((64, 64), "bfloat16"), ((2, 40, 32), "bfloat16"), {"b_major": "mn", "b_swizzle": 64},
     (r"with b_major='mn' and b_swizzle=64, b must be \(2, k, 32\) \(column chunks of 32, k a multiple of 16\), "
      r"got \(2, 40, 32\)")),
    (((64, 64), "bfloat16"), ((64, 64), "bfloat16"), {"a_major": "kk"}, r"a_major must be 'k' or 'mn', got 'kk'"),
    (((64, 64), "bfloat16"), ((64, 64), "bfloat16"), {"a_regs": True, "a_major": "mn"},
     r"a in registers has no major; leave a_major='k'"),
    (((64, 64), "bfloat16"), ((64, 64), "bfloat16"), {"b_swizzle": 16}, r"b_swizzle must be 32, 64 or 128"),
])
def test_wgmma_variant_errors(a_sd, b_sd, kwargs, message):
    kwargs = dict(kwargs)
    acc = kwargs.pop("acc", "float32")
    a_regs = kwargs.pop("a_regs", False)
    with pytest.raises(KernelBuildError, match=message):
        _bad(a_sd, b_sd, acc=acc, a_regs=a_regs, **kwargs)


def test_register_a_must_be_a_64_row_wgmma_array():
    def body(ctx, x, y, smem):
        a = FragmentedArray.load(x)  # strided layout
        wgmma(WGMMAAccumulator.zeros(64), a, smem[0])

    sd = mgpu_lab.ShapeDtype((64, 64), "bfloat16")
    with pytest.raises(KernelBuildError, match=r"a in registers must be a \(64, k\) FragmentedArray in "
                                               r"WGMMAFragLayout\(k\), k a multiple of 16, got WGStridedLayout"):
        mgpu_lab.kernel(body, grid=1, block=128, in_shapes=sd, out_shapes=sd, smem=(sd,))


def make_store_swizzled(swizzle: int, n: int = 128, **options) -> mgpu_lab.Kernel:
    """C (64, n) bf16 = A @ B (A (64, 64), B.T (n, 64)), written by acc.store_swizzled(swizzle)
    into smem and TMA-stored with the same swizzle."""
    width = swizzle // 2
    a_sd, b_sd = mgpu_lab.ShapeDtype((64, 64), "bfloat16"), mgpu_lab.ShapeDtype((n, 64), "bfloat16")

    def store_swizzled(ctx, a, b, out, smem):
        a_s, b_s, c_s, bars = smem
        bars.init(2)
        ctx.async_copy(src_ref=a, dst_ref=a_s, barrier=bars[0], swizzle=128)
        ctx.async_copy(src_ref=b, dst_ref=b_s, barrier=bars[0], swizzle=128)
        bars[0].wait(0)
        acc = wgmma(WGMMAAccumulator.zeros(n), a_s, b_s)
        wgmma_commit_group()
        acc = wgmma_wait_group(0, acc)
        acc.store_swizzled(c_s, swizzle)
        from mgpu_lab.builder.warpgroup import commit_shared

        commit_shared()
        for j in range(n // width):
            ctx.async_copy(src_ref=dsl.memref_slice(c_s, j), dst_ref=out, swizzle=swizzle,
                           gmem_slice=(slice(None), dsl.ds(j * width, width)))
        ctx.await_async_copy(0)

    smem = (a_sd, b_sd, mgpu_lab.ShapeDtype((n // width, 64, width), "bfloat16"), mgpu_lab.Barriers(1))
    return mgpu_lab.kernel(store_swizzled, grid=1, block=128, in_shapes=(a_sd, b_sd),
                           out_shapes=mgpu_lab.ShapeDtype((64, n), "bfloat16"), smem=smem,
                           name=f"store_swizzled_{swizzle}", **options)


@pytest.mark.parametrize("swizzle", [32, 64, 128])
def test_store_swizzled_compiles(swizzle):
    k = make_store_swizzled(swizzle)
    assert opcodes(k.compiled.sass).count("UTMASTG.2D") == 128 // (swizzle // 2)
