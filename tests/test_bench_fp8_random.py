"""CPU tests of benchmarks/gemm_fp8_random.py: the FP8-legal draw, the block-scale layouts handed to
torch._scaled_mm and the f32 references (no GPU; the torch parts skip without torch)."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "benchmarks"))

from gemm_fp8_random import (  # noqa: E402
    BLOCK,
    block_scale_shapes,
    build_fp8,
    fp8_random_problems,
    fp8_reference,
    fp8_shape,
    peer_block_scale_candidates,
    summarize_fp8,
    tag,
)
from gemm_random import random_problems, tuned_shapes  # noqa: E402
from gemm_sweep import Problem  # noqa: E402


@pytest.mark.parametrize("mode", ["tensor", "block"])
def test_fp8_draw_is_deterministic_legal_distinct_and_untuned(mode):
    tuned = tuned_shapes()
    first = fp8_random_problems(32, 7, mode)
    assert first == fp8_random_problems(32, 7, mode) and first != fp8_random_problems(32, 8, mode)
    assert len(first) == 32 and len({(p.m, p.n, p.k) for p in first}) == 32
    assert not any((p.m, p.n, p.k) in tuned for p in first)
    for p in first:
        assert p.transpose_b and p.n % 16 == 0 and p.k % (BLOCK if mode == "block" else 16) == 0
        if mode == "block":
            assert p.m % 4 == 0


def test_fp8_shapes_are_the_bf16_draw_rounded_up_and_labelled():
    drawn = random_problems(8, 7)
    p = Problem(255, 7000, 424, False, "log-uniform")
    assert fp8_shape(p, "tensor") == Problem(255, 7008, 432, True, "log-uniform (rounded n 7000->7008, k 424->432)")
    assert fp8_shape(p, "block") == Problem(256, 7008, 512, True,
                                            "log-uniform (rounded m 255->256, n 7000->7008, k 424->512)")
    assert fp8_random_problems(8, 7, "tensor")[0] == fp8_shape(drawn[0], "tensor")
    with pytest.raises(ValueError, match="fp8 mode"):
        fp8_shape(p, "rowwise")


def test_fp8_totals_leave_closest_peer_shapes_out():
    problems = [Problem(16, 4096, 4096, True, "a"), Problem(1024, 1024, 1024, True, "b"),
                Problem(2048, 2048, 2048, True, "c")]
    figures: dict = {}
    for p, ratio in zip(problems, (0.9, 1.1, 5.0)):
        figures[f"{tag(3, 'block', p)}_kernel_vs_scaled_mm"] = ratio
    figures[f"{tag(3, 'block', problems[2])}_peer"] = "CLOSEST PEER: rowwise scales"
    summarize_fp8(3, "block", problems, figures, [])
    prefix = "gemm_fp8_block_random_seed3"
    assert figures[f"{prefix}_shapes_timed"] == 2 and figures[f"{prefix}_shapes_against_closest_peer"] == 1
    assert figures[f"{prefix}_geomean_vs_scaled_mm"] == pytest.approx((0.9 * 1.1) ** 0.5)
    assert figures[f"{prefix}_min_vs_scaled_mm"] == 0.9 and figures[f"{prefix}_m64_shapes"] == 1


@pytest.mark.parametrize("k", [512, 640, 384])
def test_peer_block_scales_have_the_strides_torch_checks(k):
    """ScaledBlas.cpp: scale_a (m, kb) with strides (1, m); scale_b.t() (nb, kb) with strides
    (kb or kb rounded up to 4, 1); both layouts offered only where they differ."""
    torch = pytest.importorskip("torch")
    m, n = 8, 256
    sa_shape, sb_shape = block_scale_shapes(m, n, k)
    sa, sb = torch.rand(sa_shape), torch.rand(sb_shape)
    kb = -(-k // BLOCK)
    candidates = peer_block_scale_candidates(sa, sb)
    assert len(candidates) == (1 if kb % 4 == 0 else 2)
    for i, (_, a, b) in enumerate(candidates):
        assert a.shape == (m, kb) and a.stride() == (1, m) and torch.equal(a, sa)
        assert b.t().shape == sb_shape and b.t().stride() == ((kb, 1) if i == 0 else (-(-kb // 4) * 4, 1))
        assert torch.equal(b.t(), sb)


def test_block_reference_dequantizes_each_128_block():
    torch = pytest.importorskip("torch")
    m, n, k = 4, 160, 256
    gen = torch.Generator().manual_seed(0)
    a = torch.randn((m, k), generator=gen).to(torch.float8_e4m3fn)
    b = torch.randn((n, k), generator=gen).to(torch.float8_e4m3fn)
    sa_shape, sb_shape = block_scale_shapes(m, n, k)
    sa, sb = torch.rand(sa_shape, generator=gen) + 0.5, torch.rand(sb_shape, generator=gen) + 0.5
    want = torch.zeros((m, n))
    for i in range(m):
        for j in range(n):
            for kb in range(k // BLOCK):
                block = slice(kb * BLOCK, (kb + 1) * BLOCK)
                want[i, j] += (a[i, block].float() @ b[j, block].float()) * sa[i, kb] * sb[j // BLOCK, kb]
    torch.testing.assert_close(fp8_reference("block", a, b, sa, sb), want, rtol=1e-5, atol=1e-4)
    tensor = fp8_reference("tensor", a, b, torch.tensor([0.5]), torch.tensor([0.25]))
    torch.testing.assert_close(tensor, (a.float() @ b.float().T) * 0.125)


@pytest.mark.parametrize("shape, want", [
    ((8, 912, 24704), {"tile_m": 64, "tile_n": 32, "split_k": 4, "persistent": False}),
    # 18 x 22 tiles of 128 x 128, three waves: persistent blocks by default
    ((2200, 2784, 4992), {"tile_m": 128, "tile_n": 128, "split_k": 1, "persistent": True}),
])
def test_block_records_name_the_tiling_that_ran(shape, want):
    """The record's configuration is the built kernel's (block_tiles' pick, the automatic split,
    persistent blocks over 2+ waves), not a constant: records before this named 128 x 128 for
    every block-scaled shape."""
    config, seconds = build_fp8("block", *shape, True)
    assert {key: config[key] for key in want} == want and seconds > 0
