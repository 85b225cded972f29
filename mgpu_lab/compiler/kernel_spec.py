"""`KernelSpec`: what the builder knows about a kernel besides its MLIR module, and the plain
records it is made of (arrays, parameters, TMA descriptors, smem buffers, profiler layout).

No MLIR here: the runtime, exporter and widgets read these through `CompiledKernel.spec`.
"""

from __future__ import annotations

import dataclasses
import functools
import json
from dataclasses import dataclass

import numpy as np

from .dtype_names import ML_ITEMSIZE, dtype_from_name


@dataclass(frozen=True)
class ArraySpec:
    """Shape and dtype of one global-memory array argument or result."""

    shape: tuple[int, ...]
    dtype: str  # numpy dtype name, e.g. "float32", "bfloat16"

    @property
    def nbytes(self) -> int:
        return int(np.prod(self.shape, dtype=np.int64)) * dtype_itemsize(self.dtype)


@dataclass(frozen=True)
class TmaDescriptorSpec:
    """A TMA descriptor the host encodes at launch and passes as a 128-byte kernel parameter.

    `array` indexes the kernel's arrays (inputs first, then outputs). Shapes and strides are
    listed innermost dimension first, in elements, as `cuTensorMapEncodeTiled` wants them.
    """

    array: int
    dtype: str
    global_shape: tuple[int, ...]
    global_strides_bytes: tuple[int, ...]  # for dims 1..rank-1 (innermost has none)
    box_shape: tuple[int, ...]
    swizzle: int  # 0, 32, 64 or 128 bytes


@dataclass(frozen=True)
class KernelParam:
    """One parameter of the compiled kernel entry, in order.

    kind: "array" (a device pointer to array `index`), "tma" (a 128-byte descriptor,
    `index` into `CompiledKernel.tma_descriptors`) or "profile" (pointer to the profiler
    buffer the runtime allocates).
    """

    kind: str
    index: int = 0


@dataclass(frozen=True)
class SmemBuffer:
    """One region of the kernel's dynamic shared memory.

    kind: "buffer", "barrier" (an mbarrier array) or "profiler".
    union: the `Union` group a buffer belongs to (buffers in one group overlap), or -1.
    swizzle: bytes of the swizzle the buffer's users apply (0 when none), so the smem viewer
    can show which logical element lands in which bank.
    """

    path: str
    offset: int
    nbytes: int
    shape: tuple[int, ...]
    dtype: str
    kind: str = "buffer"
    union: int = -1
    swizzle: int = 0


@dataclass(frozen=True)
class ProfilerSpec:
    """How the device-side profiler laid out its buffer; `profiler.format` documents it."""

    region_names: tuple[str, ...]
    unit: str  # "warpgroup" or "warp"
    units_per_block: int
    capacity: int  # events per unit
    words_per_block: int
    smem_offset: int
    # Where the events were kept while the block ran: "smem" (the whole row in shared memory,
    # copied out at the end) or "global" (straight to the row; only headers in smem). The
    # buffer the host reads has the same layout either way.
    buffer: str = "smem"
    # Regions are recorded in the blocks whose linear id is a multiple of it; the other blocks
    # run the kernel's code without records and only stamp their start and end.
    block_stride: int = 1


@dataclass(frozen=True)
class KernelSpec:
    """Launch geometry, arguments, parameters and smem plan of one traced kernel."""

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

    @property
    def num_blocks(self) -> int:
        return self.grid[0] * self.grid[1] * self.grid[2]

    @property
    def threads_per_block(self) -> int:
        return self.block[0] * self.block[1] * self.block[2]

    @classmethod
    def from_json(cls, d: dict) -> KernelSpec:
        """Inverse of `dataclasses.asdict` (lists back to tuples, records back to classes)."""
        profiler = d.get("profiler")
        return cls(
            name=d["name"], grid=tuple(d["grid"]), block=tuple(d["block"]), cluster=tuple(d["cluster"]),
            inputs=tuple(ArraySpec(tuple(a["shape"]), a["dtype"]) for a in d["inputs"]),
            outputs=tuple(ArraySpec(tuple(a["shape"]), a["dtype"]) for a in d["outputs"]),
            params=tuple(KernelParam(**p) for p in d["params"]),
            tma_descriptors=tuple(TmaDescriptorSpec(**{k: tuple(v) if isinstance(v, list) else v
                                                       for k, v in t.items()}) for t in d["tma_descriptors"]),
            dynamic_smem_bytes=d["dynamic_smem_bytes"],
            smem_layout=tuple(SmemBuffer(**{**b, "shape": tuple(b["shape"])}) for b in d["smem_layout"]),
            profiler=ProfilerSpec(**{**profiler, "region_names": tuple(profiler["region_names"])}) if profiler else None,
        )


@functools.lru_cache(maxsize=64)
def dtype_itemsize(dtype: str) -> int:
    """Bytes per element of a dtype name, including the ML types numpy lacks (from a table: no
    ml_dtypes import)."""
    if dtype in ML_ITEMSIZE:
        return ML_ITEMSIZE[dtype]
    return dtype_from_name(dtype).itemsize
