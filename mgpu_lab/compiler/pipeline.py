"""The MLIR pass pipeline from the built module to PTX, run one pass at a time.

Running passes one by one costs a few milliseconds and buys two things: the IR after every
pass on request, and errors that name the pass that failed and the user's line it failed on.
"""

from __future__ import annotations

import linecache
import re
import time

from .._mlir import gpu, ir, passmanager
from ..errors import KernelCompileError
from ..user_errors import describe_location
from .grid_constant_params import mark_descriptor_params


def pass_list(target: str, ptx_version: str, opt_level: int, line_info: bool) -> list[str]:
    """Each entry is one pass spec, anchored on builtin.module."""
    passes = [
        # Bottom-up: on a wide-tile GEMM or attention module (10-16k ops) the default top-down
        # walk took 600-700 ms of a 1-2 s build, this one 90-240 ms, to the same SASS.
        "canonicalize{top-down=false}",
        "cse",
        "convert-nvgpu-to-nvvm",
        "convert-vector-to-scf{full-unroll=true}",
        "convert-scf-to-cf",
        "convert-nvvm-to-llvm",
        "expand-strided-metadata",
        f"nvvm-attach-target{{chip={target} features=+{ptx_version} O={opt_level}}}",
        "lower-affine",
        "convert-arith-to-llvm{index-bitwidth=0}",
        "convert-index-to-llvm{index-bitwidth=64}",
        "canonicalize",
        "cse",
        "gpu.module(convert-gpu-to-nvvm{use-bare-ptr-memref-call-conv=1 index-bitwidth=64})",
        "gpu.module(canonicalize)",
        "gpu.module(cse)",
        "gpu.module(reconcile-unrealized-casts)",
    ]
    if line_info:
        passes.append("ensure-debug-info-scope-on-llvm-func{emission-kind=LineTablesOnly}")
    passes.append("gpu-module-to-binary{format=isa}")
    return passes


_FILE_LINE = re.compile(r'"([^"]+)":(\d+):(\d+)')


def location_file_line(loc: ir.Location) -> tuple[str, int] | None:
    """(file, line) of a location built by `user_locations`, or None for unknown ones."""
    match = _FILE_LINE.search(str(loc))
    return (match.group(1), int(match.group(2))) if match else None


def format_diagnostics(error: ir.MLIRError) -> str:
    """Diagnostics with the user's file:line and source text, notes indented under each."""
    lines = []

    def emit(diag, indent: str) -> None:
        if diag.message.startswith("see current operation"):
            return  # the generic op dump repeats what the user's line already shows
        where = location_file_line(diag.location)
        if where:
            file, line = where
            lines.append(f"{indent}{describe_location(file, line)}: {diag.message}")
            text = linecache.getline(file, line).strip()
            if text:
                lines.append(f"{indent}    {text}")
        else:
            lines.append(f"{indent}{diag.message} (at {diag.location})")
        for note in diag.notes:
            emit(note, indent + "  note: ")

    for diag in error.error_diagnostics:
        emit(diag, "")
    return "\n".join(lines) or str(error)


def verify(module: ir.Module) -> None:
    """Run the MLIR verifier; raise KernelCompileError pointing at the user's lines."""
    try:
        module.operation.verify()
    except ir.MLIRError as e:
        raise KernelCompileError("the kernel's MLIR failed verification:\n" + format_diagnostics(e)) from None


def run_pipeline(module: ir.Module, passes: list[str], keep_ir: bool
                 ) -> tuple[list[tuple[str, str]], list[tuple[str, float]]]:
    """Run `passes` in order on `module` (in place). Returns (pass, IR after) pairs if asked,
    and (pass, seconds) for every pass (a pass that runs twice is listed twice)."""
    recorded: list[tuple[str, str]] = []
    timings: list[tuple[str, float]] = []
    if keep_ir:
        recorded.append(("input", module.operation.get_asm(enable_debug_info=True)))
    for spec in passes:
        t0 = time.perf_counter()
        pm = passmanager.PassManager.parse(f"builtin.module({spec})")
        try:
            pm.run(module.operation)
        except ir.MLIRError as e:
            raise KernelCompileError(
                f"pass {spec!r} failed:\n{format_diagnostics(e)}") from None
        if "convert-gpu-to-nvvm" in spec:
            mark_descriptor_params(module)  # TMA descriptors: byval + grid_constant (see tma.py)
        timings.append((spec, time.perf_counter() - t0))
        if keep_ir:
            recorded.append((spec, module.operation.get_asm(enable_debug_info=True)))
    return recorded, timings


_DYNAMIC_SMEM = re.compile(r"^\s*\.shared\s+\.align\s+\d+\s+\.b8\s+(__dynamic_shmem__\d*);\s*$", re.M)


def _declare_dynamic_smem(ptx: str) -> str:
    """Make gpu.dynamic_shared_memory's global a real dynamic-smem declaration.

    NVPTX prints the zero-length global as a 1-byte *static* shared variable; dynamic smem
    would then start after it and the kernel's last bytes would fall outside the allocation.
    `.extern ... []` is CUDA's declaration of dynamic shared memory; 1024-byte alignment is
    what the 128-byte TMA swizzle needs, and the smem planner's offsets assume it.
    """
    names = _DYNAMIC_SMEM.findall(ptx)
    if not names:
        return ptx
    # LLVM "demotes" the global into the function body; an extern must live at module scope.
    ptx = _DYNAMIC_SMEM.sub("", ptx)
    decls = "".join(f".extern .shared .align 1024 .b8 {name}[];\n" for name in dict.fromkeys(names))
    return re.sub(r"^(\.address_size\s+\d+\s*\n)", lambda m: m.group(1) + decls, ptx, count=1, flags=re.M)


def extract_ptx(module: ir.Module) -> str:
    """The PTX text of the single gpu.binary op the pipeline leaves."""
    for op in module.body.operations:
        if op.operation.name == "gpu.binary":
            objects = op.attributes["objects"]
            ptx = gpu.ObjectAttr(objects[0]).object.decode()
            # NVPTX marks the target ", debug" whenever debug info exists; ptxas then demands
            # -g (no optimization). The .loc/.file line table is all -lineinfo needs.
            ptx = re.sub(r"^(\.target\s+\w+), debug$", r"\1", ptx, count=1, flags=re.M)
            return _declare_dynamic_smem(ptx)
    raise KernelCompileError("the pass pipeline produced no gpu.binary")
