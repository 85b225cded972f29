"""`CompiledKernel`: every artifact of one compilation, as plain data.

This is the hinge of the project. The runtime, profiler host side, widgets and export read
these fields and nothing else; none of them imports MLIR. Every field is JSON-friendly
(bytes aside) so a kernel can be written to a folder and read back. The launch geometry,
arguments and smem plan are the kernel's `spec` (a `KernelSpec`), read through it or through
the same-named properties here.
"""

from __future__ import annotations

import dataclasses
import json
from concurrent.futures import Future
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from .kernel_spec import (  # noqa: F401 - the records are read from here too
    ArraySpec,
    KernelParam,
    KernelSpec,
    ProfilerSpec,
    SmemBuffer,
    TmaDescriptorSpec,
    dtype_itemsize,
)


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
class SourceSpan:
    """A user source line and what was generated from it (0-based line indexes)."""

    file: str
    line: int
    ptx_lines: tuple[int, ...]
    sass_lines: tuple[int, ...]


@dataclass(frozen=True)
class Disassembly:
    """What nvdisasm gives: the SASS listing, the source-line map and the source texts."""

    sass: str
    line_map: tuple[SourceSpan, ...] = ()
    sources: dict[str, str] = field(default_factory=dict)  # file -> text, for the viewers

    @classmethod
    def from_json(cls, d: dict[str, Any]) -> Disassembly:
        spans = tuple(SourceSpan(s["file"], s["line"], tuple(s["ptx_lines"]), tuple(s["sass_lines"]))
                      for s in d.get("line_map", ()))
        return cls(d.get("sass", ""), spans, dict(d.get("sources", {})))


def _read_through(attribute: str) -> property:
    """A read-only property returning `self.spec.<attribute>`."""
    return property(lambda self: getattr(self.spec, attribute), doc=f"`spec.{attribute}` (see KernelSpec)")


@dataclass
class CompiledKernel:
    """Everything one compilation produced; a `Kernel` runs it (`Kernel.compiled`, `Kernel.launches`).

    `disassembly` is a `Disassembly`, or a Future of one while nvdisasm runs in the background
    (~0.3 s even for tiny kernels, longer than everything else in a compile): `wait_disassembly()`
    returns it, and `sass` / `line_map` / `sources` read it (waiting if needed)."""

    spec: KernelSpec
    target: str  # e.g. "sm_90a"
    mlir: str  # the module as built, with locations
    ptx: str
    cubin: bytes
    resources: Resources
    disassembly: Disassembly | Future = field(default_factory=lambda: Disassembly(""), repr=False)
    passes: tuple[tuple[str, str], ...] = ()  # (pass name, module after it), on request
    ptxas_log: str = ""
    toolchain: dict[str, str] = field(default_factory=dict)
    cache_key: str = ""
    compile_seconds: dict[str, float] = field(default_factory=dict)  # phases: mlir_to_ptx, ptxas, nvdisasm
    pass_seconds: tuple[tuple[str, float], ...] = ()  # (pass, seconds) for every MLIR pass, in order
    from_cache: bool = False

    # -- the disassembly, explicitly awaited -------------------------------------------
    def wait_disassembly(self) -> Disassembly:
        """The SASS, line map and sources, waiting for a background nvdisasm if one runs."""
        if isinstance(self.disassembly, Future):
            self.set_disassembly(*self.disassembly.result())
        return self.disassembly

    def __getstate__(self) -> dict:
        """Pickled with its disassembly finished: a Future cannot cross processes (tuning moves
        kernels between compile and timing processes)."""
        state = dict(self.__dict__)
        state["disassembly"] = self.wait_disassembly()
        return state

    def set_disassembly(self, sass: str, line_map: tuple[SourceSpan, ...], sources: dict[str, str]) -> None:
        """Fill in the SASS, line map and sources (ends a pending background disassembly)."""
        self.disassembly = Disassembly(sass, tuple(line_map), dict(sources))

    @property
    def sass(self) -> str:
        return self.wait_disassembly().sass

    @property
    def line_map(self) -> tuple[SourceSpan, ...]:
        return self.wait_disassembly().line_map

    @property
    def sources(self) -> dict[str, str]:
        return self.wait_disassembly().sources

    # -- the spec's fields, read through (one source of truth: `spec`) --------------------
    name = _read_through("name")
    grid = _read_through("grid")
    block = _read_through("block")
    cluster = _read_through("cluster")
    inputs = _read_through("inputs")
    outputs = _read_through("outputs")
    params = _read_through("params")
    tma_descriptors = _read_through("tma_descriptors")
    dynamic_smem_bytes = _read_through("dynamic_smem_bytes")
    smem_layout = _read_through("smem_layout")
    profiler = _read_through("profiler")
    num_blocks = _read_through("num_blocks")
    threads_per_block = _read_through("threads_per_block")

    def renamed(self, name: str) -> CompiledKernel:
        """A copy whose kernel name is `name` (the cubin's entry keeps its own)."""
        return dataclasses.replace(self, spec=dataclasses.replace(self.spec, name=name),
                                   disassembly=self.wait_disassembly())

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
        self.wait_disassembly()
        data = dataclasses.asdict(self)
        data.pop("cubin")
        return data

    @classmethod
    def from_json(cls, data: dict[str, Any], cubin: bytes) -> CompiledKernel:
        """Inverse of `to_json` (also reads the older flat layout, spec fields at the top)."""
        d = dict(data)
        spec_fields = [f.name for f in dataclasses.fields(KernelSpec)]
        spec = d.pop("spec", None) or {k: d.pop(k) for k in spec_fields if k in d}
        if "disassembly" in d:
            disassembly = Disassembly.from_json(d.pop("disassembly"))
        else:
            disassembly = Disassembly.from_json({k: d.pop(k) for k in ("sass", "line_map", "sources") if k in d})
        d.pop("_pending_disassembly", None)
        d["resources"] = Resources(**d["resources"])
        d["passes"] = tuple(tuple(p) for p in d.get("passes", ()))
        d["pass_seconds"] = tuple(tuple(p) for p in d.get("pass_seconds", ()))
        return cls(spec=KernelSpec.from_json(spec), disassembly=disassembly, **d, cubin=cubin)

    @classmethod
    def load(cls, folder: str | Path) -> CompiledKernel:
        """Read a kernel written by `save`.

        The folder's single .cubin is read; the name stored in kernel.json never builds a path
        (a crafted name like '../../x' would otherwise read outside the folder)."""
        from .kernel_names import check_kernel_name

        src = Path(folder)
        data = json.loads((src / "kernel.json").read_text())
        check_kernel_name((data.get("spec") or data).get("name"), f"{src / 'kernel.json'}: name")
        cubins = sorted(p for p in src.glob("*.cubin") if p.is_file())
        if len(cubins) != 1:
            raise ValueError(f"{src}: expected exactly one .cubin file beside kernel.json, found {len(cubins)}")
        return cls.from_json(data, cubins[0].read_bytes())
