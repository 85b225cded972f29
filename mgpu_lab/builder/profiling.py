"""Device side of the profiler: `ctx.named_region` events recorded into shared memory.

It lives in `builder/` because it emits MLIR; `profiler/` holds the host side only (the buffer
layout in `profiler/format.py`, decoding, exports). Each block keeps its row of the profiler
buffer (see `profiler/format.py`) in shared memory while it
runs: one leader thread per unit (warpgroup or warp) appends (tag, %clock) events to its
unit's bounded array; events past the capacity are counted but never written, so a full buffer
cannot overwrite barriers or data. At the end the block copies its row to global memory with
all threads (coalesced). With profiling off, `named_region` emits nothing at all.
"""

from __future__ import annotations

from .._mlir import arith, gpu, ir, memref, nvvm
from ..compiler.compiled_kernel import ProfilerSpec, SmemBuffer
from ..profiler import format as fmt
from ..profiler.trace import MAX_REGIONS
from .control import for_range, when
from .ptx import inline_ptx, smem_address
from .threads import WARP_SIZE, WARPGROUP_SIZE, linear_thread_idx
from .values import c, i32_type

_UNIT_THREADS = {"warpgroup": WARPGROUP_SIZE, "warp": WARP_SIZE}


class DeviceProfiler:
    """Emits the recording code while a kernel body is traced."""

    def __init__(self, block: tuple[int, int, int], *, unit: str, capacity: int, smem_offset: int):
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
        self.words = fmt.words_per_block(self.units, capacity)
        self.smem_offset = (smem_offset + 15) // 16 * 16
        self.smem_bytes = self.smem_offset - smem_offset + self.words * 4
        self.region_names: list[str] = []
        self._smem = None
        self._buffer = None

    # -- sizes and records ---------------------------------------------------------------
    def buffer_type(self, grid: tuple[int, int, int]) -> ir.MemRefType:
        return ir.MemRefType.get([grid[0] * grid[1] * grid[2] * self.words], i32_type())

    def smem_record(self) -> SmemBuffer:
        return SmemBuffer("profiler", self.smem_offset, self.words * 4, (self.words,), "uint32", "profiler")

    def spec(self, grid: tuple[int, int, int]) -> ProfilerSpec:
        return ProfilerSpec(region_names=tuple(self.region_names), unit=self.unit, units_per_block=self.units,
                            capacity=self.capacity, words_per_block=self.words, smem_offset=self.smem_offset)

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
        self._smem = memref.view(ir.MemRefType.get([self.words], i32_type(), memory_space=workgroup), base,
                                 c(self.smem_offset), [])
        tid = linear_thread_idx()
        with when(tid == 0):
            self._store(c(fmt.MAGIC, i32_type()), 0)
            self._store(nvvm.read_ptx_sreg_smid(i32_type()), 1)
            self._store(arith.index_cast(i32_type(), self._block_linear_id(grid)), 2)
            self._store(c(self.units, i32_type()), 3)
            for w in range(10, fmt.BLOCK_HEADER_WORDS):
                self._store(c(0, i32_type()), w)
        with when(tid < self.units):
            base_word = fmt.BLOCK_HEADER_WORDS + tid * fmt.unit_words(self.capacity)
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
        count_word = fmt.BLOCK_HEADER_WORDS + unit * fmt.unit_words(self.capacity)
        count_address = smem_address(self._smem) + arith.index_cast(i32_type(), count_word * 4)
        lane = arith.index_cast(i32_type(), tid % self.threads_per_unit)
        # The unit's leader appends (tag, %clock) and counts the event, in one straight-line
        # block of predicated PTX. An `if leader` in the IR would put a branch on the thread
        # index between the region's neighbours: LLVM then threads consecutive records' equal
        # conditions through the code in between (the GEMM's first k-step became a leader copy
        # and a non-leader copy of its mbarrier wait, joining just before the wgmmas), and
        # ptxas serializes every wgmma of a kernel whose wgmma sequence it cannot prove
        # convergent (C7518: WG.DP in divergent path). Predicates never leave the block.
        # Events are 8-byte aligned (16-byte aligned row, even header and unit sizes): one v2 store.
        inline_ptx(
            "{\n"
            ".reg .pred leader, room;\n"
            ".reg .b32 count, clock, slot;\n"
            "setp.eq.u32 leader, $0, 0;\n"
            "mov.u32 count, 0;\n"
            "@leader ld.shared.b32 count, [$1];\n"
            "mov.u32 clock, %clock;\n"
            f"setp.lt.and.u32 room, count, {self.capacity}, leader;\n"
            f"mad.lo.u32 slot, count, {fmt.EVENT_WORDS * 4}, $1;\n"
            f"@room st.shared.v2.b32 [slot+{fmt.UNIT_HEADER_WORDS * 4}], {{{tag:#x}, clock}};\n"
            "add.u32 count, count, 1;\n"
            "@leader st.shared.b32 [$1], count;\n"
            "}",
            [lane, count_address], ["r", "r"])

    def begin(self, name: str) -> None:
        if not isinstance(name, str) or not name:
            raise ValueError(f"named_region: expected a non-empty region name, got {name!r}")
        self._record(name, True)

    def end(self, name: str) -> None:
        self._record(name, False)

    def finish(self) -> None:
        """Kernel exit: stamp the end, then every thread copies part of the row to global memory."""
        gpu.barrier()
        tid = linear_thread_idx()
        with when(tid == 0):
            self._stamp(6, 9)
        gpu.barrier()
        row = self._block_linear_id(self._grid) * self.words

        @for_range(tid, c(self.words), c(self.threads))
        def _copy(w):
            memref.store(memref.load(self._smem, [w]), self._buffer, [row + w])

