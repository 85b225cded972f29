"""Tune one GEMM space on 1 GPU and on 2 GPUs of this machine in the same run, each end to end.

The space: make_gemm(8192, 8192, 8192) bf16 over tile_m x tile_n x stages x group_m x persistent
(672 configurations; about 380 fit in shared memory and build, the rest fail their check at once
and are listed with the reason). At 8192^3 a launch takes 1.5-10 ms, so timing dominates.

Each tune starts from its own empty kernel cache, so both are real cold runs (compiles on the CPU
cores overlapping timings on the GPUs, the top-3 re-time, worker start-up): no tune profits from
the other's compiles. The 2-GPU tune runs first, so any warm-up (page cache, clocks) favours the
1-GPU side. Figures: `tune_2gpu_speedup` (end-to-end wall, 1 GPU / 2 GPUs);
`tune_2gpu_timing_stage_speedup` (seconds the one GPU spent timing / the busier of the two);
compile wall times of both; `tune_same_winner`: the 2-GPU winner is the 1-GPU winner, or its time
in the 1-GPU run is within 1% of the 1-GPU winner's.

Run on nvidia-h200-x2 (about 3-5 minutes):  python benchmarks/bench_tune_multi_gpu.py
On one GPU:                                python benchmarks/bench_tune_multi_gpu.py --gpus 1
--quick: a 48-candidate space (a smoke test, not the record).
"""

from __future__ import annotations

import argparse
import functools
import itertools
import os
import tempfile
import time

import numpy as np

N = 8192
SPACE = {"tile_m": [64, 128, 256], "tile_n": [64, 128, 192, 256], "stages": [2, 3, 4, 5, 6, 7, 8],
         "group_m": [1, 4, 8, 16], "persistent": [False, True]}
QUICK = {"tile_m": [128, 256], "tile_n": [128, 256], "stages": [3, 4, 5], "group_m": [4, 8], "persistent": [False, True]}
WARMUP, ITERS = 5, 50  # ~55 launches of 1.5-10 ms each: timing, not start-up, dominates a tune


def operands(n: int, seed: int = 0) -> tuple[np.ndarray, np.ndarray]:
    from mgpu_lab.builder.dtypes import numpy_dtype

    rng = np.random.default_rng(seed)
    return tuple(rng.standard_normal((n, n), dtype=np.float32).astype(numpy_dtype("bfloat16")) for _ in range(2))


def reference_f32(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    """float32 A @ B on GPU 0 (a host array; the tune ships it to each worker once)."""
    import cupy

    with cupy.cuda.Device(0):
        c = (cupy.asarray(a.astype(np.float32)) @ cupy.asarray(b.astype(np.float32))).get()
        cupy.get_default_memory_pool().free_all_blocks()
    return c


def cold_tune(make, space, a, b, ref, gpus):
    """One tune from an empty kernel cache (the compile pool it spawns inherits the variable)."""
    import mgpu_lab

    os.environ["MGPU_LAB_CACHE_DIR"] = tempfile.mkdtemp(prefix="mgpu_lab_bench_tune_cache_")
    t0 = time.perf_counter()
    result = mgpu_lab.tune(make, space, args=(a, b), reference=lambda *_: ref, gpus=gpus, use_cache=False,
                           warmup=WARMUP, iters=ITERS, timeout_s=20.0)  # a candidate takes well under 1 s
    return result, time.perf_counter() - t0


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--gpus", type=int, choices=(1, 2), default=2)
    parser.add_argument("--quick", action="store_true")
    args = parser.parse_args()

    from common import GpuSampler, table, write_record

    from mgpu_lab.kernels.gemm import make_gemm

    space = QUICK if args.quick else SPACE
    make = functools.partial(make_gemm, N, N, N)
    candidates = len(list(itertools.product(*space.values())))
    a, b = operands(N)
    ref = reference_f32(a, b)
    with GpuSampler() as gpu:
        two, two_s = cold_tune(make, space, a, b, ref, [0, 1]) if args.gpus == 2 else (None, None)
        one, one_s = cold_tune(make, space, a, b, ref, [0])

    def sec(result, key):
        value = result.notes["seconds"][key]
        return [round(v, 2) for v in value] if isinstance(value, list) else round(value, 2)

    figures = {"candidates": candidates, "built": sum(c.status not in ("failed-build", "does-not-fit")
                                                      for c in one.candidates),
               "timed": sum(c.status == "timed" for c in one.candidates),
               "tune_1gpu_s": round(one_s, 2), "compile_wall_1gpu_s": sec(one, "compile_wall"),
               "timing_busy_1gpu_s": sec(one, "timing_busy"), "retime_1gpu_s": sec(one, "retime"),
               "best_1gpu": one.best_config, "best_1gpu_ms": one.best.retimed_ms or one.best.median_ms}
    rows = [("", "1 GPU", "2 GPUs" if two else "-"),
            ("candidates / built / timed", f"{candidates} / {figures['built']} / {figures['timed']}", ""),
            ("tune end to end s (cold cache)", f"{one_s:.1f}", f"{two_s:.1f}" if two else "-"),
            ("compile wall s", f"{figures['compile_wall_1gpu_s']}", f"{sec(two, 'compile_wall')}" if two else "-"),
            ("timing busy s per GPU", f"{figures['timing_busy_1gpu_s']}", f"{sec(two, 'timing_busy')}" if two else "-")]
    if two is not None:
        by_config = {str(c.config): c for c in one.candidates}
        w1, w2 = one.best, two.best
        t_w2_in_one = by_config[str(w2.config)].median_ms
        same = w1.config == w2.config or (t_w2_in_one is not None and abs(t_w2_in_one - w1.median_ms)
                                          <= 0.01 * w1.median_ms)
        busy2 = two.notes["seconds"]["timing_busy"]
        figures.update({
            "tune_2gpu_s": round(two_s, 2), "compile_wall_2gpu_s": sec(two, "compile_wall"),
            "timing_busy_2gpu_s": sec(two, "timing_busy"), "retime_2gpu_s": sec(two, "retime"),
            "tune_2gpu_speedup": round(one_s / two_s, 3),
            "tune_2gpu_timing_stage_speedup": round(one.notes["seconds"]["timing_busy"][0] / max(busy2), 3),
            "tune_same_winner": bool(same), "best_2gpu": w2.config,
            "best_2gpu_ms": w2.retimed_ms or w2.median_ms, "best_2gpu_ms_in_1gpu_run": t_w2_in_one,
            "timed_per_gpu_2gpu": [sum(c.worker == w and c.status == "timed" for c in two.candidates)
                                   for w in two.notes["workers"]]})
        rows += [("tune_2gpu_speedup (end to end)", "", f"{figures['tune_2gpu_speedup']}x"),
                 ("timing-stage speedup", "", f"{figures['tune_2gpu_timing_stage_speedup']}x"),
                 ("winner", str(w1.config), str(w2.config)),
                 ("winner ms (re-timed)", f"{figures['best_1gpu_ms']:.4g}", f"{figures['best_2gpu_ms']:.4g}"),
                 ("tune_same_winner", "", str(same))]
    notes = {"shape": f"{N}x{N}x{N} bf16 -> bf16", "space": space, "warmup": WARMUP, "iters": ITERS,
             "order": "2 GPUs first, then 1 GPU; each from its own empty kernel cache",
             "workers_1gpu": one.notes["workers"], "workers_2gpu": two.notes["workers"] if two else None,
             "quick": args.quick, "cpu_cores": os.cpu_count()}
    path = write_record("tune_multi_gpu_quick" if args.quick else "tune_multi_gpu", figures, notes, sampler=gpu)
    print(one.to_dataframe().head(8).to_string())
    print(f"record: {path}")
    print(table(rows))


if __name__ == "__main__":
    main()
