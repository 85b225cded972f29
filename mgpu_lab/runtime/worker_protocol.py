"""The messages between a process and its isolated GPU worker (pickled over a socket pair).

One request at a time; every request gets exactly one reply, except that a worker whose
CUDA context is poisoned sends `Fault` and exits. Replies carry plain data only, so the
parent never needs the worker's CUDA objects.
"""

from __future__ import annotations

import hashlib
from dataclasses import dataclass, field
from typing import Any

from .ipc import ArrayHandle


@dataclass(frozen=True)
class KernelPayload:
    """What the worker needs to load a kernel: the launch spec (`launcher.launch_spec`) and
    its TMA descriptor specs as dicts (descriptors hold pointers, so the worker encodes them)."""

    spec: dict
    tma: tuple[dict, ...] = ()


@dataclass(frozen=True)
class Launch:
    """Launch kernel `digest` once on `arrays` (inputs, then outputs) and wait for it.
    `kernel` is sent only when this worker has not loaded that digest yet."""

    digest: str
    arrays: tuple[ArrayHandle, ...]
    kernel: KernelPayload | None = None


@dataclass(frozen=True)
class Shutdown:
    """Close IPC mappings and exit."""


@dataclass(frozen=True)
class Ready:
    """Sent once by a worker whose CUDA context is up."""

    pid: int
    device: int


@dataclass(frozen=True)
class Done:
    """The launch completed. `profile` is the profiler buffer (numpy) for profiled kernels."""

    seconds: float
    profile: Any = None


@dataclass(frozen=True)
class Fault:
    """A sticky CUDA error: the worker's context is poisoned and the worker exits after this."""

    cuda_error: str  # e.g. "cudaErrorIllegalAddress"
    detail: str  # the driver's description


@dataclass(frozen=True)
class Failed:
    """A non-sticky error (bad launch configuration, a module that does not load, ...): the
    worker's context is still healthy and it keeps serving."""

    error_type: str
    message: str
    details: dict = field(default_factory=dict)


def kernel_digest(spec: dict) -> str:
    """The worker's cache key of a kernel: its cubin and everything it is launched with."""
    h = hashlib.sha256(spec["cubin"])
    for key in ("name", "grid", "block", "cluster", "dynamic_smem", "static_smem", "params", "profile_words"):
        h.update(repr(spec.get(key)).encode())
    return h.hexdigest()
