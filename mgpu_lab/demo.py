"""`mgpu-lab demo`: build the example kernels, compile them to SASS, print a resource table;
with a GPU, launch each on fresh random inputs and check it against numpy in float64."""

from __future__ import annotations

import re
import time
from collections.abc import Callable
from dataclasses import dataclass

import numpy as np


@dataclass
class DemoRow:
    name: str
    compile_ms: float
    registers: int
    smem: int
    spills: int
    sass_instructions: int
    check: str
    from_cache: bool = False  # every launch came from the on-disk cache: the time is a load, not a compile


def _examples() -> list[tuple[str, Callable, Callable]]:
    from .examples.block_sum import make_block_sum, reference_block_sum
    from .examples.tiled_copy import make_tiled_copy, reference_tiled_copy
    from .examples.vector_add import make_vector_add, reference_vector_add

    def run_vector_add(k, rng, cupy):
        n = k.compiled.inputs[0].shape[0]
        a, b = (rng.standard_normal(n).astype(np.float32) for _ in range(2))
        out = cupy.full((n,), np.nan, np.float32)
        k(cupy.asarray(a), cupy.asarray(b), out=out)
        return out.get(), reference_vector_add(a, b)

    def run_block_sum(k, rng, cupy):
        n, blocks = k.compiled.inputs[0].shape[0], k.compiled.outputs[0].shape[0]
        x = rng.standard_normal(n).astype(np.float32)
        out = cupy.full((blocks,), np.nan, np.float32)
        k(cupy.asarray(x), out=out)
        return out.get(), reference_block_sum(x, blocks)

    def run_tiled_copy(k, rng, cupy):
        shape = k.compiled.inputs[0].shape
        x = rng.standard_normal(shape).astype(np.float32)
        out = cupy.full(shape, np.nan, np.float32)
        k(cupy.asarray(x), out=out)
        return out.get(), reference_tiled_copy(x)

    from .kernels.gemm import make_gemm
    from .examples.scaled_add import make_scaled_add, reference_scaled_add

    def run_scaled_add(k, rng, cupy):
        shape = k.compiled.inputs[0].shape
        x = rng.standard_normal(shape).astype(np.float32)
        out = cupy.full(shape, np.nan, np.float32)
        k(cupy.asarray(x), out=out)
        return out.get(), reference_scaled_add(x)

    def run_gemm(k, rng, cupy):
        import ml_dtypes

        (m, kk), (n, _) = k.compiled.inputs[0].shape, k.compiled.inputs[1].shape
        a = rng.standard_normal((m, kk)).astype(ml_dtypes.bfloat16)
        b = rng.standard_normal((n, kk)).astype(ml_dtypes.bfloat16)
        out = cupy.full((m, n), np.nan, np.float32)
        k(cupy.asarray(a), cupy.asarray(b), out=out)
        return out.get(), a.astype(np.float64) @ b.astype(np.float64).T

    return [
        ("vector_add", lambda: make_vector_add(1 << 22), run_vector_add, 1e-6),
        ("block_sum", lambda: make_block_sum(1 << 22, 1024), run_block_sum, 1e-5),
        ("tiled_copy", lambda: make_tiled_copy(4096, 4096), run_tiled_copy, 0.0),
        ("scaled_add (TMA)", lambda: make_scaled_add(4096, 4096), run_scaled_add, 1e-6),
        ("gemm bf16 (TMA+WGMMA)", lambda: make_gemm(2048, 2048, 2048, transpose_b=True, out_dtype="float32"),
         run_gemm, 1e-2),
    ]


def run_demo(print_fn: Callable[[str], None] = print) -> int:
    """Returns a process exit code: 0 when every kernel compiled (and, on a GPU, checked out)."""
    from .compiler.target import device_capability

    gpu = device_capability() is not None
    rng = np.random.default_rng()
    cupy = None
    if gpu:
        import cupy
    rows, failed = [], False
    for name, make, run, tolerance in _examples():
        t0 = time.perf_counter()
        k = make()
        compile_ms = (time.perf_counter() - t0) * 1e3
        r = k.compiled.resources
        n_instr = len(re.findall(r"/\*[0-9a-f]{4}\*/", k.compiled.sass))
        check = "no GPU: compiled only"
        if gpu:
            got, ref = run(k, rng, cupy)
            err = float(np.linalg.norm(got.astype(np.float64) - ref) / max(np.linalg.norm(ref), 1e-30))
            ok = bool(np.isfinite(got).all()) and err <= tolerance
            failed |= not ok
            check = f"{'ok' if ok else 'FAILED'} (rel. error {err:.1e})"
        rows.append(DemoRow(name, compile_ms, r.registers, r.total_smem_bytes,
                            r.spill_stores_bytes + r.spill_loads_bytes, n_instr, check,
                            all(ck.from_cache for ck in k.launches)))
    target = k.compiled.target
    header = ("kernel", "compile ms", "regs", "smem B", "spill B", "SASS instr", f"check on GPU ({target})")
    table = [header] + [(r.name, f"{r.compile_ms:.0f}" + (" (cache hit)" if r.from_cache else ""), r.registers, r.smem, r.spills, r.sass_instructions, r.check)
                        for r in rows]
    widths = [max(len(str(row[i])) for row in table) for i in range(len(header))]
    for row in table:
        print_fn("  ".join(str(v).ljust(w) for v, w in zip(row, widths)))
    return 1 if failed else 0
