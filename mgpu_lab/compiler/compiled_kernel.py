"""`CompiledKernel`: every artifact of one compilation, as plain data.

This is the hinge of the project. The runtime, profiler host side, widgets and export read
these fields and nothing else; none of them imports MLIR. Every field is JSON-friendly
(bytes aside) so a kernel can be written to a folder and read back.
"""

from __future__ import annotations

import dataclasses
import json
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np


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
class Resources:
    """What ptxas reports for the kernel (`ptxas -v`), parsed."""

    registers: int
    static_smem_bytes: int
    dynamic_smem_bytes: int  # requested at launch by the builder
    spill_stores_bytes: int
    spill_loads_bytes: int
    stack_frame_bytes: int
    const_bytes: int = 0
    barriers: int = 0

    @property
    def total_smem_bytes(self) -> int:
        return self.static_smem_bytes + self.dynamic_smem_bytes


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
class SourceSpan:
    """A user source line and what was generated from it (0-based line indexes)."""

    file: str
    line: int
    ptx_lines: tuple[int, ...]
    sass_lines: tuple[int, ...]


@dataclass(frozen=True)
class ProfilerSpec:
    """How the device-side profiler laid out its buffer; `profiler.format` documents it."""

    region_names: tuple[str, ...]
    unit: str  # "warpgroup" or "warp"
    units_per_block: int
    capacity: int  # events per unit
    words_per_block: int
    smem_offset: int


@dataclass
class CompiledKernel:
    """Everything one compilation produced. Launch it with `mgpu_lab.runtime.launch`."""

    name: str
    target: str  # e.g. "sm_90a"
    grid: tuple[int, int, int]
    block: tuple[int, int, int]
    cluster: tuple[int, int, int]
    inputs: tuple[ArraySpec, ...]
    outputs: tuple[ArraySpec, ...]
    params: tuple[KernelParam, ...]
    tma_descriptors: tuple[TmaDescriptorSpec, ...]
    dynamic_smem_bytes: int
    smem_layout: tuple[SmemBuffer, ...]
    mlir: str  # the module as built, with locations
    ptx: str
    cubin: bytes
    sass: str
    resources: Resources
    passes: tuple[tuple[str, str], ...] = ()  # (pass name, module after it), on request
    line_map: tuple[SourceSpan, ...] = ()
    sources: dict[str, str] = field(default_factory=dict)  # file -> text, for the viewers
    profiler: ProfilerSpec | None = None
    ptxas_log: str = ""
    toolchain: dict[str, str] = field(default_factory=dict)
    cache_key: str = ""
    compile_seconds: dict[str, float] = field(default_factory=dict)
    from_cache: bool = False
    # A Future of (sass, line_map, sources) while nvdisasm runs in the background (it takes
    # ~0.3 s even for tiny kernels, longer than everything else in a compile).
    _pending_disassembly: Any = field(default=None, repr=False, compare=False)

    def __getattribute__(self, name: str) -> Any:
        if name in _DEFERRED_FIELDS:
            pending = object.__getattribute__(self, "_pending_disassembly")
            if pending is not None:
                self.set_disassembly(*pending.result())
        return object.__getattribute__(self, name)

    def set_disassembly(self, sass: str, line_map: tuple[SourceSpan, ...], sources: dict[str, str]) -> None:
        """Fill in the SASS, line map and sources (ends a pending background disassembly)."""
        for name, value in (("sass", sass), ("line_map", line_map), ("sources", sources),
                            ("_pending_disassembly", None)):
            object.__setattr__(self, name, value)

    @property
    def num_blocks(self) -> int:
        return self.grid[0] * self.grid[1] * self.grid[2]

    @property
    def threads_per_block(self) -> int:
        return self.block[0] * self.block[1] * self.block[2]

    def save(self, folder: str | Path) -> Path:
        """Write every artifact to `folder` (created): kernel.json plus .mlir/.ptx/.cubin/.sass."""
        from .kernel_names import check_kernel_name

        check_kernel_name(self.name, "CompiledKernel.name")  # it names the files: no '/', no '..'
        out = Path(folder)
        out.mkdir(parents=True, exist_ok=True)
        (out / f"{self.name}.mlir").write_text(self.mlir)
        (out / f"{self.name}.ptx").write_text(self.ptx)
        (out / f"{self.name}.cubin").write_bytes(self.cubin)
        (out / f"{self.name}.sass").write_text(self.sass)
        if self.ptxas_log:
            (out / f"{self.name}.ptxas.txt").write_text(self.ptxas_log)
        for i, (pass_name, text) in enumerate(self.passes):
            safe = "".join(c if c.isalnum() or c in "-_" else "_" for c in pass_name)[:60]
            (out / "passes").mkdir(exist_ok=True)
            (out / "passes" / f"{i:02d}_{safe}.mlir").write_text(text)
        (out / "kernel.json").write_text(json.dumps(self.to_json(), indent=1))
        return out

    def to_json(self) -> dict[str, Any]:
        """All fields but the cubin as JSON-friendly data (the cubin is written beside it)."""
        self.sass  # noqa: B018 - waits for a background disassembly before copying fields
        data = dataclasses.asdict(self)
        data.pop("cubin")
        data.pop("_pending_disassembly")
        return data

    @classmethod
    def from_json(cls, data: dict[str, Any], cubin: bytes) -> CompiledKernel:
        """Inverse of `to_json`."""
        d = dict(data)
        d["grid"], d["block"], d["cluster"] = (tuple(d[k]) for k in ("grid", "block", "cluster"))
        d["inputs"] = tuple(ArraySpec(tuple(a["shape"]), a["dtype"]) for a in d["inputs"])
        d["outputs"] = tuple(ArraySpec(tuple(a["shape"]), a["dtype"]) for a in d["outputs"])
        d["params"] = tuple(KernelParam(**p) for p in d["params"])
        d["tma_descriptors"] = tuple(
            TmaDescriptorSpec(**{k: tuple(v) if isinstance(v, list) else v for k, v in t.items()})
            for t in d["tma_descriptors"]
        )
        d["smem_layout"] = tuple(
            SmemBuffer(**{**b, "shape": tuple(b["shape"])}) for b in d["smem_layout"]
        )
        d["resources"] = Resources(**d["resources"])
        d["passes"] = tuple(tuple(p) for p in d["passes"])
        d["line_map"] = tuple(
            SourceSpan(s["file"], s["line"], tuple(s["ptx_lines"]), tuple(s["sass_lines"]))
            for s in d["line_map"]
        )
        if d.get("profiler"):
            p = d["profiler"]
            d["profiler"] = ProfilerSpec(**{**p, "region_names": tuple(p["region_names"])})
        return cls(**d, cubin=cubin)

    @classmethod
    def load(cls, folder: str | Path) -> CompiledKernel:
        """Read a kernel written by `save`.

        The folder's single .cubin is read; the name stored in kernel.json never builds a path
        (a crafted name like '../../x' would otherwise read outside the folder)."""
        from .kernel_names import check_kernel_name

        src = Path(folder)
        data = json.loads((src / "kernel.json").read_text())
        check_kernel_name(data.get("name"), f"{src / 'kernel.json'}: name")
        cubins = sorted(p for p in src.glob("*.cubin") if p.is_file())
        if len(cubins) != 1:
            raise ValueError(f"{src}: expected exactly one .cubin file beside kernel.json, found {len(cubins)}")
        return cls.from_json(data, cubins[0].read_bytes())


_DEFERRED_FIELDS = frozenset({"sass", "line_map", "sources"})


def dtype_itemsize(dtype: str) -> int:
    """Bytes per element of a dtype name, including the ML types numpy lacks."""
    special = {"bfloat16": 2, "float8_e4m3fn": 1, "float8_e5m2": 1}
    if dtype in special:
        return special[dtype]
    return np.dtype(dtype).itemsize
