"""Everything a kernel body uses, in one namespace: `from mgpu_lab import dsl`.

Values are typed (`builder/values.py`): index, integer and float values have Python operators
(`i = dsl.block_idx() * 256 + dsl.thread_idx()`), plus `dsl.min/max/select/cast/fma`.

The MLIR dialect modules (`dsl.arith`, `dsl.memref`, `dsl.scf`, `dsl.gpu`, `dsl.nvvm`, ...) come
from `mgpu_lab._mlir`, so swapping the MLIR provider changes no kernel code. `dsl.memref` and
`dsl.vector` check the indices and element types of `load`/`store`, and `dsl.arith` the operands
of its binary ops, while the body runs: a Python int index, a wrong index count or a type mix is
an error at the user's line that says how to fix it, not a verifier message after tracing.

Hopper: TMA copies (`ctx.async_copy` / `async_copy(ctx, ...)`, with cluster multicast), bulk
copies of contiguous bytes (`async_bulk_load`), signals between blocks (`signal`, `wait_signal`),
mbarriers (`BarrierArray`, `BarrierRef`), register arrays (`FragmentedArray` and its layouts),
warpgroup MMA (`wgmma`, `WGMMAAccumulator`), warpgroup and cluster helpers.
"""

from ._mlir import gpu, ir, llvm, math, nvgpu, nvvm, scf
from .builder.barriers import BarrierArray, BarrierRef
from .builder.dtypes import itemsize
from .builder.control import flatten_values, for_range, if_else, when
from .builder.fragmented import FragmentedArray, optimization_barrier, where
from .builder.layouts import (
    WGMMAColLayout,
    WGMMAFragLayout,
    WGMMARowLayout,
    WGStridedLayout,
)
from .builder.layouts import swizzled_position
from .builder.ptx import global_address, inline_ptx, smem_address
from .builder.memref_ops import (
    DynamicSlice,
    checked_memref as memref,
    checked_vector as vector,
    ds,
    memref_slice,
    memref_transpose,
    memref_unfold,
    memref_unsqueeze,
)
from .builder.reductions import block_reduce, warp_reduce
from .builder.shapes import Barriers, ShapeDtype, Union
from .builder.threads import (
    block_dim,
    block_idx,
    cluster_block_idx,
    grid_dim,
    lane_idx,
    linear_thread_idx,
    thread_idx,
    thread_in_warpgroup,
    warp_idx,
    warpgroup_idx,
)
from .builder.signals import signal, wait_signal
from .builder.tma import async_bulk_load, async_copy, await_async_copy
from .builder.transforms import MemRefTransform, TileTransform, TransposeTransform
from .builder.values import (
    ArithValue,
    FloatValue,
    IndexValue,
    IntValue,
    UnsignedIntValue,
    VectorValue,
    as_index,
    c,
    checked_arith as arith,
    cast,
    fma,
    max,
    min,
    select,
)
from .builder.warpgroup import (
    cluster_arrive,
    cluster_rank,
    cluster_sync,
    cluster_wait,
    commit_shared,
    elect_one,
    fence_async_shared,
    map_to_peer,
    named_barrier,
    setmaxnreg,
    single_thread,
    warpgroup_barrier,
)
from .builder.wgmma import (
    WGMMAAccumulator,
    wgmma,
    wgmma_commit_group,
    wgmma_fence,
    wgmma_wait_group,
)

__all__ = [
    "ArithValue",
    "FloatValue",
    "IndexValue",
    "IntValue",
    "UnsignedIntValue",
    "VectorValue",
    "cast",
    "fma",
    "max",
    "min",
    "select",
    "BarrierArray",
    "BarrierRef",
    "Barriers",
    "DynamicSlice",
    "FragmentedArray",
    "MemRefTransform",
    "ShapeDtype",
    "TileTransform",
    "TransposeTransform",
    "Union",
    "WGMMAAccumulator",
    "WGMMAColLayout",
    "WGMMAFragLayout",
    "WGMMARowLayout",
    "WGStridedLayout",
    "arith",
    "as_index",
    "async_bulk_load",
    "async_copy",
    "await_async_copy",
    "block_dim",
    "block_idx",
    "block_reduce",
    "c",
    "cluster_arrive",
    "cluster_block_idx",
    "cluster_rank",
    "cluster_sync",
    "cluster_wait",
    "commit_shared",
    "ds",
    "elect_one",
    "fence_async_shared",
    "flatten_values",
    "for_range",
    "global_address",
    "gpu",
    "grid_dim",
    "if_else",
    "inline_ptx",
    "itemsize",
    "ir",
    "lane_idx",
    "linear_thread_idx",
    "llvm",
    "map_to_peer",
    "math",
    "memref",
    "memref_slice",
    "memref_transpose",
    "memref_unfold",
    "memref_unsqueeze",
    "named_barrier",
    "nvgpu",
    "nvvm",
    "optimization_barrier",
    "scf",
    "setmaxnreg",
    "signal",
    "single_thread",
    "smem_address",
    "swizzled_position",
    "thread_idx",
    "thread_in_warpgroup",
    "vector",
    "warp_idx",
    "warpgroup_barrier",
    "warp_reduce",
    "warpgroup_idx",
    "wgmma",
    "wgmma_commit_group",
    "wgmma_fence",
    "wgmma_wait_group",
    "wait_signal",
    "when",
    "where",
]
