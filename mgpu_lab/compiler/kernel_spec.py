"""`KernelSpec`: what the builder knows about a kernel besides its MLIR module."""

from __future__ import annotations

import dataclasses
import json
from dataclasses import dataclass

from .compiled_kernel import ArraySpec, KernelParam, ProfilerSpec, SmemBuffer, TmaDescriptorSpec


@dataclass(frozen=True)
class KernelSpec:
    name: str
    grid: tuple[int, int, int]
    block: tuple[int, int, int]
    cluster: tuple[int, int, int]
    inputs: tuple[ArraySpec, ...]
    outputs: tuple[ArraySpec, ...]
    params: tuple[KernelParam, ...]
    tma_descriptors: tuple[TmaDescriptorSpec, ...]
    dynamic_smem_bytes: int
    smem_layout: tuple[SmemBuffer, ...]
    profiler: ProfilerSpec | None = None

    def fingerprint(self) -> str:
        """Stable text of every field, for cache keys."""
        return json.dumps(dataclasses.asdict(self), sort_keys=True)
