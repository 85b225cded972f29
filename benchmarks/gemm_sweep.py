"""The GEMM sweep's problems, operands and timer, shared by bench_gemm.py and tune_gemm_configs.py.

Problems: squares 1024..16384 (C = A @ B), the projections of 8B- and 70B-class LLMs (Llama-3
shapes, C = X @ W.T as nn.Linear computes it) at M = 16 (decode) to 16384, and the shapes the
issue names. FP8 problems are a subset of the projections (W must be K-major for FP8 wgmma).

Timing: a block of back-to-back launches after a ~2 ms blocking kernel (torch.cuda._sleep), so
the launches queue up behind it and CUDA events measure the GPU alone, not the Python launch
path (a decode GEMM takes ~10 us, about what launching it from Python does). nvbench does the same.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any

L2_FLUSH_BYTES = 200 << 20  # rotate operand sets until this many bytes: several times the 50 MB L2
SLEEP_CYCLES_PER_LAUNCH = 100_000  # ~50 us at 2 GHz: twice what the host needs to enqueue one launch + events
SLEEP_CYCLES_MIN = 3_000_000  # ~2 ms
BLOCK_MS = 25.0  # aim for this much GPU time per timed block


@dataclass(frozen=True)
class Problem:
    m: int
    n: int
    k: int
    transpose_b: bool  # C = A @ B.T (B is an (n, k) weight)
    label: str

    @property
    def key(self) -> str:
        return f"{self.m}x{self.n}x{self.k}"

    @property
    def flops(self) -> float:
        return 2.0 * self.m * self.n * self.k

    def estimate_ms(self, itemsize: int = 2) -> float:
        """A rough duration (the larger of ~600 TFLOP/s compute and ~3.5 TB/s traffic)."""
        traffic = (self.m * self.k + self.n * self.k) * itemsize + self.m * self.n * 2
        return max(self.flops / 600e12, traffic / 3.5e12) * 1e3


# (N, K) of one layer's projections: fused QKV, attention output, fused gate+up, down.
LLAMA_8B = {"qkv": (6144, 4096), "o": (4096, 4096), "gate_up": (28672, 4096), "down": (4096, 14336)}
LLAMA_70B = {"qkv": (10240, 8192), "o": (8192, 8192), "gate_up": (57344, 8192), "down": (8192, 28672)}


def _projection(m: int, model: str, layer: str) -> Problem:
    n, k = (LLAMA_8B if model == "8b" else LLAMA_70B)[layer]
    return Problem(m, n, k, True, f"{model} {layer} M={m}")


def bf16_problems(quick: bool = False) -> list[Problem]:
    """The bf16 sweep: 28 problems (6 with quick=True)."""
    if quick:
        return [Problem(4096, 4096, 4096, False, "square"), _projection(16, "8b", "qkv"),
                _projection(4096, "8b", "gate_up"), _projection(1024, "70b", "o"),
                Problem(2048, 2048, 8192, True, "issue: 128 tiles"), Problem(4000, 4000, 4000, False, "ragged")]
    squares = [Problem(s, s, s, False, "square") for s in (1024, 2048, 4096, 8192, 16384)]
    squares += [Problem(s, s, s, True, "square, B (n, k)") for s in (4096, 8192)]
    projections = [_projection(m, model, layer) for m, model, layer in [
        (16, "8b", "qkv"), (16, "8b", "gate_up"), (16, "8b", "down"), (16, "70b", "qkv"), (16, "70b", "down"),
        (64, "8b", "o"), (128, "8b", "o"), (128, "70b", "gate_up"),
        (1024, "8b", "qkv"), (1024, "8b", "down"), (1024, "70b", "o"),
        (4096, "8b", "gate_up"), (4096, "8b", "down"), (4096, "70b", "qkv"),
        (16384, "8b", "qkv"), (16384, "70b", "down")]]
    named = [Problem(4096, 14336, 4096, True, "issue"), Problem(8192, 8192, 2048, True, "issue"),
             Problem(2048, 2048, 8192, True, "issue: 128 tiles"), Problem(4000, 4000, 4000, False, "ragged"),
             Problem(129, 4096, 4104, True, "ragged decode")]
    return squares + projections + named


def fp8_problems(quick: bool = False) -> list[Problem]:
    """The FP8 sweep (C = A @ B.T, per-tensor scales): 8 problems (3 with quick=True)."""
    problems = [Problem(4096, 4096, 4096, True, "square"), Problem(8192, 8192, 8192, True, "square"),
                _projection(16, "8b", "qkv"), _projection(128, "8b", "o"), _projection(1024, "8b", "qkv"),
                _projection(4096, "8b", "gate_up"), _projection(4096, "70b", "qkv"), _projection(16384, "8b", "qkv")]
    return [problems[0], problems[2], problems[5]] if quick else problems


def cupy_view(tensor: Any, dtype: Any) -> Any:
    """A CuPy array over a torch tensor's memory (CuPy has no bf16 / float8 DLPack type)."""
    import cupy

    nbytes = tensor.numel() * tensor.element_size()
    memory = cupy.cuda.UnownedMemory(tensor.data_ptr(), nbytes, tensor)
    return cupy.ndarray(tuple(tensor.shape), dtype=dtype, memptr=cupy.cuda.MemoryPointer(memory, 0))


def operand_sets(p: Problem, torch: Any, dtype: Any, seed: int = 0) -> list[tuple[Any, Any]]:
    """Enough (A, B) torch pairs, unit-variance values, that rotating through them misses L2."""
    itemsize = torch.empty((), dtype=dtype).element_size()
    per_set = (p.m * p.k + p.n * p.k) * itemsize
    count = max(2, min(16, math.ceil(L2_FLUSH_BYTES / per_set)))
    gen = torch.Generator(device="cuda").manual_seed(seed)
    b_shape = (p.n, p.k) if p.transpose_b else (p.k, p.n)
    return [(torch.randn((p.m, p.k), device="cuda", generator=gen).to(dtype),
             torch.randn(b_shape, device="cuda", generator=gen).to(dtype)) for _ in range(count)]


def iterations(p: Problem, itemsize: int = 2) -> int:
    return max(3, min(100, round(BLOCK_MS / p.estimate_ms(itemsize))))


def blocking_timer(iters: int, warmup: int = 3):
    """A `timer(fn) -> Timing` for common.interleaved_rounds: warm-up, a blocking kernel, then
    `iters` launches each between CUDA events (runtime.timing.time_cuda), all queued behind it."""
    import torch

    from mgpu_lab.runtime.timing import time_cuda

    def timer(fn):
        for i in range(warmup):
            fn(i)
        # on the default stream, which CuPy's current stream is; long enough to enqueue the block behind it
        torch.cuda._sleep(max(SLEEP_CYCLES_MIN, iters * SLEEP_CYCLES_PER_LAUNCH))
        return time_cuda(lambda i: fn(warmup + i), warmup=0, iters=iters)

    return timer


def geomean(values: list[float]) -> float:
    return math.exp(sum(math.log(v) for v in values) / len(values)) if values else float("nan")
