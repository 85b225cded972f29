"""Tune one GEMM space on 1 GPU and on 2 GPUs of this machine in the same run.

The space: make_gemm(8192, 8192, 8192) bf16 over tile_m x tile_n x stages x group_m x persistent
(672 configurations; about 380 fit in shared memory and build, the rest fail their check at once
and are reported with the reason). At 8192^3 a launch takes 1.5-10 ms, so timing dominates.

Stages, timed separately so the figures stay honest:
 1. the cold compile of every candidate (a spawned process per CPU core, into a fresh kernel cache);
 2. `mgpu_lab.tune(..., gpus=[0])`, then 3. `mgpu_lab.tune(..., gpus=[0, 1])`: both compile from
    that warm kernel cache, so their wall times are the timing stage plus cache loads, re-time of
    the top 3 and worker start-up. `tune_2gpu_speedup` = (2) / (3); also given with the cold
    compile added to both sides (a conservative end-to-end figure: the tune overlaps compiles
    with timings, this adds them up).
`tune_same_winner`: the 2-GPU winner is the 1-GPU winner, or its time in the 1-GPU run is within 1%.

Run on nvidia-h200-x2 (about 3-4 minutes):  python benchmarks/bench_tune_multi_gpu.py
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


def tune_on(make, space, a, b, ref, gpus):
    import mgpu_lab

    t0 = time.perf_counter()
    result = mgpu_lab.tune(make, space, args=(a, b), reference=lambda *_: ref, gpus=gpus, use_cache=False,
                           warmup=5, iters=20, timeout_s=20.0)  # a candidate takes well under 1 s
    return result, time.perf_counter() - t0


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--gpus", type=int, choices=(1, 2), default=2)
    parser.add_argument("--quick", action="store_true")
    args = parser.parse_args()
    # A fresh kernel cache: stage 1 is a real cold compile, the tunes then share what it built.
    os.environ.setdefault("MGPU_LAB_CACHE_DIR", tempfile.mkdtemp(prefix="mgpu_lab_bench_tune_cache_"))

    from common import GpuSampler, table, write_record

    from mgpu_lab.autotune import compile_candidates
    from mgpu_lab.examples.gemm import make_gemm

    space = QUICK if args.quick else SPACE
    make = functools.partial(make_gemm, N, N, N)
    candidates = len(list(itertools.product(*space.values())))
    a, b = operands(N)
    ref = reference_f32(a, b)
    with GpuSampler() as gpu:
        t0 = time.perf_counter()
        built = compile_candidates(make, space)
        compile_s = time.perf_counter() - t0
        n_built = sum(c.status == "built" for c in built)
        del built
        print(f"cold compile: {candidates} candidates, {n_built} built, {compile_s:.1f} s", flush=True)
        one, one_s = tune_on(make, space, a, b, ref, [0])
        two, two_s = (tune_on(make, space, a, b, ref, [0, 1]) if args.gpus == 2 else (None, None))

    def seconds(result, key):
        return round(result.notes["seconds"][key], 2)

    figures = {"candidates": candidates, "built": n_built,
               "timed": sum(c.status == "timed" for c in one.candidates),
               "compile_cold_s": round(compile_s, 2), "tune_1gpu_s": round(one_s, 2),
               "tune_1gpu_timing_stage_s": seconds(one, "compile_and_time"),
               "best_1gpu": one.best_config, "best_1gpu_ms": one.best.retimed_ms or one.best.median_ms}
    rows = [("", "1 GPU", "2 GPUs" if two else "-"),
            ("tune wall s (warm kernel cache)", f"{one_s:.1f}", f"{two_s:.1f}" if two else "-")]
    if two is not None:
        by_config = {str(c.config): c for c in one.candidates}
        w1, w2 = one.best, two.best
        t_w2_in_one = by_config[str(w2.config)].median_ms
        same = w1.config == w2.config or abs(t_w2_in_one - w1.median_ms) <= 0.01 * w1.median_ms
        figures.update({
            "tune_2gpu_s": round(two_s, 2), "tune_2gpu_timing_stage_s": seconds(two, "compile_and_time"),
            "tune_2gpu_speedup": round(one_s / two_s, 3),
            "tune_2gpu_timing_stage_speedup": round(one.notes["seconds"]["compile_and_time"]
                                                    / two.notes["seconds"]["compile_and_time"], 3),
            "tune_2gpu_speedup_with_cold_compile": round((compile_s + one_s) / (compile_s + two_s), 3),
            "tune_same_winner": bool(same), "best_2gpu": w2.config,
            "best_2gpu_ms": w2.retimed_ms or w2.median_ms, "best_2gpu_ms_in_1gpu_run": t_w2_in_one,
            "candidates_per_gpu_2gpu": {w: sum(c.worker == w for c in two.candidates) for w in two.notes["workers"]}})
        rows += [("timing stage s", f"{figures['tune_1gpu_timing_stage_s']}", f"{figures['tune_2gpu_timing_stage_s']}"),
                 ("tune_2gpu_speedup (warm cache)", "", f"{figures['tune_2gpu_speedup']}x"),
                 ("speedup incl. cold compile", "", f"{figures['tune_2gpu_speedup_with_cold_compile']}x"),
                 ("winner", str(w1.config), str(w2.config)),
                 ("tune_same_winner", "", str(same))]
    notes = {"shape": f"{N}x{N}x{N} bf16 -> bf16", "space": space, "warmup": 5, "iters": 20,
             "order": "cold compile, then 1 GPU, then 2 GPUs (one run each; both tunes load from the same warm cache)",
             "workers_1gpu": one.notes["workers"], "workers_2gpu": two.notes["workers"] if two else None,
             "quick": args.quick, "cpu_cores": os.cpu_count()}
    path = write_record("tune_multi_gpu_quick" if args.quick else "tune_multi_gpu", figures, notes, sampler=gpu)
    print(one.to_dataframe().head(8).to_string())
    print(f"record: {path}")
    rows.insert(1, ("candidates / built / timed", f"{candidates} / {n_built} / {figures['timed']}", ""))
    rows.insert(2, ("cold compile s (32-way pool)" if os.cpu_count() == 32 else "cold compile s", f"{compile_s:.1f}", ""))
    print(table(rows))


if __name__ == "__main__":
    main()
