"""Thread, warp, warpgroup and block indices. Warp-level indices are made warp-uniform."""

from __future__ import annotations

from .._mlir import arith, gpu, ir, nvvm
from .values import c

WARP_SIZE = 32
WARPGROUP_SIZE = 128
_DIMS = {"x": gpu.Dimension.x, "y": gpu.Dimension.y, "z": gpu.Dimension.z}


def thread_idx(dim: str = "x") -> ir.Value:
    """threadIdx along `dim`, as index."""
    return gpu.thread_id(_DIMS[dim])


def block_idx(dim: str = "x") -> ir.Value:
    """blockIdx along `dim`, as index."""
    return gpu.block_id(_DIMS[dim])


def block_dim(dim: str = "x") -> ir.Value:
    """blockDim along `dim`, as index (a constant after lowering: the block is static)."""
    return gpu.block_dim(_DIMS[dim])


def grid_dim(dim: str = "x") -> ir.Value:
    """gridDim along `dim` (blocks in the grid), as index."""
    return gpu.grid_dim(_DIMS[dim])


def cluster_block_idx(dim: str = "x") -> ir.Value:
    """This block's index inside its cluster."""
    return gpu.cluster_block_id(_DIMS[dim])


def linear_thread_idx() -> ir.Value:
    """x + bx * (y + by * z) for the thread in its block, as index."""
    x, y, z = (thread_idx(d) for d in "xyz")
    bx, by = block_dim("x"), block_dim("y")
    return x + bx * (y + by * z)


def _uniform(value: ir.Value) -> ir.Value:
    # Broadcast lane 0's value so the compiler knows it is warp-uniform (keeps it in a uniform
    # register and lets branches on it stay non-divergent).
    i32 = ir.IntegerType.get_signless(32)
    v = arith.index_cast(i32, value)
    full = c(-1, i32)
    return arith.index_cast(
        ir.IndexType.get(),
        nvvm.shfl_sync(i32, full, v, c(0, i32), c(0x1F, i32), nvvm.ShflKind.idx),
    )


def lane_idx() -> ir.Value:
    """The thread's lane in its warp (0..31)."""
    return linear_thread_idx() % WARP_SIZE


def warp_idx() -> ir.Value:
    """The warp's index in the block, warp-uniform."""
    return _uniform(linear_thread_idx() // WARP_SIZE)


def warpgroup_idx() -> ir.Value:
    """The warpgroup's index in the block (128 consecutive threads), warp-uniform."""
    return _uniform(linear_thread_idx() // WARPGROUP_SIZE)


def thread_in_warpgroup() -> ir.Value:
    """The thread's index inside its warpgroup (0..127)."""
    return linear_thread_idx() % WARPGROUP_SIZE
