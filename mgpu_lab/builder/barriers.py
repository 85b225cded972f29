"""mbarriers in shared memory: `BarrierArray` (what a `Barriers(count)` smem leaf becomes) and
`BarrierRef` (one barrier of it).

An mbarrier completes a *phase* when its pending arrival count reaches zero and its expected
transaction bytes (from TMA copies) have landed; the phases alternate parity 0, 1, 0, ...
Waiting names the parity of the phase to wait for. In a loop that cycles through `count`
barriers, iteration i uses barrier i % count and waits for parity (i // count) & 1:
`barriers.for_iteration(i)` returns both, so kernels never track phases by hand.

    full, empty = smem_barriers           # Barriers(stages), Barriers(stages)
    full.init(1); empty.init(consumers)   # one thread + fence + block barrier
    ...
    bar, parity = full.for_iteration(k)
    bar.wait(parity)
"""

from __future__ import annotations

from .._mlir import arith, gpu, ir
from .values import as_i32, as_index, c
from .launch_context import active_options
from .threads import linear_thread_idx
from .ptx import i32, inline_ptx, smem_address
from .warpgroup import cluster_sync, fence_mbarrier_init, map_to_peer

BARRIER_BYTES = 8


class BarrierRef:
    """One mbarrier: `array[index]`. All methods act for the calling thread only."""

    def __init__(self, array: BarrierArray, index: int | ir.Value):
        self.array = array
        self.index = index

    def address(self) -> ir.Value:
        """The barrier's 32-bit shared-memory address."""
        base = smem_address(self.array.ref)
        if isinstance(self.index, int):
            return base + self.index * BARRIER_BYTES if self.index else base
        return base + as_i32(self.index, "barrier index") * BARRIER_BYTES

    def init(self, arrival_count: int | ir.Value) -> None:
        """`mbarrier.init`: expect `arrival_count` arrivals per phase. Run it on one thread, then
        fence and synchronize (BarrierArray.init does all of this)."""
        inline_ptx("mbarrier.init.shared::cta.b64 [$0], $1;",
                   [self.address(), as_i32(arrival_count, "arrival_count")], ["r", "r"])

    def arrive(self, cta: int | ir.Value | None = None, *, scope: str = "cta") -> None:
        """Count one arrival of the calling thread on this barrier, or, with `cta` (a cluster
        rank, int or value), on the barrier at the same smem offset in that block of the cluster
        (`mapa` + `mbarrier.arrive.shared::cluster`): how a consumer releases a slot that a
        peer's multicast copy writes into.

        scope: the release's reach. "cta" (default) orders only this block's view: enough when
        the arriving thread has just read the slot (the peer's copy then writes it). "cluster"
        (`.release.cluster`) also makes the thread's earlier writes visible to the peer before the
        arrival counts; it waits for them, costing ~0.5 us per arrival in a GEMM mainloop
        (measured on the H200), so ask for it only when the peer reads what this thread wrote."""
        if scope not in ("cta", "cluster"):
            raise ValueError(f"BarrierRef.arrive: scope must be 'cta' or 'cluster', got {scope!r}")
        if cta is None:
            inline_ptx("{\n.reg .b64 state;\nmbarrier.arrive.shared::cta.b64 state, [$0];\n}",
                       [self.address()], ["r"])
            return
        remote = map_to_peer(self.address(), as_i32(cta, "cta"))
        sem = ".release.cluster" if scope == "cluster" else ""
        inline_ptx(f"mbarrier.arrive{sem}.shared::cluster.b64 _, [$0];", [remote], ["r"])

    def arrive_cluster(self, ctas: int | list[int] | None = None, *, cluster_size: int | None = None) -> None:
        """Arrive once on this barrier in each of the cluster blocks `ctas` (ranks; an int is a
        bit mask; None: ranks 0 .. cluster_size - 1, this block included)."""
        if ctas is None:
            if cluster_size is None:
                raise ValueError("arrive_cluster: pass ctas= (ranks or a bit mask) or cluster_size=")
            ranks = list(range(cluster_size))
        elif isinstance(ctas, int):
            ranks = [r for r in range(16) if ctas >> r & 1]
        else:
            ranks = list(ctas)
        if not ranks:
            raise ValueError(f"arrive_cluster: no block selected by ctas={ctas!r}")
        for rank in ranks:
            self.arrive(cta=rank)

    def arrive_expect_tx(self, nbytes: int | ir.Value) -> None:
        """Arrive and add `nbytes` to the transaction bytes this phase waits for (TMA loads)."""
        inline_ptx("{\n.reg .b64 state;\nmbarrier.arrive.expect_tx.shared::cta.b64 state, [$0], $1;\n}",
                   [self.address(), as_i32(nbytes, "nbytes")], ["r", "r"])

    def expect_tx(self, nbytes: int | ir.Value) -> None:
        """Add `nbytes` expected transaction bytes without arriving."""
        inline_ptx("mbarrier.expect_tx.relaxed.cta.shared::cta.b64 [$0], $1;",
                   [self.address(), as_i32(nbytes, "nbytes")], ["r", "r"])

    def try_wait(self, parity: int | ir.Value) -> ir.Value:
        """i1: has the phase of this parity completed? (one `try_wait.parity`, may time out)."""
        flag = inline_ptx(
            "{\n.reg .pred done;\nmbarrier.try_wait.parity.shared::cta.b64 done, [$1], $2;\n"
            "selp.b32 $0, 1, 0, done;\n}",
            [self.address(), as_i32(parity, "parity")], ["=r", "r", "r"], [i32()])
        return flag != 0

    def wait(self, parity: int | ir.Value) -> None:
        """Block until the phase with this parity (0 or 1, or an i1/i32/index value) completes.

        With `CompileOptions.mbarrier_timeout_s` set (or $MGPU_LAB_MBARRIER_TIMEOUT_S when the
        kernel is built), a wait that lasts longer traps (the launch fails) instead of
        hanging: a debugging aid for barrier protocols."""
        timeout = active_options().mbarrier_timeout_s
        operands = [self.address(), as_i32(parity, "parity")]
        if not timeout:
            inline_ptx(
                "{\n.reg .pred done;\nmbarrier_wait_loop:\n"
                "mbarrier.try_wait.parity.shared::cta.b64 done, [$0], $1;\n"
                "@!done bra mbarrier_wait_loop;\n}", operands, ["r", "r"])
            return
        limit_ns = int(timeout * 1e9)
        inline_ptx(
            "{\n.reg .pred done;\n.reg .u64 start, now;\nmov.u64 start, %globaltimer;\n"
            "mbarrier_wait_loop:\n"
            "mbarrier.try_wait.parity.shared::cta.b64 done, [$0], $1;\n"
            "@done bra mbarrier_wait_done;\n"
            "mov.u64 now, %globaltimer;\nsub.u64 now, now, start;\n"
            f"setp.lt.u64 done, now, {limit_ns};\n"
            "@done bra mbarrier_wait_loop;\ntrap;\nmbarrier_wait_done:\n}", operands, ["r", "r"])


class BarrierArray:
    """`count` mbarriers laid out contiguously in shared memory (`ref`: memref<count x i64, 3>)."""

    def __init__(self, ref: ir.Value, count: int):
        self.ref = ref
        self.count = count

    def __len__(self) -> int:
        return self.count

    def __getitem__(self, index: int | ir.Value) -> BarrierRef:
        if isinstance(index, int):
            if not -self.count <= index < self.count:
                raise IndexError(f"barrier index {index} is out of range for Barriers({self.count})")
            index %= self.count
        elif not isinstance(index, ir.Value):
            raise TypeError(f"barrier index: expected an int or an index value, got {type(index).__name__}")
        return BarrierRef(self, index)

    def __iter__(self):
        return (BarrierRef(self, i) for i in range(self.count))

    def init(self, arrival_count: int | ir.Value = 1, *, sync: bool | str = True) -> None:
        """Initialize every barrier of the array to expect `arrival_count` arrivals per phase.

        Thread 0 of the block initializes; then the init is fenced and (with `sync`, the
        default) the block synchronizes so every thread sees initialized barriers.
        sync="cluster": the whole cluster synchronizes instead (`cluster_sync`), so peers may
        arrive on these barriers or multicast into this block right after. With sync=False,
        call this from all threads and synchronize yourself before first use."""
        if sync not in (True, False, "cluster"):
            raise ValueError(f"Barriers.init: sync must be True, False or 'cluster', got {sync!r}")
        is_first = linear_thread_idx() == 0
        from .control import when

        with when(is_first):
            for bar in self:
                bar.init(arrival_count)
            fence_mbarrier_init()
        if sync == "cluster":
            cluster_sync()
        elif sync:
            gpu.barrier()

    def for_iteration(self, iteration: int | ir.Value) -> tuple[BarrierRef, ir.Value]:
        """(barrier, parity) of pipeline iteration `iteration` when iterations cycle through the
        array: barrier iteration % count, waiting for phase parity (iteration // count) & 1."""
        if isinstance(iteration, int):
            return self[iteration % self.count], c((iteration // self.count) & 1, i32())
        it = as_index(iteration)
        parity = it // self.count & 1
        return self[it % self.count], arith.index_cast(i32(), parity)

    def wait_for_iteration(self, iteration: int | ir.Value, *, flip: bool = False) -> BarrierRef:
        """Wait on the barrier of `iteration` for its phase; return it. flip=True waits for the
        other parity: what a producer waits for on a fresh 'empty' barrier (passes at once)."""
        bar, parity = self.for_iteration(iteration)
        if flip:
            parity = as_i32(parity) ^ 1
        bar.wait(parity)
        return bar

