"""Warpgroup and thread-level Hopper primitives: electing one thread, register reallocation
(setmaxnreg), named barriers, proxy fences and cluster synchronization. They are short PTX
snippets (see `ptx.py`) that read like the PTX manual.
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterator, Sequence
from typing import Any

from .._mlir import arith, ir, nvvm, scf
from .ptx import i32, inline_ptx
from .values import as_i1, as_i32, c
from .threads import WARPGROUP_SIZE, thread_idx, warp_idx

# Named barrier 0 is __syncthreads(); warpgroup barriers use 1 + warpgroup index.
_FIRST_NAMED_BARRIER = 1
MAX_NAMED_BARRIERS = 16


def elect_one() -> ir.Value:
    """i1: true in exactly one active lane of the (converged) warp (`elect.sync`)."""
    return nvvm.elect_sync(ir.IntegerType.get_signless(1))


def single_thread_predicate(scope: str = "warpgroup") -> ir.Value:
    """i1 true for one thread of the warp / warpgroup / block (warp 0 of the scope, elected)."""
    if scope == "warp":
        return elect_one()
    warp = warp_idx()
    if scope == "warpgroup":
        warp = warp % (WARPGROUP_SIZE // 32)
    elif scope != "block":
        raise ValueError(f"scope: expected 'warp', 'warpgroup' or 'block', got {scope!r}")
    first_warp = warp == 0
    # Elect inside the first warp only: elect.sync needs the whole warp converged.
    if_op = scf.IfOp(first_warp, [ir.IntegerType.get_signless(1)], has_else=True)
    with ir.InsertionPoint(if_op.then_block):
        scf.yield_([elect_one()])
    with ir.InsertionPoint(if_op.else_block):
        scf.yield_([as_i1(False)])
    return if_op.results[0]


@contextlib.contextmanager
def single_thread(scope: str = "warpgroup") -> Iterator[None]:
    """Ops in the `with` run on one thread of each warp / warpgroup / block (`scope`)."""
    if_op = scf.IfOp(single_thread_predicate(scope))
    with ir.InsertionPoint(if_op.then_block):
        yield
        scf.yield_([])


def setmaxnreg(count: int, action: str | None = None) -> None:
    """Reallocate registers of the calling warpgroup to `count` per thread (24..256, multiple
    of 8). action: "inc" or "dec"; by default inc when count >= 128 else dec."""
    if not isinstance(count, int) or not 24 <= count <= 256 or count % 8:
        raise ValueError(f"setmaxnreg: count must be an int in [24, 256] and a multiple of 8, got {count!r}")
    action = action or ("inc" if count >= 128 else "dec")
    if action not in ("inc", "dec"):
        raise ValueError(f"setmaxnreg: action must be 'inc' or 'dec', got {action!r}")
    threads = _block_threads()
    if threads is not None and threads % WARPGROUP_SIZE:
        # Every warpgroup must execute setmaxnreg whole; a partial warpgroup hangs or faults.
        raise ValueError(f"setmaxnreg: the block must be whole warpgroups (a multiple of {WARPGROUP_SIZE} "
                         f"threads), got {threads} threads")
    inline_ptx(f"setmaxnreg.{action}.sync.aligned.u32 {count};")


def _block_threads() -> int | None:
    """Threads per block of the gpu.func being built (its known_block_size), or None."""
    op = ir.InsertionPoint.current.block.owner.operation
    while op is not None and op.name != "gpu.func":
        op = op.parent
    if op is None or "known_block_size" not in op.attributes:
        return None
    x, y, z = ir.DenseI32ArrayAttr(op.attributes["known_block_size"])
    return x * y * z


def named_barrier(barrier_id: int | ir.Value, threads: int, *, arrive: bool = False) -> None:
    """`bar.sync id, threads`: the `threads` threads (a multiple of 32) that reach barrier `id` wait
    for each other. Id 0 is the block barrier. arrive=True: `bar.arrive`, count the calling warps
    toward `threads` without waiting (one warpgroup signalling another, as in FA3's pingpong)."""
    if threads % 32:
        raise ValueError(f"named_barrier: threads must be a multiple of 32, got {threads}")
    op = "bar.arrive" if arrive else "bar.sync"
    if isinstance(barrier_id, int):
        if not 0 <= barrier_id < MAX_NAMED_BARRIERS:
            raise ValueError(f"named_barrier: id must be in [0, {MAX_NAMED_BARRIERS}), got {barrier_id}")
        inline_ptx(f"{op} {barrier_id}, {threads};")
        return
    inline_ptx(f"{op} $0, {threads};", [arith.index_cast(i32(), barrier_id)], ["r"])


def warpgroup_barrier(warpgroup: int | ir.Value | None = None) -> None:
    """Synchronize the 128 threads of one warpgroup (named barrier 1 + warpgroup index).

    `warpgroup` defaults to the calling thread's (computed from threadIdx)."""
    if warpgroup is None:
        warpgroup = thread_idx() // WARPGROUP_SIZE
    if isinstance(warpgroup, int):
        named_barrier(_FIRST_NAMED_BARRIER + warpgroup, WARPGROUP_SIZE)
    else:
        named_barrier(warpgroup + _FIRST_NAMED_BARRIER, WARPGROUP_SIZE)


def fence_async_shared() -> None:
    """Order this thread's generic-proxy smem writes before later async-proxy (TMA, WGMMA)
    reads of them: `fence.proxy.async.shared::cta`. Follow it with a barrier before the
    thread that issues the TMA store or WGMMA."""
    inline_ptx("fence.proxy.async.shared::cta;")


def commit_shared() -> None:
    """Make every thread's smem writes visible to TMA stores/WGMMA: proxy fence + block barrier."""
    fence_async_shared()
    from .._mlir import gpu

    gpu.barrier()


def fence_mbarrier_init() -> None:
    """Make mbarrier initializations visible to other threads and the async proxy."""
    inline_ptx("fence.mbarrier_init.release.cluster;")


# -- clusters ---------------------------------------------------------------------------------

def cluster_rank() -> ir.Value:
    """This block's rank in its cluster (`%cluster_ctarank`: x + nx * (y + ny * z)), as i32."""
    return nvvm.read_ptx_sreg_cluster_ctarank(i32())


def cluster_arrive(relaxed: bool = False) -> None:
    """`barrier.cluster.arrive`: the calling thread arrives at the cluster barrier (release
    semantics: its earlier memory accesses are visible to threads that pass the wait; relaxed=True
    drops that ordering). Every thread of every block of the cluster must arrive (warp-aligned)."""
    inline_ptx(f"barrier.cluster.arrive.{'relaxed' if relaxed else 'release'}.aligned;")


def cluster_wait() -> None:
    """`barrier.cluster.wait`: wait until every thread of the cluster has arrived (acquire)."""
    inline_ptx("barrier.cluster.wait.acquire.aligned;")


def cluster_sync() -> None:
    """Every thread of every block of the cluster meets here (arrive + wait). Use it after
    initializing barriers that peers will signal, and before a block exits while peers may still
    arrive on its barriers or multicast into its shared memory."""
    cluster_arrive()
    cluster_wait()


def map_to_peer(address: ir.Value, rank: int | ir.Value) -> ir.Value:
    """`mapa`: the `.shared::cluster` address of the same smem location (an i32 `.shared::cta`
    address) in the block of cluster rank `rank`."""
    return inline_ptx("mapa.shared::cluster.u32 $0, $1, $2;", [address, as_i32(rank)], ["=r", "r", "r"], [i32()],
                      memory=False)
