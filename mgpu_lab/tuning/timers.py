"""What a timing worker does with one candidate: check it against the reference, then time it.

A timer is picklable; a worker calls `setup` once (inputs as host arrays, the reference output
as a host array) and `measure` for every candidate it is given. `CudaTimer` times compiled
kernels with CUDA events on the worker's GPU; `HostTimer` times plain Python callables on the
CPU (tests, and tuning of host code), so the whole pipeline runs for real without a GPU.
"""

from __future__ import annotations

import statistics
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np


KEEP_LOADED = 16  # kernels a CudaTimer keeps loaded (a re-time of the top k finds them there)


@dataclass(frozen=True)
class Measurement:
    """One candidate's result: median and spread ((p90 - p10) / median) of its runs, rel. error."""

    median_ms: float
    spread: float
    rel_error: float | None


class WrongResult(Exception):
    """The candidate ran but its output is not within rtol of the reference."""


def spread_of(runs_ms: Sequence[float]) -> float:
    s = sorted(runs_ms)
    median = statistics.median(s)
    return (s[(len(s) * 9) // 10] - s[len(s) // 10]) / median if median > 0 else 0.0


def rel_error_host(got: Any, want: np.ndarray) -> float:
    g = np.asarray(got, dtype=np.float64)
    w = np.asarray(want, dtype=np.float64)
    if g.shape != w.shape or not np.isfinite(g).all():
        return float("inf")
    return float(np.linalg.norm(g - w) / max(np.linalg.norm(w), 1e-30))


def _first(out: Any) -> Any:
    return out[0] if isinstance(out, tuple) else out


@dataclass
class HostTimer:
    """Times plain Python callables `payload(*inputs)` with perf_counter (median of `iters`)."""

    warmup: int = 1
    iters: int = 5
    rtol: float = 1e-2
    _sets: list = field(default_factory=list, repr=False)
    _reference: Any = field(default=None, repr=False)

    def setup(self, input_sets: list[tuple], reference: np.ndarray | None) -> str:
        """Keep the inputs; the label of what this worker times on."""
        import os

        self._sets, self._reference = input_sets, reference
        return f"cpu:{os.getpid()}"

    def measure(self, key: str, payload: Callable[..., Any]) -> Measurement:
        error = None
        if self._reference is not None:
            error = rel_error_host(_first(payload(*self._sets[0])), self._reference)
            if not error <= self.rtol:
                raise WrongResult(f"relative error {error:.3g} > {self.rtol}")
        for i in range(self.warmup):
            payload(*self._sets[i % len(self._sets)])
        runs = []
        for i in range(self.iters):
            t0 = time.perf_counter()
            payload(*self._sets[i % len(self._sets)])
            runs.append((time.perf_counter() - t0) * 1e3)
        return Measurement(statistics.median(runs), spread_of(runs), error)

    def poisoned(self) -> bool:
        return False

    def device_model(self, device: int | None = None) -> str:
        import platform

        return f"host {platform.machine()} {platform.processor() or ''}".strip()


@dataclass
class CudaTimer:
    """Times candidate Kernels with CUDA events on this worker's GPU.

    Inputs and the reference are copied to the GPU once per worker; loaded kernels stay loaded
    (keyed by candidate) so a re-time costs no module load. Outputs are allocated once per
    candidate and poisoned with NaN before the checked run, so a kernel that writes nothing
    cannot pass on memory a previous candidate filled."""

    warmup: int = 5
    iters: int = 20
    rtol: float = 1e-2
    _sets: list = field(default_factory=list, repr=False)
    _reference: Any = field(default=None, repr=False)
    _kernels: dict = field(default_factory=dict, repr=False)

    def setup(self, input_sets: list[tuple], reference: np.ndarray | None) -> str:
        import cupy

        cupy.cuda.runtime.free(0)  # create the context now, not inside the first timing
        self._sets = [tuple(cupy.asarray(a) for a in s) for s in input_sets]
        self._reference = None if reference is None else cupy.asarray(reference, dtype=cupy.float32)
        props = cupy.cuda.runtime.getDeviceProperties(cupy.cuda.Device().id)
        name = props["name"].decode() if isinstance(props["name"], bytes) else props["name"]
        return f"{name} (pci {props['pciBusID']:02x})"

    def _kernel(self, key: str, candidate: Any) -> Any:
        """The candidate's Kernel, kept loaded (the most recent KEEP_LOADED) for a re-time."""
        kernel = self._kernels.pop(key, None)
        if kernel is None:
            kernel = candidate
            while len(self._kernels) >= KEEP_LOADED:
                self._kernels.pop(next(iter(self._kernels)))  # the least recently used
        self._kernels[key] = kernel
        return kernel

    def _rel_error(self, got: Any) -> float:
        import cupy

        g = _as_float32(got)
        if g.shape != self._reference.shape or not bool(cupy.isfinite(g).all()):
            return float("inf")
        num = float(cupy.linalg.norm((g - self._reference).ravel()))
        return num / max(float(cupy.linalg.norm(self._reference.ravel())), 1e-30)

    def measure(self, key: str, payload: Any) -> Measurement:
        import cupy

        from ..runtime.timing import time_cuda

        kernel = self._kernel(key, payload)
        sets = self._sets
        out = launch_on_poisoned_outputs(kernel, sets[0])
        outs = out if isinstance(out, tuple) else (out,)
        cupy.cuda.get_current_stream().synchronize()
        error = None
        if self._reference is not None:
            error = self._rel_error(outs[0])
            if not error <= self.rtol:
                raise WrongResult(f"relative error {error:.3g} > {self.rtol}")
        timing = time_cuda(lambda i: kernel(*sets[i % len(sets)], out=out), warmup=self.warmup, iters=self.iters)
        return Measurement(timing.median_ms, timing.spread, error)

    def poisoned(self) -> bool:
        from ..runtime.isolated_worker import context_poisoned

        return context_poisoned()

    def device_model(self, device: int | None = None) -> str:
        """The GPU's model name (a runtime query: no context is created)."""
        import cupy

        props = cupy.cuda.runtime.getDeviceProperties(device or 0)
        return props["name"].decode() if isinstance(props["name"], bytes) else props["name"]


def launch_on_poisoned_outputs(kernel: Any, args: tuple) -> Any:
    """Launch once for the outputs, NaN them, launch again into them; return the outputs. A kernel
    that writes nothing must not pass on memory the pool handed back from an earlier one."""
    out = kernel(*args)
    for o in out if isinstance(out, tuple) else (out,):
        poison(o)
    return kernel(*args, out=out)


def poison(array: Any) -> None:
    """NaN everywhere (bf16 NaN bits for 2-byte custom floats, all-ones bytes otherwise)."""
    import cupy

    if array.dtype.kind == "f":
        array.fill(np.nan)
    elif array.dtype.kind == "V" and array.dtype.itemsize == 2:
        array.view(cupy.uint16).fill(0x7FC0)
    else:
        array.view(cupy.uint8).fill(0xFF)


def _as_float32(array: Any) -> Any:
    """float32 copy on the GPU; bfloat16 (a 2-byte custom dtype CuPy cannot cast) by its bits."""
    import cupy

    if array.dtype.kind == "V" and array.dtype.itemsize == 2:
        return (array.view(cupy.uint16).astype(cupy.uint32) << 16).view(cupy.float32)
    return array.astype(cupy.float32)
