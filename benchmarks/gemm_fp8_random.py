"""`bench_gemm.py --random N --seed S --fp8 [tensor|block]`: the FP8 e4m3 GEMM on shapes drawn at
run time, against torch._scaled_mm (cuBLASLt) on the same GPU in the same run.

Shapes: gemm_random.random_problems' draw for the same seed (so seed 7 here is seed 7's bf16
shapes), made FP8-legal, then every shape of the tuned table dropped (and the table switched
off, as for bf16):
- B is always (n, k) (C = A @ B.T): FP8 wgmma and cuBLASLt read K-major operands only;
- n and k are rounded up to multiples of 16 (TMA rows of 16 bytes; _scaled_mm's own rule);
- block mode also rounds k up to a multiple of 128 (whole scale blocks; cuBLASLt's block-scale
  layouts are only documented for those) and m up to a multiple of 4 (the 1x128 activation
  scales are an M-strided float32 column-major array: 16-byte strides);
- a shape that rounds onto one already drawn is skipped; the draw goes on until N are left.

Modes:
- tensor: `make_fp8_gemm` (per-tensor scales, no fp32 promotion) against
  `torch._scaled_mm(a, b.t(), scale_a, scale_b, use_fast_accum=True)` (also no promotion), as
  bench_gemm.py's FP8 sweep does.
- block: `make_fp8_block_scaled_gemm` (DeepGEMM-style: A 1x128 scales, B 128x128 scales, f32
  promotion every 128 k) against `torch._scaled_mm` with the same float32 block scales
  (BlockWise1x128 for A, BlockWise128x128 for B; cuBLASLt on sm_90 with CUDA >= 12.9 only and
  without fast accumulation, which it refuses for block scales). torch versions differ on B's
  scale row stride (ceil(k/128), or that rounded up to 4): both layouts are tried on the first
  call and the one taken is recorded. Should torch refuse block scales altogether, the closest
  peer is timed instead, rowwise scales without fast accumulation, and every figure of that
  shape says so (`<tag>_peer`).

Per shape (built first in a process pool, as gemm_random does): correctness first, ours
poisoned (NaN) and compared with an f32 reference on fresh random inputs (the peer's error is
recorded too); then kernel-only timing, `launch_unchecked` on CuPy views against
`torch._scaled_mm(..., out=)` (allocating, and recorded so, where this torch has no out=),
launches queued behind a blocking kernel, A B B A rounds, SM clock and power per shape.
"""

from __future__ import annotations

import functools
import time
from dataclasses import dataclass, replace
from typing import Any

from gemm_random import (
    build_all,
    default_workers,
    describe,
    kernel_only_timer,
    model_configs_only,
    random_problems,
    ratio_totals,
    shape_gpu_figures,
    time_all,
    tuned_shapes,
)
from gemm_sweep import Problem, cupy_view, geomean, operand_sets

FP8_MODES = ("tensor", "block")
BLOCK = 128  # k (and n) extent of one block scale
TOLERANCE = 2e-2  # as bench_gemm.py's FP8 sweep: fp8 wgmma sums carry ~14 bits
TENSOR_SCALES = (0.05, 0.02)  # per-tensor scale_a, scale_b (bench_gemm.py's sweep uses the same)


def _round_up(x: int, multiple: int) -> int:
    return -(-x // multiple) * multiple


def fp8_shape(p: Problem, mode: str) -> Problem:
    """The FP8-legal problem for a drawn one (see the module doc): B (n, k), n and k multiples of
    16; block mode: k a multiple of 128 and m of 4. The label says what was rounded."""
    if mode not in FP8_MODES:
        raise ValueError(f"fp8 mode must be one of {FP8_MODES}, got {mode!r}")
    block = mode == "block"
    m = _round_up(p.m, 4) if block else p.m
    n, k = _round_up(p.n, 16), _round_up(p.k, BLOCK if block else 16)
    label = p.label.replace(", B (n, k)", "")
    moved = [f"{name} {a}->{b}" for name, a, b in (("m", p.m, m), ("n", p.n, n), ("k", p.k, k)) if a != b]
    return replace(p, m=m, n=n, k=k, transpose_b=True, label=label + (f" (rounded {', '.join(moved)})" if moved else ""))


def fp8_random_problems(count: int, seed: int, mode: str,
                        exclude: set[tuple[int, int, int]] | None = None) -> list[Problem]:
    """`count` distinct FP8 problems from gemm_random's draw for `seed`, rounded (`fp8_shape`),
    none in `exclude` (default: the tuned table's shapes) after rounding."""
    exclude = tuned_shapes() if exclude is None else exclude
    wanted = count
    while True:
        # random_problems(n) is a prefix of random_problems(n + more): drawing more keeps the order
        problems: list[Problem] = []
        seen: set[tuple[int, int, int]] = set()
        drawn = random_problems(wanted, seed, exclude)
        for p in (fp8_shape(d, mode) for d in drawn):
            if (p.m, p.n, p.k) in exclude or (p.m, p.n, p.k) in seen:
                continue
            seen.add((p.m, p.n, p.k))
            problems.append(p)
            if len(problems) == count:
                return problems
        wanted += count


def tag(seed: int, mode: str, p: Problem) -> str:
    return f"gemm_fp8_{mode}_random_seed{seed}_{p.key}"


def make_fp8_kernel(mode: str, m: int, n: int, k: int, **options: Any) -> Any:
    """Our FP8 kernel of the mode: per-tensor (configured by the model) or block-scaled (its
    defaults); `options` (tile_m, persistent, ...) override the defaults."""
    from mgpu_lab.kernels.gemm import make_fp8_block_scaled_gemm, make_fp8_gemm

    return make_fp8_block_scaled_gemm(m, n, k, **options) if mode == "block" else make_fp8_gemm(m, n, k, **options)


def build_fp8(mode: str, m: int, n: int, k: int, transpose_b: bool, **options: Any) -> tuple[dict, float]:
    """In a pool worker: the configuration and the host time of the cold build (which fills the
    on-disk kernel cache for the timing process). `options`: a configuration other than the default."""
    from mgpu_lab.kernels.gemm.configs import gemm_config
    from mgpu_lab.kernels.gemm.fp8 import FP8

    t0 = time.perf_counter()
    kern = make_fp8_kernel(mode, m, n, k, **options)
    elapsed = time.perf_counter() - t0
    if mode == "block" or options:  # block_tiles' pick and the automatic split, or given: the tiling built
        t = kern.program.notes["tiling"]
        config = {"tile_m": t.tile_m, "tile_n": t.tile_n, "persistent": t.persistent, "split_k": t.split_k,
                  "source": "given" if options else "fp8_block defaults"}
    else:
        config = gemm_config(m, n, k, transpose_b=transpose_b, dtype=FP8, table=False)
    return config, elapsed


# --------------------------------------------------------------------------- scales and references

def block_scale_shapes(m: int, n: int, k: int) -> tuple[tuple[int, int], tuple[int, int]]:
    """scale_a (m, ceil(k/128)) and scale_b (ceil(n/128), ceil(k/128)), as fp8_block.scale_shapes."""
    kb = -(-k // BLOCK)
    return (m, kb), (-(-n // BLOCK), kb)


def peer_block_scale_candidates(scale_a: Any, scale_b: Any) -> list[tuple[str, Any, Any]]:
    """Our row-major block scales as torch._scaled_mm(a, b.t(), ...) takes them, one entry per
    layout some torch version accepts: (layout name, scale_a, scale_b).

    scale_a (m, kb) must be outer-dim-major (stride (1, m)); scale_b is given for b.t() (k, n) as
    a (kb, nb) view whose transpose is (nb, kb) with unit column stride and a row stride of kb
    (torch <= 2.9-era check) or kb rounded up to 4 (later ones). With kb % 4 == 0 they coincide."""
    import torch

    a_outer = scale_a.t().contiguous().t()
    nb, kb = scale_b.shape
    candidates = [("row stride ceil(k/128)", a_outer, scale_b.t())]
    padded_kb = _round_up(kb, 4)
    if padded_kb != kb:
        padded = torch.zeros((nb, padded_kb), dtype=scale_b.dtype, device=scale_b.device)
        padded[:, :kb] = scale_b
        candidates.append(("row stride ceil(k/128) rounded up to 4", a_outer, padded[:, :kb].t()))
    return candidates


def expand_block_scales(scale_a: Any, scale_b: Any, m: int, n: int, k: int) -> tuple[Any, Any]:
    """Per-element f32 scales of A (m, k) and B (n, k) from the block scales."""
    full_a = scale_a.repeat_interleave(BLOCK, dim=1)[:, :k]
    full_b = scale_b.repeat_interleave(BLOCK, dim=0).repeat_interleave(BLOCK, dim=1)[:n, :k]
    return full_a, full_b


def fp8_reference(mode: str, a: Any, b: Any, scale_a: Any, scale_b: Any) -> Any:
    """The f32 product our kernel (and the peer) compute: scale_a * scale_b * A @ B.T per tensor,
    or the block-dequantized A @ B.T."""
    a32, b32 = a.float(), b.float()
    if mode == "block":
        full_a, full_b = expand_block_scales(scale_a, scale_b, a.shape[0], b.shape[0], a.shape[1])
        return (a32 * full_a) @ (b32 * full_b).T
    return (a32 @ b32.T) * (scale_a.float() * scale_b.float())


def relative_error(got: Any, want: Any) -> float:
    return float((got.float() - want).norm() / want.norm())


@dataclass
class Fp8Peer:
    """How torch._scaled_mm is called for one shape: its scales, fast accumulation, and whether
    it writes into `out=`; `what` names it for the record."""

    scale_a: Any
    scale_b: Any
    fast_accum: bool
    what: str
    takes_out: bool = True

    def __call__(self, a: Any, b: Any, out: Any) -> Any:
        import torch

        kwargs = dict(scale_a=self.scale_a, scale_b=self.scale_b, out_dtype=torch.bfloat16,
                      use_fast_accum=self.fast_accum)
        if self.takes_out:
            return torch._scaled_mm(a, b.t(), out=out, **kwargs)
        return torch._scaled_mm(a, b.t(), **kwargs)


def settle_peer(candidates: list[Fp8Peer], a: Any, b: Any, out: Any) -> tuple[Fp8Peer, Any, list[str]]:
    """The first candidate torch accepts (with out=, else allocating), its result on (a, b), and
    why the others were refused. RuntimeError when none runs."""
    refused = []
    for peer in candidates:
        for takes_out in (True, False):
            peer.takes_out = takes_out
            try:
                result = peer(a, b, out)
                return peer, (out if takes_out else result), refused
            except (RuntimeError, TypeError) as e:
                refused.append(f"{peer.what}{'' if takes_out else ' (no out=)'}: {str(e).splitlines()[0][:200]}")
    raise RuntimeError("torch._scaled_mm refused every scale layout tried: " + " | ".join(refused))


def peer_candidates(mode: str, scale_a: Any, scale_b: Any, m: int, n: int) -> list[Fp8Peer]:
    """The _scaled_mm calls to try, best match first: per-tensor with fast accumulation; block
    scales in each layout, then rowwise scales as the closest peer (not the same product)."""
    import torch

    if mode == "tensor":
        return [Fp8Peer(scale_a, scale_b, True, "per-tensor scales, use_fast_accum=True")]
    peers = [Fp8Peer(sa, sb, False, f"1x128 x 128x128 block scales ({layout}), use_fast_accum=False")
             for layout, sa, sb in peer_block_scale_candidates(scale_a, scale_b)]
    rows_a = torch.ones((m, 1), dtype=torch.float32, device=scale_a.device)
    rows_b = torch.ones((1, n), dtype=torch.float32, device=scale_a.device)
    peers.append(Fp8Peer(rows_a, rows_b, False, "CLOSEST PEER: rowwise scales (block scales refused), "
                                                "use_fast_accum=False"))
    return peers


def fp8_scales(mode: str, p: Problem, seed: int) -> tuple[Any, Any]:
    """Our scales as float32 torch tensors on the GPU: (1,) each per tensor, or random positive
    block scales of `block_scale_shapes` (fresh per shape)."""
    import torch

    if mode == "tensor":
        return tuple(torch.tensor([s], dtype=torch.float32, device="cuda") for s in TENSOR_SCALES)
    gen = torch.Generator(device="cuda").manual_seed(seed)
    sa_shape, sb_shape = block_scale_shapes(p.m, p.n, p.k)
    # 2^-6 .. 2^-4: a product of two unit-normal e4m3 values summed over k stays well inside bf16
    return tuple(torch.exp2(-6 + 2 * torch.rand(shape, generator=gen, device="cuda")) for shape in (sa_shape, sb_shape))


# --------------------------------------------------------------------------- one shape

def time_fp8_problem(seed: int, mode: str, p: Problem, built: tuple[dict, float], figures: dict, rows: list,
                     rounds: int, sampler_cls: Any, options: dict | None = None, name: str | None = None) -> float | None:
    """Check and time one problem; its kernel-only ratio (_scaled_mm time / ours), None when wrong.
    `options` build a configuration other than the default (keys under `name`)."""
    import numpy as np
    import torch

    from common import interleaved_rounds
    from mgpu_lab.builder.dtypes import numpy_dtype

    config, cold_s = built
    name = name or tag(seed, mode, p)
    t0 = time.perf_counter()
    kern = make_fp8_kernel(mode, p.m, p.n, p.k, **(options or {}))
    figures.update({f"{name}_build_s": time.perf_counter() - t0, f"{name}_cold_build_s": cold_s,
                    f"{name}_config": config})
    shape_seed = seed * 100_003 + p.m + 7 * p.n + 13 * p.k
    sets = operand_sets(p, torch, torch.float8_e4m3fn, seed=shape_seed)
    views = [(cupy_view(a, np.uint8), cupy_view(b, np.uint8)) for a, b in sets]
    scale_a, scale_b = fp8_scales(mode, p, shape_seed)
    scale_views = (cupy_view(scale_a, np.float32), cupy_view(scale_b, np.float32))
    ours_out = torch.empty((p.m, p.n), dtype=torch.bfloat16, device="cuda")
    out_view = cupy_view(ours_out, numpy_dtype("bfloat16"))
    peer_out = torch.empty((p.m, p.n), dtype=torch.bfloat16, device="cuda")
    a0, b0 = sets[0]
    want = fp8_reference(mode, a0, b0, scale_a, scale_b)
    ours_out.fill_(float("nan"))
    kern(*views[0], *scale_views, out=out_view)
    err = relative_error(ours_out, want)
    peer, peer_result, refused = settle_peer(peer_candidates(mode, scale_a, scale_b, p.m, p.n), a0, b0, peer_out)
    same_product = not peer.what.startswith("CLOSEST PEER")
    peer_err = relative_error(peer_result, want) if same_product else None
    del want, peer_result
    figures.update({f"{name}_rel_error": err, f"{name}_peer": peer.what, f"{name}_peer_rel_error": peer_err,
                    f"{name}_peer_out": "out=" if peer.takes_out else "allocated (this torch takes no out=)"})
    if refused:
        figures[f"{name}_peer_refused"] = refused
    if not err <= TOLERANCE:
        figures[f"{name}_error"] = f"relative error {err:.3g} (peer {peer_err}): not timed"
        rows.append((p.key, p.label, "WRONG", f"{err:.2g}", "", "", describe(config), ""))
        return None
    count = len(sets)
    launch = kern.launch_unchecked

    def ours(i: int) -> None:
        a, b = views[i % count]
        launch(a, b, *scale_views, out_view)

    def theirs(i: int) -> None:
        a, b = sets[i % count]
        peer(a, b, peer_out)

    with sampler_cls() as gpu:
        kernel_only = interleaved_rounds(ours, theirs, rounds, timer=kernel_only_timer(p.estimate_ms(itemsize=1)))
    ratio = kernel_only.b_ms / kernel_only.a_ms
    figures.update({
        f"{name}_kernel_vs_scaled_mm": ratio, f"{name}_ours_us": kernel_only.a_ms * 1e3,
        f"{name}_scaled_mm_us": kernel_only.b_ms * 1e3, f"{name}_ours_tflops": p.flops / kernel_only.a_ms / 1e9,
        f"{name}_scaled_mm_tflops": p.flops / kernel_only.b_ms / 1e9, **shape_gpu_figures(name, gpu.summary())})
    rows.append((p.key, p.label, f"{kernel_only.a_ms * 1e3:.1f}", f"{kernel_only.b_ms * 1e3:.1f}", f"{ratio:.3f}",
                 "" if same_product else "closest peer", describe(config), f"{err:.1e}"))
    return ratio


def summarize_fp8(seed: int, mode: str, problems: list[Problem], figures: dict, rows: list) -> None:
    """Totals over the shapes timed against the same product (closest-peer shapes are left out
    and counted): geomean, 10th percentile, min, and the m <= 64 subset's geomean."""
    prefix = f"gemm_fp8_{mode}_random_seed{seed}"
    ratios, small, closest = [], [], 0
    for p in problems:
        name = tag(seed, mode, p)
        if f"{name}_kernel_vs_scaled_mm" not in figures:
            continue
        if str(figures.get(f"{name}_peer", "")).startswith("CLOSEST PEER"):
            closest += 1
            continue
        ratios.append(figures[f"{name}_kernel_vs_scaled_mm"])
        if p.m <= 64:
            small.append(ratios[-1])
    figures.update({f"{prefix}_shapes_timed": len(ratios), f"{prefix}_shapes_drawn": len(problems),
                    f"{prefix}_shapes_against_closest_peer": closest})
    if ratios:
        figures.update(ratio_totals(prefix, "scaled_mm", ratios))
        rows.append(("total", f"{len(ratios)} shapes", "", "", f"geomean {geomean(ratios):.3f}",
                     f"min {min(ratios):.3f}", f"p10 {figures[f'{prefix}_p10_vs_scaled_mm']:.3f}", ""))
    if small:
        figures.update({f"{prefix}_m64_geomean_vs_scaled_mm": geomean(small), f"{prefix}_m64_shapes": len(small)})
        rows.append(("m <= 64", f"{len(small)} shapes", "", "", f"geomean {geomean(small):.3f}",
                     f"min {min(small):.3f}", "", ""))


def run_fp8_random(count: int, seed: int, figures: dict, rows: list, *, mode: str = "tensor", rounds: int = 3,
                   deadline: float = float("inf"), workers: int | None = None) -> list[Problem]:
    """Draw, build (process pool), check and time `count` FP8 shapes of `mode`; totals into figures."""
    from common import GpuSampler

    model_configs_only()
    problems = fp8_random_problems(count, seed, mode)
    t0 = time.perf_counter()
    built = build_all(problems, workers or default_workers(), build=functools.partial(build_fp8, mode))
    figures[f"gemm_fp8_{mode}_random_seed{seed}_build_wall_s"] = time.perf_counter() - t0
    time_all(problems, built, lambda p: tag(seed, mode, p),
             lambda p, result: time_fp8_problem(seed, mode, p, result, figures, rows, rounds, GpuSampler),
             figures, rows, deadline)
    summarize_fp8(seed, mode, problems, figures, rows)
    return problems
