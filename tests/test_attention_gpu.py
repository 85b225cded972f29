"""GPU tests of the flash attention forward against a float64 reference (numpy on the host):
fresh random inputs every run, both outputs poisoned with NaN first.

With MGPU_ATTENTION_DEBUG=1 (and on any failure) each case prints its worst errors per
(batch, head, 64-row block): which consumer warpgroup, which tile, NaN counts, so a failed run on
the device says where the kernel is wrong."""

from __future__ import annotations

import os

import numpy as np
import pytest
from test_hopper import host_f32, poison

from mgpu_lab.builder.dtypes import numpy_dtype
from mgpu_lab.kernels.attention import make_attention, reference_attention

pytestmark = pytest.mark.gpu

# Elementwise |out - ref| <= atol * magnitude + rtol * |ref| (out is rounded to the input type and P is
# multiplied in it, so errors scale with |v|), and ||out - ref|| / ||ref|| <= norm (catches a systematic
# error too small for the elementwise bound, e.g. a dropped tile; lse catches those as well).
_OUT_TOL = {"bfloat16": (6e-3, 2e-2, 8e-3), "float16": (1.5e-3, 5e-3, 2e-3)}
_LSE_TOL = (2e-3, 1e-4)  # f32 with ex2.approx


def _block_report(name: str, got: np.ndarray, ref: np.ndarray, rows: int = 64, limit: int = 12) -> str:
    """The worst (batch, head, row block) errors of got vs ref, NaN counts included."""
    batch, heads, seq = ref.shape[:3]
    err = np.abs(got.astype(np.float64) - ref)
    err = np.where(np.isnan(got), np.inf, err)
    lines = []
    for b in range(batch):
        for h in range(heads):
            for r0 in range(0, seq, rows):
                blk = err[b, h, r0:r0 + rows]
                nan = int(np.isnan(got[b, h, r0:r0 + rows]).sum())
                worst = float(blk.max())
                where = np.unravel_index(int(np.argmax(blk)), blk.shape)
                lines.append((worst, f"  {name} b={b} h={h} rows {r0}-{min(r0 + rows, seq) - 1} (consumer "
                                     f"{(r0 // 64) % 2}): max err {worst:.3g} at row {r0 + where[0]}"
                                     f"{', col ' + str(where[1]) if blk.ndim == 2 else ''}, NaN {nan}"))
    lines.sort(key=lambda x: -x[0])
    # the pattern over blocks (every other block: one consumer; the last: the tail) and, for out,
    # over 64-column chunks (a TMA box / swizzle span of head_dim)
    pattern = []
    for h in range(min(heads, 2)):
        per_block = [float(err[0, h, r0:r0 + rows].max()) for r0 in range(0, seq, rows)]
        pattern.append(f"  {name} b=0 h={h} max err per {rows}-row block: " + " ".join(f"{x:.0e}" for x in per_block))
        if err.ndim == 4:
            per_chunk = [float(err[0, h, :, c0:c0 + 64].max()) for c0 in range(0, err.shape[-1], 64)]
            pattern.append(f"  {name} b=0 h={h} max err per 64-column chunk: " + " ".join(f"{x:.0e}" for x in per_chunk))
    return "\n".join([text for _, text in lines[:limit]] + pattern)


def _check(batch, heads, seq_q, seq_kv, head_dim, rng, *, causal=False, kv_heads=None, dtype="bfloat16",
           magnitude=1.0, runs=2, **options):
    import cupy

    kv_heads = kv_heads or heads
    kern = make_attention(batch, heads, seq_q, seq_kv, head_dim, causal=causal, kv_heads=kv_heads, dtype=dtype,
                          **options)
    debug = bool(os.environ.get("MGPU_ATTENTION_DEBUG"))
    atol, rtol, norm_tol = _OUT_TOL[dtype]
    atol *= magnitude
    worst = (0.0, 0.0)
    for run in range(runs):
        host = [(rng.standard_normal((batch, h, n, head_dim), dtype=np.float32) * magnitude).astype(numpy_dtype(dtype))
                for h, n in ((heads, seq_q), (kv_heads, seq_kv), (kv_heads, seq_kv))]
        out, lse = poison(cupy, (batch, heads, seq_q, head_dim), dtype), poison(cupy, (batch, heads, seq_q), "float32")
        kern(*(cupy.asarray(x) for x in host), out=(out, lse))
        got_out, got_lse = host_f32(out), lse.get()
        ref_out, ref_lse = reference_attention(*host, causal=causal, scale=options.get("scale"))
        out_bad = ~(np.abs(got_out - ref_out) <= atol + rtol * np.abs(ref_out))  # NaN counts as bad
        lse_bad = ~(np.abs(got_lse - ref_lse) <= _LSE_TOL[0] + _LSE_TOL[1] * np.abs(ref_lse))
        worst = (max(worst[0], float(np.nanmax(np.abs(got_out - ref_out)))),
                 max(worst[1], float(np.nanmax(np.abs(got_lse - ref_lse)))))
        rel_norm = float(np.linalg.norm(np.nan_to_num(got_out, nan=1e30) - ref_out) / np.linalg.norm(ref_out))
        failed = out_bad.any() or lse_bad.any() or not rel_norm <= norm_tol
        if debug or failed:
            print(f"{kern.name} run {run}: relative norm error {rel_norm:.2e}, "
                  f"{int(out_bad.sum())} bad out elements, {int(lse_bad.sum())} bad lse rows, "
                  f"NaN out {int(np.isnan(got_out).sum())}, NaN lse {int(np.isnan(got_lse).sum())}")
            print(_block_report("out", got_out, ref_out))
            print(_block_report("lse", got_lse, ref_lse, limit=6))
        assert not failed, f"{kern.name}: out or lse outside tolerance (see the block report above)"
    print(f"{kern.name}: max |out err| {worst[0]:.3g}, max |lse err| {worst[1]:.3g}")


@pytest.mark.parametrize("head_dim", [64, 128, 256])
def test_attention_head_dims(head_dim, rng):
    _check(2, 2, 512, 512, head_dim, rng)


@pytest.mark.parametrize("head_dim", [64, 128, 256])
def test_attention_causal(head_dim, rng):
    _check(1, 2, 1000, 1000, head_dim, rng, causal=True)


@pytest.mark.parametrize("seq_q, seq_kv", [(1000, 1000), (384, 700), (700, 384), (64, 80)])
def test_attention_ragged(seq_q, seq_kv, rng):
    _check(1, 2, seq_q, seq_kv, 128, rng)


def test_attention_causal_ragged_rectangular(rng):
    _check(1, 2, 300, 520, 64, rng, causal=True)


def test_attention_gqa(rng):
    _check(2, 8, 512, 640, 128, rng, kv_heads=2)


def test_attention_gqa_causal_float16(rng):
    _check(1, 8, 768, 768, 128, rng, kv_heads=4, causal=True, dtype="float16")


@pytest.mark.parametrize("head_dim, causal", [(64, False), (128, True), (256, False)])
def test_attention_large_logits(head_dim, causal, rng):
    """Inputs scaled by 6: logits 36x larger, softmax rows close to one-hot; the running max
    changes a lot between tiles (alpha far from 1)."""
    _check(1, 2, 1000, 1000, head_dim, rng, causal=causal, magnitude=6.0)


@pytest.mark.parametrize("head_dim", [64, 128, 256])
def test_attention_float16(head_dim, rng):
    _check(1, 2, 640, 640, head_dim, rng, dtype="float16")


@pytest.mark.parametrize("stages, block_kv", [(2, 64), (3, 128), (4, 64)])
def test_attention_pipeline_options(stages, block_kv, rng):
    _check(1, 2, 1000, 1000, 128, rng, causal=True, stages=stages, block_kv=block_kv)


@pytest.mark.parametrize("head_dim, block_kv, stages", [(64, 192, 3), (128, 176, 2), (256, 80, 2)])
@pytest.mark.parametrize("causal", [False, True])
def test_attention_wide_kv_tiles(head_dim, block_kv, stages, causal, rng):
    """K/V tiles that are not powers of two (FA3's shapes: 128 x 176 for d 128, 128 x 80 for d 256)."""
    _check(1, 2, 1000, 1000, head_dim, rng, causal=causal, block_kv=block_kv, stages=stages)


@pytest.mark.parametrize("causal", [False, True])
def test_attention_without_pingpong(causal, rng):
    _check(1, 4, 1000, 1000, 128, rng, causal=causal, pingpong=False)


@pytest.mark.parametrize("head_dim, causal, magnitude", [(64, False, 1.0), (64, True, 6.0), (128, False, 6.0)])
def test_attention_exp2_on_fma(head_dim, causal, magnitude, rng):
    """A quarter and all of the softmax's exp2s by the FMA polynomial: masked scores must still
    give exact zeros, large logits no overflow, the ragged tail no NaN."""
    for fraction in (0.25, 1.0):
        _check(1, 2, 1000, 1000, head_dim, rng, causal=causal, magnitude=magnitude, exp2_fma_fraction=fraction,
               runs=1)


def test_attention_scale(rng):
    _check(1, 2, 256, 256, 64, rng, scale=0.05)


def test_attention_single_row(rng):
    """One query, one key: TMA boxes of 128 rows over an extent of 1 (the rest zero-filled / clipped)."""
    _check(1, 2, 1, 1, 128, rng)


# -- persistent blocks (at most one per SM, looping over (query tile, head, batch) items) -----------

@pytest.mark.parametrize("causal", [False, True])
@pytest.mark.parametrize("head_dim, batch", [(64, 8), (128, 4), (256, 3)])
def test_attention_persistent(head_dim, batch, causal, rng):
    """batch x 16 heads x 4 query tiles: 512 / 256 / 192 items on 132 blocks (several items per
    block: the K/V ring, the Q halves and the pingpong turns carry over between items). d 64 has
    its own output buffer; d 128 and 256 write the output over the Q halves."""
    _check(batch, 16, 512, 512, head_dim, rng, causal=causal, persistent=True, runs=1)


def test_attention_persistent_ragged_gqa_causal(rng):
    """seq_q != seq_kv, neither a multiple of the tiles; 4 query heads per K/V head; 192 items."""
    _check(3, 8, 1000, 700, 128, rng, kv_heads=2, causal=True, persistent=True, runs=1)


def test_attention_persistent_fewer_items_than_sms(rng):
    """3 query tiles x 16 heads = 48 items: 48 blocks of one item each; causal, seq_q < seq_kv."""
    _check(1, 16, 300, 520, 64, rng, causal=True, persistent=True)


@pytest.mark.parametrize("options", [dict(stages=2), dict(pingpong=False)], ids=["out_buffer_d128", "no_pingpong"])
def test_attention_persistent_options(options, rng):
    """d 128 with 2 stages has an output buffer; without pingpong the consumers run unpaired."""
    _check(4, 16, 512, 512, 128, rng, causal=True, persistent=True, runs=1, **options)


def test_attention_persistent_rows_past_seq_q(rng):
    """seq_q 150: each head's second query tile has one row-half entirely past seq_q (zero-filled
    loads, clipped stores); 144 items, float16."""
    _check(9, 8, 150, 150, 64, rng, dtype="float16", persistent=True)


@pytest.mark.parametrize("profile_tiles, causal", [(8, False), (None, False), (4, True)])
def test_profiled_attention_is_right_and_records_its_window(profile_tiles, causal, rng):
    """Profiled (windowed or every tile): the same results as the plain kernel's reference, and each
    consumer of each block records its first tile, the window of unmasked tiles and the masked ones."""
    import collections
    import warnings

    import cupy

    from mgpu_lab.errors import ProfilerNote

    seq, block_kv = 4096, 128
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", ProfilerNote)
        # profile_blocks=1: every block records (the default samples every 16th), so every query
        # block's window is in the trace
        _check(1, 2, seq, seq, 128, rng, causal=causal, runs=1, profile=True, profile_tiles=profile_tiles,
               block_kv=block_kv, profile_blocks=1)
        kern = make_attention(1, 2, seq, seq, 128, causal=causal, profile=True, profile_tiles=profile_tiles,
                              block_kv=block_kv, profile_blocks=1)
    q, k, v = (cupy.asarray(rng.standard_normal((1, 2, seq, 128), dtype=np.float32).astype(numpy_dtype("bfloat16")))
               for _ in range(3))
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # no overflow: the capacity holds what the window records
        kern(q, k, v)
        trace = kern.last_trace
    s_gemm = trace.region_names.index("S GEMM")
    per_unit = collections.Counter((b, u) for b, u, r in zip(trace.block.tolist(), trace.unit.tolist(),
                                                             trace.region.tolist()) if r == s_gemm)
    assert trace.dropped == 0 and per_unit
    if not causal:  # 32 unmasked tiles per block: tile 0, then the window of the 31 in the loop
        assert set(per_unit.values()) == {32 if profile_tiles is None else 1 + profile_tiles}
    else:  # query block qb: tile 0, the window of its qb - 1 unmasked loop tiles, the diagonal tile
        assert set(per_unit.values()) == {1} | {2 + min(profile_tiles, qb - 1) for qb in range(1, seq // 128)}
