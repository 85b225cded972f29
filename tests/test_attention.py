"""CPU tests of the flash attention forward: every configuration builds and compiles to SASS with
tensor-core (HGMMA) and TMA (UTMALDG/UTMASTG) instructions, no local memory, no spills, and no
wgmma serialization in the ptxas log; bad arguments are refused with errors naming them."""

from __future__ import annotations

import re

import numpy as np
import pytest

from mgpu_lab.kernels.attention import (
    SMS,
    attention_smem_bytes,
    default_persistent,
    default_pingpong,
    has_out_buffer,
    make_attention,
    reference_attention,
    visible_tiles,
    work_item,
)


def opcodes(sass: str) -> list[str]:
    return re.findall(r"\*/\s+(?:@!?U?P\w+\s+)?([A-Z][A-Z0-9_.]+)", sass)


CONFIGS = [
    dict(head_dim=64),
    dict(head_dim=128),
    dict(head_dim=256),
    dict(head_dim=64, causal=True),
    dict(head_dim=128, causal=True),
    dict(head_dim=256, causal=True),
    dict(head_dim=128, seq_q=1000, seq_kv=1000),  # ragged tail
    dict(head_dim=128, seq_q=1000, seq_kv=1000, causal=True),
    dict(head_dim=128, heads=8, kv_heads=2, dtype="float16"),  # GQA
    dict(head_dim=256, seq_q=384, seq_kv=700, dtype="float16"),
    dict(head_dim=128, causal=True, pingpong=False),
    dict(head_dim=128, block_kv=64, stages=4),
    dict(head_dim=64, block_kv=192, seq_q=1000, seq_kv=1000, causal=True),
    dict(head_dim=128, block_kv=176, stages=2, seq_q=1000, seq_kv=1000),
    dict(head_dim=256, block_kv=80, stages=2, seq_q=1000, seq_kv=1000, causal=True),
    # persistent (batch 4 x heads 2 x 4 query tiles = 32 items unless stated)
    dict(head_dim=64, persistent=True),  # own output buffer
    dict(head_dim=128, persistent=True),  # output over the Q halves
    dict(head_dim=256, persistent=True),
    dict(head_dim=64, causal=True, persistent=True),
    dict(head_dim=128, causal=True, persistent=True, stages=2),  # d 128 with an output buffer
    dict(head_dim=256, causal=True, persistent=True, batch=3, heads=16),  # 192 items (spilled before the fixes)
    dict(head_dim=128, seq_q=1000, seq_kv=700, causal=True, persistent=True),  # ragged
    dict(head_dim=128, heads=8, kv_heads=2, dtype="float16", persistent=True),  # GQA
    dict(head_dim=64, causal=True, pingpong=False, persistent=True),
    dict(head_dim=64, batch=32, heads=32, causal=True),  # 4096 items: persistent by default
]


def _ids(cfg: dict) -> str:
    return "-".join(f"{k}={v}" for k, v in cfg.items())


@pytest.mark.parametrize("cfg", CONFIGS, ids=_ids)
def test_attention_sass(cfg):
    shape = dict(batch=4 if cfg.get("persistent") else 1, heads=2, seq_q=512, seq_kv=512)
    shape.update({k: v for k, v in cfg.items() if k in shape})
    options = {k: v for k, v in cfg.items() if k not in shape}
    kern = make_attention(shape["batch"], shape["heads"], shape["seq_q"], shape["seq_kv"], **options)
    items = -(-shape["seq_q"] // 128) * shape["heads"] * shape["batch"]
    persistent = cfg.get("persistent", items > 2 * SMS)
    assert kern.name.endswith("_persistent") == persistent
    compiled = kern.compiled
    ops = opcodes(compiled.sass)
    d = cfg["head_dim"]
    in_type = "" if cfg.get("dtype") == "float16" else r"\.BF16"  # f16 is HGMMA's default: no suffix
    # S = Q K^T: n = block_kv; O += P V: n = head_dim, A from registers (R operand)
    assert re.search(rf"HGMMA\.64x{d}x16\.F32{in_type} R\d+, R\d+, gdesc", compiled.sass), "no register-A PV GEMM"
    assert re.search(rf"HGMMA\.64x\d+x16\.F32{in_type} R\d+, gdesc", compiled.sass), "no smem S GEMM"
    assert any(op.startswith("UTMALDG") for op in ops) and any(op.startswith("UTMASTG") for op in ops)
    assert not any(op.startswith(("LDL", "STL")) for op in ops), "local memory in the attention kernel"
    assert "USETMAXREG.DEALLOC.CTAPOOL" in ops and "USETMAXREG.TRY_ALLOC.CTAPOOL" in ops
    r = compiled.resources
    assert r.spill_stores_bytes == r.spill_loads_bytes == r.stack_frame_bytes == 0
    assert "serialized" not in compiled.ptxas_log, compiled.ptxas_log
    assert compiled.block == (384, 1, 1)
    if persistent:
        assert compiled.grid == (min(items, SMS), 1, 1)
    else:
        assert compiled.grid == (-(-shape["seq_q"] // 128), shape["heads"], shape["batch"])
    # the consumer overlaps softmax with the PV GEMM: it waits for 1 pending group somewhere
    assert "WARPGROUP.DEPBAR.LE gsb0, 0x1" in re.sub(r"\s+", " ", compiled.sass)
    # pingpong: each consumer waits for its turn (bar.sync) and hands the turn over (bar.arrive)
    pingpong = cfg.get("pingpong", default_pingpong(d, cfg.get("causal", False), persistent))
    assert any(op.startswith("BAR.ARV") for op in ops) == pingpong


def test_attention_outputs_and_names():
    kern = make_attention(2, 8, 300, 200, 64, kv_heads=4, causal=True)
    assert [tuple(s.shape) for s in kern.compiled.outputs] == [(2, 8, 300, 64), (2, 8, 300)]
    assert [s.dtype for s in kern.compiled.outputs] == ["bfloat16", "float32"]
    assert [tuple(s.shape) for s in kern.compiled.inputs] == [(2, 8, 300, 64), (2, 4, 200, 64), (2, 4, 200, 64)]
    assert kern.compiled.grid == (3, 8, 2)
    assert attention_smem_bytes(128, 128, 3) <= 227 * 1024 < attention_smem_bytes(128, 128, 4)


@pytest.mark.parametrize("shape, causal, pingpong", [
    ((4, 16, 4096, 4096, 128), False, False),  # full attention, d 128, one block per tile
    ((4, 16, 4096, 4096, 128), True, True),
    ((16, 16, 1024, 1024, 128), False, True),  # persistent
    ((4, 32, 4096, 4096, 64), False, True),
    ((4, 8, 4096, 4096, 256), False, True),
])
def test_attention_default_pingpong(shape, causal, pingpong):
    kern = make_attention(*shape, causal=causal)
    assert kern.name.endswith("_nopp") != pingpong, kern.name
    assert ("bar.arrive" in kern.compiled.ptx) == pingpong  # the turn handoffs


def test_attention_exp2_on_fma_by_head_dim():
    """d 64 moves 6 of its 32 S registers' exponentials per tile off MUFU; d 128 keeps them all there."""
    ex2 = {d: make_attention(1, 2, 512, 512, d, persistent=False).compiled.ptx.count("add.rm.ftz.f32")
           for d in (64, 128)}
    assert ex2 == {64: 3 * 6 * 2, 128: 0}  # 3 softmax sites (tile 0, unmasked and masked loops) x 6 registers x 2


@pytest.mark.parametrize("kwargs, message", [
    (dict(head_dim=96), r"head_dim must be one of \(64, 128, 256\), got 96"),
    (dict(kv_heads=3), r"kv_heads must divide heads .* heads=4 and kv_heads=3"),
    (dict(dtype="float32"), r"dtype must be 'bfloat16' or 'float16', got 'float32'"),
    (dict(scale=-1.0), r"scale must be a positive finite number, got -1.0"),
    (dict(block_kv=72), r"block_kv must be a multiple of 16 in \[64, 256\], got 72"),
    (dict(head_dim=256, block_kv=128), r"head_dim 256 allows block_kv up to 80"),
    (dict(stages=1), r"stages must be an int >= 2, got 1"),
    (dict(stages=4), r"4 K/V stages of 128 x 128 need \d+ bytes of smem"),
    (dict(seq_q=0), r"seq_q must be a positive int, got 0"),
    (dict(persistent="yes"), r"persistent must be True, False or None, got 'yes'"),
    (dict(exp2_fma_fraction=2), r"exp2_fma_fraction must be a number in \[0, 1\], got 2"),
    (dict(pingpong="on"), r"pingpong must be True, False or None, got 'on'"),
])
def test_attention_rejects_bad_arguments(kwargs, message):
    args = dict(batch=1, heads=4, seq_q=256, seq_kv=256, head_dim=128)
    args.update(kwargs)
    shape = [args.pop(k) for k in ("batch", "heads", "seq_q", "seq_kv", "head_dim")]
    with pytest.raises(ValueError, match=message):
        make_attention(*shape, **args)


@pytest.mark.parametrize("causal", [False, True])
@pytest.mark.parametrize("q_blocks, pairs, section", [(4, 1024, 256), (8, 7, 3), (1, 5, 2), (3, 10, 10)])
def test_work_items_cover_every_tile_once(q_blocks, pairs, section, causal):
    """work_item (the kernel runs the same function on index values) maps items 0 .. n - 1 onto
    every (query tile, head/batch pair) once; causal: within a section, heaviest query tile first."""
    items = [work_item(i, q_blocks, pairs, section, causal) for i in range(q_blocks * pairs)]
    assert sorted(items) == [(qb, p) for qb in range(q_blocks) for p in range(pairs)]
    if causal:
        per_section = section * q_blocks
        for start in range(0, len(items), per_section):
            qbs = [qb for qb, _ in items[start:start + per_section]]
            assert qbs == sorted(qbs, reverse=True)


def test_persistent_default_and_buffers():
    """Several waves of short blocks go persistent; long sequences and small grids do not. The
    output buffer exists where smem has room for it."""
    assert default_persistent(32, 32, 512, 512, 64, False, 128)
    assert default_persistent(32, 32, 512, 512, 64, True, 128)
    assert not default_persistent(4, 16, 4096, 4096, 128, False, 128)  # 32 tiles per block
    assert default_persistent(4, 32, 4096, 4096, 64, False, 128)  # 32 tiles of half the work
    assert not default_persistent(1, 32, 16384, 16384, 64, False, 128)
    assert not default_persistent(1, 16, 16384, 16384, 128, True, 128)
    assert not default_persistent(1, 2, 512, 512, 64, False, 128)  # 8 items
    assert has_out_buffer(64, 128, 4) and has_out_buffer(128, 128, 2)
    assert not has_out_buffer(128, 128, 3) and not has_out_buffer(256, 64, 2)
    assert visible_tiles(0, 1000, 128, True) == 1 and visible_tiles(7, 1000, 128, True) == 8
    assert visible_tiles(0, 1000, 128, False) == 8
    kern = make_attention(1, 2, 300, 300, 64, persistent=True)  # fewer items than SMs
    assert kern.compiled.grid == (6, 1, 1) and kern.name.endswith("_persistent")
    assert attention_smem_bytes(64, 128, 4, persistent=True, out_buffer=True) == \
        attention_smem_bytes(64, 128, 4) + 128 * 64 * 2 + 3 * 8


def test_reference_attention_matches_a_direct_softmax():
    rng = np.random.default_rng(0)
    q, k, v = (rng.standard_normal((1, 2, n, 8)) for n in (5, 7, 7))
    out, lse = reference_attention(q, k, v, causal=True, scale=0.5)
    s = np.einsum("hid,hjd->hij", q[0], k[0]) * 0.5
    s[:, np.arange(7)[None, :] > np.arange(5)[:, None]] = -np.inf  # top-left causal: key j <= query i
    w = np.exp(s) / np.exp(s).sum(-1, keepdims=True)
    np.testing.assert_allclose(out[0], w @ v[0], rtol=1e-12)
    np.testing.assert_allclose(lse[0], np.log(np.exp(s).sum(-1)), rtol=1e-12)


# -- the two DSL pieces the attention kernel added ------------------------------------------------

def test_named_barrier_arrive_hands_a_turn_over():
    """named_barrier(arrive=True) is `bar.arrive` (count and go on); the default waits (`bar.sync`)."""
    import mgpu_lab
    from mgpu_lab import dsl

    sd = mgpu_lab.ShapeDtype((128,), "float32")

    def body(ctx, x, y, smem):
        first = dsl.arith.cmpi(dsl.arith.CmpIPredicate.eq, dsl.warpgroup_idx(), dsl.c(0))
        dsl.if_else(first, lambda: dsl.named_barrier(5, 256, arrive=True), lambda: dsl.named_barrier(5, 256))

    k = mgpu_lab.kernel(body, grid=1, block=256, in_shapes=sd, out_shapes=sd)
    assert "bar.arrive 5, 256;" in k.compiled.ptx and "bar.sync 5, 256;" in k.compiled.ptx
    assert "BAR.ARV" in " ".join(opcodes(k.compiled.sass))


def test_wgmma_fence_threads_its_operands():
    """wgmma_fence(acc, p) returns the operands rebuilt from the fence's outputs (same kinds,
    layouts and types), so writes to them cannot sink below the fence."""
    import mgpu_lab
    from mgpu_lab import dsl

    sd = mgpu_lab.ShapeDtype((128,), "float32")
    checked = []

    def body(ctx, x, y, smem):
        acc = dsl.WGMMAAccumulator.zeros(64)
        p = dsl.FragmentedArray.splat(1.0, dsl.WGMMAFragLayout(64), "bfloat16")
        fenced_acc, fenced_p = dsl.wgmma_fence(acc, p)
        # checked while tracing: MLIR values do not outlive the kernel's module
        assert isinstance(fenced_acc, dsl.WGMMAAccumulator) and fenced_acc.n == 64 and len(fenced_acc.values) == 32
        assert fenced_p.layout == dsl.WGMMAFragLayout(64) and str(fenced_p.element_type) == "bf16"
        # the fence's output (its registers are built from the asm's results), not the zeros' splat
        assert fenced_acc.value.registers[0].owner.name != acc.value.registers[0].owner.name
        assert isinstance(dsl.wgmma_fence(acc), dsl.WGMMAAccumulator) and dsl.wgmma_fence() is None
        with pytest.raises(TypeError, match="operands must be WGMMAAccumulator or FragmentedArray"):
            dsl.wgmma_fence(x)
        checked.append(True)

    k = mgpu_lab.kernel(body, grid=1, block=128, in_shapes=sd, out_shapes=sd)
    assert checked and k.compiled.ptx.count("wgmma.fence.sync.aligned;") == 3
