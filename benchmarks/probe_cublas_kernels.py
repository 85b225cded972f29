"""Which kernel cuBLAS runs (name, grid, block, time) for bf16 shapes on and off the 128-byte line:
a probe for why our loads of rows off the line cost more than cuBLAS's. GPU only.

The drawn-shape records put the largest share of the bf16 gap on problems whose rows are off
the 128-byte line (bf16 K, or N for B (k, n), not a multiple of 64): 0.877x cuBLAS on 80 of 448
shapes at 3e725ca, against 0.960x for aligned problems of the same size. The kernel names say
whether cuBLAS changes scheme there (TMA or cp.async loads, tile and cluster shape, split-K).

Run on a GPU machine:  python benchmarks/probe_cublas_kernels.py [--shapes 517x1712x12104,322x1560x2144:nn]
(`--shapes`: MxNxK with B (n, k) unless `:nn`, instead of the list below.)
Writes `cublas_kernels_<time>_<commit>.json` (under $OUT when set) and prints a table last.
"""

from __future__ import annotations

import argparse

from common import parse_shapes, table, write_record

# (m, n, k, B as (n, k)): pairs on and off the line, and the slowest drawn off-line shapes
SHAPES = [
    (4096, 4096, 4096, True), (4096, 4096, 4104, True), (4096, 4096, 4136, True),
    (4096, 4104, 4096, False), (2198, 2784, 4968, True), (5286, 536, 8656, True),
    (550, 2616, 26064, False), (1161, 1424, 11496, False), (7900, 848, 25368, True),
]


def kernels_of(torch, fn) -> list[dict]:
    """The CUDA kernels one call of fn launches: name, grid, block, device time."""
    from torch.profiler import ProfilerActivity, profile

    fn()
    torch.cuda.synchronize()
    with profile(activities=[ProfilerActivity.CUDA]) as prof:
        fn()
        torch.cuda.synchronize()
    out = []
    for event in prof.events():
        if event.device_type.name != "CUDA":
            continue
        out.append({"name": event.name, "us": round(event.device_time, 2) if hasattr(event, "device_time")
                    else round(event.cuda_time, 2)})
    return out


def main() -> None:
    import torch

    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--shapes", help="comma-separated MxNxK[:nt|:nn] (B (n, k) unless :nn) instead of SHAPES")
    args = parser.parse_args()
    figures: dict = {}
    rows = [("shape", "layout", "kernel", "us")]
    for m, n, k, transpose_b in parse_shapes(args.shapes) if args.shapes else SHAPES:
        a = torch.randn(m, k, dtype=torch.bfloat16, device="cuda")
        b = torch.randn((n, k) if transpose_b else (k, n), dtype=torch.bfloat16, device="cuda")
        fn = (lambda a=a, b=b: a @ b.T) if transpose_b else (lambda a=a, b=b: a @ b)
        key = f"{m}x{n}x{k}_{'nt' if transpose_b else 'nn'}"
        kernels = kernels_of(torch, fn)
        figures[f"cublas_kernels_{key}"] = kernels
        for kernel in kernels:
            rows.append((f"{m}x{n}x{k}", "nt" if transpose_b else "nn", kernel["name"][:110], kernel["us"]))
        del a, b
    write_record("cublas_kernels", figures, notes={"torch": torch.__version__})
    print(table(rows))


if __name__ == "__main__":
    main()
