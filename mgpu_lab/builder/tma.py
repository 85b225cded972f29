"""TMA (cp.async.bulk.tensor) copies between global and shared memory.

`ctx.async_copy(src_ref=, dst_ref=, gmem_slice=, swizzle=, barrier=)` copies one box. The
global side must be a kernel argument; the box is `gmem_slice` of it, whose shape (without
the dimensions indexed by an int) must equal the smem ref's. Every distinct (array, box,
swizzle) gets a TMA descriptor: the host encodes it at launch (runtime/tma_descriptor.py)
and passes it as a 128-byte `__grid_constant__` kernel parameter, which the kernel reads in
place (its generic address goes straight to the copy instruction).

How the parameter is built: during tracing each descriptor becomes a new `!llvm.ptr` argument
of the entry block; `finalize_tma_params` fixes the gpu.func's type and marks the arguments
with the `mgpu_lab.tma_params` function attribute; after convert-gpu-to-nvvm (which keeps only
some argument attributes), `mark_descriptor_params` gives the llvm.func arguments
`llvm.byval = !llvm.array<128 x i8>`, `nvvm.grid_constant` and `llvm.align = 64`, so the
PTX declares `.param .align 64 .b8 name[128]` and reads it with `cvta.param`.

Loads complete on an mbarrier (`barrier=`; by default the issuing thread also does
`arrive.expect_tx` with the box's bytes). Stores go into a bulk group; `await_async_copy(n)`
waits until at most n groups of the calling thread are pending.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

from .._mlir import arith, gpu, ir
from ..compiler.compiled_kernel import TmaDescriptorSpec
from ..compiler.grid_constant_params import DESCRIPTOR_ALIGN, TMA_PARAMS_ATTR
from .barriers import BarrierRef
from .values import as_index, c
from .dtypes import bitwidth, dtype_of_mlir
from .memref_ops import DynamicSlice, memref_slice
from .transforms import MemRefTransform
from .ptx import global_address, i32, inline_ptx, smem_address
from .warpgroup import cluster_rank, single_thread, warpgroup_barrier

if TYPE_CHECKING:
    from .launch_context import LaunchContext

MAX_RANK = 5
MAX_BOX_DIM = 256
SWIZZLES = (0, 32, 64, 128)
_WORKGROUP = "#gpu.address_space<workgroup>"


def _is_smem(ref_type: ir.MemRefType) -> bool:
    return ref_type.memory_space is not None and str(ref_type.memory_space) == _WORKGROUP


def _is_gmem(ref_type: ir.MemRefType) -> bool:
    return ref_type.memory_space is None


def _entry_block_of_kernel() -> ir.Block:
    """The entry block of the gpu.func being traced (walk up from the insertion point)."""
    op = ir.InsertionPoint.current.block.owner
    while op is not None and op.operation.name != "gpu.func":
        op = op.operation.parent
    if op is None:
        raise ValueError("async_copy must be called while tracing a kernel body")
    return op.operation.regions[0].blocks[0]


def _kernel_array_index(ref: ir.Value, ctx: LaunchContext) -> int:
    """Which kernel array argument `ref` is; explain what is accepted otherwise."""
    try:
        arg = ir.BlockArgument(ref)
    except (ValueError, TypeError):
        arg = None
    if arg is None:
        raise ValueError(
            "async_copy: the global-memory ref must be a kernel array argument itself (select the "
            "box with gmem_slice=, not by slicing the ref first)")
    entry = _entry_block_of_kernel()
    if arg.owner != entry:
        raise ValueError("async_copy: the global-memory ref must be an argument of the kernel being traced")
    index = arg.arg_number
    if ctx.profiler is not None and index == _array_arg_count(entry, ctx):
        raise ValueError("async_copy: the profiler buffer cannot be copied with TMA")
    return index


def _array_arg_count(entry: ir.Block, ctx: LaunchContext) -> int:
    n = len(entry.arguments) - len(ctx.tma_params)
    return n - 1 if ctx.profiler is not None else n


def _parse_slice(gmem_slice: Any, shape: Sequence[int]) -> tuple[list[int | ir.Value], list[int], list[bool]]:
    """(start indices, slice shape, squeezed?) per dimension of a gmem_slice."""
    index = gmem_slice if isinstance(gmem_slice, tuple) else (gmem_slice,)
    if len(index) > len(shape):
        raise ValueError(f"gmem_slice: {len(index)} indices for a rank-{len(shape)} array")
    index = index + (slice(None),) * (len(shape) - len(index))
    starts, sizes, squeezed = [], [], []
    for dim, (idx, extent) in enumerate(zip(index, shape)):
        if isinstance(idx, slice):
            start, stop, step = idx.indices(extent)
            if step != 1:
                raise ValueError(f"gmem_slice: dimension {dim}: only step 1 is supported, got {step}")
            starts.append(start), sizes.append(stop - start), squeezed.append(False)
        elif isinstance(idx, DynamicSlice):
            if isinstance(idx.start, int) and not 0 <= idx.start < extent:
                raise ValueError(f"gmem_slice: dimension {dim}: start {idx.start} is outside [0, {extent})")
            starts.append(idx.start), sizes.append(idx.size), squeezed.append(False)
        elif isinstance(idx, (int, ir.Value)):
            if isinstance(idx, int) and not 0 <= idx < extent:
                raise ValueError(f"gmem_slice: dimension {dim}: index {idx} is outside [0, {extent})")
            starts.append(idx), sizes.append(1), squeezed.append(True)
        else:
            raise TypeError(f"gmem_slice: dimension {dim}: expected an int, index value, slice or ds(), "
                            f"got {type(idx).__name__}")
    return starts, sizes, squeezed


def _contiguous_shape(ref_type: ir.MemRefType, what: str, op: str = "async_copy",
                      kind: str = "smem buffer") -> tuple[int, ...]:
    shape = tuple(ref_type.shape)
    strides, _ = ref_type.get_strides_and_offset()
    expected, acc = [], 1
    for d in reversed(shape):
        expected.insert(0, acc)
        acc *= d
    if any(s != e for s, e, d in zip(strides, expected, shape) if d != 1):
        raise ValueError(f"{op}: {what} must be a contiguous row-major {kind}, got {ref_type}")
    return shape


def check_tma_box(*, array: int, what: str, global_shape: Sequence[int], global_strides: Sequence[int],
                  box: Sequence[int], itemsize: int, swizzle: int) -> None:
    """Hopper's TMA rules, with errors naming the argument (shapes/strides outermost first,
    strides in elements)."""
    rank = len(global_shape)
    if not 1 <= rank <= MAX_RANK:
        raise ValueError(f"async_copy: {what} has rank {rank}; TMA supports ranks 1 to {MAX_RANK}")
    if swizzle not in SWIZZLES:
        raise ValueError(f"async_copy: swizzle must be one of None, 32, 64, 128 (bytes), got {swizzle!r}")
    if global_strides[-1] != 1:
        raise ValueError(f"async_copy: the innermost dimension of {what} must have stride 1 for TMA, "
                         f"got strides {tuple(global_strides)}")
    for dim, stride in enumerate(global_strides[:-1]):
        nbytes = stride * itemsize
        if nbytes % 16:
            raise ValueError(
                f"async_copy: {what} dimension {dim} has a stride of {nbytes} bytes; TMA needs global "
                f"strides that are multiples of 16 bytes (expected a multiple of {16 // math.gcd(16, itemsize)} "
                f"elements along the inner dimensions, shape {tuple(global_shape)})")
        if nbytes >= 1 << 40:
            raise ValueError(f"async_copy: {what} dimension {dim} has a stride of {nbytes} bytes; TMA allows < 2**40")
    for dim, b in enumerate(box):
        if not 1 <= b <= MAX_BOX_DIM:
            raise ValueError(f"async_copy: the box (gmem_slice shape {tuple(box)}) has {b} elements in "
                             f"dimension {dim}; TMA boxes allow 1 to {MAX_BOX_DIM} per dimension")
    inner_bytes = box[-1] * itemsize
    if swizzle:
        if inner_bytes > swizzle:
            raise ValueError(
                f"async_copy: the innermost box dimension is {inner_bytes} bytes ({box[-1]} elements) but "
                f"swizzle={swizzle} allows at most {swizzle} bytes; expected at most {swizzle // itemsize} "
                f"elements (split the copy, or use a larger swizzle)")
    elif inner_bytes % 16:
        raise ValueError(
            f"async_copy: the innermost box dimension is {inner_bytes} bytes ({box[-1]} elements); TMA "
            f"needs a multiple of 16 bytes (expected a multiple of {16 // math.gcd(16, itemsize)} elements)")
    del array


def _planned_buffer(ref: ir.Value) -> tuple[int, tuple[int, ...]] | None:
    """(byte offset, shape) of the planned smem buffer a view derives from, when it is static.

    Follows subviews and reshapes back to the `memref.view` of dynamic smem the kernel builder
    made for the buffer; None for anything else."""
    value = ref
    for _ in range(16):
        owner = value.owner
        if not isinstance(owner, ir.Operation) and not hasattr(owner, "operation"):
            return None
        op = owner.operation if hasattr(owner, "operation") else owner
        if op.name == "memref.view":
            shift = op.operands[1].owner
            shift = shift.operation if hasattr(shift, "operation") else shift
            if shift.name != "arith.constant":
                return None
            offset = ir.IntegerAttr(shift.attributes["value"]).value
            return offset, tuple(ir.MemRefType(op.results[0].type).shape)
        if op.name not in ("memref.subview", "memref.expand_shape", "memref.collapse_shape",
                           "memref.transpose", "memref.reinterpret_cast"):
            return None
        value = op.operands[0]
    return None


def _descriptor(ctx: LaunchContext, spec: TmaDescriptorSpec) -> ir.Value:
    """The kernel parameter holding `spec`'s descriptor (one per distinct spec)."""
    for known, value in zip(ctx.tma_descriptors, ctx.tma_params):
        if known == spec:
            return value
    entry = _entry_block_of_kernel()
    value = entry.add_argument(ir.Type.parse("!llvm.ptr"), ir.Location.unknown())
    ctx.tma_descriptors.append(spec)
    ctx.tma_params.append(value)
    return value


def _issuer(uniform: Any):
    if uniform is True:
        return single_thread("warpgroup")
    if uniform in ("warp", "warpgroup", "block"):
        return single_thread(uniform)
    if uniform is False:
        import contextlib

        return contextlib.nullcontext()
    raise ValueError(f"async_copy: uniform must be True, False, 'warp', 'warpgroup' or 'block', got {uniform!r}")


def async_copy(ctx: LaunchContext, *, src_ref: ir.Value, dst_ref: ir.Value, gmem_slice: Any = (),
               gmem_transform: MemRefTransform | tuple[MemRefTransform, ...] = (),
               swizzle: int | None = None, barrier: BarrierRef | None = None,
               arrive: bool | None = None, uniform: Any = True, collective: str | Sequence[str] | None = None,
               multicast_mask: int | ir.Value | None = None) -> None:
    """Start a TMA copy of one box between a kernel array and a shared-memory buffer.

    GMEM -> SMEM: `barrier` (a BarrierRef) is required; with arrive=True (default) the issuing
    thread also does `arrive.expect_tx(box bytes)` on it; pass arrive=False when you call
    `barrier.arrive_expect_tx(total)` yourself for several copies.
    SMEM -> GMEM: no barrier; the copy joins a bulk group (committed here); wait with
    `await_async_copy`. Make the smem writes visible first (`warpgroup.commit_shared()` or
    `fence_async_shared()` + a barrier).
    uniform: True issues from one thread of the calling warpgroup (elect.sync in its first
    warp), 'block'/'warp' from one thread of those, False from the calling thread itself.
    swizzle: 32/64/128-byte swizzle of the smem side (None: no swizzle); the smem buffer must
    then be aligned to 1024 bytes (the planner does that for buffers >= 1 KiB).

    Clusters (loads only; `.multicast::cluster`):
    collective: cluster axes ('x', ('x', 'y'), ...): the blocks along them load the box together.
    Each loads 1/n of it (n = the cluster's size along those axes; a slice of the smem ref's first
    dimension) and multicasts it into the same smem offset of all n blocks, completing bytes on
    the barrier at the same offset in each. Every block receives the whole box, so the default
    arrive expects the whole box's bytes. Initialize the barriers with `init(..., sync="cluster")`.
    multicast_mask: a 16-bit mask of cluster ranks (int or value): this block loads the whole box
    into each of them (arrive=True expects the box's bytes on this block's barrier).
    """
    src_type, dst_type = ir.MemRefType(src_ref.type), ir.MemRefType(dst_ref.type)
    if src_type.element_type != dst_type.element_type:
        raise ValueError(f"async_copy: src_ref and dst_ref must have the same element type, got "
                         f"{src_type.element_type} and {dst_type.element_type}")
    if _is_gmem(src_type) and _is_smem(dst_type):
        gmem_ref, smem_ref, load = src_ref, dst_ref, True
        if barrier is None:
            raise ValueError("async_copy: a GMEM -> SMEM copy needs barrier= (a BarrierRef such as barriers[0])")
        if not isinstance(barrier, BarrierRef):
            raise TypeError(f"async_copy: barrier must be a BarrierRef (e.g. barriers[i]), got {type(barrier).__name__}")
        arrive = True if arrive is None else arrive
    elif _is_smem(src_type) and _is_gmem(dst_type):
        gmem_ref, smem_ref, load = dst_ref, src_ref, False
        if barrier is not None or arrive is not None:
            raise ValueError("async_copy: barrier= and arrive= apply to GMEM -> SMEM copies only; SMEM -> GMEM "
                             "copies complete in bulk groups (see await_async_copy)")
    else:
        raise ValueError(f"async_copy: expected one global (kernel argument) and one shared memref, got "
                         f"src_ref {src_type} and dst_ref {dst_type}")
    swizzle = swizzle or 0
    array = _kernel_array_index(gmem_ref, ctx)
    gmem_type = ir.MemRefType(gmem_ref.type)
    what = f"the {'src_ref' if load else 'dst_ref'} array (kernel argument {array})"
    starts, slice_shape, squeezed = _parse_slice(gmem_slice, gmem_type.shape)
    for dim, (start, size, extent) in enumerate(zip(starts, slice_shape, gmem_type.shape)):
        if isinstance(start, int) and start + size > extent:
            raise ValueError(f"async_copy: gmem_slice dimension {dim}: [{start}, {start + size}) is outside "
                             f"[0, {extent}) of {what}")

    transforms = gmem_transform if isinstance(gmem_transform, tuple) else (gmem_transform,)
    view, indices, box = gmem_ref, [as_index(s) for s in starts], tuple(slice_shape)
    for t in transforms:
        view = t.apply(view)
        indices = list(t.transform_index(indices))
        box = tuple(t.transform_shape(box))
    view_type = ir.MemRefType(view.type)
    strides, offset = view_type.get_strides_and_offset()
    if offset != 0:
        raise ValueError(f"async_copy: gmem_transform must keep offset 0, got {view_type}")

    smem_shape = _contiguous_shape(ir.MemRefType(smem_ref.type), "the smem ref")
    expected = tuple(s for s, sq in zip(slice_shape, squeezed) if not sq)
    if transforms:
        # The box is in the transformed layout; squeezed logical dims are size-1 dims of it.
        if tuple(d for d in box if d != 1) != tuple(d for d in smem_shape if d != 1):
            raise ValueError(f"async_copy: the smem ref has shape {smem_shape} but the transformed gmem box is {box}")
    elif smem_shape != expected:
        raise ValueError(f"async_copy: the smem ref has shape {smem_shape} but gmem_slice selects {expected} "
                         f"(from {what}, shape {tuple(gmem_type.shape)})")

    itemsize = bitwidth(gmem_type.element_type) // 8
    nbytes = math.prod(box) * itemsize  # what each receiving block gets
    mask = None
    if collective is not None or multicast_mask is not None:
        if not load:
            raise ValueError("async_copy: collective= and multicast_mask= apply to GMEM -> SMEM copies (TMA "
                             "multicast loads) only")
        if collective is not None and multicast_mask is not None:
            raise ValueError("async_copy: pass collective= or multicast_mask=, not both")
        if math.prod(ctx.cluster) == 1:
            raise ValueError("async_copy: collective=/multicast_mask= multicast within a cluster; build the kernel "
                             "with cluster=(2, 1, 1) or larger (got cluster=(1, 1, 1))")
        if multicast_mask is not None:
            mask = _mask_value(multicast_mask, math.prod(ctx.cluster))
        else:
            if transforms:
                raise ValueError("async_copy: collective= does not combine with gmem_transform=")
            dim = squeezed.index(False) if False in squeezed else None
            if dim is None:
                raise ValueError("async_copy: collective= splits the box's first dimension; this box has none")
            part, index, mask = _collective_split(ctx, collective, smem_shape, itemsize, swizzle)
            offset = index * part
            indices[dim] = indices[dim] + offset
            box = tuple(part if d == dim else b for d, b in enumerate(box))
            smem_ref = memref_slice(smem_ref, DynamicSlice(offset, part))
    check_tma_box(array=array, what=what, global_shape=view_type.shape, global_strides=strides, box=box,
                  itemsize=itemsize, swizzle=swizzle)
    spec = TmaDescriptorSpec(
        array=array, dtype=_dtype_of(gmem_type.element_type),
        global_shape=tuple(reversed(view_type.shape)),
        global_strides_bytes=tuple(s * itemsize for s in reversed(strides[:-1])),
        box_shape=tuple(reversed(box)), swizzle=swizzle)
    desc = _descriptor(ctx, spec)
    if swizzle:
        planned = _planned_buffer(smem_ref)
        if planned is not None:
            ctx.smem_swizzles[planned] = swizzle
    rank = len(box)
    coords = [arith.index_cast(i32(), i) for i in reversed(indices)]
    coord_list = ", ".join(f"${i + 2}" for i in range(rank))

    with _issuer(uniform):
        smem_addr = smem_address(smem_ref)
        if load:
            if arrive:
                barrier.arrive_expect_tx(nbytes)
            if mask is not None:
                inline_ptx(
                    f"cp.async.bulk.tensor.{rank}d.shared::cluster.global.tile.mbarrier::complete_tx::bytes"
                    f".multicast::cluster [$0], [$1, {{{coord_list}}}], [${rank + 2}], ${rank + 3};",
                    [smem_addr, desc, *coords, barrier.address(), mask], ["r", "l"] + ["r"] * rank + ["r", "h"])
                return
            inline_ptx(
                f"cp.async.bulk.tensor.{rank}d.shared::cluster.global.tile.mbarrier::complete_tx::bytes "
                f"[$0], [$1, {{{coord_list}}}], [${rank + 2}];",
                [smem_addr, desc, *coords, barrier.address()], ["r", "l"] + ["r"] * rank + ["r"])
        else:
            inline_ptx(
                f"cp.async.bulk.tensor.{rank}d.global.shared::cta.tile.bulk_group [$1, {{{coord_list}}}], [$0];",
                [smem_addr, desc, *coords], ["r", "l"] + ["r"] * rank)
            inline_ptx("cp.async.bulk.commit_group;")


_AXES = "xyz"


def async_bulk_load(*, src_ref: ir.Value, dst_ref: ir.Value, barrier: BarrierRef, arrive: bool = False) -> None:
    """(The calling thread.) Copy a contiguous global-memory view into a contiguous smem buffer
    of the same bytes with one bulk copy (`cp.async.bulk`, no TMA descriptor, no box limits),
    completing its bytes on `barrier`; arrive=True also does `arrive.expect_tx(bytes)` there.
    Both start 16-byte aligned and the size is a multiple of 16 bytes. For data that is
    already laid out as the smem buffer wants it, e.g. a partial tile another block wrote.
    Reading what other blocks wrote with generic stores: acquire it first (`dsl.wait_signal`,
    which also orders the async proxy's reads after the acquire)."""
    src_type, dst_type = ir.MemRefType(src_ref.type), ir.MemRefType(dst_ref.type)
    if not _is_gmem(src_type) or not _is_smem(dst_type):
        raise ValueError(f"async_bulk_load: src_ref must be a global and dst_ref a shared-memory memref, got "
                         f"{src_type} and {dst_type}")
    if not isinstance(barrier, BarrierRef):
        raise TypeError(f"async_bulk_load: barrier must be a BarrierRef (e.g. barriers[i]), got "
                        f"{type(barrier).__name__}")
    nbytes = [math.prod(_contiguous_shape(ref_type, name, "async_bulk_load", "view"))
              * bitwidth(ref_type.element_type) // 8 for name, ref_type in (("src_ref", src_type), ("dst_ref", dst_type))]
    if nbytes[0] != nbytes[1] or nbytes[0] % 16:
        raise ValueError(f"async_bulk_load: src_ref and dst_ref must hold the same bytes, a multiple of 16; got "
                         f"{nbytes[0]} and {nbytes[1]}")
    if arrive:
        barrier.arrive_expect_tx(nbytes[0])
    inline_ptx("cp.async.bulk.shared::cluster.global.mbarrier::complete_tx::bytes [$0], [$1], $2, [$3];",
               [smem_address(dst_ref), global_address(src_ref), c(nbytes[0], i32()), barrier.address()],
               ["r", "l", "r", "r"])


def _mask_value(mask: int | ir.Value, cluster_size: int) -> ir.Value:
    """A multicast_mask as the i16 the instruction takes."""
    i16 = ir.IntegerType.get_signless(16)
    if isinstance(mask, int):
        if not 0 < mask < 1 << cluster_size:
            raise ValueError(f"async_copy: multicast_mask must select blocks of the {cluster_size}-block cluster: an "
                             f"int in [1, {(1 << cluster_size) - 1}], got {mask:#x}")
        return c(mask, i16)
    if isinstance(mask.type, ir.IndexType):
        mask = arith.index_cast(i32(), mask)
    width = ir.IntegerType(mask.type).width
    return mask if width == 16 else (arith.trunci(i16, mask) if width > 16 else arith.extui(i16, mask))


def _collective_split(ctx: LaunchContext, collective: Any, smem_shape: Sequence[int], itemsize: int,
                      swizzle: int) -> tuple[int, ir.Value, ir.Value]:
    """(rows per block, this block's index among the collective blocks, the i16 multicast mask)."""
    axes = (collective,) if isinstance(collective, str) else tuple(collective)
    if not axes or any(a not in _AXES for a in axes) or len(set(axes)) != len(axes):
        raise ValueError(f"async_copy: collective must name distinct cluster axes 'x', 'y', 'z' (a str or a tuple), "
                         f"got {collective!r}")
    sizes = dict(zip(_AXES, ctx.cluster))
    for a in axes:
        if sizes[a] == 1:
            raise ValueError(f"async_copy: collective axis {a!r} has cluster size 1 (cluster={ctx.cluster}); "
                             f"nothing to share along it")
    count = math.prod(sizes[a] for a in axes)
    rows = smem_shape[0]
    if rows % count:
        raise ValueError(f"async_copy: collective={axes} splits the smem ref's first dimension ({rows}) among "
                         f"{count} blocks; it must be a multiple of {count}")
    part = rows // count
    part_bytes = part * math.prod(smem_shape[1:]) * itemsize
    align = 8 * swizzle if swizzle else 128
    if part_bytes % align:
        raise ValueError(f"async_copy: collective={axes}: each block's part is {part} rows = {part_bytes} bytes; "
                         f"it must be a multiple of {align} bytes ({'the swizzle period' if swizzle else 'TMA'}"
                         f"'s alignment); load a larger box or use fewer blocks")
    rank_stride = {"x": 1, "y": sizes["x"], "z": sizes["x"] * sizes["y"]}
    # This block's cluster coordinates from %cluster_ctarank and the static cluster shape (reading
    # %cluster_ctaid costs a runtime division when the PTX does not declare the cluster shape).
    rank = arith.index_cast(ir.IndexType.get(), cluster_rank())
    coord = {a: rank // rank_stride[a] % sizes[a] for a in _AXES if sizes[a] > 1}
    index, stride = c(0), 1
    for a in axes:  # this block's position among the collective blocks, first axis fastest
        index = index + coord[a] * stride
        stride *= sizes[a]
    pattern = 0
    for flat in range(count):  # ranks of the collective blocks that share this block's other coordinates
        rank, rest = 0, flat
        for a in axes:
            rank += (rest % sizes[a]) * rank_stride[a]
            rest //= sizes[a]
        pattern |= 1 << rank
    base = c(0)
    for a in _AXES:
        if a not in axes and sizes[a] > 1:
            base = base + coord[a] * rank_stride[a]
    mask = c(pattern, i32()) << arith.index_cast(i32(), base)
    return part, index, arith.trunci(ir.IntegerType.get_signless(16), mask)


def _dtype_of(element_type: ir.Type) -> str:
    """The dtype name the descriptor is encoded with (integers by width: TMA only moves bytes;
    8/16-bit ones as unsigned, the data types TMA encodes for them)."""
    narrow = isinstance(element_type, ir.IntegerType) and ir.IntegerType(element_type).width in (8, 16)
    try:
        return dtype_of_mlir(element_type, unsigned=narrow)
    except ValueError:
        raise ValueError(f"async_copy: TMA does not support element type {element_type}") from None


def await_async_copy(ctx: LaunchContext, allow_groups: int, await_read_only: bool = False,
                     sync: str | None = None) -> None:
    """Wait until at most `allow_groups` bulk groups (TMA stores) of the calling thread are pending.

    Every calling thread waits for its own groups (threads that issued none pass at once).
    await_read_only: only wait until the groups have finished *reading* smem (enough to reuse
    the buffers; the global writes finish on their own).
    sync: then synchronize the 'block' or the 'warpgroup' (None: no barrier) so the other
    threads may reuse the smem."""
    if not isinstance(allow_groups, int) or allow_groups < 0:
        raise ValueError(f"await_async_copy: allow_groups must be an int >= 0, got {allow_groups!r}")
    inline_ptx(f"cp.async.bulk.wait_group{'.read' if await_read_only else ''} {allow_groups};")
    if sync == "block":
        gpu.barrier()
    elif sync == "warpgroup":
        warpgroup_barrier()
    elif sync is not None:
        raise ValueError(f"await_async_copy: sync must be None, 'block' or 'warpgroup', got {sync!r}")
    del ctx


def finalize_tma_params(func: Any, entry: ir.Block, ctx: LaunchContext) -> None:
    """After tracing: make the descriptor block arguments real kernel parameters."""
    if not ctx.tma_params:
        return
    ptr = ir.Type.parse("!llvm.ptr")
    old_type = ir.FunctionType(ir.TypeAttr(func.attributes["function_type"]).value)
    inputs = list(old_type.inputs)
    first = len(inputs)
    if len(entry.arguments) != first + len(ctx.tma_params):
        raise RuntimeError("finalize_tma_params: the entry block's arguments and the descriptors disagree")
    func.attributes["function_type"] = ir.TypeAttr.get(ir.FunctionType.get(inputs + [ptr] * len(ctx.tma_params), []))
    align = ir.DictAttr.get({"llvm.align": ir.IntegerAttr.get(ir.IntegerType.get_signless(64), DESCRIPTOR_ALIGN)})
    old_attrs = list(func.attributes["arg_attrs"]) if "arg_attrs" in func.attributes else \
        [ir.DictAttr.get({})] * first
    func.attributes["arg_attrs"] = ir.ArrayAttr.get(old_attrs + [align] * len(ctx.tma_params))
    func.attributes[TMA_PARAMS_ATTR] = ir.DenseI32ArrayAttr.get(list(range(first, first + len(ctx.tma_params))))
