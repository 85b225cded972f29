"""Device side of the profiler: `ctx.named_region` events recorded per block and unit.

It lives in `builder/` because it emits MLIR; `profiler/` holds the host side only (the buffer
layout in `profiler/format.py`, decoding, exports). One leader thread per unit (warpgroup or
warp) appends (tag, %clock) events to its unit's bounded array, counting them in a register;
events past the capacity are counted but never written, so a full buffer cannot overwrite
barriers or data. Thread 0 writes the block header (start stamps) straight to the block's row
in global memory at entry; at exit each unit ends on its own, with no block barrier: its leader
writes the unit's count, and the last unit to finish stamps the block's end. Where the events
go is the `buffer` mode:

- "smem": each unit's events stay in its part of a shared-memory copy of the row (see
  `profiler/format.py`) while it runs; at its end the leader's warp copies the events it kept
  to global memory. Cheapest per event, but the row (8 bytes per event per unit) competes with
  the kernel's own buffers.
- "global": events go straight to the block's row in global memory (the same row layout, so
  decoding is unchanged); shared memory holds only the header area (the finish counter). Any
  kernel has room for it.

`choose_buffer` resolves "auto". With profiling off, `named_region` emits nothing at all.
"""

from __future__ import annotations

from .._mlir import arith, gpu, ir, memref, nvvm
from ..compiler.compiled_kernel import ProfilerSpec, SmemBuffer
from ..profiler import format as fmt
from ..profiler.trace import MAX_REGIONS
from .control import for_range, when
from .ptx import i64, inline_ptx, smem_address
from .threads import WARP_SIZE, WARPGROUP_SIZE, linear_thread_idx
from .values import c, i32_type

_UNIT_THREADS = {"warpgroup": WARPGROUP_SIZE, "warp": WARP_SIZE}
BUFFER_MODES = ("smem", "global", "auto")
_SMEM_ALIGN = 16  # the smem area starts 16-byte aligned: v2 (8-byte) event stores stay whole
# The smem area's copy of the block header is never copied out: its reserved word 10 counts
# the units that have finished (the last one stamps the block's end).
_FINISHED_WORD = 10


def check_buffer_mode(buffer: object) -> str:
    """The `profile_buffer` argument, checked: ValueError naming it unless one of BUFFER_MODES."""
    if not isinstance(buffer, str) or buffer not in BUFFER_MODES:
        raise ValueError(f"profile_buffer: expected one of {', '.join(repr(m) for m in BUFFER_MODES)}, "
                         f"got {buffer!r}")
    return buffer


def smem_area_bytes(units: int, capacity: int, buffer: str, offset: int) -> int:
    """Bytes of shared memory the profiler adds after `offset` bytes of kernel buffers in
    `buffer` mode ("smem" or "global"), its alignment padding included."""
    words = fmt.words_per_block(units, capacity) if buffer == "smem" else \
        fmt.BLOCK_HEADER_WORDS + units * fmt.UNIT_HEADER_WORDS
    return -offset % _SMEM_ALIGN + words * 4


def choose_buffer(buffer: str, *, units: int, capacity: int, kernel_smem: int, limit: int) -> str:
    """"smem" or "global" for the `profile_buffer` argument: "auto" keeps the row in shared
    memory when it fits beside `kernel_smem` bytes of buffers within `limit`, else global."""
    if check_buffer_mode(buffer) != "auto":
        return buffer
    fits = kernel_smem + smem_area_bytes(units, capacity, "smem", kernel_smem) <= limit
    return "smem" if fits else "global"


class DeviceProfiler:
    """Emits the recording code while a kernel body is traced."""

    def __init__(self, block: tuple[int, int, int], *, unit: str, capacity: int, smem_offset: int,
                 buffer: str = "smem", block_stride: int = 1):
        if check_buffer_mode(buffer) == "auto":
            raise ValueError("profile_buffer: DeviceProfiler needs 'smem' or 'global' (resolve 'auto' with "
                             "choose_buffer first), got 'auto'")
        if unit not in _UNIT_THREADS:
            raise ValueError(f"profile_unit: expected 'warpgroup' or 'warp', got {unit!r}")
        if not isinstance(capacity, int) or capacity < 1:
            raise ValueError(f"profile_capacity: expected a positive int (events per {unit}), got {capacity!r}")
        if isinstance(block_stride, bool) or not isinstance(block_stride, int) or block_stride < 1:
            raise ValueError(f"profile_blocks: expected a positive int (record regions in every n-th block) or None, "
                             f"got {block_stride!r}")
        threads = block[0] * block[1] * block[2]
        per_unit = _UNIT_THREADS[unit]
        if threads % per_unit:
            raise ValueError(
                f"profile_unit: {unit} recording needs a multiple of {per_unit} threads per block, got {threads}")
        self.unit = unit
        self.threads = threads
        self.threads_per_unit = per_unit
        self.units = threads // per_unit
        self.capacity = capacity
        self.buffer = buffer
        self.block_stride = block_stride
        self.words = fmt.words_per_block(self.units, capacity)  # of the global row
        self.smem_offset = (smem_offset + _SMEM_ALIGN - 1) // _SMEM_ALIGN * _SMEM_ALIGN
        self.smem_bytes = smem_area_bytes(self.units, capacity, buffer, smem_offset)
        # Words of the smem area: the whole row, or the header and each unit's header.
        self.smem_words = (self.smem_bytes - (self.smem_offset - smem_offset)) // 4
        # Where unit u's header (its event count) sits in the smem area: units' headers are
        # packed after the block header in global mode, a whole unit apart in smem mode.
        self.unit_stride = fmt.unit_words(capacity) if buffer == "smem" else fmt.UNIT_HEADER_WORDS
        self.region_names: list[str] = []
        self._smem = None
        self._buffer = None
        self._count = None  # this thread's event count: a private i32 that LLVM keeps in a register

    # -- sizes and records ---------------------------------------------------------------
    def buffer_type(self, grid: tuple[int, int, int]) -> ir.MemRefType:
        return ir.MemRefType.get([grid[0] * grid[1] * grid[2] * self.words], i32_type())

    def smem_record(self) -> SmemBuffer:
        return SmemBuffer("profiler", self.smem_offset, self.smem_words * 4, (self.smem_words,), "uint32",
                          "profiler")

    def spec(self, grid: tuple[int, int, int]) -> ProfilerSpec:
        return ProfilerSpec(region_names=tuple(self.region_names), unit=self.unit, units_per_block=self.units,
                            capacity=self.capacity, words_per_block=self.words, smem_offset=self.smem_offset,
                            buffer=self.buffer, block_stride=self.block_stride)

    # -- emitted code --------------------------------------------------------------------
    def _store(self, value: ir.Value, index: ir.Value | int) -> None:
        memref.store(value, self._smem, [c(index) if isinstance(index, int) else index])

    def _stamp(self, timer_word: int, clock_word: int, row: ir.Value | None = None) -> None:
        """Write %globaltimer and %clock, read back to back (the host pairs them to convert
        cycles to ns), to the given words of the block's header in global memory."""
        timer = nvvm.read_ptx_sreg_globaltimer(ir.IntegerType.get_signless(64))
        clock = nvvm.read_ptx_sreg_clock(i32_type())
        row = self._row_word() if row is None else row
        memref.store(arith.trunci(i32_type(), timer), self._buffer, [row + timer_word])
        memref.store(arith.trunci(i32_type(), timer.unsigned >> 32), self._buffer, [row + timer_word + 1])
        memref.store(clock, self._buffer, [row + clock_word])

    def start(self, buffer: ir.Value, grid: tuple[int, int, int]) -> None:
        """Kernel entry: thread 0 writes the block header (start stamps included) straight to the
        block's row in global memory and zeroes the finish counter; then one block barrier, so no
        unit can finish before the counter is zero."""
        self._buffer = buffer
        self._grid = grid
        workgroup = ir.Attribute.parse("#gpu.address_space<workgroup>")
        i8 = ir.IntegerType.get_signless(8)
        base = gpu.dynamic_shared_memory(ir.MemRefType.get([ir.ShapedType.get_dynamic_size()], i8,
                                                           memory_space=workgroup))
        self._smem = memref.view(ir.MemRefType.get([self.smem_words], i32_type(), memory_space=workgroup),
                                 base, c(self.smem_offset), [])
        # Each thread counts its unit's events in a register (a one-element private alloca in
        # the entry block, which LLVM promotes): reading the count back from shared memory at
        # every event put a load's latency on the kernel's critical path (~40 cycles an event;
        # 16% on attention, whose consumers record 10 events a K/V tile). The leader's count is
        # the unit's and goes to the unit header once, in `finish`.
        self._count = memref.alloca(ir.MemRefType.get([1], i32_type()), [], [])
        memref.store(c(0, i32_type()), self._count, [c(0)])
        tid = linear_thread_idx()
        row = self._row_word()
        with when(tid == 0):
            for word, value in ((0, c(fmt.MAGIC, i32_type())), (1, nvvm.read_ptx_sreg_smid(i32_type())),
                                (2, arith.index_cast(i32_type(), self._block_linear_id(grid))),
                                (3, c(self.units, i32_type()))):
                memref.store(value, self._buffer, [row + word])
            for word in range(10, fmt.BLOCK_HEADER_WORDS):
                memref.store(c(0, i32_type()), self._buffer, [row + word])
            self._store(c(0, i32_type()), _FINISHED_WORD)
            self._stamp(4, 8)
        gpu.barrier()

    def block_sampled(self) -> ir.Value:
        """Whether this block records its regions (an i1, uniform over the block): its linear id
        is a multiple of `block_stride`."""
        block = arith.index_cast(i32_type(), self._block_linear_id(self._grid))
        return arith.cmpi(arith.CmpIPredicate.eq, arith.remui(block, c(self.block_stride, i32_type())),
                          c(0, i32_type()))

    @staticmethod
    def _block_linear_id(grid: tuple[int, int, int]) -> ir.Value:
        x, y, z = (gpu.block_id(d) for d in (gpu.Dimension.x, gpu.Dimension.y, gpu.Dimension.z))
        return x + grid[0] * (y + grid[1] * z)

    def _record(self, name: str, begin: bool, when: ir.Value | None = None) -> None:
        if name not in self.region_names:
            if len(self.region_names) >= MAX_REGIONS:  # the decoder refuses ids past it (a corrupt tag)
                raise ValueError(f"named_region: expected at most {MAX_REGIONS} distinct region names per kernel, "
                                 f"got a new one past them: {name!r}")
            self.region_names.append(name)
        tag = self.region_names.index(name) | (fmt.BEGIN_BIT if begin else 0)
        tid = linear_thread_idx()
        lane = arith.index_cast(i32_type(), tid % self.threads_per_unit)
        count = memref.load(self._count, [c(0)])
        sampled = [] if when is None else [arith.extui(i32_type(), when)]
        unit = tid // self.threads_per_unit
        if self.buffer == "global":
            event_word = self._row_word() + fmt.BLOCK_HEADER_WORDS + unit * fmt.unit_words(self.capacity) \
                + fmt.UNIT_HEADER_WORDS
            events = arith.index_cast(i64(), memref.extract_aligned_pointer_as_index(self._buffer) + event_word * 4)
            self._record_global(tag, lane, count, events, sampled)
        else:
            first_event = (fmt.BLOCK_HEADER_WORDS + unit * self.unit_stride + fmt.UNIT_HEADER_WORDS) * 4
            self._record_smem(tag, lane, count, smem_address(self._smem) + arith.index_cast(i32_type(), first_event),
                              sampled)
        # a record not taken (profile_when false) does not count
        memref.store(arith.addi(count, sampled[0] if sampled else c(1, i32_type())), self._count, [c(0)])

    def _record_smem(self, tag: int, lane: ir.Value, count: ir.Value, first_event: ir.Value,
                     sampled: list[ir.Value]) -> None:
        """The unit's leader stores (tag, %clock) at its slot `count` of the unit's events in shared
        memory, in one straight-line block of predicated PTX. An `if leader` in the IR would put a
        branch on the thread index between the region's neighbours: LLVM then threads consecutive
        records' equal conditions through the code in between (the GEMM's first k-step became a
        leader copy and a non-leader copy of its mbarrier wait, joining just before the wgmmas),
        and ptxas serializes every wgmma of a kernel whose wgmma sequence it cannot prove
        convergent (C7518: WG.DP in divergent path). Predicates never leave the block. Events are
        8-byte aligned (16-byte aligned row, even header and unit sizes): one v2 store.
        `sampled`: [] or [an i32, 0 where the record is not taken] (`ctx.profile_when`)."""
        sample = "setp.ne.and.u32 room, $3, 0, room;\n" if sampled else ""
        inline_ptx(
            "{\n"
            ".reg .pred room;\n"
            ".reg .b32 clock, slot;\n"
            "setp.eq.u32 room, $0, 0;\n"
            f"setp.lt.and.u32 room, $1, {self.capacity}, room;\n"
            f"{sample}"
            "mov.u32 clock, %clock;\n"
            f"mad.lo.u32 slot, $1, {fmt.EVENT_WORDS * 4}, $2;\n"
            f"@room st.shared.v2.b32 [slot], {{{tag:#x}, clock}};\n"
            "}",
            [lane, count, first_event, *sampled], ["r", "r", "r"] + ["r"] * len(sampled))

    def _record_global(self, tag: int, lane: ir.Value, count: ir.Value, events: ir.Value,
                       sampled: list[ir.Value]) -> None:
        """The global-mode record: the event goes to the unit's slot `count` of the block's row in
        global memory (`events`: the generic address of the unit's first slot), in the same single
        predicated block as `_record_smem`. Rows are 16-byte aligned (the launcher's arrays) and
        row, header and unit sizes even in words: every event is 8-byte aligned, one v2 store."""
        sample = "setp.ne.and.u32 room, $3, 0, room;\n" if sampled else ""
        inline_ptx(
            "{\n"
            ".reg .pred room;\n"
            ".reg .b32 clock;\n"
            ".reg .b64 events, slot;\n"
            "setp.eq.u32 room, $0, 0;\n"
            f"setp.lt.and.u32 room, $1, {self.capacity}, room;\n"
            f"{sample}"
            "mov.u32 clock, %clock;\n"
            "cvta.to.global.u64 events, $2;\n"
            f"mad.wide.u32 slot, $1, {fmt.EVENT_WORDS * 4}, events;\n"
            f"@room st.global.v2.b32 [slot], {{{tag:#x}, clock}};\n"
            "}",
            [lane, count, events, *sampled], ["r", "r", "l"] + ["r"] * len(sampled))

    def _row_word(self, fresh: bool = False) -> ir.Value:
        """Index of the block's first word in the global profiler buffer (fresh: from block ids
        read by a volatile asm, which LLVM neither hoists nor shares with other reads)."""
        if not fresh:
            return self._block_linear_id(self._grid) * self.words
        x, y, z = (arith.index_cast(ir.IndexType.get(), inline_ptx(f"mov.u32 $0, %ctaid.{d};", [], ["=r"], [i32_type()],
                                                                  memory=False)) for d in "xyz")
        return (x + self._grid[0] * (y + self._grid[1] * z)) * self.words

    def begin(self, name: str, when: ir.Value | None = None) -> None:
        if not isinstance(name, str) or not name:
            raise ValueError(f"named_region: expected a non-empty region name, got {name!r}")
        self._record(name, True, when)

    def end(self, name: str, when: ir.Value | None = None) -> None:
        self._record(name, False, when)

    def finish(self) -> None:
        """Kernel exit, with no block barrier: each unit ends on its own. Its leader writes the
        unit's count to the unit header in global memory (in smem mode its warp first copies the
        events it kept to the row) and counts itself finished; the last unit to finish stamps
        the block's end. A block barrier here held every warp of the block, including the
        producer warps that have long finished, to the slowest one, and cost attention 4%."""
        tid = linear_thread_idx()
        lane_in_unit = arith.index_cast(i32_type(), tid % self.threads_per_unit)
        count = memref.load(self._count, [c(0)])
        # the block id read again here, opaquely: shared with the start's, LLVM computed the row's
        # address at entry and kept it live through the body (a persistent attention consumer,
        # at its register limit, spilled 4 bytes)
        row = self._row_word(fresh=True)
        unit = tid // self.threads_per_unit
        unit_base = row + fmt.BLOCK_HEADER_WORDS + unit * fmt.unit_words(self.capacity)
        if self.buffer == "smem":
            self._copy_events(lane_in_unit, count, unit, unit_base)
        with when(lane_in_unit == c(0, i32_type())):
            memref.store(count, self._buffer, [unit_base])
            memref.store(c(0, i32_type()), self._buffer, [unit_base + 1])
            finished = inline_ptx("atom.shared.add.u32 $0, [$1], 1;",
                                  [smem_address(self._smem) + c(_FINISHED_WORD * 4, i32_type())],
                                  ["=r", "r"], [i32_type()])
            with when(finished == c(self.units - 1, i32_type())):
                self._stamp(6, 9, row)

    def _copy_events(self, lane_in_unit: ir.Value, count: ir.Value, unit: ir.Value, unit_base: ir.Value) -> None:
        """smem mode: the leader's warp copies the events the leader kept (its count, read from
        lane 0, capped at the capacity) from the unit's smem area to its row in global memory."""
        with when(lane_in_unit < c(WARP_SIZE, i32_type())):
            # Every lane of the leader's warp is here (the branch is warp-uniform): the shuffle
            # also orders lane 0's event stores before the other lanes' loads.
            kept = inline_ptx("shfl.sync.idx.b32 $0, $1, 0, 0x1f, 0xffffffff;", [count], ["=r", "r"],
                              [i32_type()])
            words = arith.index_cast(ir.IndexType.get(), arith.minui(kept, c(self.capacity, i32_type()))) \
                * fmt.EVENT_WORDS
            smem_events = fmt.BLOCK_HEADER_WORDS + unit * self.unit_stride + fmt.UNIT_HEADER_WORDS
            events = unit_base + fmt.UNIT_HEADER_WORDS

            @for_range(arith.index_cast(ir.IndexType.get(), lane_in_unit), words, c(WARP_SIZE))
            def _copy(w):
                memref.store(memref.load(self._smem, [smem_events + w]), self._buffer, [events + w])
