"""Hopper DSL benchmarks, each a ratio against its peer measured in the same run:

- bf16 GEMM (WGMMA, TMA, warp-specialized; examples/gemm.py), C = A @ B and A @ B.T at
  4096^3 and 8192^3, in TFLOP/s vs torch.matmul (cuBLAS) on the same inputs;
- scaled_add (TMA tiles, y = a * x + b) bandwidth vs a device-to-device copy of the same bytes.

Timing: CUDA events on the current stream, median of `iters` runs after warm-up; inputs rotate
through several sets so no run reads what the previous one left in L2. Every kernel's result is
checked before it is timed.

Run on a GPU machine:  python benchmarks/bench_gemm.py [--quick]
Writes benchmarks/results/gemm_<date>.json (or $OUT/ when set) and prints a table.
"""

from __future__ import annotations

import argparse
import sys
import time

import numpy as np
from common import table, write_record

from mgpu_lab.examples.gemm import make_gemm
from mgpu_lab.examples.scaled_add import make_scaled_add
from mgpu_lab.runtime.timing import time_cuda

ROTATE = 3


def _cupy_view(tensor, dtype):
    """A CuPy array over a torch tensor's memory (no DLPack: CuPy has no bf16 DLPack type)."""
    import cupy

    nbytes = tensor.numel() * tensor.element_size()
    memory = cupy.cuda.UnownedMemory(tensor.data_ptr(), nbytes, tensor)
    return cupy.ndarray(tuple(tensor.shape), dtype=dtype, memptr=cupy.cuda.MemoryPointer(memory, 0))


def gemm(figures: dict, rows: list, sizes: tuple[int, ...], iters: int) -> None:
    """Inputs live in torch tensors (bf16 arithmetic for the reference); our kernel reads the same
    memory through CuPy views."""
    import torch

    for size in sizes:
        for transpose_b in (False, True):
            _gemm_one(figures, rows, torch, size, transpose_b, iters)
        torch.cuda.empty_cache()


def _gemm_one(figures: dict, rows: list, torch, size: int, transpose_b: bool, iters: int) -> None:
    from mgpu_lab.builder.dtypes import numpy_dtype

    bf16 = numpy_dtype("bfloat16")
    m = n = k = size
    flops = 2.0 * m * n * k
    tag = f"{'nt' if transpose_b else 'nn'}_{size}"
    gen = torch.Generator(device="cuda").manual_seed(size)
    ta = [torch.randn((m, k), device="cuda", generator=gen).to(torch.bfloat16) for _ in range(ROTATE)]
    tb = [torch.randn((n, k) if transpose_b else (k, n), device="cuda", generator=gen).to(torch.bfloat16)
          for _ in range(ROTATE)]
    a_sets, b_sets = [_cupy_view(t, bf16) for t in ta], [_cupy_view(t, bf16) for t in tb]
    tout_ours = torch.full((m, n), float("nan"), dtype=torch.bfloat16, device="cuda")
    out = _cupy_view(tout_ours, bf16)
    tout = torch.empty((m, n), dtype=torch.bfloat16, device="cuda")

    t0 = time.perf_counter()
    kern = make_gemm(m, n, k, transpose_b=transpose_b, use_cache=False)
    figures[f"gemm_compile_s_{tag}"] = time.perf_counter() - t0
    kern(a_sets[0], b_sets[0], out=out)
    torch.cuda.synchronize()
    if not transpose_b:  # cold build + first call, the figure JAX's first-call time compares with
        figures[f"gemm_first_call_s_{size}"] = time.perf_counter() - t0
    b32 = tb[0].float()
    ref = ta[0].float() @ (b32.T if transpose_b else b32)
    err = float(torch.linalg.norm(tout_ours.float() - ref) / torch.linalg.norm(ref))
    del ref, b32
    figures[f"gemm_rel_error_{tag}"] = err
    if not err <= 1e-2:
        figures[f"gemm_error_{tag}"] = f"relative error {err:.3g} > 1e-2: not timed"
        rows.append((f"gemm {tag}", f"WRONG (rel err {err:.3g})", "", "", ""))
        return

    def ours(i: int) -> None:
        kern(a_sets[i % ROTATE], b_sets[i % ROTATE], out=out)

    def peer_out(i: int) -> None:
        b = tb[i % ROTATE]
        torch.matmul(ta[i % ROTATE], b.T if transpose_b else b, out=tout)

    def peer_alloc(i: int) -> None:
        b = tb[i % ROTATE]
        torch.matmul(ta[i % ROTATE], b.T if transpose_b else b)

    tf_ours = flops / time_cuda(ours, warmup=10, iters=iters).median_ms / 1e9
    # cuBLAS through torch, with and without `out=`: the peer gets its better figure.
    tf_torch = max(flops / time_cuda(p, warmup=10, iters=iters).median_ms / 1e9 for p in (peer_out, peer_alloc))
    figures[f"gemm_tflops_{tag}"] = tf_ours
    figures[f"gemm_tflops_torch_{tag}"] = tf_torch
    figures[f"gemm_ours_vs_torch_{tag}"] = tf_ours / tf_torch
    rows.append((f"gemm bf16 {tag}", f"ours {tf_ours:.0f} TFLOP/s", f"torch {tf_torch:.0f} TFLOP/s",
                 f"ratio {tf_ours / tf_torch:.3f}", f"rel err {err:.1e}"))


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
        rows.append((f"pallas mosaic {size}", f"ours {ours:.0f} TFLOP/s", f"pallas {best:.0f} TFLOP/s",
                     f"ratio {ours / best:.3f}", f"{tried} configs"))


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
    rows.append(("scaled_add 8192^2 f32 (TMA)", f"ours {gbs_ours:.0f} GB/s", f"copy {gbs_copy:.0f} GB/s",
                 f"ratio {gbs_ours / gbs_copy:.3f}", ""))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--quick", action="store_true", help="4096^3 only, fewer iterations")
    args = parser.parse_args()
    figures: dict = {}
    rows: list = [("benchmark", "ours", "peer", "ratio", "")]
    iters = 20 if args.quick else 50
    sizes = (4096,) if args.quick else (4096, 8192)
    for step in (lambda: scaled_add(figures, rows, iters),
                 lambda: gemm(figures, rows, sizes, iters),
                 *(lambda s=s: pallas_peer(figures, rows, s) for s in sizes)):
        try:
            step()
        except Exception as e:  # noqa: BLE001 - record what failed and keep the other figures
            figures.setdefault("errors", []).append(f"{type(e).__name__}: {e}")
            print(f"error: {type(e).__name__}: {e}", file=sys.stderr)
    path = write_record("gemm", figures)
    print(table(rows))
    print(f"record: {path}")


if __name__ == "__main__":
    main()
