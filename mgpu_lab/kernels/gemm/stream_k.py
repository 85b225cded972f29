"""Stream-K for the persistent GEMM (persistent="stream_k"): every block gets the same number of
k-steps, so no SM idles through a last, partial wave.

A persistent grid of P units (blocks, multicast pairs: cluster_m or cluster_n = 2, or teams of
team_m blocks on a column's tiles) over T work items (tiles, tile pairs, a team's tiles) of ks
k-steps each: with whole tiles per unit, T / P rounds up, and the
power-of-two tile counts of most shapes leave 4 of the H200's 132 SMs idle in every wave (512
tiles are 3.88 waves: 3% of the SM time). Here the first `dp_rounds` = T // P rounds are whole
tiles (data-parallel, as persistent=True); the T - dp_rounds * P tiles left (fewer than P) are
one range of k-steps cut into P equal pieces, unit u taking steps [u * S // P, (u + 1) * S // P)
of the S = (T - dp_rounds * P) * ks. Where that would cut a tile into more than
MAX_CONTRIBUTORS + 1 pieces (few tiles left), one round fewer is whole and the range is longer.

A unit's piece crosses tile boundaries: it is one to three segments, each a run of the ordinary
mainloop over part of a tile's K. It runs them in reverse: the start of its last tile first (from
k-step 0), its first tile's end last. So in every unit the split phase begins at k-step 0 at the
same moment, and the tiles that share panels of A and B in L2 read them at about the same time,
as whole tiles do (run the other way round, each unit starts at its own offset into K and the
units' working set outgrows L2: 0.84x of one tile per block at 2048x2048x8192, measured).

A tile cut between units is finished by the unit whose segment ends it (its last k-step: the
"owner", its last segment): the units whose segment stops inside the tile (the previous unit, or
the two before it, each with its first segment) park their f32 partials in a global workspace
in the layout of their registers (`store_by_thread`, 16-byte coalesced stores) and raise a flag
(a warp of the producer warpgroup does, so the consumers go straight on). The owner's producer
waits for the flags in unit order and bulk-copies the partials into the ring, one slot's B
buffer at a time, as extra pipeline iterations; the owner's consumers add them to their
accumulator in that order (the same sum in every run), then run the epilogue and store the tile
as the persistent kernel does. Each partial is its writer's first segment and each sum its
owner's last, so an owner never waits for a unit that is still behind it.

The workspace (grid, chunks, consumers, groups, 128, 4) f32 and the flags (grid,) int32 are the
kernel's last two inputs; `stream_k_gemm` makes them scratch buffers of the program (the flags allocated zeroed; each
owner resets the flags it waited for, so they are zero again after every launch).
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any, Callable

from mgpu_lab import dsl
from mgpu_lab.runtime.kernel import Kernel
from mgpu_lab.runtime.program import Launch, Program, Ref, Scratch, inputs

from .pieces import WARPGROUP, GemmTiling, load_tile, multiply, release_slot
from .stream_k_plan import MAX_CONTRIBUTORS, StreamKPlan

SIGNAL_BARRIER = 7  # + consumer index: the consumer's partial is parked (it arrives, the signaller syncs)
SIGNALLER_WARP = 1  # of the producer warpgroup (warp 0 issues the TMA loads)


def check_stream_k(t: GemmTiling) -> None:
    """ValueError naming what stream_k needs that the tiling lacks."""
    step = math.lcm(16 * t.consumers, t.tile_m // 4)  # whole 16-byte groups per thread; 8-column slices
    if t.tile_n % step:
        raise ValueError(f"gemm: persistent='stream_k' hands partial tiles over in slices of tile_n * 32 / tile_m "
                         f"columns (a multiple of 8), 16 bytes per thread: tile_n must be a multiple of {step} for "
                         f"tile_m={t.tile_m}, got tile_n={t.tile_n}")
    if t.split_k > 1:
        raise ValueError(f"gemm: persistent='stream_k' splits K itself; it cannot be combined with "
                         f"split_k={t.split_k}")
    plan = StreamKPlan.of(t)
    if plan.units * (plan.sk_steps + plan.k_steps) >= 2 ** 31:
        raise ValueError(f"gemm: persistent='stream_k' schedules k-steps in 32-bit arithmetic; {t.m}x{t.n}x{t.k} "
                         f"has too many ({plan.sk_steps} split k-steps over {plan.units} units)")
    if not plan.every_unit_splits:
        raise ValueError(f"gemm: persistent='stream_k' gives each of the {plan.units} persistent units at least one "
                         f"k-step; {t.m}x{t.n}x{t.k} in {t.tile_m}x{t.tile_n} tiles has {plan.sk_steps}: use "
                         f"persistent=False or split_k")


def stream_k_inputs(t: GemmTiling) -> tuple[dsl.ShapeDtype, dsl.ShapeDtype]:
    """The workspace (one partial tile per block, in chunks laid out by thread) and the flags."""
    workspace = dsl.ShapeDtype((t.grid, t.partial_chunks, t.consumers, t.partial_groups, WARPGROUP, 4), "float32",
                               name="stream_k_partials")
    return workspace, dsl.ShapeDtype((t.grid,), "int32", name="stream_k_flags")


@dataclass(frozen=True)
class _Unit:
    """One unit's split range in a kernel: steps [s0, s1) of the split items, its segments run
    last tile first, their pipeline iterations counted on from its whole tiles'. 32-bit
    arithmetic (check_stream_k keeps the products in range): the producer has 40 registers, and
    64-bit values live through the segment loop spilled there."""

    plan: StreamKPlan
    unit: Any  # i32
    s0: Any
    s1: Any

    @classmethod
    def of(cls, plan: StreamKPlan, unit: Any) -> _Unit:
        unit = dsl.cast(unit, "int32")
        return cls(plan, unit, plan.start(unit), plan.start(unit + 1))

    @property
    def base(self) -> int:
        return self.plan.dp_rounds * self.plan.k_steps

    @property
    def job_count(self) -> Any:
        """The unit's jobs: its `dp_rounds` whole tiles and its split segments."""
        ks = self.plan.k_steps
        return (self.s1 - 1) // ks - self.s0 // ks + 1 + self.plan.dp_rounds

    def job(self, j: Any) -> tuple[Any, Any, Any, Any]:
        """Job j's (item, first k-step in it, k-steps, first pipeline iteration): the whole tiles
        first, then the split segments, last tile first (ints, or i32 values in a kernel)."""
        plan, ks, rounds = self.plan, self.plan.k_steps, self.plan.dp_rounds
        item = (self.s1 - 1) // ks - (j - rounds)  # a split item (past the last one for a whole tile: not used)
        lo = dsl.max(self.s0, item * ks)
        hi = dsl.min(self.s1, item * ks + ks)
        split = (plan.dp_items + item, lo - item * ks, hi - lo, self.s1 - hi + self.base)
        tile = (self.unit + j * plan.units, 0, ks, j * ks)
        return tuple(dsl.select(j < rounds, w, p) for w, p in zip(tile, split))

    def for_jobs(self, body: Callable[..., None]) -> None:
        """body(*job(j)) for each of the unit's jobs in the order run, as index values. One loop
        for whole tiles and split segments, so the mainloop, the epilogue and the producer's loads
        are traced once: two copies made the largest stream-K builds a third longer."""
        @dsl.for_range(0, self.job_count, dtype="int32")
        def _(j):
            body(*(dsl.as_index(x) for x in self.job(j)))

    @property
    def writes_partial(self) -> Any:
        """Its range stops inside a tile: its first segment is a partial for that tile's owner."""
        return self.s1 % self.plan.k_steps != 0

    @property
    def owns_split_tile(self) -> Any:
        """Its range starts inside a tile and reaches that tile's end: its last segment sums the
        others' partials of it."""
        ks = self.plan.k_steps
        return (self.s0 % ks != 0) & (self.s1 >= (self.s0 // ks + 1) * ks)

    @property
    def contributor_count(self) -> Any:
        """How many units wrote a partial of this unit's first tile (an i32): unit - 1, unit - 2,
        ... up to it, a prefix, since the units' starts fall with d."""
        flags = [self.contributes(d) for d in range(1, self.plan.max_contributors + 1)]
        if not any(isinstance(f, dsl.ir.Value) for f in flags):  # on the host (tests): ints
            return sum(bool(f) for f in flags)
        count = dsl.c(0, "int32")
        for f in flags:
            count = count + dsl.cast(f, "int32", unsigned=True)
        return count

    def contributes(self, d: int) -> Any:
        """Unit unit - d wrote a partial of this unit's first tile (d = 1, 2, ...): its range ends
        inside the tile."""
        return self.plan.start(self.unit - (d - 1)) > self.s0 // self.plan.k_steps * self.plan.k_steps

    @property
    def partials_first_iteration(self) -> Any:
        """Pipeline iteration of the first partial chunk (after the last segment's k-steps); chunk c
        of unit - d's partial follows at `partial_offset(t, d, c)`."""
        return dsl.as_index(self.s1 - self.s0 + self.base)


def partial_offset(t: GemmTiling, d: Any, chunk: int) -> Any:
    """Iterations from an owner's first partial chunk to chunk `chunk` of unit - d's partial (d an
    int, or an i32 value in a kernel)."""
    return (d - 1) * t.partial_chunks + chunk


def produce(ctx: Any, t: GemmTiling, plan: StreamKPlan, a: Any, b: Any, ring: tuple, chunks: Any, full: Any,
            empty: Any, workspace: Any, flags: Any, unit: Any, rank: Any, member: Any,
            origin: Callable[[Any], tuple]) -> None:
    """(The producer's TMA thread.) The unit's whole tiles, its split segments, then, if it owns a
    split tile, each contributor's partial into the ring once its flag is up. rank: the block's
    in its multicast cluster (None outside one); member: its place in its unit (the cluster rank,
    or its team's: the block of each earlier unit in the same place wrote its partials)."""
    if not plan.sk_steps:  # the tiles fill the rounds exactly
        @dsl.for_range(unit, plan.dp_items, plan.units)
        def _(item):
            load_tile(ctx, t, a, b, ring, full, empty, *origin(item), (item - unit) // plan.units * plan.k_steps,
                      rank=rank)
        return
    me = _Unit.of(plan, unit)
    me.for_jobs(lambda item, k_first, steps, first: load_tile(
        ctx, t, a, b, ring, full, empty, *origin(item), first, k_first=k_first, steps=steps, rank=rank))
    with dsl.when(me.owns_split_tile):
        after = me.partials_first_iteration

        @dsl.for_range(0, me.contributor_count, dtype="int32")
        def _(d0):  # unit - (d0 + 1)'s partial: one copy of the code, however many may contribute
            source = (unit - dsl.as_index(d0 + 1)) * t.unit_blocks + (0 if member is None else member)
            with ctx.named_region("flag"):
                dsl.wait_signal(flags, source)
            for chunk in range(t.partial_chunks):
                it = after + dsl.as_index(partial_offset(t, d0 + 1, chunk))
                with ctx.named_region("load"):
                    empty.wait_for_iteration(it, flip=True)
                    bar, _ = full.for_iteration(it)
                    dsl.async_bulk_load(src_ref=dsl.memref_slice(workspace, (source, chunk)),
                                        dst_ref=dsl.memref_slice(chunks, it % t.stages), barrier=bar, arrive=True)


def signal_partials(t: GemmTiling, plan: StreamKPlan, flags: Any, unit: Any, block: Any) -> None:
    """(Every producer thread.) Warp SIGNALLER_WARP waits until each consumer has parked its part of
    the unit's partial (if it writes one) and raises the block's flag."""
    if not plan.sk_steps:
        return
    warp = dsl.thread_in_warpgroup() // 32
    with dsl.when((warp == SIGNALLER_WARP) & _Unit.of(plan, unit).writes_partial):
        for wg in range(t.consumers):
            dsl.named_barrier(SIGNAL_BARRIER + wg, WARPGROUP + 32)
        with dsl.when(dsl.lane_idx() == 0):
            dsl.signal(flags, block)


def consume(ctx: Any, t: GemmTiling, plan: StreamKPlan, ring: tuple, chunks: Any, full: Any, empty: Any,
            workspace: Any, wg: Any, unit: Any, block: Any, peers: tuple, origin: Callable[[Any], tuple],
            finish: Callable[[dsl.FragmentedArray, Any, Any], None]) -> None:
    """(A consumer warpgroup.) The unit's whole tiles, then its split segments, in one loop
    (`_Unit.for_jobs`): a job that ends its tile is finished here (`finish(acc, row0, col0)`:
    epilogue and store), after the contributors' partials are added if it started inside the
    tile; one that does not parks its partial for the owner."""
    if not plan.sk_steps:
        @dsl.for_range(unit, plan.dp_items, plan.units)
        def _(item):
            acc = multiply(ctx, t, ring, full, empty, wg, (item - unit) // plan.units * plan.k_steps,
                           release_last=True, peers=peers)
            finish(acc, *origin(item))
        return
    me = _Unit.of(plan, unit)
    # decided before the segment loop: one count kept live through the mainloops, not the unit
    # id and the division that derive it
    contributors = me.contributor_count
    after = me.partials_first_iteration

    def job(item, k_first, steps, first):  # a whole tile ends its tile and owns no partials
        acc = multiply(ctx, t, ring, full, empty, wg, first, release_last=True, steps=steps, peers=peers)
        ends_tile = k_first + steps == plan.k_steps
        owner = ends_tile & (k_first != 0)
        acc = dsl.if_else(owner, lambda: _add_partials(ctx, t, contributors, after, acc, chunks, full, empty, wg,
                                                       peers), lambda: acc)
        row0, col0 = origin(item)
        dsl.if_else(ends_tile, lambda: finish(acc, row0, col0),
                    lambda: _park(ctx, t, acc, workspace, block, wg))

    me.for_jobs(job)


def _park(ctx: Any, t: GemmTiling, acc: dsl.FragmentedArray, workspace: Any, block: Any, wg: Any) -> None:
    """Write this consumer's part of the block's partial to the workspace, then tell the signaller."""
    width = t.partial_width
    with ctx.named_region("park"):
        for chunk in range(t.partial_chunks):
            acc.columns(chunk * width, width).store_by_thread(dsl.memref_slice(workspace, (block, chunk, wg)), pack=2)
        dsl.named_barrier(SIGNAL_BARRIER + wg, WARPGROUP + 32, arrive=True)


def _add_partials(ctx: Any, t: GemmTiling, contributors: Any, after: Any, acc: dsl.FragmentedArray, chunks: Any,
                  full: Any, empty: Any, wg: Any, peers: tuple) -> dsl.FragmentedArray:
    """The accumulator plus the partials of unit - 1, unit - 2, ... (`contributors` of them, an
    i32), in that order, read from the ring from pipeline iteration `after` on. A loop over the
    contributors, not a copy of the sum per possible one: each copy loads and adds the whole tile
    (4 x 32 values a thread at 128 x 256), and five copies made the kernel's build 1.5x longer."""
    width = t.partial_width
    layout = dsl.WGMMAFragLayout(width, t.consumer_rows)
    pieces = [acc.columns(chunk * width, width) for chunk in range(t.partial_chunks)]

    with ctx.named_region("sum"):
        @dsl.for_range(0, contributors, dtype="int32", carry=pieces)
        def pieces(d0, pieces):
            out = []
            for chunk, piece in enumerate(pieces):  # of unit - (d0 + 1)'s partial
                it = after + dsl.as_index(partial_offset(t, d0 + 1, chunk))
                with ctx.named_region("wait_data"):
                    full.wait_for_iteration(it)
                part = dsl.FragmentedArray.load_by_thread(dsl.memref_slice(chunks, (it % t.stages, wg)), layout,
                                                          pack=2)
                release_slot(empty, it, peers)
                # summed before the next chunk's loads: deferred, every chunk would be live at once (spills)
                out.append(dsl.optimization_barrier(piece + part)[0])
            return out
    return dsl.FragmentedArray.from_columns(pieces)


def stream_k_gemm(kernel: Any, tiling: GemmTiling) -> Any:
    """`make_gemm`'s (and `make_fp8_gemm`'s) Kernel with persistent='stream_k': a program of the
    one launch whose last two inputs, the partial tiles' workspace and the hand-over flags, are
    scratch buffers of the program, the flags zero-filled when allocated (the kernel resets every
    flag it waited on, so they are zero again after each launch). The caller passes
    `kernel(a, b, *epilogue_arrays)` as for any GEMM. In process the buffers are kept per device
    and stream; a torch op takes fresh ones from torch's allocator on every call."""
    compiled = kernel.compiled
    workspace, flags = stream_k_inputs(tiling)
    n_user = len(compiled.inputs) - 2
    program = Program(
        compiled.name, inputs=tuple(compiled.inputs[:n_user]), outputs=tuple(compiled.outputs),
        scratch=(Scratch(workspace.shape, "float32", name="stream_k_partials"),
                 Scratch(flags.shape, "int32", zeroed=True, name="stream_k_flags")),
        steps=(Launch(compiled, inputs(n_user) + (Ref("scratch", 0), Ref("scratch", 1), Ref("output", 0))),),
        notes={"tiling": tiling})
    return Kernel(program, isolate=kernel.isolate)


__all__ = ["MAX_CONTRIBUTORS", "SIGNAL_BARRIER", "stream_k_gemm", "StreamKPlan", "check_stream_k", "consume", "produce",
           "signal_partials", "stream_k_inputs"]
