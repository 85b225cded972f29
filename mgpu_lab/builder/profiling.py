"""Device side of the profiler: `ctx.named_region` events recorded per block and unit.

It lives in `builder/` because it emits MLIR; `profiler/` holds the host side only (the buffer
layout in `profiler/format.py`, decoding, exports). One leader thread per unit (warpgroup or
warp) appends (tag, %clock) events to its unit's bounded array, counting them in a register;
events past the capacity are counted but never written, so a full buffer cannot overwrite barriers or data. Where the
events go is the `buffer` mode:

- "smem": the block keeps its whole row of the profiler buffer (see `profiler/format.py`) in
  shared memory while it runs and copies it to global memory at the end with all threads
  (coalesced). Cheapest per event, but the row (8 bytes per event per unit) competes with the
  kernel's own buffers.
- "global": only the block header and the per-unit counters stay in shared memory (a few words
  per unit); events go straight to the block's row in global memory (the same row layout, so
  decoding is unchanged) and the end copies the header and counters. Any kernel has room for it.

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
                 buffer: str = "smem"):
        if check_buffer_mode(buffer) == "auto":
            raise ValueError("profile_buffer: DeviceProfiler needs 'smem' or 'global' (resolve 'auto' with "
                             "choose_buffer first), got 'auto'")
        if unit not in _UNIT_THREADS:
            raise ValueError(f"profile_unit: expected 'warpgroup' or 'warp', got {unit!r}")
        if not isinstance(capacity, int) or capacity < 1:
            raise ValueError(f"profile_capacity: expected a positive int (events per {unit}), got {capacity!r}")
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
                            buffer=self.buffer)

    # -- emitted code --------------------------------------------------------------------
    def _store(self, value: ir.Value, index: ir.Value | int) -> None:
        memref.store(value, self._smem, [c(index) if isinstance(index, int) else index])

    def _stamp(self, timer_word: int, clock_word: int) -> None:
        # Read the two clocks back to back: the host pairs them to convert cycles to ns.
        timer = nvvm.read_ptx_sreg_globaltimer(ir.IntegerType.get_signless(64))
        clock = nvvm.read_ptx_sreg_clock(i32_type())
        self._store(arith.trunci(i32_type(), timer), timer_word)
        self._store(arith.trunci(i32_type(), timer.unsigned >> 32), timer_word + 1)
        self._store(clock, clock_word)

    def start(self, buffer: ir.Value, grid: tuple[int, int, int]) -> None:
        """Kernel entry: header, zeroed counters, then a block barrier."""
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
        with when(tid == 0):
            self._store(c(fmt.MAGIC, i32_type()), 0)
            self._store(nvvm.read_ptx_sreg_smid(i32_type()), 1)
            self._store(arith.index_cast(i32_type(), self._block_linear_id(grid)), 2)
            self._store(c(self.units, i32_type()), 3)
            for w in range(10, fmt.BLOCK_HEADER_WORDS):
                self._store(c(0, i32_type()), w)
        with when(tid < self.units):
            base_word = fmt.BLOCK_HEADER_WORDS + tid * self.unit_stride
            self._store(c(0, i32_type()), base_word)
            self._store(c(0, i32_type()), base_word + 1)
        with when(tid == 0):
            self._stamp(4, 8)
        gpu.barrier()

    @staticmethod
    def _block_linear_id(grid: tuple[int, int, int]) -> ir.Value:
        x, y, z = (gpu.block_id(d) for d in (gpu.Dimension.x, gpu.Dimension.y, gpu.Dimension.z))
        return x + grid[0] * (y + grid[1] * z)

    def _record(self, name: str, begin: bool) -> None:
        if name not in self.region_names:
            if len(self.region_names) >= MAX_REGIONS:  # the decoder refuses ids past it (a corrupt tag)
                raise ValueError(f"named_region: expected at most {MAX_REGIONS} distinct region names per kernel, "
                                 f"got a new one past them: {name!r}")
            self.region_names.append(name)
        tag = self.region_names.index(name) | (fmt.BEGIN_BIT if begin else 0)
        tid = linear_thread_idx()
        unit = tid // self.threads_per_unit
        lane = arith.index_cast(i32_type(), tid % self.threads_per_unit)
        count = memref.load(self._count, [c(0)])
        if self.buffer == "global":
            self._record_global(tag, lane, count, unit)
        else:
            first_event = (fmt.BLOCK_HEADER_WORDS + unit * self.unit_stride + fmt.UNIT_HEADER_WORDS) * 4
            self._record_smem(tag, lane, count, smem_address(self._smem) + arith.index_cast(i32_type(), first_event))
        memref.store(arith.addi(count, c(1, i32_type())), self._count, [c(0)])

    def _record_smem(self, tag: int, lane: ir.Value, count: ir.Value, first_event: ir.Value) -> None:
        """The unit's leader stores (tag, %clock) at its slot `count` of the unit's events in shared
        memory, in one straight-line block of predicated PTX. An `if leader` in the IR would put a
        branch on the thread index between the region's neighbours: LLVM then threads consecutive
        records' equal conditions through the code in between (the GEMM's first k-step became a
        leader copy and a non-leader copy of its mbarrier wait, joining just before the wgmmas),
        and ptxas serializes every wgmma of a kernel whose wgmma sequence it cannot prove
        convergent (C7518: WG.DP in divergent path). Predicates never leave the block. Events are
        8-byte aligned (16-byte aligned row, even header and unit sizes): one v2 store."""
        inline_ptx(
            "{\n"
            ".reg .pred room;\n"
            ".reg .b32 clock, slot;\n"
            "mov.u32 clock, %clock;\n"
            "setp.eq.u32 room, $0, 0;\n"
            f"setp.lt.and.u32 room, $1, {self.capacity}, room;\n"
            f"mad.lo.u32 slot, $1, {fmt.EVENT_WORDS * 4}, $2;\n"
            f"@room st.shared.v2.b32 [slot], {{{tag:#x}, clock}};\n"
            "}",
            [lane, count, first_event], ["r", "r", "r"])

    def _record_global(self, tag: int, lane: ir.Value, count: ir.Value, unit: ir.Value) -> None:
        """The global-mode record: the event goes to the unit's slot `count` of the block's row in
        global memory. The same single predicated block as `_record_smem`; the slot address is
        computed in the block from the unit's first event address, a plain 64-bit value LLVM may
        hoist."""
        event_word = self._row_word() + fmt.BLOCK_HEADER_WORDS + unit * fmt.unit_words(self.capacity) \
            + fmt.UNIT_HEADER_WORDS
        events = arith.index_cast(i64(), memref.extract_aligned_pointer_as_index(self._buffer) + event_word * 4)
        # Rows are 16-byte aligned (the launcher's arrays) and row, header and unit sizes even
        # in words: every event is 8-byte aligned, one v2 store.
        inline_ptx(
            "{\n"
            ".reg .pred room;\n"
            ".reg .b32 clock;\n"
            ".reg .b64 events, slot;\n"
            "mov.u32 clock, %clock;\n"
            "setp.eq.u32 room, $0, 0;\n"
            f"setp.lt.and.u32 room, $1, {self.capacity}, room;\n"
            "cvta.to.global.u64 events, $2;\n"
            f"mad.wide.u32 slot, $1, {fmt.EVENT_WORDS * 4}, events;\n"
            f"@room st.global.v2.b32 [slot], {{{tag:#x}, clock}};\n"
            "}",
            [lane, count, events], ["r", "r", "l"])

    def _row_word(self) -> ir.Value:
        """Index of the block's first word in the global profiler buffer."""
        return self._block_linear_id(self._grid) * self.words

    def begin(self, name: str) -> None:
        if not isinstance(name, str) or not name:
            raise ValueError(f"named_region: expected a non-empty region name, got {name!r}")
        self._record(name, True)

    def end(self, name: str) -> None:
        self._record(name, False)

    def finish(self) -> None:
        """Kernel exit: stamp the end, then every thread copies part of the smem area to the
        block's row in global memory (the whole row, or in global mode the headers only: the
        events are there already)."""
        tid = linear_thread_idx()
        # Each unit's leader writes its count (events tried, recorded or not) to the unit header.
        count_address = smem_address(self._smem) + arith.index_cast(
            i32_type(), (fmt.BLOCK_HEADER_WORDS + tid // self.threads_per_unit * self.unit_stride) * 4)
        inline_ptx(
            "{\n"
            ".reg .pred leader;\n"
            "setp.eq.u32 leader, $0, 0;\n"
            "@leader st.shared.b32 [$1], $2;\n"
            "}",
            [arith.index_cast(i32_type(), tid % self.threads_per_unit), count_address,
             memref.load(self._count, [c(0)])], ["r", "r", "r"])
        gpu.barrier()
        with when(tid == 0):
            self._stamp(6, 9)
        gpu.barrier()
        row = self._row_word()
        if self.buffer == "smem":
            @for_range(tid, c(self.words), c(self.threads))
            def _copy(w):
                memref.store(memref.load(self._smem, [w]), self._buffer, [row + w])
            return

        @for_range(tid, c(fmt.BLOCK_HEADER_WORDS), c(self.threads))
        def _copy_header(w):
            memref.store(memref.load(self._smem, [w]), self._buffer, [row + w])

        unit_headers = self.units * fmt.UNIT_HEADER_WORDS

        @for_range(tid, c(unit_headers), c(self.threads))
        def _copy_units(w):
            unit, word = w // fmt.UNIT_HEADER_WORDS, w % fmt.UNIT_HEADER_WORDS
            target = row + fmt.BLOCK_HEADER_WORDS + unit * fmt.unit_words(self.capacity) + word
            memref.store(memref.load(self._smem, [fmt.BLOCK_HEADER_WORDS + w]), self._buffer, [target])

