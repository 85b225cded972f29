"""The GEMM sweep: our bf16 GEMM (mgpu_lab/kernels/gemm/kernel.py) against torch.matmul (cuBLAS) on 28 problems
(squares 1024..16384, 8B/70B-class LLM projections at M = 16..16384, the issue's shapes, ragged
ones), and our FP8 e4m3 GEMM against torch._scaled_mm (cuBLASLt, fast accumulation: ours has no
fp32 promotion either) on 8, all on the same inputs in the same run.

Each problem uses the configuration `gemm_config` gives it: the tuned table
(mgpu_lab/kernels/gemm/configs.json, written by benchmarks/tune_gemm_configs.py) or, for shapes
it lacks, the heuristic; the record says which. Every result is checked against a float32
matmul before it is timed. Timing: ours and the peer alternate in rounds A B, B A, A B, ...
(common.interleaved_rounds), each block a run of launches queued behind a blocking kernel
(gemm_sweep.blocking_timer) with CUDA events around each launch; inputs rotate through sets
larger than L2. The SM clock and power are sampled throughout (common.GpuSampler).

Figures: `gemm_bf16_<M>x<N>x<K>_vs_cublas` and `gemm_fp8_<M>x<N>x<K>_vs_scaled_mm` (cuBLAS time /
our time: above 1 means ours is faster), `gemm_sweep_geomean_vs_cublas`, `gemm_sweep_min_vs_cublas`,
`gemm_fp8_sweep_geomean_vs_scaled_mm`, `gemm_fp8_sweep_min_vs_scaled_mm`, TFLOP/s of both sides,
relative errors, configurations. `--extras` adds the older figures (scaled_add vs a device copy,
Pallas Mosaic GPU's matmul at 4096^3 and 8192^3); `--compare-persistent` also times, where the tiles
take more than one wave, the same tiles with the other block scheme (persistent or one tile per
block), so the record shows whether the persistent kernel pays.

Run on a GPU machine:  python benchmarks/bench_gemm.py [--quick] [--no-fp8] [--extras] [--no-split-k]
Writes a `gemm` record under benchmarks/results/ (or $OUT) and prints a table last.

Random shapes (gemm_random.py: the distribution, what is timed):
    python benchmarks/bench_gemm.py --random 64 --seed 7      # ~8 minutes on an H200
    python benchmarks/bench_gemm.py --random 64 --seed 7 --quick   # 6 of those shapes, 2 rounds: a smoke check
draws the shapes from the seed, drops the tuned table's, switches the table off (the model's
configurations alone) and writes a `gemm_random` record: per shape kernel-only and user-call
time against cuBLAS, the configuration, SM clock and power; `gemm_random_seed<S>_geomean_vs_cublas`,
`_p10_vs_cublas`, `_min_vs_cublas`, `_call_geomean_vs_cublas`, and the m <= 64 subset
(`_m64_geomean_vs_cublas`, `_m64_bandwidth_share_of_copy_geomean`: bytes moved over our time against
the run's own 256 MiB device copy, `_device_copy_bytes_per_s`; and
`_m64_bandwidth_share_of_same_bytes_copy_geomean`: a copy of as many bytes, timed beside each
shape, over our time).

    python benchmarks/bench_gemm.py --random 32 --seed 7 --epilogue bias   # + a bias, against torch.addmm
the same with a (n,) bias added in our epilogue, against cuBLASLt's bias epilogue (torch.addmm):
an nn.Linear with a bias; figures `gemm_random_bias_seed<S>_...`.

    python benchmarks/bench_gemm.py --random 32 --seed 7 --fp8         # FP8, per-tensor scales
    python benchmarks/bench_gemm.py --random 32 --seed 7 --fp8 block   # FP8, 1x128 / 128x128 block scales
the same draw made FP8-legal (gemm_fp8_random.py), against torch._scaled_mm; a `gemm_fp8_random`
record: `gemm_fp8_<mode>_random_seed<S>_geomean_vs_scaled_mm`, `_p10_`, `_min_`, per shape the peer
that ran and both relative errors.
"""

from __future__ import annotations

import argparse
import sys
import time

import numpy as np
from common import GpuSampler, interleaved_rounds, table, write_record
from gemm_random import EPILOGUES
from gemm_random import describe as _describe
from gemm_sweep import (
    Problem,
    bf16_problems,
    blocking_timer,
    cupy_view,
    fp8_problems,
    geomean,
    iterations,
    operand_sets,
)

from mgpu_lab.builder.dtypes import numpy_dtype
from mgpu_lab.kernels.gemm import make_gemm
from mgpu_lab.kernels.gemm.configs import SMS, gemm_config, kernel_options
from mgpu_lab.kernels.gemm.fp8 import make_fp8_gemm
from mgpu_lab.examples.scaled_add import make_scaled_add
from mgpu_lab.runtime.timing import time_cuda

ROTATE = 3
DEADLINE = [float("inf")]  # perf_counter() after which no new problem starts (--budget-s)
TOLERANCE = {"bf16": 1e-2, "fp8": 2e-2}  # fp8 wgmma sums carry ~14 bits


def _rounds(p: Problem, quick: bool) -> int:
    """A B B A at least; 10 rounds (about half a second a side) where a launch is short: with 4,
    three back-to-back sweeps gave a 4000^3 problem 0.93, 0.98 and 1.01 (the H200's clock moves
    within a 25 ms block)."""
    if quick:
        return 2
    return 10 if p.estimate_ms() < 4 else 4


NO_SPLIT_K = [False]  # --no-split-k: one-slice GEMMs only (set by main)


def _config(p: Problem, dtype: str) -> dict:
    picked = gemm_config(p.m, p.n, p.k, transpose_b=p.transpose_b, dtype=dtype)
    keys = ("tile_m", "tile_n", "stages", "group_m", "persistent", "cluster_m", "split_k", "split_k_reduce", "swap_ab")
    config = {key: picked[key] for key in keys if key in picked} | {"source": picked["source"]}
    if NO_SPLIT_K[0]:
        config.pop("split_k_reduce", None)
        config["split_k"] = 1
    return config


def _sweep(problems: list[Problem], figures: dict, rows: list, kind: str, one) -> list[float]:
    """`one(p)` for each problem while the time budget lasts (a cut run still writes its record);
    a problem that raises is recorded and the sweep goes on. Returns the ratios measured."""
    import torch

    ratios = []
    for p in problems:
        if time.perf_counter() > DEADLINE[0]:
            figures.setdefault("skipped_for_time", []).append(f"{kind} {p.key}")
            continue
        try:
            ratio = one(p)
        except Exception as e:  # noqa: BLE001 - one problem's failure is a figure, not the end of the sweep
            figures.setdefault("errors", []).append(f"{kind} {p.key}: {type(e).__name__}: {e}")
            rows.append((f"{kind} {p.key}", p.label, "ERROR", type(e).__name__, "", "", ""))
            ratio = None
        torch.cuda.empty_cache()
        if ratio is not None:
            ratios.append(ratio)
    return ratios


def _relative_error(got, want) -> float:
    return float((got.float() - want).norm() / want.norm())


def bf16_sweep(figures: dict, rows: list, problems: list[Problem], quick: bool,
               compare_persistent: bool = False) -> list[float]:
    """Time each problem's configured kernel against cuBLAS; with compare_persistent, also the
    same tiles with the other block scheme (persistent or one tile per block) where the tiles
    take more than one wave (`<tag>_persistent_vs_cublas` / `<tag>_one_tile_vs_cublas`)."""
    return _sweep(problems, figures, rows, "bf16",
                  lambda p: _bf16_problem(p, figures, rows, quick, compare_persistent))


def bf16_tag(p: Problem) -> str:
    """The figures' key prefix of a bf16 problem: squares run in both layouts, so the C = A @ B.T
    ones get `_nt` (records up to commit 35dda3f hold the .T square's figures under the plain key,
    which the C = A @ B square's had been written to first; its layout keys `gemm_*_nn_<size>`
    were always right)."""
    square_nt = p.transpose_b and p.m == p.n == p.k
    return f"gemm_bf16_{p.key}" + ("_nt" if square_nt else "")


def _bf16_problem(p: Problem, figures: dict, rows: list, quick: bool, compare_persistent: bool) -> float | None:
    """One bf16 problem: build, check, time against cuBLAS; the ratio (None when wrong)."""
    import torch

    bf16 = numpy_dtype("bfloat16")
    config = _config(p, "bfloat16")
    tag = bf16_tag(p)
    settings = kernel_options(config)
    t0 = time.perf_counter()
    kern = make_gemm(p.m, p.n, p.k, transpose_b=p.transpose_b, **settings)
    figures[f"{tag}_build_s"] = time.perf_counter() - t0
    figures[f"{tag}_config"] = config
    sets = operand_sets(p, torch, torch.bfloat16, seed=p.m + p.n + p.k)
    views = [(cupy_view(a, bf16), cupy_view(b, bf16)) for a, b in sets]
    ours_out = torch.empty((p.m, p.n), dtype=torch.bfloat16, device="cuda")
    out_view = cupy_view(ours_out, bf16)
    peer_out = torch.empty((p.m, p.n), dtype=torch.bfloat16, device="cuda")
    a0, b0 = sets[0]
    want = a0.float() @ (b0.float().T if p.transpose_b else b0.float())
    n = len(sets)

    def peer(i: int) -> None:
        a, b = sets[i % n]
        torch.matmul(a, b.T if p.transpose_b else b, out=peer_out)

    def measure(kernel, name: str, label: str) -> float | None:
        """peer time / our time, after checking the result (None when wrong)."""
        ours_out.fill_(float("nan"))
        kernel(*views[0], out=out_view)
        err = _relative_error(ours_out, want)
        figures[f"{name}_rel_error"] = err
        if not err <= TOLERANCE["bf16"]:
            figures[f"{name}_error"] = f"relative error {err:.3g}: not timed"
            rows.append((f"bf16 {p.key}", p.label, "WRONG", f"rel err {err:.2g}", "", label, ""))
            return None
        launch = getattr(kernel, "launch_unchecked", None)

        def ours(i: int) -> None:
            a, b = views[i % n]
            launch(a, b, out_view) if launch else kernel(a, b, out=out_view)

        result = interleaved_rounds(ours, peer, _rounds(p, quick), timer=blocking_timer(iterations(p)))
        ratio = result.b_ms / result.a_ms
        figures[f"{name}_vs_cublas"] = ratio
        figures[f"{name}_ours_tflops"] = p.flops / result.a_ms / 1e9
        figures[f"{name}_cublas_tflops"] = p.flops / result.b_ms / 1e9
        rows.append((f"bf16 {p.key}", p.label, f"{p.flops / result.a_ms / 1e9:.0f}",
                     f"{p.flops / result.b_ms / 1e9:.0f}", f"{ratio:.3f}", label, f"{err:.1e}"))
        return ratio

    ratio = measure(kern, tag, _describe(config))
    if ratio is not None and p.m == p.n == p.k and p.m in (4096, 8192):  # the keys make_table.py reads
        layout = "nt" if p.transpose_b else "nn"
        figures[f"gemm_tflops_{layout}_{p.m}"] = figures[f"{tag}_ours_tflops"]
        figures[f"gemm_tflops_torch_{layout}_{p.m}"] = figures[f"{tag}_cublas_tflops"]
        figures[f"gemm_ours_vs_torch_{layout}_{p.m}"] = ratio
    tiles = -(-p.m // config["tile_m"]) * -(-p.n // config["tile_n"])
    if compare_persistent and tiles > SMS and not config.get("swap_ab"):
        other = not config.get("persistent", False)
        alternative = make_gemm(p.m, p.n, p.k, transpose_b=p.transpose_b, **{**settings, "persistent": other, "cluster_m": 1,
                                                                             "stages": None, "split_k": 1})
        measure(alternative, f"{tag}_{'persistent' if other else 'one_tile'}",
                f"{config['tile_m']}x{config['tile_n']} {'persistent' if other else 'one tile'} (compare)")
    return ratio


def fp8_sweep(figures: dict, rows: list, problems: list[Problem], quick: bool) -> list[float]:
    """Time each problem's FP8 kernel against torch._scaled_mm."""
    return _sweep(problems, figures, rows, "fp8", lambda p: _fp8_problem(p, figures, rows, quick))


def _fp8_problem(p: Problem, figures: dict, rows: list, quick: bool) -> float | None:
    """One FP8 problem: build, check, time against _scaled_mm; the ratio (None when wrong)."""
    import cupy
    import torch

    config = _config(p, "float8_e4m3fn")
    tag = f"gemm_fp8_{p.key}"
    kern = make_fp8_gemm(p.m, p.n, p.k, **kernel_options(config))
    sets = operand_sets(p, torch, torch.float8_e4m3fn, seed=p.k)
    views = [(cupy_view(a, np.uint8), cupy_view(b, np.uint8)) for a, b in sets]
    scale_a, scale_b = torch.tensor(0.05, device="cuda"), torch.tensor(0.02, device="cuda")
    ours_scales = (cupy.asarray([0.05], np.float32), cupy.asarray([0.02], np.float32))
    ours_out = torch.full((p.m, p.n), float("nan"), dtype=torch.bfloat16, device="cuda")
    out_view = cupy_view(ours_out, numpy_dtype("bfloat16"))
    kern(*views[0], *ours_scales, out=out_view)
    a0, b0 = sets[0]
    want = (a0.float() @ b0.float().T) * (0.05 * 0.02)
    err = _relative_error(ours_out, want)
    del want
    figures[f"{tag}_rel_error"] = err
    figures[f"{tag}_config"] = config
    if not err <= TOLERANCE["fp8"]:
        figures[f"{tag}_error"] = f"relative error {err:.3g}: not timed"
        rows.append((f"fp8 {p.key}", p.label, "WRONG", f"rel err {err:.2g}", "", "", ""))
        return None
    n = len(sets)

    def ours(i: int) -> None:
        a, b = views[i % n]
        kern.launch_unchecked(a, b, *ours_scales, out_view)

    def peer(i: int) -> None:
        a, b = sets[i % n]
        torch._scaled_mm(a, b.t(), scale_a=scale_a, scale_b=scale_b, out_dtype=torch.bfloat16,
                         use_fast_accum=True)

    result = interleaved_rounds(ours, peer, _rounds(p, quick), timer=blocking_timer(iterations(p, 1)))
    ratio = result.b_ms / result.a_ms
    figures[f"{tag}_vs_scaled_mm"] = ratio
    figures[f"{tag}_ours_tflops"] = p.flops / result.a_ms / 1e9
    figures[f"{tag}_scaled_mm_tflops"] = p.flops / result.b_ms / 1e9
    rows.append((f"fp8 {p.key}", p.label, f"{p.flops / result.a_ms / 1e9:.0f}",
                 f"{p.flops / result.b_ms / 1e9:.0f}", f"{ratio:.3f}",
                 _describe(config), f"{err:.1e}"))
    return ratio


def pallas_peer(figures: dict, rows: list, size: int) -> None:
    """JAX's Pallas Mosaic GPU Hopper matmul, best of a few configurations (wall-clock batches:
    JAX runs on its own stream, so CuPy events cannot bracket it)."""
    import dataclasses
    import inspect
    import itertools

    import jax
    import jax.numpy as jnp
    from jax.experimental.pallas.ops.gpu import hopper_matmul_mgpu as hm

    ka, kb = jax.random.split(jax.random.key(0))
    a = jax.random.normal(ka, (size, size), jnp.bfloat16)
    b = jax.random.normal(kb, (size, size), jnp.bfloat16)
    fields = {f.name for f in dataclasses.fields(hm.TuningConfig)}
    takes_c = "c" in inspect.signature(hm.matmul).parameters
    best, tried, errors = 0.0, 0, []
    first_call = None
    for tile_m, tile_n, steps, wg in itertools.product((128,), (128, 256), (2, 3, 4, 5), ("M", "N")):
        want = dict(tile_m=tile_m, tile_n=tile_n, tile_k=64, max_concurrent_steps=steps, epi_tile_n=64,
                    epi_tile_m=64, grid_minor_dim=hm.MatmulDimension.N, grid_tile_width=8,
                    wg_dimension=getattr(hm.MatmulDimension, wg), cluster_dimension=None)
        config = hm.TuningConfig(**{k: v for k, v in want.items() if k in fields})
        try:
            f = jax.jit(lambda x, y, config=config: hm.matmul(x, y, None, config=config) if takes_c
                        else hm.matmul(x, y, config=config))
            t0 = time.perf_counter()
            jax.block_until_ready(f(a, b))
            first_call = first_call or time.perf_counter() - t0
            samples = []
            for _ in range(5):
                t0 = time.perf_counter()
                for _ in range(10):
                    r = f(a, b)
                jax.block_until_ready(r)
                samples.append((time.perf_counter() - t0) / 10)
            tried += 1
            best = max(best, 2.0 * size ** 3 / sorted(samples)[2] / 1e12)
        except Exception as e:  # noqa: BLE001 - configurations the kernel rejects are skipped
            errors.append(f"{type(e).__name__}: {str(e)[:120]}")
    figures[f"pallas_mosaic_configs_ok_{size}"] = tried
    if first_call and f"gemm_first_call_s_{size}" in figures:
        figures[f"pallas_mosaic_first_call_s_{size}"] = first_call
        figures[f"gemm_first_call_{size}_ours_vs_pallas_mosaic"] = figures[f"gemm_first_call_s_{size}"] / first_call
    if errors:
        figures[f"pallas_mosaic_errors_{size}"] = errors[:3]
    if best:
        figures[f"gemm_tflops_pallas_mosaic_{size}"] = best
        ours = max(figures.get(f"gemm_tflops_nn_{size}", 0), figures.get(f"gemm_tflops_nt_{size}", 0))
        figures[f"gemm_bf16_{size}_ours_best_vs_pallas_mosaic"] = ours / best
        rows.append((f"pallas mosaic {size}", f"{tried} configs", f"{ours:.0f}", f"{best:.0f}",
                     f"{ours / best:.3f}", "", ""))


def scaled_add(figures: dict, rows: list, iters: int) -> None:
    import cupy

    m = n = 8192
    kern = make_scaled_add(m, n, a=2.0, b=1.0)
    rng = np.random.default_rng(0)
    xs = [cupy.asarray(rng.standard_normal((m, n), dtype=np.float32)) for _ in range(ROTATE)]
    out, dst = cupy.full((m, n), np.nan, np.float32), cupy.empty((m, n), np.float32)
    kern(xs[0], out=out)
    assert bool(cupy.allclose(out, 2 * xs[0] + 1)), "scaled_add is wrong"
    moved = 2 * xs[0].nbytes  # read + write
    t_ours = time_cuda(lambda i: kern(xs[i % ROTATE], out=out), warmup=10, iters=iters).median_ms
    t_copy = time_cuda(lambda i: cupy.copyto(dst, xs[i % ROTATE]), warmup=10, iters=iters).median_ms
    gbs_ours, gbs_copy = moved / t_ours / 1e6, moved / t_copy / 1e6
    figures.update({"scaled_add_8192_GBps": gbs_ours, "device_copy_8192_GBps": gbs_copy,
                    "scaled_add_8192_vs_device_copy": gbs_ours / gbs_copy})
    rows.append(("scaled_add 8192^2", "f32 (TMA) vs device copy", f"{gbs_ours:.0f} GB/s", f"{gbs_copy:.0f} GB/s",
                 f"{gbs_ours / gbs_copy:.3f}", "", ""))


def _summarize(figures: dict, rows: list, ratios: list[float], prefix: str, peer: str) -> None:
    if not ratios:
        return
    figures[f"{prefix}_geomean_vs_{peer}"] = geomean(ratios)
    figures[f"{prefix}_min_vs_{peer}"] = min(ratios)
    rows.append((prefix, f"{len(ratios)} problems", "", "", f"geomean {geomean(ratios):.3f}",
                 f"min {min(ratios):.3f}", ""))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--quick", action="store_true", help="6 bf16 and 3 fp8 problems, 2 rounds")
    parser.add_argument("--no-fp8", action="store_true", help="skip the FP8 sweep")
    parser.add_argument("--extras", action="store_true", help="also scaled_add and Pallas Mosaic GPU at 4096/8192")
    parser.add_argument("--budget-s", type=float, default=None,
                        help="start no new problem after this many seconds (the record is written either way)")
    parser.add_argument("--compare-persistent", action="store_true",
                        help="also time the other block scheme (persistent / one tile) where tiles take > 1 wave")
    parser.add_argument("--no-split-k", action="store_true", help="never split K (even where the config says so)")
    parser.add_argument("--random", type=int, default=None, metavar="N",
                        help="time N random shapes drawn from --seed instead of the sweep (gemm_random.py)")
    parser.add_argument("--seed", type=int, default=0, help="the seed of --random's shapes")
    parser.add_argument("--epilogue", default=None, choices=EPILOGUES,
                        help="with --random (bf16): add a (n,) bias in our GEMM's epilogue, against torch.addmm")
    parser.add_argument("--fp8", nargs="?", const="tensor", default=None, choices=("tensor", "block"),
                        help="with --random: the FP8 GEMM against torch._scaled_mm, per-tensor scales (default) or "
                             "1x128 / 128x128 block scales (gemm_fp8_random.py)")
    args = parser.parse_args()
    if args.fp8 is not None and args.random is None:
        parser.error("--fp8 goes with --random N (the fixed FP8 sweep runs unless --no-fp8)")
    if args.epilogue is not None and (args.random is None or args.fp8 is not None):
        parser.error("--epilogue goes with --random N, bf16 (not --fp8)")
    if args.random is not None:
        (fp8_random_main if args.fp8 else random_main)(args)
        return
    NO_SPLIT_K[0] = args.no_split_k
    figures: dict = {}
    rows: list = [("problem", "what", "ours TFLOP/s", "peer TFLOP/s", "peer time / ours", "config", "rel err")]
    bf16_ratios: list[float] = []
    fp8_ratios: list[float] = []
    steps = [("bf16", lambda: bf16_ratios.extend(bf16_sweep(figures, rows, bf16_problems(args.quick), args.quick,
                                                            args.compare_persistent)))]
    if not args.no_fp8:
        steps.append(("fp8", lambda: fp8_ratios.extend(fp8_sweep(figures, rows, fp8_problems(args.quick),
                                                                 args.quick))))
    if args.extras:
        steps += [("scaled_add", lambda: scaled_add(figures, rows, 50)),
                  *((f"pallas {s}", lambda s=s: pallas_peer(figures, rows, s)) for s in (4096, 8192))]
    t0 = time.perf_counter()
    if args.budget_s is not None:
        DEADLINE[0] = t0 + args.budget_s
    with GpuSampler() as gpu:
        for name, step in steps:
            try:
                step()
            except Exception as e:  # noqa: BLE001 - record what failed and keep the other figures
                figures.setdefault("errors", []).append(f"{name}: {type(e).__name__}: {e}")
                print(f"error in {name}: {type(e).__name__}: {e}", file=sys.stderr)
    _summarize(figures, rows, bf16_ratios, "gemm_sweep", "cublas")
    _summarize(figures, rows, fp8_ratios, "gemm_fp8_sweep", "scaled_mm")
    figures["gemm_sweep_wall_s"] = time.perf_counter() - t0
    path = write_record("gemm", figures, sampler=gpu, notes={
        "ratio": "peer median time / our median time (above 1: ours faster)",
        "order": "A B B A ... (common.interleaved_rounds), launches queued behind a blocking kernel",
        "bf16 peer": "torch.matmul (cuBLAS)", "fp8 peer": "torch._scaled_mm(use_fast_accum=True)",
        "configs": "gemm_configs.json where tuned, else the heuristic (per problem: *_config.source)",
        "gemm_configs_sha256": _table_digest()})
    print(f"clock/power: {gpu.summary()}")
    print(f"record: {path}")
    print(table(rows))


def _random_record(args: argparse.Namespace, record: str, prefix: str, header: tuple, run, notes: dict) -> None:
    """The random-shape runs' frame: `run(count, seed, figures, rows, rounds=, deadline=)` under a
    GpuSampler (--quick: 6 shapes, 2 rounds; --budget-s: the deadline), then the record and the table."""
    figures: dict = {}
    rows: list = [header]
    count = min(args.random, 6) if args.quick else args.random
    t0 = time.perf_counter()
    deadline = t0 + args.budget_s if args.budget_s is not None else float("inf")
    with GpuSampler() as gpu:
        run(count, args.seed, figures, rows, rounds=2 if args.quick else 3, deadline=deadline)
    figures[f"{prefix}_wall_s"] = time.perf_counter() - t0
    path = write_record(record, figures, sampler=gpu, notes={
        **notes, "order": "A B B A ... (common.interleaved_rounds)", "seed": args.seed, "drawn": args.random,
        "quick": args.quick, "gemm_configs_sha256": _table_digest()})
    print(f"clock/power: {gpu.summary()}")
    print(f"record: {path}")
    print(table(rows))


def random_main(args: argparse.Namespace) -> None:
    """--random N --seed S [--epilogue bias]: the model's configurations on shapes drawn at run
    time (gemm_random.py)."""
    import functools

    from gemm_random import figure_prefix, run_random

    peer = "torch.addmm(bias, ...)" if args.epilogue else "torch.matmul"
    notes = {
        "ratio": "cuBLAS median time / our median time (above 1: ours faster)",
        "kernel": f"launch_unchecked on CuPy views vs {peer} (out=), launches queued behind a blocking kernel",
        "call": f"the Kernel called on torch tensors vs {peer}, CUDA events around each call",
        "configs": "the model alone (MGPU_LAB_GEMM_TABLE=0); tuned shapes dropped"}
    if args.epilogue:
        notes["epilogue"] = ("bias: a (n,) bf16 bias added in our GEMM's epilogue (fused(m, n, bias=...)), in "
                             "cuBLASLt's by torch.addmm")
    _random_record(args, "gemm_random", figure_prefix(args.seed, args.epilogue),
                   ("problem", "what", "ours us", "cuBLAS us", "kernel: cuBLAS / ours", "call: cuBLAS / ours",
                    "config", "rel err"), functools.partial(run_random, epilogue=args.epilogue), notes)


FP8_RANDOM_PEERS = {
    "tensor": "torch._scaled_mm, per-tensor float32 scales, use_fast_accum=True (ours: no promotion either)",
    "block": "torch._scaled_mm, float32 block scales 1x128 (A) x 128x128 (B), use_fast_accum=False (refused with "
             "block scales; ours promotes every 128 k to f32 too); per shape <tag>_peer names what ran, and a "
             "CLOSEST PEER (rowwise scales) shape is left out of the totals"}


def fp8_random_main(args: argparse.Namespace) -> None:
    """--random N --seed S --fp8 MODE: the FP8 GEMM on shapes drawn at run time (gemm_fp8_random.py)."""
    import functools

    import torch
    from gemm_fp8_random import run_fp8_random

    _random_record(args, "gemm_fp8_random", f"gemm_fp8_{args.fp8}_random_seed{args.seed}",
                   ("problem", "what", "ours us", "_scaled_mm us", "kernel: _scaled_mm / ours", "peer", "config",
                    "rel err"), functools.partial(run_fp8_random, mode=args.fp8), {
        "ratio": "torch._scaled_mm median time / our median time (above 1: ours faster)", "mode": args.fp8,
        "peer": FP8_RANDOM_PEERS[args.fp8], "torch": torch.__version__,
        "kernel": "launch_unchecked on CuPy views vs torch._scaled_mm(out=), launches queued behind a blocking kernel",
        "shapes": "gemm_random's draw for the seed, B (n, k), n and k rounded up to 16 (block: k to 128, m to 4); "
                  "tuned shapes dropped; labels name what was rounded",
        "configs": "tensor: the model alone (MGPU_LAB_GEMM_TABLE=0); block: fp8_block.block_tiles (the model's "
                   "one-tile-per-block pick among tile_m 64/128, tile_n 32/64/128)"})


def _table_digest() -> str:
    """The tuned table's content hash: which table a record measured, even before it is committed."""
    import hashlib

    from mgpu_lab.kernels.gemm.configs import CONFIG_FILE

    return hashlib.sha256(CONFIG_FILE.read_bytes()).hexdigest()[:16] if CONFIG_FILE.exists() else "absent"


if __name__ == "__main__":
    main()
