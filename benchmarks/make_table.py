"""Render the human table of benchmarks/README.md from ALL the records in results/, not a chosen one.

For each figure the table shows the median over the selected runs, and the range (min-max)
and the number of runs beside it, with the record files it came from. The selection per
benchmark: every run at the given commit (default: the commit of that benchmark's newest
run), or, with --last N, the newest N runs whatever their commit. Benchmarks measured over
several runs (NEWEST_RUNS: drawn-shape seeds, the profiler's kernels) read, row by row, the
newest runs that measured the row's figure. Each GPU kind gets its own table (an H100's runs, made
while no H200 was lent, never mix into the H200's figures), and probe runs (a record naming
a key of common.PROBE_SETTINGS: the GEMM switched away from what main ships, one whose
`gemm_calibration` main no longer gives that GPU, or made at a commit in PROBE_COMMITS) are left out.

    python benchmarks/make_table.py                 # prints the markdown table
    python benchmarks/make_table.py --last 5        # the newest 5 runs of each benchmark
    python benchmarks/make_table.py --write         # also replaces the table in benchmarks/README.md
"""

from __future__ import annotations

import argparse
import statistics
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).parent))
from common import PROBE_SETTINGS, RESULTS, load_records, recorded_on  # noqa: E402

README = Path(__file__).parent / "README.md"
BEGIN, END = "<!-- make_table.py: begin -->", "<!-- make_table.py: end -->"

def _gemm_row(shape: str) -> tuple:
    """The sweep's figures for one bf16 problem `MxNxK`."""
    key = f"gemm_bf16_{shape}"
    return ("gemm", f"bf16 GEMM {shape}", f"{key}_ours_tflops", f"{key}_cublas_tflops", f"{key}_vs_cublas",
            "TFLOP/s vs cuBLAS (torch)", ">= 0.97")


def _attention_row(shape: str, goal: str) -> tuple:
    """The attention sweep's figures for one shape (`d128_s4096`, `..._causal`, `..._gqa8`)."""
    key = f"attention_fwd_bf16_{shape}"
    return ("attention", f"attention fwd bf16 {shape}", f"{key}_ours_tflops", f"{key}_cudnn_tflops",
            f"{key}_vs_cudnn", "TFLOP/s, speedup vs cuDNN (torch SDPA)", goal)


GEMM_SHAPES = ("4096x4096x4096", "8192x8192x8192", "16384x16384x16384", "2048x2048x8192", "16x4096x14336",
               "4000x4000x4000")
# The goals: head dim 128 at seq 4096 and 16384 >= 1.05x cuDNN, every other shape >= 0.9x.
ATTENTION_SHAPES = (("d128_s4096", ">= 1.05"), ("d128_s4096_causal", ">= 0.9"), ("d128_s16384", ">= 1.05"),
                    ("d128_s16384_causal", ">= 0.9"), ("d256_s16384", ">= 0.9"), ("d64_s512", ">= 0.9"),
                    ("d64_s4096", ">= 0.9"),
                    ("d128_s4096_gqa8", ">= 0.9"))


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
    ("first_call", "GEMM 4096^3 first call, both cold in fresh processes", "ours_first_call_s_median",
     "pallas_mosaic_first_call_s_median", "first_call_ours_vs_pallas_mosaic",
     "s vs JAX Pallas Mosaic GPU (lower is better)", "< 1"),
    ("gemm", "scaled_add (TMA) 8192^2 f32", "scaled_add_8192_GBps", "device_copy_8192_GBps",
     "scaled_add_8192_vs_device_copy", "GB/s vs device copy", ">= 0.90"),
    ("foundation", "tiled smem copy 8192^2 f32", "tiled_copy_8192_GBps", "copyto_8192_GBps",
     "tiled_copy_8192_vs_copyto", "GB/s vs cupy.copyto", ">= 0.90"),
    *(_gemm_row(shape) for shape in GEMM_SHAPES),
    ("gemm", "bf16 GEMM sweep, geomean (26-28 shapes)", None, None, "gemm_sweep_geomean_vs_cublas",
     "speedup vs cuBLAS (torch)", ">= 1.05"),
    ("gemm", "bf16 GEMM sweep, slowest shape", None, None, "gemm_sweep_min_vs_cublas",
     "speedup vs cuBLAS (torch)", ">= 0.97"),
    ("gemm", "FP8 e4m3 GEMM sweep, geomean of 8 shapes", None, None, "gemm_fp8_sweep_geomean_vs_scaled_mm",
     "speedup vs torch._scaled_mm (cuBLASLt)", ">= 1.0"),
    ("launch", "launch, checked call, output passed in", "launch_us_ours_checked", "launch_us_rawkernel",
     "launch_checked_vs_rawkernel", "us per call vs CuPy RawKernel (lower is better)", "<= 1"),
    ("launch", "launch, `launch_unchecked`", "launch_us_ours_unchecked", "launch_us_rawkernel",
     "launch_unchecked_vs_rawkernel", "us per call vs CuPy RawKernel (lower is better)", "<= 1"),
    ("launch", "launch, output allocated", "launch_us_ours_allocating", "launch_us_rawkernel_allocating",
     "launch_allocating_vs_rawkernel_allocating", "us per call vs RawKernel + cupy.empty (lower is better)", "<= 1"),
    ("host_cost", "host cost, Kernel call on torch tensors, 16x6144x4096", "host_us_call_16x6144x4096_ours",
     "host_us_call_16x6144x4096_torch_matmul", "call_16x6144x4096_vs_torch_matmul",
     "host us per call vs torch.matmul (lower is better)", "<= 1.2"),
    ("host_cost", "host cost, Kernel call on torch tensors, 4096^3", "host_us_call_4096x4096x4096_ours",
     "host_us_call_4096x4096x4096_torch_matmul", "call_4096x4096x4096_vs_torch_matmul",
     "host us per call vs torch.matmul (lower is better)", "<= 1.2"),
    ("host_cost", "host cost, as_torch_op, 16x6144x4096", "host_us_op_16x6144x4096_ours",
     "host_us_op_16x6144x4096_f_linear", "op_16x6144x4096_vs_f_linear",
     "host us per call vs F.linear (lower is better)", "<= 1.2"),
    ("host_cost", "host cost, as_torch_op, 4096^3", "host_us_op_4096x4096x4096_ours",
     "host_us_op_4096x4096x4096_f_linear", "op_4096x4096x4096_vs_f_linear",
     "host us per call vs F.linear (lower is better)", "<= 1.2"),
    ("host_cost", "decode loop (as_torch_op, 16x6144x4096), wall per call", "host_us_op_loop_16x6144x4096_ours",
     "host_us_op_loop_16x6144x4096_f_linear_loop", "op_loop_16x6144x4096_vs_f_linear_loop",
     "us per call incl. GPU vs F.linear (lower is better)", "<= 1.0"),
    ("host_cost", "host cost, checked CuPy call (vector add, out=)", "host_us_cupy_checked_call_ours",
     "host_us_cupy_rawkernel", "cupy_checked_call_vs_rawkernel", "us per call vs CuPy RawKernel (lower is better)",
     "<= 1.0"),
    ("host_cost", "host cost, as_torch_op on an nn.Parameter weight (no_grad), 16x6144x4096",
     "host_us_op_param_16x6144x4096_ours", "host_us_op_param_16x6144x4096_f_linear",
     "op_param_16x6144x4096_vs_f_linear", "host us per call vs F.linear (lower is better)", "<= 1.2"),
    ("host_cost", "host cost, an nn.Linear routed by route_linears, (4, 512, 2048) input, 2048x5632x2048",
     "host_us_routed_linear_2048x5632x2048_ours", "host_us_routed_linear_2048x5632x2048_nn_linear",
     "routed_linear_2048x5632x2048_vs_nn_linear", "host us per call vs the module's own forward (lower is better)",
     "<= 1.0"),
    ("gemm_random", "bf16 GEMM, 64 shapes drawn at run time (7 newest seeds), geomean", None, None,
     "gemm_random_geomean_vs_cublas", "kernel-only speedup vs cuBLAS (torch), table off", ">= 1.00"),
    ("gemm_random", "bf16 GEMM, shapes drawn at run time (7 newest seeds), 10th percentile", None, None,
     "gemm_random_p10_vs_cublas", "kernel-only speedup vs cuBLAS (torch)", ">= 0.90"),
    ("gemm_random", "bf16 GEMM, shapes drawn at run time (7 newest seeds), slowest shape", None, None,
     "gemm_random_min_vs_cublas", "kernel-only speedup vs cuBLAS (torch)", ">= 0.80"),
    ("gemm_random", "bf16 GEMM, shapes drawn at run time (7 newest seeds), m <= 64, geomean", None, None,
     "gemm_random_m64_geomean_vs_cublas", "kernel-only speedup vs cuBLAS (torch)", ">= 0.95"),
    ("gemm_random", "bf16 GEMM, shapes drawn at run time (7 newest seeds), user call (torch tensors), geomean", None,
     None, "gemm_random_call_geomean_vs_cublas", "speedup vs torch.matmul, call path", ">= 1.00"),
    ("gemm_fp8_random", "FP8 e4m3 GEMM, per-tensor scales, 32 shapes drawn at run time (4 newest seeds), geomean", None,
     None, "gemm_fp8_tensor_random_geomean_vs_scaled_mm", "kernel-only speedup vs torch._scaled_mm",
     ">= 1.00"),
    ("gemm_fp8_random", "FP8 e4m3 GEMM, 128x128 block scales, 32 shapes drawn at run time (4 newest seeds), geomean",
     None, None, "gemm_fp8_block_random_geomean_vs_scaled_mm",
     "kernel-only speedup vs torch._scaled_mm (block scales)", ">= 1.00"),
    *(("build_time", f"GEMM cold build, 24 shapes drawn per seed, {what} ({where})", None, None,
       f"build_time_{host}_{figure}_s", "s of host time (make_gemm, no cache)", "< 1" if goal else "- (goal: H200 host)")
      for host, where, goal in (("h200_host", "the H200 machine's host", True),
                                ("h100_host", "the H100 machine's host", False),
                                ("no_gpu_host", "the 2-core CPU machine", False))
      for what, figure in (("slowest", "max"), ("90th percentile", "p90"), ("median", "median"))),
    ("hf_model", "Llama-style HF model (8 layers, 2048/5632), prefill 4x512", "hf_llama_prefill_4x512_ours_ms",
     "hf_llama_prefill_4x512_torch_ms", "hf_llama_prefill_4x512_vs_torch",
     "ms, every nn.Linear on our GEMM vs torch (speedup: torch / ours)", ">= 1.0"),
    ("hf_model", "Llama-style HF model, prefill 4x512, every shape built with tune='auto'",
     "hf_llama_tuned_prefill_4x512_ours_ms", "hf_llama_tuned_prefill_4x512_torch_ms",
     "hf_llama_tuned_prefill_4x512_vs_torch", "ms, every nn.Linear on our tuned GEMM vs torch (speedup: torch / ours)",
     ">= 1.0"),
    *(("hf_model", f"Llama-style HF model, prefill 4x512{label} as one CUDA graph replay per side",
       f"{prefix}_prefill_graph_4x512_ours_ms", f"{prefix}_prefill_graph_4x512_torch_ms",
       f"{prefix}_prefill_graph_4x512_vs_torch", "ms, the forward's GPU time (speedup: torch / ours)", ">= 1.0")
      for prefix, label in (("hf_llama", ""), ("hf_llama_tuned", ", tune='auto'"))),
    *(("hf_model", f"Llama-style HF model, prefill 4x512{label}, its GEMM kernels' GPU time only (profiler)", None,
       None, f"{prefix}_prefill_4x512_breakdown_gemm_torch_over_ours",
       "cuBLAS's GEMM kernel time / ours over one forward (speedup)", "-")
      for prefix, label in (("hf_llama", ""), ("hf_llama_tuned", ", tune='auto'"))),
    ("hf_model", "Llama-style HF model, greedy decode batch 1, per token", "hf_llama_decode_b1_ours_ms_per_token",
     "hf_llama_decode_b1_torch_ms_per_token", "hf_llama_decode_b1_vs_torch",
     "ms per token vs torch (speedup: torch / ours)", ">= 1.0"),
    ("hf_model", "Llama-style HF model, greedy decode batch 4, per token", "hf_llama_decode_b4_ours_ms_per_token",
     "hf_llama_decode_b4_torch_ms_per_token", "hf_llama_decode_b4_vs_torch",
     "ms per token vs torch (speedup: torch / ours)", ">= 1.0"),
    *(("hf_model", f"Llama-style HF model, decode batch {b} with CUDA graphs (static cache), per token",
       f"hf_llama_decode_graph_b{b}_ours_ms_per_token", f"hf_llama_decode_graph_b{b}_torch_ms_per_token",
       f"hf_llama_decode_graph_b{b}_vs_torch", "ms per token vs torch (speedup: torch / ours)", ">= 1.0")
      for b in (1, 4)),
    ("isolation", "isolation: faults survived of 100 injected", None, None, "isolation_faults_survived",
     "faults (OOB near/far, trap, mbarrier timeout, misaligned)", "100"),
    ("isolation", "isolation: next correct launch after a fault", None, None, "isolation_recovery_s",
     "s (median)", "< 10"),
    ("isolation", "isolation: isolated call overhead", "isolated_launch_us", "in_process_launch_sync_us",
     "isolated_launch_overhead_us", "us per call over in-process launch + sync", "-"),
    *(_attention_row(shape, goal) for shape, goal in ATTENTION_SHAPES),
    ("attention", "attention fwd bf16, lowest shape of the sweep", None, None, "attention_fwd_bf16_sweep_min_vs_cudnn",
     "speedup vs cuDNN (torch SDPA), the sweep's minimum", ">= 0.9"),
    ("attention", "attention fwd f16 d128_s4096", None, "attention_fwd_f16_d128_s4096_pallas_mosaic_ms",
     "attention_fwd_f16_d128_s4096_vs_pallas_mosaic", "speedup vs Pallas Mosaic GPU attention_mgpu (wall clock)", "> 1"),
    ("torch_compile_mlp", "MLP 2048x2048x8192 as torch ops, eager", "torch_mlp_eager_2048x2048x8192_ours_ms",
     "torch_mlp_eager_2048x2048x8192_torch_ms", "torch_mlp_eager_2048x2048x8192_ours_vs_torch",
     "ms vs torch linear (lower is better)", "<= 1"),
    ("torch_compile_mlp", "MLP 2048x2048x8192, torch.compile(fullgraph)", "torch_mlp_compiled_2048x2048x8192_ours_ms",
     "torch_mlp_compiled_2048x2048x8192_torch_ms", "torch_mlp_compiled_2048x2048x8192_ours_vs_torch",
     "ms vs torch linear compiled (lower is better)", "<= 1"),
    ("torch_compile_mlp", "MLP 2048x2048x8192, bias+GELU in our epilogues vs torch compiled",
     "torch_mlp_fused_compiled_2048x2048x8192_ours_ms", "torch_mlp_fused_compiled_2048x2048x8192_torch_ms",
     "torch_mlp_fused_compiled_2048x2048x8192_ours_vs_torch", "ms vs torch linear compiled (lower is better)", "<= 1"),
    ("viewers", "slowest viewer, data ready to display (Python side)", None, None, "viewer_display_s_max",
     "s (4096^3 GEMM, every pass kept, profiled; CPU)", "<= 0.5"),
    ("viewers", "IR viewer outputs (static + widget bundle)", None, None, "viewer_output_bytes_ir",
     "bytes (from 8 MB of pass-by-pass IR)", "<= 1e6"),
    *(("profiler", f"profiled / plain, {label}", None, None, f"{key}_profiled_vs_plain",
       "ms, same kernel with and without regions", "<= 1.03")
      for label, key in (("gemm_4096_nt", "gemm_4096_nt"), ("gemm_4096_nn", "gemm_4096_nn"),
                         ("gemm_8192_nt", "gemm_8192_nt"), ("gemm_8192_nn", "gemm_8192_nn"),
                         ("attention_d128_s8192_b2, a window of K/V tiles (profile_tiles, default 8)",
                          "attention_d128_s8192_b2_window"),
                         ("attention_d128_s8192_b2, every K/V tile", "attention_d128_s8192_b2_every_tile"))),
]
# Benchmarks whose table rows read, row by row, the newest N runs that measured the row's figure,
# whatever their commit: one figure is measured over several runs (the random GEMM's and the build
# time's three seeds; the profiler's kernels, one run each).
NEWEST_RUNS = {"gemm_random": 7, "gemm_fp8_random": 4, "profiler": 3, "build_time": 3}
COMPILE_EXAMPLES = ("vector_add", "block_sum", "tiled_copy")


ATTENTION_SWEEP = 20  # per-shape cuDNN ratios in a full attention run (25); a --quick run has 4


def with_derived(record: dict) -> dict:
    """The record with figures computed from its own: the lowest per-shape ratio of a full attention
    sweep (`attention_fwd_bf16_sweep_min_vs_cudnn`), the figure its done-when line reads."""
    figures = record["figures"]
    ratios = [v for k, v in figures.items() if k.startswith("attention_fwd_bf16_") and k.endswith("_vs_cudnn")
              and isinstance(v, (int, float))]
    if record.get("benchmark") == "attention" and len(ratios) >= ATTENTION_SWEEP:
        record["figures"] = {**figures, "attention_fwd_bf16_sweep_min_vs_cudnn": min(ratios)}
    name = record.get("benchmark")
    notes = record.get("notes") or {}
    if name == "profiler" and str(notes.get("kernel", "")).startswith("attention"):
        # Records before profile_tiles existed, and profile_tiles="all", profiled every K/V tile.
        how = "window" if "profile_tiles" in notes and notes["profile_tiles"] != "all" else "every_tile"
        ratio = figures.get(f"{notes['kernel']}_profiled_vs_plain")
        record["figures"] = figures = {**figures, f"{notes['kernel']}_{how}_profiled_vs_plain": ratio}
    # One seed's figures of a drawn-shape benchmark, also under seed-free keys (the rows read
    # those): <stem>_seed<S>_<figure> -> <stem>_<figure>.
    seeded = {"gemm_random": ("gemm_random", notes.get("seed")), "build_time": ("build_time", figures.get("seed")),
              "gemm_fp8_random": (f"gemm_fp8_{notes.get('mode', 'tensor')}_random", notes.get("seed"))}
    if name in seeded:
        stem, seed = seeded[name]
        prefix = f"{stem}_seed{seed}_"
        record["figures"] = {**figures, **{f"{stem}_{k[len(prefix):]}": v for k, v in figures.items()
                                           if k.startswith(prefix)}}
    if name == "build_time":  # the target is the H200 machine's host; the other machines' runs beside it
        device = str(record.get("device"))
        host = "h200_host" if "H200" in device else "h100_host" if "H100" in device else "no_gpu_host"
        ours = {f"build_time_{host}_{k[len('build_time_'):]}": v for k, v in record["figures"].items()
                if k.startswith("build_time_")}
        record["figures"] = {**record["figures"], **ours}
    return record


def select_runs(name: str, records: list[dict], last: int | None, commit: str | None,
                key: str | None = None) -> list[dict]:
    """Of benchmark `name`'s `records` (oldest first, `with_derived`), the runs the table
    summarizes (see the module docstring); for a NEWEST_RUNS benchmark, the newest of those that
    measured figure `key`."""
    if not records:
        return []
    if not (last or commit) and name in NEWEST_RUNS:
        have = [r for r in records if key is None or isinstance(r["figures"].get(key), (int, float))]
        return have[-NEWEST_RUNS[name]:]
    if last:
        return records[-last:]
    wanted = commit or records[-1]["commit"]
    return [r for r in records if r["commit"].startswith(wanted)]


def fmt(value: float | None) -> str:
    if value is None:
        return "-"
    if abs(value) < 10:
        return f"{value:.3f}"
    return f"{value:.1f}" if abs(value) < 100 else f"{value:.0f}"


def spread(runs: list[dict], key: str | None, scale: float = 1.0) -> tuple[float | None, str]:
    """(median, "median (min-max, n runs)") of figure `key` over the runs that have it."""
    values = [scale * r["figures"][key] for r in runs
              if key and isinstance(r["figures"].get(key), (int, float))]
    if not values:
        return None, "-"
    median = statistics.median(values)
    if len(values) == 1:
        return median, f"{fmt(median)} (1 run)"
    return median, f"{fmt(median)} ({fmt(min(values))}-{fmt(max(values))}, {len(values)} runs)"


def clocks(runs: list[dict]) -> str:
    """Median SM clock and power over the runs that recorded them."""
    mhz = [r["gpu"]["sm_clock_mhz"]["median"] for r in runs if (r.get("gpu") or {}).get("sm_clock_mhz")]
    watts = [r["gpu"]["power_w"]["median"] for r in runs if (r.get("gpu") or {}).get("power_w")]
    if not mhz:
        return "not recorded"
    return f"{statistics.median(mhz):.0f} MHz, {statistics.median(watts):.0f} W"


def provenance(runs: list[dict]) -> str:
    commits = sorted({r["commit"][:8] for r in runs})
    files = ", ".join(f"`results/{r['_file']}`" for r in runs)
    return f"{', '.join(commits)}: {files}"


# Commits whose own defaults were a probe, reverted after it: their runs read as probes too.
PROBE_COMMITS = {"75a267b": "the GEMM model's refit, which held out worse and was reverted in 6c1f841"}


def off_calibration(record: dict) -> bool:
    """Whether a record's GEMM picks used a calibration main no longer gives its GPU (c3000be's
    H100 runs picked with constants_h100.json, retired in 5994a63; the H100's runs with the
    built-in constants since it reads h100_measured.json): a probe, like a switched model. A
    record naming none picked with the built-in constants (every GPU did before records named
    them). A run under MGPU_LAB_GEMM_CONSTANTS is one already (its `gemm_constants`)."""
    from mgpu_lab.kernels.gemm import model

    used = record.get("gemm_calibration") or model.BUILT_IN_CALIBRATION
    return "=" not in used and used != model.calibration_of(str(record.get("device") or ""))


def render(results: Path = RESULTS, last: int | None = None, commit: str | None = None,
           device: str = "H200") -> str:
    """The markdown table (one row per figure) over the selected runs of each benchmark on
    `device` (records of one GPU kind only: an H100's runs never mix into the H200's figures)."""
    lines = ["| benchmark | ratio: median (range, runs) | ours | peer | unit | goal | SM clock, power | "
             "commit: records |", "| --- | --- | --- | --- | --- | --- | --- | --- |"]
    loaded: dict[str, list[dict]] = {}

    def records_of(name: str) -> list[dict]:  # each benchmark's records read once per table
        if name not in loaded:
            loaded[name] = [with_derived(r) for r in load_records(name, results)
                            if recorded_on(r, device) and not any(r.get(key) for key in PROBE_SETTINGS)
                            and str(r.get("commit", ""))[:7] not in PROBE_COMMITS and not off_calibration(r)]
        return loaded[name]

    for record_name, label, ours, peer, ratio, unit, goal in ROWS:
        runs = select_runs(record_name, records_of(record_name), last, commit,
                           ratio if record_name in NEWEST_RUNS else None)
        runs = [r for r in runs if ratio in r["figures"] and r["figures"][ratio] is not None]
        if not runs:
            continue
        _, ratio_text = spread(runs, ratio)
        lines.append(f"| {label} | **{ratio_text}** | {spread(runs, ours)[1]} | {spread(runs, peer)[1]} | {unit} | "
                     f"{goal} | {clocks(runs)} | {provenance(runs)} |")
    runs = select_runs("foundation", records_of("foundation"), last, commit)
    for name in COMPILE_EXAMPLES:
        have = [r for r in runs if f"compile_cold_s_{name}" in r["figures"]]
        if not have:
            continue
        cold = spread(have, f"compile_cold_s_{name}", 1e3)[1]
        sass = spread(have, f"compile_cold_with_sass_s_{name}", 1e3)[1]
        disk = spread(have, f"compile_cached_disk_ms_{name}")[1]
        lines.append(f"| compile {name}: cold / cold+SASS / cache (disk), ms | {cold} / {sass} / {disk} | - | - | "
                     f"latency | <= 300 / - / <= 5 | {clocks(have)} | {provenance(have)} |")
    return "\n".join(lines)


def render_mutation(results: Path = RESULTS) -> str:
    """Per-module mutation scores of the newest mutation record (scripts/mutation.py)."""
    records = load_records("mutation", results)
    if not records:
        return ""
    record = records[-1]
    notes = record["notes"]
    lines = [f"Mutation testing of the CPU suite ({notes['tool']}, commit {notes['commit_measured'][:8]}, "
             f"`results/{record['_file']}`): killed / run, and the score with GPU-only and equivalent survivors "
             f"(each listed in the record with its reason) left out.", "",
             "| module | killed / run (of all) | score | CPU-reachable score | GPU-only | equivalent | unexplained |",
             "| --- | --- | --- | --- | --- | --- | --- |"]
    for module, r in notes["modules"].items():
        unexplained = sum(s["reason"] == "unexplained" for s in r["survivors"])
        sample = f" (sample of {r['mutants_total']})" if r["sampled"] else ""
        score = "-" if r["score"] is None else f"{r['score']:.2f}"
        reachable = "-" if r.get("score_cpu_reachable") is None else f"**{r['score_cpu_reachable']:.2f}**"
        lines.append(f"| {module} | {r['killed']} / {r['mutants_run']}{sample} | {score} | {reachable} | "
                     f"{r.get('survivors_gpu_only', '-')} | {r.get('survivors_equivalent', '-')} | {unexplained} |")
    return "\n".join(lines)


def write_readme(table_text: str, readme: Path = README) -> None:
    """Replace the text between the BEGIN and END markers of benchmarks/README.md."""
    text = readme.read_text()
    if BEGIN not in text or END not in text:
        raise SystemExit(f"{readme}: add the markers {BEGIN!r} and {END!r} around the table first")
    head, rest = text.split(BEGIN, 1)
    _, tail = rest.split(END, 1)
    readme.write_text(f"{head}{BEGIN}\n{table_text}\n{END}{tail}")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--last", type=int, default=None, help="the newest N runs of each benchmark")
    parser.add_argument("--commit", default=None, help="runs at this commit (prefix); default: each newest run's")
    parser.add_argument("--write", action="store_true", help="replace the table in benchmarks/README.md")
    args = parser.parse_args()
    text = render(last=args.last, commit=args.commit)
    h100 = render(last=args.last, commit=args.commit, device="H100")
    if len(h100.splitlines()) > 2:  # rows beyond the header
        text += "\n\n### NVIDIA H100 (runs made while no H200 was lent; not comparable with the rows above)\n\n" + h100
    mutation = render_mutation()
    if mutation:
        text += "\n\n" + mutation
    print(text)
    if args.write:
        write_readme(text)


if __name__ == "__main__":
    main()
