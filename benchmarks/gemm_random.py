"""`bench_gemm.py --random N --seed S`: the bf16 GEMM on shapes drawn at run time, against cuBLAS.

The shapes cannot be tuned for: they are drawn from the seed given on the command line, and
every shape of the tuned table (configs.json, any device or layout) is dropped, so the figures
measure the configuration model (model.py), not the table; the table is switched off for the
run as well (MGPU_LAB_GEMM_TABLE=0).

Distribution (`random_problems`, Python's `random.Random(seed)`, the same on every machine):
- m log-uniform in 1..16384 (rounded to an int);
- half of the problems: n and k each log-uniform in 256..32768, rounded to a multiple of 8;
  the other half: a public LLM's projection, (n, k) = (intermediate, hidden) (up / gate) or
  (hidden, intermediate) (down), hidden from LLM_HIDDEN (Llama-2/3 7B/8B, Mistral 7B: 4096;
  Llama 70B: 8192; Qwen2 7B: 3584) and intermediate from LLM_INTERMEDIATE (Llama-2 7B 11008,
  Llama-3 8B / Mistral 7B 14336, Llama 70B 28672, Qwen2 7B 18944);
- half of the problems with B as (n, k) (C = A @ B.T, nn.Linear's layout), half B (k, n).

Per shape: the kernels of all shapes are built first in a process pool (the kernel cache is
on disk, so the timing process loads them), then each shape is checked and timed:
- correctness: our output poisoned (NaN), then compared with an f32 reference (torch.matmul in
  float32) on fresh random inputs, before anything is timed;
- kernel-only: `launch_unchecked` on CuPy views against `torch.matmul(..., out=)`, blocks of
  launches queued behind a blocking kernel, CUDA events per launch, A B B A rounds;
- user call: the Kernel called on torch tensors (output allocated) against torch.matmul, the
  same call path, CUDA events around each call (so host time counts where it dominates);
- the chosen configuration, the model's estimate, the SM clock and board power during the shape.
Launches per block are bounded by a time budget per shape (BLOCK_MS), rounds kept small.

`--epilogue bias` (`EPILOGUES`): C = A @ B + bias, a (n,) bf16 bias added in our GEMM's epilogue
(`fused(m, n, bias=...)`, the configuration the model picks for a kernel with an epilogue)
against `torch.addmm(bias, A, B)`, which cuBLASLt runs with its bias epilogue: what an
nn.Linear with a bias costs on either side. Figures under `gemm_random_bias_seed<S>_...`.
"""

from __future__ import annotations

import concurrent.futures
import math
import multiprocessing
import os
import random
import time
from collections.abc import Callable
from typing import Any

from gemm_sweep import Problem, blocking_timer, cupy_view, geomean, operand_sets

LLM_HIDDEN = (4096, 8192, 3584)
LLM_INTERMEDIATE = (11008, 14336, 28672, 18944)
M_RANGE = (1, 16384)
NK_RANGE = (256, 32768)
DEVICE_COPY_BYTES_PER_S = 4.04e12  # the H200's device copy (../shared/DESIGN.md): when none was measured
SMALL_M = 64  # problems with at most this many rows are bandwidth-bound: their share of a copy's is reported
COPY_BYTES = 1 << 28  # per buffer of the copy timed for the m <= 64 ceiling: five times an H200's L2
BLOCK_MS = 8.0  # GPU time per timed block (kernel-only)
CALL_ITERS = (3, 30)  # user-call launches per block, at least / at most
ROUNDS = 3
TOLERANCE = 1e-2
EPILOGUES = ("bias",)  # --epilogue: what the GEMM adds to A @ B in its epilogue (and the peer in cuBLASLt's)


def _log_uniform(rng: random.Random, lo: float, hi: float) -> float:
    return math.exp(rng.uniform(math.log(lo), math.log(hi)))


def _multiple_of_8(rng: random.Random, lo: int, hi: int) -> int:
    return min(hi, max(lo, 8 * round(_log_uniform(rng, lo, hi) / 8)))


def tuned_shapes() -> set[tuple[int, int, int]]:
    """(m, n, k) of every entry of the tuned table, on any device, in either layout."""
    from mgpu_lab.kernels.gemm.configs import tuned_table

    shapes = set()
    for entries in tuned_table().values():
        for key in entries:
            m, n, k = (int(x) for x in key.rsplit("_", 1)[1].split("x"))
            shapes.add((m, n, k))
    return shapes


def random_problems(count: int, seed: int, exclude: set[tuple[int, int, int]] | None = None) -> list[Problem]:
    """`count` distinct problems drawn from `seed` (see the module doc), none in `exclude`
    (default: the tuned table's shapes)."""
    if not isinstance(count, int) or count < 0:
        raise ValueError(f"random_problems: count must be an int >= 0, got {count!r}")
    exclude = tuned_shapes() if exclude is None else exclude
    rng = random.Random(seed)
    problems: list[Problem] = []
    seen: set[tuple[int, int, int, bool]] = set()
    while len(problems) < count:
        m = min(M_RANGE[1], max(M_RANGE[0], round(_log_uniform(rng, *M_RANGE))))
        if rng.random() < 0.5:
            hidden, inter = rng.choice(LLM_HIDDEN), rng.choice(LLM_INTERMEDIATE)
            up = rng.random() < 0.5
            n, k = (inter, hidden) if up else (hidden, inter)
            label = f"llm {'up' if up else 'down'} h{hidden} i{inter}"
        else:
            n, k = _multiple_of_8(rng, *NK_RANGE), _multiple_of_8(rng, *NK_RANGE)
            label = "log-uniform"
        transpose_b = rng.random() < 0.5
        if (m, n, k) in exclude or (m, n, k, transpose_b) in seen:
            continue
        seen.add((m, n, k, transpose_b))
        problems.append(Problem(m, n, k, transpose_b, f"{label}{', B (n, k)' if transpose_b else ''}"))
    return problems


def figure_prefix(seed: int, epilogue: str | None = None) -> str:
    """The record's figure prefix of a seed's run (with --epilogue: `gemm_random_<epilogue>_seed<S>`)."""
    return f"gemm_random_{epilogue}_seed{seed}" if epilogue else f"gemm_random_seed{seed}"


def tag(seed: int, p: Problem, epilogue: str | None = None) -> str:
    return f"{figure_prefix(seed, epilogue)}_{p.key}_{'nt' if p.transpose_b else 'nn'}"


def make_ours(m: int, n: int, k: int, transpose_b: bool, epilogue: str | None = None) -> Any:
    """Our GEMM of the shape as a user makes it: plain, or with `epilogue` (EPILOGUES) fused."""
    from mgpu_lab.kernels.gemm import fused, make_gemm

    if epilogue is None:
        return make_gemm(m, n, k, transpose_b=transpose_b)
    if epilogue not in EPILOGUES:
        raise ValueError(f"epilogue: expected one of {EPILOGUES} or None, got {epilogue!r}")
    e = fused(m, n, bias="bfloat16")
    return make_gemm(m, n, k, transpose_b=transpose_b, epilogue=e.fn, epilogue_inputs=e.inputs)


def scheme(config: dict) -> tuple:
    """What tells two configurations' kernels apart (tiles, block scheme, split, clusters, swap),
    defaults filled in: the same for a pick, a built kernel's tiling and a record's config."""
    return (config.get("tile_m"), config.get("tile_n"), config.get("persistent") or False,
            config.get("split_k", 1) or 1, config.get("cluster_m", 1) or 1, config.get("cluster_n", 1) or 1,
            bool(config.get("swap_ab")), config.get("team_m", 1) or 1)


def built_config(kernel: Any, picked: dict) -> dict:
    """The configuration the kernel was built with (its tiling), with the pick's source, and its
    estimate where the kernel is the pick: a kernel with an epilogue may take another
    configuration than `gemm_config` gives the plain problem (and a model switch may move it)."""
    tiling = (getattr(kernel, "config", None) or {}).get("tiling")
    if tiling is None:  # the padded path's program: the pick is what its inner kernel built
        return picked
    built = {"tile_m": tiling.tile_m, "tile_n": tiling.tile_n, "persistent": tiling.persistent,
             "group_m": tiling.group_m}
    for key, default in (("split_k", 1), ("cluster_m", 1), ("cluster_n", 1), ("swap_ab", False), ("team_m", 1)):
        if getattr(tiling, key, default) != default:
            built[key] = getattr(tiling, key)
    if tiling.split_k > 1:
        built["split_k_reduce"] = tiling.split_k_reduce
    same = scheme(picked) == scheme(built)
    extra = {"source": picked.get("source")} | ({"model_us": picked["model_us"]} if same and "model_us" in picked
                                                else {})
    return built | extra


def _build(m: int, n: int, k: int, transpose_b: bool, epilogue: str | None = None) -> tuple[dict, float]:
    """In a pool worker: the configuration the kernel was built with and the host time of the
    cold build (which fills the on-disk kernel cache for the timing process). That time (records'
    `*_cold_build_s`) is taken with several workers building at once, a worker's first build also
    paying its import and CUDA start: 2.6-3.9 s for the slowest shapes on the H200 host where
    `bench_build_time.py`, one build at a time after the first, read at most 0.75 s. The issue's
    build target is the latter's."""
    from mgpu_lab.kernels.gemm.configs import gemm_config

    t0 = time.perf_counter()
    picked = gemm_config(m, n, k, transpose_b=transpose_b, table=False, epilogue=epilogue is not None)
    kernel = make_ours(m, n, k, transpose_b, epilogue)
    return built_config(kernel, picked), time.perf_counter() - t0


def build_all(problems: list[Problem], workers: int,
              build: Callable[[int, int, int, bool], tuple[dict, float]] = _build) -> dict[Problem, tuple[dict, float] | str]:
    """Every problem's kernel built in a spawned process pool: (config, build seconds) or the error.
    `build(m, n, k, transpose_b)` must be picklable (a module-level function or a partial of one)."""
    out: dict[Problem, tuple[dict, float] | str] = {}
    context = multiprocessing.get_context("spawn")  # no CUDA state is forked
    with concurrent.futures.ProcessPoolExecutor(max_workers=workers, mp_context=context) as pool:
        futures = {pool.submit(build, p.m, p.n, p.k, p.transpose_b): p for p in problems}
        for future in concurrent.futures.as_completed(futures):
            try:
                out[futures[future]] = future.result()
            except Exception as e:  # noqa: BLE001 - one shape's failure is a figure
                out[futures[future]] = f"{type(e).__name__}: {e}"
    return out


def _iters(ms: float, budget_ms: float, lo: int, hi: int) -> int:
    return max(lo, min(hi, round(budget_ms / max(ms, 1e-3))))


def kernel_only_timer(estimate_ms: float):
    """The kernel-only block timer for one shape: launches for about BLOCK_MS of GPU time queued
    behind a blocking kernel (gemm_sweep.blocking_timer), fewer warm-ups for long launches."""
    iters = _iters(estimate_ms, BLOCK_MS, 2, 100)
    return blocking_timer(iters, warmup=1 if iters <= 3 else 3)


def shape_gpu_figures(name: str, summary: dict) -> dict:
    """The median SM clock and board power while one shape was timed (a GpuSampler summary)."""
    return {f"{name}_sm_clock_mhz": (summary.get("sm_clock_mhz") or {}).get("median"),
            f"{name}_power_w": (summary.get("power_w") or {}).get("median")}


def same_bytes_copy_ms(p: Problem, sources: list[Any], estimate_ms: float) -> float:
    """Kernel-only time of a device copy that moves as many bytes as the GEMM (reads and writes
    half each), from the operand sets' B in turn as the GEMM rotates them: a small problem's
    ceiling with its own launch and ramp, where the 256 MiB copy's bandwidth is out of reach."""
    import torch

    elements = min(moved_bytes(p) // 4, min(b.numel() for b in sources))
    srcs = [b.reshape(-1)[:elements] for b in sources]
    dst = torch.empty(elements, dtype=torch.bfloat16, device="cuda")
    timing = kernel_only_timer(estimate_ms)(lambda i: dst.copy_(srcs[i % len(srcs)]))
    return timing.median_ms


def time_problem(seed: int, p: Problem, built: tuple[dict, float], figures: dict, rows: list, rounds: int,
                 sampler_cls: Any, epilogue: str | None = None) -> float | None:
    """Check and time one problem; its kernel-only ratio (cuBLAS time / ours), None when wrong.
    epilogue='bias': ours with the bias in its epilogue against torch.addmm (cuBLASLt's)."""
    import torch

    from mgpu_lab.builder.dtypes import numpy_dtype
    from mgpu_lab.runtime.timing import time_cuda

    from common import interleaved_rounds

    config, cold_s = built
    name = tag(seed, p, epilogue)
    bf16 = numpy_dtype("bfloat16")
    t0 = time.perf_counter()
    kern = make_ours(p.m, p.n, p.k, p.transpose_b, epilogue)
    figures[f"{name}_build_s"] = time.perf_counter() - t0
    figures[f"{name}_cold_build_s"] = cold_s
    figures[f"{name}_config"] = config
    sets = operand_sets(p, torch, torch.bfloat16, seed=seed * 100_003 + p.m + 7 * p.n + 13 * p.k)
    views = [(cupy_view(a, bf16), cupy_view(b, bf16)) for a, b in sets]
    extra = ()  # the epilogue's inputs after a and b: a fresh bias
    if epilogue == "bias":
        generator = torch.Generator(device="cuda").manual_seed(seed * 7 + p.n)
        extra = (torch.randn(p.n, device="cuda", generator=generator).to(torch.bfloat16),)
    extra_views = tuple(cupy_view(x, bf16) for x in extra)
    ours_out = torch.empty((p.m, p.n), dtype=torch.bfloat16, device="cuda")
    out_view = cupy_view(ours_out, bf16)
    peer_out = torch.empty((p.m, p.n), dtype=torch.bfloat16, device="cuda")
    a0, b0 = sets[0]
    want = torch.matmul(a0.float(), b0.float().T if p.transpose_b else b0.float())
    if extra:
        want += extra[0].float()
    ours_out.fill_(float("nan"))
    kern(*views[0], *extra_views, out=out_view)
    err = float((ours_out.float() - want).norm() / want.norm())
    called = kern(a0, b0, *extra)  # the user's call path: torch in, torch out
    call_err = float((called.float() - want).norm() / want.norm())
    del want, called
    figures[f"{name}_rel_error"] = err
    if not (err <= TOLERANCE and call_err <= TOLERANCE):
        figures[f"{name}_error"] = f"relative error {err:.3g} (user call {call_err:.3g}): not timed"
        rows.append((p.key, p.label, "WRONG", f"{err:.2g}", "", "", "", ""))
        return None
    count = len(sets)
    launch = kern.launch_unchecked

    def ours(i: int) -> None:
        a, b = views[i % count]
        launch(a, b, *extra_views, out_view)

    def peer(i: int) -> None:
        a, b = sets[i % count]
        if extra:
            torch.addmm(extra[0], a, b.T if p.transpose_b else b, out=peer_out)
        else:
            torch.matmul(a, b.T if p.transpose_b else b, out=peer_out)

    def ours_call(i: int) -> None:
        a, b = sets[i % count]
        kern(a, b, *extra)

    def peer_call(i: int) -> None:
        a, b = sets[i % count]
        if extra:
            torch.addmm(extra[0], a, b.T if p.transpose_b else b)
        else:
            torch.matmul(a, b.T if p.transpose_b else b)

    estimate_ms = p.estimate_ms()
    with sampler_cls() as gpu:
        kernel_only = interleaved_rounds(ours, peer, rounds, timer=kernel_only_timer(estimate_ms))
        call_iters = _iters(estimate_ms, BLOCK_MS, *CALL_ITERS)
        user = interleaved_rounds(ours_call, peer_call, rounds,
                                  timer=lambda fn: time_cuda(fn, warmup=2, iters=call_iters))
        if p.m <= SMALL_M:
            try:
                figures[f"{name}_same_bytes_copy_us"] = same_bytes_copy_ms(p, [b for _, b in sets], estimate_ms) * 1e3
            except Exception as e:  # noqa: BLE001 - a side figure: the shape's own times still count
                figures[f"{name}_same_bytes_copy_error"] = f"{type(e).__name__}: {e}"
    ratio = kernel_only.b_ms / kernel_only.a_ms
    call_ratio = user.b_ms / user.a_ms
    summary = gpu.summary()
    figures.update({
        f"{name}_kernel_vs_cublas": ratio, f"{name}_ours_us": kernel_only.a_ms * 1e3,
        f"{name}_cublas_us": kernel_only.b_ms * 1e3, f"{name}_call_vs_cublas": call_ratio,
        f"{name}_call_ours_us": user.a_ms * 1e3, f"{name}_call_cublas_us": user.b_ms * 1e3,
        f"{name}_ours_tflops": p.flops / kernel_only.a_ms / 1e9, **shape_gpu_figures(name, summary)})
    rows.append((p.key, p.label, f"{kernel_only.a_ms * 1e3:.1f}", f"{kernel_only.b_ms * 1e3:.1f}", f"{ratio:.3f}",
                 f"{call_ratio:.3f}", describe(config), f"{err:.1e}"))
    return ratio


def describe(config: dict) -> str:
    scheme = {True: " persistent", "pingpong": " pingpong", "stream_k": " stream-K"}.get(config.get("persistent"), "")
    if config.get("swap_ab"):
        scheme += " swap_ab"
    if config.get("cluster_m", 1) > 1:
        scheme += " multicast"
    if config.get("split_k", 1) > 1:
        scheme += f" split_k={config['split_k']} {config.get('split_k_reduce', 'cluster')}"
    if config.get("group_m", 8) != 8:
        scheme += f" group_m={config['group_m']}"
    return f"{config['tile_m']}x{config['tile_n']}{scheme} {config.get('source', '')}"


def percentile(values: list[float], q: float) -> float:
    """The q-th percentile (linear interpolation between order statistics)."""
    s = sorted(values)
    if not s:
        return float("nan")
    pos = (len(s) - 1) * q / 100
    lo = math.floor(pos)
    hi = min(lo + 1, len(s) - 1)
    return s[lo] + (s[hi] - s[lo]) * (pos - lo)


def ratio_totals(prefix: str, peer: str, ratios: list[float]) -> dict[str, float]:
    """`<prefix>_geomean_vs_<peer>`, `_p10_vs_<peer>` and `_min_vs_<peer>` of non-empty ratios."""
    return {f"{prefix}_geomean_vs_{peer}": geomean(ratios), f"{prefix}_p10_vs_{peer}": percentile(ratios, 10),
            f"{prefix}_min_vs_{peer}": min(ratios)}


def moved_bytes(p: Problem) -> int:
    """Bytes a bf16 GEMM must move at least: A and B read once, C written once."""
    return (p.m * p.k + p.n * p.k + p.m * p.n) * 2


def device_copy_bytes_per_s() -> float:
    """This GPU's device-to-device copy bandwidth, read + write bytes per second: the median of
    ten CUDA-event timings of `cupy.copyto` between two 256 MiB buffers (beyond L2), after warm-up.
    The m <= 64 ceiling is measured on the GPU that runs the shapes, not taken from an H200."""
    import cupy

    from mgpu_lab.runtime.timing import time_cuda

    src = cupy.random.default_rng(0).random(COPY_BYTES // 4, dtype=cupy.float32)
    dst = cupy.full_like(src, cupy.nan)
    timing = time_cuda(lambda i: cupy.copyto(dst, src), warmup=3, iters=10)
    if not bool(cupy.array_equal(dst, src)):
        raise RuntimeError("device copy: the destination does not match the source")
    return 2 * COPY_BYTES / (timing.median_ms * 1e-3)


def summarize(seed: int, problems: list[Problem], figures: dict, rows: list, epilogue: str | None = None,
              copy_bytes_per_s: float = DEVICE_COPY_BYTES_PER_S) -> None:
    """Totals: geomean, 10th percentile and min of the kernel-only ratio, the user-call geomean,
    and the m <= 64 subset with its achieved bandwidth as a share of the device copy's
    (`copy_bytes_per_s`: the one measured in the run, else the H200's)."""
    prefix = figure_prefix(seed, epilogue)
    ratios, calls, small, shares, same_shares = [], [], [], [], []
    for p in problems:
        name = tag(seed, p, epilogue)
        if f"{name}_kernel_vs_cublas" not in figures:
            continue
        ratios.append(figures[f"{name}_kernel_vs_cublas"])
        calls.append(figures[f"{name}_call_vs_cublas"])
        if p.m <= SMALL_M:
            small.append(figures[f"{name}_kernel_vs_cublas"])
            share = moved_bytes(p) / (figures[f"{name}_ours_us"] * 1e-6) / copy_bytes_per_s
            figures[f"{name}_bandwidth_share_of_copy"] = share
            shares.append(share)
            if f"{name}_same_bytes_copy_us" in figures:
                same = figures[f"{name}_same_bytes_copy_us"] / figures[f"{name}_ours_us"]
                figures[f"{name}_bandwidth_share_of_same_bytes_copy"] = same
                same_shares.append(same)
    figures[f"{prefix}_shapes_timed"] = len(ratios)
    figures[f"{prefix}_shapes_drawn"] = len(problems)
    if ratios:
        figures.update(ratio_totals(prefix, "cublas", ratios))
        figures[f"{prefix}_call_geomean_vs_cublas"] = geomean(calls)
        rows.append(("total", f"{len(ratios)} shapes", "", "", f"geomean {geomean(ratios):.3f}",
                     f"call {geomean(calls):.3f}", f"p10 {percentile(ratios, 10):.3f} min {min(ratios):.3f}", ""))
    if small:
        figures.update({f"{prefix}_m64_geomean_vs_cublas": geomean(small), f"{prefix}_m64_min_vs_cublas": min(small),
                        f"{prefix}_m64_bandwidth_share_of_copy_geomean": geomean(shares),
                        f"{prefix}_m64_shapes": len(small)})
        same = f", {geomean(same_shares):.0%} of a same-bytes copy's" if same_shares else ""
        if same_shares:
            figures[f"{prefix}_m64_bandwidth_share_of_same_bytes_copy_geomean"] = geomean(same_shares)
        rows.append(("m <= 64", f"{len(small)} shapes", "", "", f"geomean {geomean(small):.3f}",
                     f"min {min(small):.3f}", f"bandwidth {geomean(shares):.0%} of copy{same}", ""))


def model_configs_only() -> None:
    """Switch the tuned table off for this process and the build workers it spawns (they inherit
    the environment): the performance model alone configures every shape."""
    from mgpu_lab.kernels.gemm.configs import MODEL_ENV, TABLE_ENV

    os.environ[TABLE_ENV] = "0"
    # (the model is the default; MGPU_LAB_GEMM_MODEL=0 in the environment measures the old heuristic)
    os.environ.setdefault(MODEL_ENV, "1")


def default_workers() -> int:
    return max(1, min(16, (os.cpu_count() or 2) - 1))


def time_all(problems: list[Problem], built: dict[Problem, tuple[dict, float] | str], name_of: Callable[[Problem], str],
             time_one: Callable[[Problem, tuple[dict, float]], object], figures: dict, rows: list,
             deadline: float = float("inf")) -> None:
    """`time_one(p, built[p])` for each problem until the deadline; a build error or an exception
    is recorded under `<name_of(p)>_error` and a table row, and the run goes on."""
    import torch

    for p in problems:
        name = name_of(p)
        if time.perf_counter() > deadline:
            figures.setdefault("skipped_for_time", []).append(name)
            continue
        result = built[p]
        if isinstance(result, str):
            figures[f"{name}_error"] = f"build: {result}"
            rows.append((p.key, p.label, "BUILD ERROR", result[:60], "", "", "", ""))
            continue
        try:
            time_one(p, result)
        except Exception as e:  # noqa: BLE001 - one shape's failure is a figure, not the end of the run
            figures[f"{name}_error"] = f"{type(e).__name__}: {e}"
            rows.append((p.key, p.label, "ERROR", type(e).__name__, "", "", "", ""))
        torch.cuda.empty_cache()


def run_random(count: int, seed: int, figures: dict, rows: list, *, rounds: int = ROUNDS,
               deadline: float = float("inf"), workers: int | None = None,
               epilogue: str | None = None) -> list[Problem]:
    """Draw, build (process pool), check and time `count` shapes; totals into figures.
    epilogue: None (C = A @ B against torch.matmul) or one of EPILOGUES."""
    import functools

    from common import GpuSampler

    if epilogue is not None and epilogue not in EPILOGUES:
        raise ValueError(f"epilogue: expected one of {EPILOGUES} or None, got {epilogue!r}")
    model_configs_only()
    problems = random_problems(count, seed)
    t0 = time.perf_counter()
    built = build_all(problems, workers or default_workers(), functools.partial(_build, epilogue=epilogue))
    figures[f"{figure_prefix(seed, epilogue)}_build_wall_s"] = time.perf_counter() - t0
    try:
        copy_bytes_per_s = device_copy_bytes_per_s()
        figures[f"{figure_prefix(seed, epilogue)}_device_copy_bytes_per_s"] = copy_bytes_per_s
    except Exception as e:  # noqa: BLE001 - the ceiling is a side figure: the shapes are still timed
        figures[f"{figure_prefix(seed, epilogue)}_device_copy_error"] = f"{type(e).__name__}: {e}"
        copy_bytes_per_s = DEVICE_COPY_BYTES_PER_S
    time_all(problems, built, lambda p: tag(seed, p, epilogue),
             lambda p, result: time_problem(seed, p, result, figures, rows, rounds, GpuSampler, epilogue),
             figures, rows, deadline)
    summarize(seed, problems, figures, rows, epilogue, copy_bytes_per_s)
    return problems
