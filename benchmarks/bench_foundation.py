"""Foundation benchmarks, each a ratio against its peer measured in the same run:

- compile latency of the example kernels, cold and from the cache (the peer for compile
  latency, JAX Pallas Mosaic GPU's first GEMM call, is measured in bench_gemm.py);
- launch overhead per call vs a CuPy RawKernel of an equivalent CUDA C vector add;
- the tiled smem copy's bandwidth vs `cupy.copyto` of the same bytes.

Ours and the peer are timed in alternating rounds (A B B A ...) and the SM clock and power
are sampled throughout (benchmarks/common.py).

Run on a GPU machine:  python benchmarks/bench_foundation.py
Writes benchmarks/results/foundation_<UTC time>_<commit>.json (or under $OUT) and prints a table.
"""

from __future__ import annotations

import statistics
import tempfile
import time

import numpy as np

from common import GpuSampler, interleaved_rounds, table, write_record

import mgpu_lab.compiler.cache as cache_mod
from mgpu_lab.examples.block_sum import make_block_sum
from mgpu_lab.examples.tiled_copy import make_tiled_copy
from mgpu_lab.examples.vector_add import make_vector_add
from mgpu_lab.runtime.timing import time_host_calls

RAW_VECTOR_ADD = r"""
extern "C" __global__ void vadd(const float4* a, const float4* b, float4* out, unsigned n4) {
  unsigned i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n4) { float4 x = a[i], y = b[i]; out[i] = make_float4(x.x + y.x, x.y + y.y, x.z + y.z, x.w + y.w); }
}
"""

EXAMPLES = {
    "vector_add": lambda **o: make_vector_add(1 << 20, **o),
    "block_sum": lambda **o: make_block_sum(1 << 22, 1024, **o),
    "tiled_copy": lambda **o: make_tiled_copy(4096, 4096, **o),
}


def compile_latency(figures: dict, rows: list) -> None:
    with tempfile.TemporaryDirectory() as cache_dir:
        for name, make in EXAMPLES.items():
            make(use_cache=False)  # warm the MLIR bindings and tool lookups once
            cold, with_sass, cached_disk, cached_mem = [], [], [], []
            for _ in range(5):
                t0 = time.perf_counter()
                k = make(use_cache=False)
                cold.append(time.perf_counter() - t0)
                k.compiled.sass  # noqa: B018
                with_sass.append(time.perf_counter() - t0)
            make(cache_dir=cache_dir).compiled.sass  # noqa: B018 - fill the cache
            for _ in range(5):
                cache_mod._caches.clear()  # a new process sees only the disk
                t0 = time.perf_counter()
                make(cache_dir=cache_dir)
                cached_disk.append(time.perf_counter() - t0)
                t0 = time.perf_counter()
                make(cache_dir=cache_dir)
                cached_mem.append(time.perf_counter() - t0)
            figures[f"compile_cold_s_{name}"] = statistics.median(cold)
            figures[f"compile_cold_with_sass_s_{name}"] = statistics.median(with_sass)
            figures[f"compile_cached_disk_ms_{name}"] = 1e3 * statistics.median(cached_disk)
            figures[f"compile_cached_memory_ms_{name}"] = 1e3 * statistics.median(cached_mem)
            rows.append((f"compile {name}", f"cold {statistics.median(cold) * 1e3:.0f} ms",
                         f"+sass {statistics.median(with_sass) * 1e3:.0f} ms",
                         f"disk hit {1e3 * statistics.median(cached_disk):.1f} ms",
                         f"memory hit {1e3 * statistics.median(cached_mem):.1f} ms"))


def launch_overhead(figures: dict, rows: list) -> None:
    import cupy

    n = 1 << 12
    ours = make_vector_add(n)
    raw = cupy.RawKernel(RAW_VECTOR_ADD, "vadd")
    a, b = (cupy.asarray(np.random.default_rng(i).standard_normal(n, dtype=np.float32)) for i in range(2))
    out, out_raw = cupy.empty_like(a), cupy.empty_like(a)
    grid, n4 = (n // 4 + 255) // 256, np.uint32(n // 4)
    ours(a, b, out=out)
    raw((grid,), (256,), (a, b, out_raw, n4))
    assert cupy.array_equal(out, out_raw), "the two kernels disagree"

    def host_timer(fn):
        return time_host_calls(lambda: fn(0))

    rounds = 4
    checked = interleaved_rounds(lambda i: ours(a, b, out=out), lambda i: raw((grid,), (256,), (a, b, out_raw, n4)),
                                 rounds, timer=host_timer)
    unchecked = interleaved_rounds(lambda i: ours.launch_unchecked(a, b, out),
                                   lambda i: raw((grid,), (256,), (a, b, out_raw, n4)), rounds, timer=host_timer)
    allocating = interleaved_rounds(lambda i: ours(a, b),
                                    lambda i: raw((grid,), (256,), (a, b, cupy.empty_like(a), n4)), rounds,
                                    timer=host_timer)
    t_ours, t_raw = 1e3 * checked.a_ms, 1e3 * checked.b_ms
    t_unchecked, t_alloc, t_raw_alloc = 1e3 * unchecked.a_ms, 1e3 * allocating.a_ms, 1e3 * allocating.b_ms
    launcher = ours.launcher.checker
    device = cupy.cuda.runtime.getDevice()
    figures["launch_us_ours_argument_checks_only"] = 1e3 * time_host_calls(
        lambda: launcher.checked((a, b), out, device)).median_ms
    figures.update({
        "launch_us_ours": t_ours, "launch_us_rawkernel": t_raw,
        "launch_us_ours_unchecked": t_unchecked, "launch_us_rawkernel_unchecked_round": 1e3 * unchecked.b_ms,
        "launch_us_ours_allocating_output": t_alloc, "launch_us_rawkernel_allocating_output": t_raw_alloc,
        "launch_ours_vs_rawkernel": checked.ratio,
        "launch_unchecked_ours_vs_rawkernel": unchecked.ratio,
        "launch_allocating_ours_vs_rawkernel": allocating.ratio,
    })
    rows.append(("launch overhead", f"ours {t_ours:.2f} us", f"RawKernel {t_raw:.2f} us",
                 f"ratio {checked.ratio:.2f}", f"allocating: {t_alloc:.2f} vs {t_raw_alloc:.2f} us; "
                 f"unchecked {t_unchecked:.2f} us (ratio {unchecked.ratio:.2f})"))


def copy_bandwidth(figures: dict, rows: list) -> None:
    import cupy

    m = n = 8192
    k = make_tiled_copy(m, n)
    src = cupy.asarray(np.random.default_rng(0).standard_normal((m, n), dtype=np.float32))
    dst, dst_ref = cupy.full_like(src, np.nan), cupy.full_like(src, np.nan)
    k(src, out=dst)
    assert cupy.array_equal(dst, src), "tiled copy is wrong"
    moved = 2 * src.nbytes  # read + write
    result = interleaved_rounds(lambda i: k(src, out=dst), lambda i: cupy.copyto(dst_ref, src), 6,
                                warmup=5, iters=10)
    t_ours, t_copy = result.a_ms, result.b_ms
    gbs_ours, gbs_copy = moved / t_ours / 1e6, moved / t_copy / 1e6
    figures.update({"tiled_copy_8192_GBps": gbs_ours, "copyto_8192_GBps": gbs_copy,
                    "tiled_copy_8192_vs_copyto": gbs_ours / gbs_copy})
    rows.append(("copy 8192^2 f32", f"tiled {gbs_ours:.0f} GB/s", f"copyto {gbs_copy:.0f} GB/s",
                 f"ratio {gbs_ours / gbs_copy:.3f}", ""))


def main() -> None:
    figures: dict = {}
    rows: list = [("benchmark", "ours", "peer", "ratio", "")]
    with GpuSampler() as gpu:
        compile_latency(figures, rows)
        launch_overhead(figures, rows)
        copy_bandwidth(figures, rows)
    path = write_record("foundation", figures, notes={"order": "A B B A ... (A = ours, B = the peer)"}, sampler=gpu)
    print(table(rows))
    print(f"record: {path}")


if __name__ == "__main__":
    main()
