"""Where a GEMM configuration's time goes: its named regions per warpgroup (the on-device
profiler), for configurations of one problem side by side.

For each configuration (make_gemm keyword arguments as JSON, e.g. '{"tile_m": 128, "tile_n":
256, "persistent": "stream_k"}') the kernel is built with profile=True, run once to warm up
and once recorded on fresh random inputs (output poisoned, result checked against a float32
matmul), and its region summary printed: count, total, mean, p50, p95 and share of every
region (load, wait_data, mma, epilogue, park, ...), with the block end times' spread (how
unevenly the SMs finish) and the latest blocks; the record keeps every block's id, SM, start
and end. Profiling takes a few ring slots for its buffer, so absolute times
run a little slower than unprofiled ones: compare configurations with each other.

Run on a GPU machine:  python benchmarks/profile_gemm.py 2048x2048x8192 [--nt] CONFIG [CONFIG ...]
Writes `profile_gemm_<time>_<commit>.json` (under $OUT when set) with the summaries.
"""

from __future__ import annotations

import argparse
import json

import numpy as np
from common import GpuSampler, write_record

from mgpu_lab.builder.dtypes import numpy_dtype
from mgpu_lab.kernels.gemm import make_gemm


def main() -> None:
    import cupy

    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("shape", help="MxNxK")
    parser.add_argument("configs", nargs="+", help="make_gemm keyword arguments as JSON objects")
    parser.add_argument("--nt", action="store_true", help="B is (n, k): C = A @ B.T")
    args = parser.parse_args()
    m, n, k = (int(x) for x in args.shape.split("x"))
    bf16 = numpy_dtype("bfloat16")
    rng = np.random.default_rng(0)
    a = cupy.asarray(rng.standard_normal((m, k), dtype=np.float32).astype(bf16))
    b = cupy.asarray(rng.standard_normal((n, k) if args.nt else (k, n), dtype=np.float32).astype(bf16))
    want = a.astype(cupy.float32) @ (b.astype(cupy.float32).T if args.nt else b.astype(cupy.float32))
    figures = {}
    with GpuSampler() as gpu:
        for text in args.configs:
            options = json.loads(text)
            kern = make_gemm(m, n, k, transpose_b=args.nt, profile=True, **options)
            out = cupy.full((m, n), np.nan, np.float32).astype(bf16)
            kern(a, b, out=out)
            out[...] = np.nan
            kern(a, b, out=out)
            trace = kern.last_trace
            err = float(cupy.linalg.norm(out.astype(cupy.float32) - want) / cupy.linalg.norm(want))
            summary = trace.summary()
            start0 = np.asarray(trace.block_start_ns).min()
            ends = np.asarray(trace.block_end_ns) - start0
            spread = {"block_end_us_min": float(ends.min() / 1e3), "block_end_us_median": float(np.median(ends) / 1e3),
                      "block_end_us_max": float(ends.max() / 1e3)}
            print(f"== {args.shape} {options}: rel error {err:.2e}, block ends (us) min {spread['block_end_us_min']:.1f}"
                  f" median {spread['block_end_us_median']:.1f} max {spread['block_end_us_max']:.1f}")
            # every block's SM and span: whether the late ones share SMs (an L2 partition, a GPC) or tiles
            spread["blocks"] = [[int(b), int(sm), round(float(t0 - start0) / 1e3, 3), round(float(t1 - start0) / 1e3, 3)]
                                for b, sm, t0, t1 in zip(trace.block_ids, trace.block_sm, trace.block_start_ns,
                                                         trace.block_end_ns)]
            late = sorted(spread["blocks"], key=lambda row: -row[3])[:5]
            print("latest blocks (block, SM, end us): " + ", ".join(f"({b}, {sm}, {t1:.1f})" for b, sm, _, t1 in late))
            print(summary)
            rows = [{key: value.item() if isinstance(value, np.generic) else value for key, value in row.items()}
                    for row in summary.rows]
            figures[f"profile_{args.shape}_{text}"] = {"rel_error": err, **spread, "regions": rows}
    path = write_record("profile_gemm", figures, {"shape": args.shape, "nt": args.nt}, sampler=gpu)
    print(f"record: {path}")


if __name__ == "__main__":
    main()
