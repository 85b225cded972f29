"""Render the human table of benchmarks/README.md from the newest records in results/.

    python benchmarks/make_table.py        # prints the markdown table
"""

from __future__ import annotations

import json
from pathlib import Path

RESULTS = Path(__file__).parent / "results"

ROWS = [  # (record, label, our figure, peer figure, ratio key, unit, goal)
    ("gemm", "bf16 GEMM 4096^3, C = A @ B", "gemm_tflops_nn_4096", "gemm_tflops_torch_nn_4096",
     "gemm_ours_vs_torch_nn_4096", "TFLOP/s vs cuBLAS (torch)", ">= 0.95"),
    ("gemm", "bf16 GEMM 4096^3, C = A @ B.T", "gemm_tflops_nt_4096", "gemm_tflops_torch_nt_4096",
     "gemm_ours_vs_torch_nt_4096", "TFLOP/s vs cuBLAS (torch)", ">= 0.95"),
    ("gemm", "bf16 GEMM 8192^3, C = A @ B", "gemm_tflops_nn_8192", "gemm_tflops_torch_nn_8192",
     "gemm_ours_vs_torch_nn_8192", "TFLOP/s vs cuBLAS (torch)", ">= 0.95"),
    ("gemm", "bf16 GEMM 8192^3, C = A @ B.T", "gemm_tflops_nt_8192", "gemm_tflops_torch_nt_8192",
     "gemm_ours_vs_torch_nt_8192", "TFLOP/s vs cuBLAS (torch)", ">= 0.95"),
    ("gemm", "bf16 GEMM 4096^3, best layout", None, "gemm_tflops_pallas_mosaic_4096",
     "gemm_bf16_4096_ours_best_vs_pallas_mosaic", "TFLOP/s vs Pallas Mosaic GPU", "> 1"),
    ("gemm", "bf16 GEMM 8192^3, best layout", None, "gemm_tflops_pallas_mosaic_8192",
     "gemm_bf16_8192_ours_best_vs_pallas_mosaic", "TFLOP/s vs Pallas Mosaic GPU", "> 1"),
    ("gemm", "GEMM 4096^3 cold build + first call", "gemm_first_call_s_4096", "pallas_mosaic_first_call_s_4096",
     "gemm_first_call_4096_ours_vs_pallas_mosaic", "s vs JAX Pallas Mosaic GPU (lower is better)", "< 1"),
    ("gemm", "scaled_add (TMA) 8192^2 f32", "scaled_add_8192_GBps", "device_copy_8192_GBps",
     "scaled_add_8192_vs_device_copy", "GB/s vs device copy", ">= 0.90"),
    ("foundation", "tiled smem copy 8192^2 f32", "tiled_copy_8192_GBps", "copyto_8192_GBps",
     "tiled_copy_8192_vs_copyto", "GB/s vs cupy.copyto", ">= 0.90"),
    ("foundation", "launch, output passed in", "launch_us_ours", "launch_us_rawkernel",
     "launch_ours_vs_rawkernel", "us per call vs CuPy RawKernel (lower is better)", "<= 1"),
    ("foundation", "launch, `launch_unchecked`", "launch_us_ours_unchecked", "launch_us_rawkernel",
     "launch_unchecked_ours_vs_rawkernel", "us per call vs CuPy RawKernel (lower is better)", "<= 1"),
    ("foundation", "launch, output allocated", "launch_us_ours_allocating_output",
     "launch_us_rawkernel_allocating_output", "launch_allocating_ours_vs_rawkernel",
     "us per call vs RawKernel + cupy.empty", "<= 1"),
    ("profiler", "GEMM 8192^3 profiled / plain", "gemm_8192_profiled_ms", "gemm_8192_plain_ms",
     "profiler_overhead_ratio", "ms, same kernel with and without regions", "<= 1.03"),
]


def newest(name: str) -> dict | None:
    files = sorted(RESULTS.glob(f"{name}_[0-9][0-9][0-9][0-9]-*.json"))  # {name}_<date>.json
    return json.loads(files[-1].read_text()) if files else None


def fmt(value) -> str:
    if value is None:
        return "-"
    if abs(value) < 10:
        return f"{value:.3f}"
    return f"{value:.1f}" if abs(value) < 100 else f"{value:.0f}"


def main() -> None:
    print("| benchmark | ours | peer | ratio | unit | goal | date, commit |")
    print("| --- | --- | --- | --- | --- | --- | --- |")
    for record_name, label, ours, peer, ratio, unit, goal in ROWS:
        record = newest(record_name)
        if record is None or ratio not in record["figures"]:
            continue
        f = record["figures"]
        print(f"| {label} | {fmt(f.get(ours)) if ours else '-'} | {fmt(f.get(peer))} | **{f[ratio]:.3f}** | "
              f"{unit} | {goal} | {record['date']}, {record['commit'][:8]} |")
    compile_rec = newest("foundation")
    if compile_rec:
        f = compile_rec["figures"]
        for name in ("vector_add", "block_sum", "tiled_copy"):
            print(f"| compile {name}: cold / cold+SASS / cache (disk) | "
                  f"{1e3 * f[f'compile_cold_s_{name}']:.0f} ms / {1e3 * f[f'compile_cold_with_sass_s_{name}']:.0f} ms"
                  f" / {f[f'compile_cached_disk_ms_{name}']:.1f} ms | - | - | latency | <= 300 ms / - / <= 5 ms | "
                  f"{compile_rec['date']}, {compile_rec['commit'][:8]} |")


if __name__ == "__main__":
    main()
