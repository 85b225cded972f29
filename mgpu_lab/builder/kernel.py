"""`mgpu_lab.kernel`: trace a Python body into a gpu.module, compile it, return a `Kernel`
(runtime/kernel.py, the one launchable type; importable from here too)."""

from __future__ import annotations

import dataclasses
import re
import sys
import threading
import traceback
from collections.abc import Callable, Sequence
from typing import Any

from .._mlir import gpu, ir, memref
from ..arguments import flag
from ..compiler.compile import compile_module
from ..compiler.compiled_kernel import ArraySpec, CompiledKernel, KernelParam
from ..compiler.kernel_names import check_kernel_name, kernel_name_from
from ..compiler.kernel_spec import KernelSpec
from ..compiler.options import CompileOptions
from ..errors import KernelBuildError, ResourceLimitError
from ..runtime.kernel import Kernel
from ..user_errors import user_facing
from .control import if_else
from .dtypes import mlir_type
from .launch_context import LaunchContext
from .locations import describe_frame, innermost_user_frame, user_locations
from .shapes import ShapeDtype, as_shape_dtype
from .smem import map_leaves, plan_smem
from .values import index_hint, operand_hint, python_number

MAX_THREADS_PER_BLOCK = 1024
_BLOCK_LIMITS = (1024, 1024, 64)
_GRID_LIMITS = (2**31 - 1, 65535, 65535)
MAX_PORTABLE_CLUSTER = 8


def _dims3(given: Any, what: str) -> tuple[int, int, int]:
    value = (given,) if isinstance(given, int) else given
    if not isinstance(value, (tuple, list)) or not 1 <= len(value) <= 3 \
            or not all(isinstance(v, int) and not isinstance(v, bool) for v in value):  # grid=True is no size
        raise TypeError(f"{what}: expected an int or a tuple of 1-3 ints, got {given!r}")
    dims = tuple(value) + (1,) * (3 - len(value))
    if any(d < 1 for d in dims):
        raise ResourceLimitError(f"{what}: every dimension must be >= 1, got {dims}")
    return dims  # type: ignore[return-value]


def check_launch_dims(grid: tuple[int, int, int], block: tuple[int, int, int],
                      cluster: tuple[int, int, int]) -> None:
    """Raise ResourceLimitError naming the argument for grid/block/cluster out of CUDA's range."""
    for axis, (b, lim) in enumerate(zip(block, _BLOCK_LIMITS)):
        if b > lim:
            raise ResourceLimitError(f"block: dimension {'xyz'[axis]} may be at most {lim}, got {b}")
    threads = block[0] * block[1] * block[2]
    if threads > MAX_THREADS_PER_BLOCK:
        raise ResourceLimitError(
            f"block: at most {MAX_THREADS_PER_BLOCK} threads per block, got {block} = {threads}")
    for axis, (g, lim) in enumerate(zip(grid, _GRID_LIMITS)):
        if g > lim:
            raise ResourceLimitError(f"grid: dimension {'xyz'[axis]} may be at most {lim}, got {g}")
    size = cluster[0] * cluster[1] * cluster[2]
    if size > MAX_PORTABLE_CLUSTER:
        raise ResourceLimitError(f"cluster: at most {MAX_PORTABLE_CLUSTER} blocks per cluster, got {cluster} = {size}")
    for axis, (g, c) in enumerate(zip(grid, cluster)):
        if g % c:
            raise ResourceLimitError(
                f"grid: dimension {'xyz'[axis]} ({g}) must be a multiple of the cluster's ({c})")


def _shape_tuple(shapes: Any, what: str) -> tuple[ShapeDtype, ...]:
    if shapes is None:
        return ()
    if isinstance(shapes, (list, tuple)) and not (
            len(shapes) == 2 and isinstance(shapes[0], (tuple, list)) and not isinstance(shapes[1], (tuple, list))):
        return tuple(as_shape_dtype(s, f"{what}[{i}]") for i, s in enumerate(shapes))
    return (as_shape_dtype(shapes, what),)


@user_facing
def kernel(body: Callable[..., None], *, grid: Any, block: Any, in_shapes: Any = (),
           out_shapes: Any = (), smem: Any = None, cluster: Any = (1, 1, 1), name: str | None = None,
           profile: bool = False, profile_unit: str = "warpgroup", profile_capacity: int = 256,
           profile_buffer: str = "auto", profile_blocks: int | None = None, may_alias: Any = None,
           isolate: bool | None = None, options: CompileOptions | None = None, **option_overrides: Any) -> Kernel:
    """Trace `body(ctx, *in_refs, *out_refs, smem_refs)` into a Hopper kernel and compile it.

    grid, block, cluster: 1-3 ints. in_shapes/out_shapes: ShapeDtype (or (shape, dtype), or an
    array to copy the shape of), one or a sequence. smem: a tree of ShapeDtype / Barriers /
    Union (tuple, list or dict nodes); `smem_refs` mirrors it with memref views.
    profile: record `ctx.named_region`s per warpgroup (or per warp) into a bounded buffer.
    profile_buffer: where the events are kept while a block runs: "smem" (its row of the
    buffer in shared memory beside the kernel's, copied out at the end), "global" (straight to
    global memory; only a few header words in shared memory) or "auto" (smem when the row fits
    within the target's shared memory, else global with a `ProfilerNote` warning).
    profile_blocks: record the regions in every n-th block only (by linear block id); the other
    blocks run the kernel's code with no records (the body is traced twice, once per kind of
    block) and only stamp their start and end. None: every block records.
    may_alias: outputs allowed to overlap inputs in memory (True, or {output index: input
    index}); other overlaps of out= arrays are refused. isolate: run every launch of this
    kernel in the isolated GPU worker (None follows `mgpu_lab.isolated()`).
    Compile options: `options=CompileOptions(...)` and/or its fields as keywords (target=,
    keep_passes=, dump_dir=, max_registers=, mbarrier_timeout_s=, ...); keywords override
    the fields of `options` (default: `CompileOptions.from_env()`).
    """
    if not callable(body):
        raise TypeError(f"body: expected a callable body(ctx, *refs, smem), got {type(body).__name__}")
    # before anything is built: profile="no" is truthy and would profile
    profile = flag("profile", profile)
    isolate = flag("isolate", isolate, optional=True)
    grid3, block3, cluster3 = _dims3(grid, "grid"), _dims3(block, "block"), _dims3(cluster, "cluster")
    check_launch_dims(grid3, block3, cluster3)
    inputs = _shape_tuple(in_shapes, "in_shapes")
    outputs = _shape_tuple(out_shapes, "out_shapes")
    # A name derived from the function is made ASCII; one spelled out must already be valid.
    name = kernel_name_from(getattr(body, "__name__", "kernel")) if name is None else check_kernel_name(name)
    options = merge_options(options, option_overrides)

    plan = plan_smem(smem)
    profiler = None
    if profile:
        profiler = _make_profiler(block3, profile_unit, profile_capacity, profile_buffer, plan.total_bytes,
                                  options, 1 if profile_blocks is None else profile_blocks)
    elif profile_buffer != "auto":  # a typo is caught even where it has no effect
        from .profiling import check_buffer_mode

        check_buffer_mode(profile_buffer)
    _check_occupancy(options, block3)
    dynamic_smem = plan.total_bytes + (profiler.smem_bytes if profiler else 0)
    _check_smem_against_device(dynamic_smem, plan, profiler)

    context = _thread_context()
    with context, ir.Location.unknown(context):
        module = ir.Module.create()
        module.operation.attributes["gpu.container_module"] = ir.UnitAttr.get()
        with ir.InsertionPoint(module.body):
            gpu_module = gpu.GPUModuleOp(f"{name}_module")
            gpu_module.bodyRegion.blocks.append()
        arg_types = [ir.MemRefType.get(list(s.shape), mlir_type(s.dtype)) for s in inputs + outputs]
        if profiler:
            arg_types.append(profiler.buffer_type(grid3))
        body_loc = _body_location(body)
        with ir.InsertionPoint(gpu_module.bodyRegion.blocks[0]):
            # The launcher guarantees 16-byte aligned arrays, so 16-byte vector accesses stay whole.
            align16 = ir.DictAttr.get({"llvm.align": ir.IntegerAttr.get(ir.IntegerType.get_signless(64), 16)})
            func = gpu.GPUFuncOp(ir.FunctionType.get(arg_types, []), sym_name=name, kernel=True,
                                 known_block_size=list(block3), loc=body_loc,
                                 arg_attrs=ir.ArrayAttr.get([align16] * len(arg_types)))
            _set_occupancy(func, options)
            entry = func.add_entry_block()
        ctx = LaunchContext(grid=grid3, block=block3, cluster=cluster3, profiler=profiler, options=options)
        refs = list(entry.arguments)[: len(inputs) + len(outputs)]
        with ir.InsertionPoint(entry):
            smem_refs = _smem_views(plan, dynamic_smem) if smem is not None or profiler else None
            if profiler:
                profiler.start(entry.arguments[len(arg_types) - 1], grid3)
            with ctx.active():
                if profiler and profiler.block_stride > 1:
                    _trace_sampled(body, ctx, refs, smem_refs, name)
                else:
                    _trace(body, ctx, refs, smem_refs, name)
            if profiler:
                profiler.finish()
            gpu.return_([])
        tma_params = _append_tma_params(func, entry, ctx)

    params = [KernelParam("array", i) for i in range(len(inputs) + len(outputs))]
    if profiler:
        params.append(KernelParam("profile"))
    params += [KernelParam("tma", i) for i in range(tma_params)]  # appended after tracing
    spec = KernelSpec(
        name=name, grid=grid3, block=block3, cluster=cluster3,
        inputs=tuple(ArraySpec(s.shape, s.dtype) for s in inputs),
        outputs=tuple(ArraySpec(s.shape, s.dtype) for s in outputs),
        params=tuple(params), tma_descriptors=tuple(ctx.tma_descriptors),
        dynamic_smem_bytes=dynamic_smem,
        smem_layout=tuple(_with_swizzle(r, ctx.smem_swizzles) for r in plan.records)
        + ((profiler.smem_record(),) if profiler else ()),
        profiler=profiler.spec(grid3) if profiler else None,
    )
    with context:
        compiled = compile_module(module, spec, options)
    return Kernel(compiled, may_alias=may_alias, isolate=isolate)


def merge_options(options: CompileOptions | None, overrides: dict[str, Any]) -> CompileOptions:
    """`options` (default: from the environment) with the keyword `overrides` applied."""
    CompileOptions.check_names(overrides)
    if options is None:
        return CompileOptions.from_env(**overrides)
    if not isinstance(options, CompileOptions):
        raise TypeError(f"options: expected a CompileOptions, got {type(options).__name__}")
    return dataclasses.replace(options, **{k: v for k, v in overrides.items() if v is not None})


def _check_occupancy(options: CompileOptions, block: tuple[int, int, int]) -> None:
    regs, blocks = options.max_registers, options.min_blocks_per_sm
    if regs is not None and (not isinstance(regs, int) or not 24 <= regs <= 255):
        raise ValueError(f"max_registers: expected an int in [24, 255] (registers per thread), got {regs!r}")
    if blocks is not None and (not isinstance(blocks, int) or blocks < 1):
        raise ValueError(f"min_blocks_per_sm: expected an int >= 1, got {blocks!r}")
    if regs is not None and blocks is not None:
        threads = block[0] * block[1] * block[2]
        if regs * threads * blocks > 65536:
            raise ResourceLimitError(
                f"max_registers={regs} x {threads} threads x min_blocks_per_sm={blocks} = "
                f"{regs * threads * blocks} registers, more than the SM's 65536")


def _set_occupancy(func: Any, options: CompileOptions) -> None:
    """Launch bounds as NVVM function attributes: LLVM emits `.maxnreg` and `.minnctapersm`
    into the PTX (`.maxntid` comes from the static block size already), and ptxas honours them."""
    i32 = ir.IntegerType.get_signless(32)
    if options.max_registers is not None:
        func.attributes["nvvm.maxnreg"] = ir.IntegerAttr.get(i32, options.max_registers)
    if options.min_blocks_per_sm is not None:
        func.attributes["nvvm.minctasm"] = ir.IntegerAttr.get(i32, options.min_blocks_per_sm)


_contexts = threading.local()
_TRACE_LOCK = threading.RLock()


def _thread_context() -> ir.Context:
    """One MLIR context per thread: creating one (all dialects loaded) costs ~3 ms, more than
    tracing and a cache lookup together."""
    ctx = getattr(_contexts, "ctx", None)
    if ctx is None:
        ctx = _contexts.ctx = ir.Context()
    return ctx


def _with_swizzle(record: Any, swizzles: dict) -> Any:
    """The smem record with the swizzle its TMA copies used, for the smem viewer."""
    swizzle = swizzles.get((record.offset, tuple(record.shape)), 0)
    return dataclasses.replace(record, swizzle=swizzle) if swizzle else record


def _body_location(body: Callable[..., Any]) -> ir.Location:
    code = getattr(body, "__code__", None)
    if code is None:
        return ir.Location.unknown()
    return ir.Location.file(code.co_filename, code.co_firstlineno, 1)


def _trace(body: Callable[..., None], ctx: LaunchContext, refs: Sequence[ir.Value], smem_refs: Any,
           name: str) -> None:
    """Call the body with user locations on; turn its exceptions into KernelBuildError."""
    try:
        # loc_tracebacks is process-wide state: one trace at a time (compiles still overlap).
        with _TRACE_LOCK, user_locations():
            body(ctx, *refs, smem_refs)
    except KernelBuildError:
        raise
    except Exception as e:
        frame = innermost_user_frame(sys.exc_info()[2])
        where = describe_frame(frame) if frame else "(no user frame in the traceback)"
        reason = _operand_error(e)
        raise KernelBuildError(
            f"tracing kernel {name!r} failed at\n  {where}\n{type(reason).__name__}: {reason}") from reason


def _trace_sampled(body: Callable[..., None], ctx: LaunchContext, refs: Sequence[ir.Value], smem_refs: Any,
                   name: str) -> None:
    """The body traced twice behind a branch on the block id (uniform over the block, so no
    warp diverges): the sampled blocks' copy records regions, the others' is the plain code."""
    def unrecorded() -> None:
        with ctx.without_profiler():
            _trace(body, ctx, refs, smem_refs, name)

    if_else(ctx.profiler.block_sampled(), lambda: _trace(body, ctx, refs, smem_refs, name), unrecorded)


_NOT_A_VALUE = re.compile(r'^Operand (\d+) of operation "([\w.]+)" must be a Value')


def _operand_error(error: Exception) -> Exception:
    """`error`, or for the bindings' 'Operand N of operation "op" must be a Value' a TypeError
    naming the argument, what it got and how to write it (`dsl.c(0)`), with the same traceback.

    The generated builder (`LoadOp.__init__`, ...) still holds its arguments and the flat
    `operands` list it made of them: matching the two in order finds the argument operand N
    came from (variadic ones, such as `indices`, give a position too)."""
    found = _NOT_A_VALUE.match(str(error)) if isinstance(error, ValueError) else None
    if found is None:
        return error
    number, op = int(found.group(1)), found.group(2)
    builder = None
    for frame, _ in traceback.walk_tb(error.__traceback__):
        owner = frame.f_locals.get("self")
        if getattr(owner, "OPERATION_NAME", None) == op and isinstance(frame.f_locals.get("operands"), list):
            builder = frame
    if builder is None:
        return error
    operands = builder.f_locals["operands"]
    code = builder.f_code
    what, position = None, 0
    for arg in code.co_varnames[1:code.co_argcount + code.co_kwonlyargcount]:  # [0] is self
        given = builder.f_locals.get(arg)
        if isinstance(given, (list, tuple)):
            size = len(given)
            group = operands[position:position + size]
            # a number stays itself in `operands`; an op given for a value becomes its result
            if len(group) == size and all(o is g or python_number(g) is None for o, g in zip(group, given)):
                if position <= number < position + size:
                    k = number - position
                    what = f"index {k}" if arg == "indices" else f"{arg}[{k}]"
                    break
                position += size
        elif position < len(operands) and operands[position] is given and given is not None:
            if position == number:
                what = arg
                break
            position += 1
    if what is None or number >= len(operands):
        return error
    bad = operands[number]
    if what.startswith("index "):
        message = f"{op}: {index_hint(what, bad)}"
    else:
        like = next((o for o in operands if isinstance(o, ir.Value)), None)
        message = operand_hint(op, what, bad, like)
    hint = TypeError(message).with_traceback(error.__traceback__)
    hint.__context__, hint.__suppress_context__ = error, True  # kept for MGPU_LAB_FULL_TRACEBACK readers
    return hint


def _smem_views(plan: Any, dynamic_smem: int) -> Any:
    workgroup = ir.Attribute.parse("#gpu.address_space<workgroup>")
    i8 = ir.IntegerType.get_signless(8)
    base = gpu.dynamic_shared_memory(ir.MemRefType.get([ir.ShapedType.get_dynamic_size()], i8,
                                                       memory_space=workgroup))

    def view(rec):
        from .values import c

        if rec.kind == "barrier":
            from .barriers import BarrierArray

            ref = memref.view(ir.MemRefType.get([rec.shape[0]], ir.IntegerType.get_signless(64),
                                                memory_space=workgroup), base, c(rec.offset), [])
            return BarrierArray(ref, rec.shape[0])
        ref_type = ir.MemRefType.get(list(rec.shape), mlir_type(rec.dtype), memory_space=workgroup)
        return memref.view(ref_type, base, c(rec.offset), [])

    return map_leaves(plan.tree, view)


def _append_tma_params(func: Any, entry: ir.Block, ctx: LaunchContext) -> int:
    """TMA descriptors are discovered while tracing; add their byval parameters now."""
    count = len(ctx.tma_descriptors)
    if not count:
        return 0
    from .tma import finalize_tma_params

    finalize_tma_params(func, entry, ctx)
    return count


def _make_profiler(block: tuple[int, int, int], unit: str, capacity: int, buffer: str, kernel_smem: int,
                   options: CompileOptions, block_stride: int = 1) -> Any:
    """The DeviceProfiler, with "auto" resolved against the smem the target (and the GPU, when
    there is one) allows a block; a kernel author is told when the events go to global memory."""
    from ..compiler.target import default_target, target_info
    from ..errors import ProfilerNote
    from ..runtime.device import max_dynamic_smem_bytes
    from ..user_errors import warn_at_user
    from .profiling import DeviceProfiler, check_buffer_mode, choose_buffer, smem_area_bytes

    check_buffer_mode(buffer)
    # checks unit, capacity, block_stride
    probe = DeviceProfiler(block, unit=unit, capacity=capacity, smem_offset=kernel_smem, block_stride=block_stride)
    limits = [target_info(options.target or default_target()).max_smem_per_block, max_dynamic_smem_bytes()]
    limit = min(v for v in limits if v is not None)
    chosen = choose_buffer(buffer, units=probe.units, capacity=capacity, kernel_smem=kernel_smem, limit=limit)
    if buffer == "auto" and chosen == "global":
        row = smem_area_bytes(probe.units, capacity, "smem", kernel_smem)
        warn_at_user(f"profile_buffer='auto': the profiler's row ({row} B: {probe.units} {unit}s x {capacity} events) "
                     f"does not fit beside the kernel's {kernel_smem} B of shared memory within {limit} B, so the "
                     f"events go to global memory (profile_buffer='global'); pass profile_buffer='smem' to keep them "
                     f"in shared memory with a smaller profile_capacity", ProfilerNote)
    return probe if chosen == "smem" else DeviceProfiler(block, unit=unit, capacity=capacity,
                                                          smem_offset=kernel_smem, buffer=chosen,
                                                          block_stride=block_stride)


def _check_smem_against_device(total: int, plan: Any, profiler: Any) -> None:
    from ..runtime.device import max_dynamic_smem_bytes

    limit = max_dynamic_smem_bytes()
    if limit is not None and total > limit:
        parts = f"{plan.total_bytes} B of buffers"
        if profiler:
            parts += f" + {profiler.smem_bytes} B of profiler buffer"
        raise ResourceLimitError(
            f"smem: the kernel needs {total} bytes of shared memory ({parts}) but the device "
            f"allows at most {limit} bytes per block")


__all__ = ["Kernel", "check_launch_dims", "kernel", "merge_options"]
