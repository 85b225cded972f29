"""The reusable pieces of the warp-specialized Hopper GEMM (mgpu_lab/kernels/gemm/kernel.py, fp8.py).

A GEMM kernel body is three pieces around one `GemmTiling` (the shapes and tile sizes):

- `load_operands` (the producer warpgroup): one elected thread streams (tile_m x tile_k) tiles
  of A and (tile_k x tile_n) tiles of B into a ring of `stages` smem slots with TMA. The TMA
  descriptors carry the true global sizes, so boxes that hang over an edge (ragged M, N or a
  K tail) read zeros there: no shape needs to be a multiple of a tile.
- `multiply` (each consumer warpgroup): wgmma over the ring, one group in flight, releasing a
  slot when its group is done; returns the f32 accumulator of the consumer's rows as a
  `FragmentedArray` (WGMMA layout, rows x tile_n).
- `store_tile`: round a register tile to the output type, write it swizzled into smem and
  TMA-store it (the store clips at the array's edges).

Between `multiply` and `store_tile` an epilogue callable may rewrite the tile:
`epilogue(acc, tile, *extra_refs) -> FragmentedArray`, `tile` an `EpilogueTile` that loads
bias vectors, residual tiles and scalars at this tile's coordinates (see epilogues.py).
"""

from __future__ import annotations

import dataclasses
import os
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

from mgpu_lab import dsl
from mgpu_lab.compiler.compiled_kernel import dtype_itemsize
from mgpu_lab.dsl import arith, c, ir, memref, vector

from .h200_limits import H200_CLUSTERS
from .tile_limits import consumer_count
from .tile_order import tile_position

WARPGROUP = 128
WGMMA_ROWS = 64  # rows of one wgmma instruction (one warpgroup)
SWIZZLE = 128  # bytes: A and K-major B rows are one 128-byte swizzle span of k
PRODUCER_REGS, CONSUMER_REGS = 40, 232
# three consumers (tile_m = 192): 512 threads start at 128 registers each; the producer's 40 leave
# the consumers 152 (40 + 3 * 152 <= 4 * 128)
THREE_CONSUMER_REGS = 152
CONSUMER_BARRIER = 1  # named barrier of all consumer threads
WG_BARRIER = 2  # + consumer index (up to three): named barrier of one consumer warpgroup
TURN_BARRIER = 5  # + consumer index (pingpong): 'your mainloop may start', the other consumer arrives
EPILOGUE_SLOTS_BYTES = 16 * 1024  # a persistent consumer's epilogue buffer, at most (two slots)
SMEM_LIMIT = 227 * 1024  # shared memory a Hopper block can have


SWAP_STORES = ("tma", "one-tile", "registers")


def _probe_number(variable: str, low: int, high: int, meaning: tuple[str, str], step: int = 1) -> int | None:
    """A probe's whole number from the environment (None unset), refused naming the variable, the
    range and what it means (`meaning`: its unit, what it sets) where it is not one from `low` to
    `high`, a multiple of `step`."""
    value = os.environ.get(variable)
    if not value:
        return None
    try:
        number = int(value)
    except ValueError:
        number = low - 1
    if not low <= number <= high or number % step:
        multiple = f", a multiple of {step}" if step > 1 else ""
        raise ValueError(f"{variable} must be a number of {meaning[0]} from {low} to {high}{multiple} ({meaning[1]}), "
                         f"got {value!r}")
    return number


# Probes of the ring's smem and depth, read at import so that a benchmark's build workers build
# as it does; unset, nothing changes. MGPU_LAB_GEMM_RING_SMEM=<bytes>: the smem a block's default
# ring (deepest_ring) and a persistent tile's epilogue slots may use (else SMEM_LIMIT).
# MGPU_LAB_GEMM_SMEM_PAD=<bytes>: that much more smem in every GEMM block, unused (the last entry
# of GemmTiling.smem); it counts in smem_bytes, so a default ring gives up stages for it, while a
# ring given with `stages` keeps them and only the block grows. Padding a shallow ring to a deep
# one's smem told the two apart (H100, f25b310): 631x8192x28672's persistent 128 x 160 ran 726
# TF/s with 4 stages (180 KB) and 730 padded to 214 KB, against 572 with the default 6 (229 KB):
# the depth, not the 228 KB carve-out. RING_SMEM=199680 lost x0.988-0.996 on seeds 52 / 53 / 57 /
# 58: it also takes 128 x 256 and 256 x 128 tiles from 4 stages to 3 (x0.90-0.97).
RING_SMEM_ENV = "MGPU_LAB_GEMM_RING_SMEM"
RING_SMEM_FLOOR = 32 * 1024
RING_SMEM = _probe_number(RING_SMEM_ENV, RING_SMEM_FLOOR, SMEM_LIMIT,
                          ("bytes", "the smem a GEMM block's default ring and epilogue slots may use")) or SMEM_LIMIT
SMEM_PAD_ENV = "MGPU_LAB_GEMM_SMEM_PAD"
PAD_ALIGNMENT = 1024  # the pad buffer starts on a 1 KB boundary after the barriers: counted as used
SMEM_PAD = _probe_number(SMEM_PAD_ENV, 0, SMEM_LIMIT - RING_SMEM_FLOOR,
                         ("bytes", "unused smem added to every GEMM block"), step=128) or 0


def _probe_choice(variable: str, value: str, choices: tuple[str, ...], meaning: str) -> str:
    """A probe's setting from the environment, refused naming the variable, the choices and what
    it sets where it is not one of `choices`."""
    if value not in choices:
        listed = ", ".join(repr(c) for c in choices[:-1]) + f" or {choices[-1]!r}"
        raise ValueError(f"{variable} must be {listed} ({meaning}), got {value!r}")
    return value


def _swap_store(value: str) -> str:
    return _probe_choice(SWAP_STORE_ENV, value, SWAP_STORES, "how a swapped tile writes C")


# How a swapped tile writes C (GemmTiling.swap_tma_store): "tma" (one-tile and persistent blocks
# write their tile transposed into smem, then TMA-store it), "one-tile" (only one-tile blocks do;
# persistent ones store each element from the registers, as before 2026-12-05's evening) or
# "registers" (every swapped tile from the registers, as before that morning), for timing the
# paths side by side; read at import, so that a benchmark's build workers build as it does.
SWAP_STORE_ENV = "MGPU_LAB_GEMM_SWAP_STORE"
SWAP_STORE = _swap_store(os.environ.get(SWAP_STORE_ENV, "tma"))

# How many smem slots a persistent consumer streams its C tile out through (GemmTiling.epilogue_slots):
# "even" (two where the tile has an even number of store boxes and two fit in EPILOGUE_SLOTS_BYTES,
# else one: a 128 x 224 tile's seven boxes, or a 128 x 176 tile's eleven, each waited for before
# the next is written; the default until 2026-12-05's last session, kept for timing) or "fill"
# (at least even's, and more up to the tile's boxes, EPILOGUE_SLOTS_BYTES and the smem the ring
# leaves, the ring as deep as with even's: the box written next reuses the slot whose store is
# oldest). Fill is the default: the model's alternatives ran x1.008-1.023 on the odd-box tiles it
# changes (H200, afcb4ae), the stream-K and persistent GPU tests pass under it (116 / 116 on an
# H100, 9c41882), and drawn seeds whose picks it barely touches ran x1.002 / x0.999 (seeds 42 / 43,
# H100). (Those runs sized the ring first, which gave a 64 x 256 pingpong tile a fifth stage and
# one slot; fill now keeps even's ring.) Read at import, so that a benchmark's build workers build
# as it does.
EPILOGUE_SLOTS_ENV = "MGPU_LAB_GEMM_EPILOGUE_SLOTS"
EPILOGUE_SLOT_POLICIES = ("even", "fill")


def _epilogue_slots_policy(value: str) -> str:
    return _probe_choice(EPILOGUE_SLOTS_ENV, value, EPILOGUE_SLOT_POLICIES,
                         "how many smem slots a persistent tile streams C through")


EPILOGUE_SLOTS = _epilogue_slots_policy(os.environ.get(EPILOGUE_SLOTS_ENV, "fill"))

# How a persistent tile whose tile_n is no multiple of a 128-byte swizzle span writes C
# (GemmTiling.store_boxes): "uniform" (boxes of out_width columns, the widest power of two that
# divides tile_n: a 128 x 176 tile in eleven 16-column boxes, its epilogue 6.9 us a tile against
# 128 x 192's 2.9 on an H100, profile_gemm_2026-12-07T215321Z_271a645) or "mixed" (128-byte spans,
# half spans for a large accumulator, then the rest in halving powers of two, narrow boxes first:
# 128 x 176 over two consumers 16, 32, 64, 64; pingpong 16 and five of 32). Read at import,
# so that a benchmark's build workers build as it does; benchmarks/probe_store_boxes.py times the
# two side by side.
STORE_BOXES_ENV = "MGPU_LAB_GEMM_STORE_BOXES"
STORE_BOX_POLICIES = ("uniform", "mixed")


def _store_boxes_policy(value: str) -> str:
    return _probe_choice(STORE_BOXES_ENV, value, STORE_BOX_POLICIES, "the widths of the boxes a persistent tile "
                         "stores C in")


STORE_BOXES = _store_boxes_policy(os.environ.get(STORE_BOXES_ENV, "uniform"))
# Mixed boxes of a whole 128-byte span need registers beside the accumulator: with more than this
# many f32 a thread (128 x 176 pingpong: 176) ptxas spilled 48-56 bytes, so such tiles take boxes
# of half a span (128 x 176: five of 32 columns and one of 16, no spill).
WIDE_BOX_ACCUMULATOR = 160

MAX_STAGES = 8

# A third probe: MGPU_LAB_GEMM_WIDE_STAGES=<n> caps the default ring of tiles with 128 rows or
# more and more than 128 columns (128 x 136 ... 128 x 224 take 5-6 stages by smem; 128 x 256 and
# 256-row tiles take 4) at n stages. On an H100 (f25b310) one stage fewer ran x1.02-1.09 on 128 x
# 192 tiles and four stages x1.27 on a persistent 128 x 160, on long K. Timed at 4 on fresh seeds
# 59-61 (H100, 47ecb4c) it moved no seed (x0.999-1.001; its picks x0.96-1.06, long K gaining,
# short K losing), so no default changed.
WIDE_STAGES_ENV = "MGPU_LAB_GEMM_WIDE_STAGES"
WIDE_STAGES = _probe_number(WIDE_STAGES_ENV, 2, MAX_STAGES,
                            ("stages", "the deepest default ring of a tile of 128+ rows by 136+ columns"))


@dataclass(frozen=True)
class GemmTiling:
    """C (m, n) = A (m, k) @ B: B (k, n), or (n, k) with transpose_b. A block computes a
    (tile_m x tile_n) tile of C with `consumers` warpgroups of tile_m / consumers rows each (one of
    64 rows, two of 64 or 128, three of 64 for tile_m = 192); with
    pingpong, each of the two consumers computes whole tiles, alternating, so one's epilogue runs
    while the other multiplies."""

    m: int
    n: int
    k: int
    tile_m: int = 128
    tile_n: int = 256
    stages: int = 4
    group_m: int = 8
    transpose_b: bool = False
    dtype: str = "bfloat16"
    out_dtype: str = "bfloat16"
    # True: one block per SM looping over tiles (its own epilogue buffer); "pingpong": that, with
    # the two consumers taking alternate whole tiles; "stream_k": that, with the tiles of the last
    # waves split over K so every block gets the same k-steps (stream_k.py)
    persistent: bool | str = False
    sms: int = 132  # blocks of a persistent grid
    # > 1: blocks (grid y) compute K slices of k_steps pipeline steps each (the last slice's boxes
    # past K read zeros), summed (split_k.py) by the blocks of a cluster through distributed
    # shared memory ("cluster", at most MAX_CLUSTER_SPLIT slices) or by a second kernel from an
    # f32 workspace (split_k, m, n) ("workspace")
    split_k: int = 1
    split_k_reduce: str = "cluster"
    # 2 (4): persistent blocks work in clusters on 2 (4) vertically adjacent tiles (a "pair"), each
    # block loading its share of the column's common B tile and multicasting it into all of them
    # (B traffic from L2 halved (quartered))
    cluster_m: int = 1
    # 2 (4): the same on horizontally adjacent tiles sharing A; with cluster_m = 2 as well, a
    # 2 x 2 "quad" of tiles: each block loads half of its row's A tile and half of its column's B
    # tile (what one block reads from L2 per k-step halves); 2 x 4 and 4 x 2 clusters of eight
    # blocks, a quarter of one operand's tile and half of the other's. At most eight blocks.
    cluster_n: int = 1
    # True: the tiling is of C.T = B @ A.T (m, n: the user's n, m; B is the wgmma A operand, K-major
    # from B (n, k) or MN-major from B (k, n), A (m, k) the K-major B operand): a skinny A becomes a
    # narrow tile_n (a multiple of 8) instead of a mostly empty 64-row wgmma tile; C's tile is
    # written transposed (by TMA through smem where it can: swap_tma_store)
    swap_ab: bool = False
    # > 1 (persistent="stream_k" only): stream-K units of team_m blocks on vertically adjacent
    # tiles of one column, no cluster: each block runs its own tile over the same k-steps as the
    # others, at the same time, so they read each panel of their common B tile from L2 together
    # (stream-K's single blocks start their pieces at different k-steps and read B from DRAM up
    # to once per tile row; l2_replay.py)
    team_m: int = 1

    @property
    def itemsize(self) -> int:
        return dtype_itemsize(self.dtype)

    @property
    def a_mn_major(self) -> bool:
        """The wgmma A operand is stored (k, m): swap_ab with B (k, n), whose columns are C.T's rows."""
        return self.swap_ab is True and not self.transpose_b

    @property
    def b_k_major(self) -> bool:
        """The wgmma B operand is stored (n, k): B (n, k), or A (m, k) with swap_ab."""
        return self.transpose_b or self.swap_ab is True

    @property
    def a_chunk(self) -> int:
        """Rows per A box of an MN-major A (a_mn_major): one swizzle span of m."""
        return SWIZZLE // self.itemsize

    @property
    def tile_k(self) -> int:
        """k per pipeline slot: one 128-byte swizzle span (64 bf16, 128 fp8)."""
        return SWIZZLE // self.itemsize

    @property
    def consumers(self) -> int:
        """Consumer warpgroups (tile_limits.consumer_count): three of 64 rows for 192 (what cuBLAS's
        192-row tiles run: a 192 x 176 tile in one wave of 99 blocks on 163 x 18944)."""
        return consumer_count(self.tile_m, self.pingpong)

    @property
    def consumer_rows(self) -> int:
        return self.tile_m if self.pingpong else self.tile_m // self.consumers

    @property
    def pingpong(self) -> bool:
        return self.persistent == "pingpong"

    @property
    def stream_k(self) -> bool:
        return self.persistent == "stream_k"

    @property
    def partial_chunks(self) -> int:
        """Stream-K: a partial tile (tile_m x tile_n f32) crosses between blocks in chunks of one
        ring slot's B buffer (tile_n rows of 128 bytes): tile_m / 32 of them."""
        return self.tile_m // 32

    @property
    def partial_width(self) -> int:
        """Stream-K: columns of a consumer's accumulator per chunk (a multiple of 8 where stream_k is allowed)."""
        return self.tile_n * 32 // self.tile_m

    @property
    def partial_groups(self) -> int:
        """Stream-K: 16-byte register groups of each consumer thread per chunk."""
        return self.tile_n // (16 * self.consumers)

    @property
    def slot_consumers(self) -> int:
        """Consumer warpgroups reading each ring slot (its 'empty' barrier waits for their warps)."""
        return 1 if self.pingpong else self.consumers

    def row_offset(self, wg: Any) -> Any:
        """First row of consumer `wg`'s part of the tile."""
        return 0 if self.pingpong else wg * self.consumer_rows

    @property
    def tiles_m(self) -> int:
        return -(-self.m // self.tile_m)

    @property
    def tiles_n(self) -> int:
        return -(-self.n // self.tile_n)

    @property
    def k_tiles(self) -> int:
        return -(-self.k // self.tile_k)

    @property
    def k_steps(self) -> int:
        """Pipeline steps of one tile (of one K slice with split_k)."""
        return -(-self.k_tiles // self.split_k)

    @property
    def b_chunk(self) -> int:
        """Columns per B box of A @ B (MN-major B): one 128-byte swizzle span (64 bf16), or 32
        columns (64-byte swizzle) where tile_n is not a multiple of 64 (32, 96, 160, 224)."""
        span = SWIZZLE // self.itemsize
        return span if self.tile_n % span == 0 else span // 2

    @property
    def out_width(self) -> int:
        """Columns per TMA-store box (and per split-K piece): one 128-byte swizzle span, or the
        widest power-of-two part of it that divides tile_n (tile_n = 96: 32; 144: 16)."""
        width = SWIZZLE // dtype_itemsize(self.out_dtype)
        while self.tile_n % width:
            width //= 2
        return width

    @property
    def stage_bytes(self) -> int:
        return (self.tile_m + self.tile_n) * self.tile_k * self.itemsize

    @property
    def pipeline_bytes(self) -> int:
        return self.stages * self.stage_bytes

    @property
    def store_boxes(self) -> tuple[tuple[int, int], ...]:
        """(first column, width) of each TMA-store box of a consumer's tile (and of each split-K
        piece): out_width columns each; under STORE_BOXES "mixed", a persistent tile that streams
        C (stream_tile) and whose tile_n is no multiple of a 128-byte swizzle span takes spans
        (half spans past WIDE_BOX_ACCUMULATOR accumulator registers a thread) and then the rest in
        halving powers of two, the narrow boxes first: 128 x 176 over two consumers 16, 32, 64, 64;
        pingpong (one consumer's 176 registers) 16 and five of 32."""
        width, span = self.out_width, SWIZZLE // dtype_itemsize(self.out_dtype)
        if (STORE_BOXES == "uniform" or width == span or not self.persistent or self.swap_ab
                or self.cluster_split):
            return tuple((start, width) for start in range(0, self.tile_n, width))
        widths, left, width = [], self.tile_n, span
        if self.consumer_rows * self.tile_n // WARPGROUP > WIDE_BOX_ACCUMULATOR:
            width //= 2
        while left:
            while width > left:
                width //= 2
            widths.append(width)
            left -= width
        boxes, start = [], 0
        for width in reversed(widths):  # narrow ones first: fewer registers live while a wide box converts
            boxes.append((start, width))
            start += width
        return tuple(boxes)

    @property
    def mixed_store_boxes(self) -> bool:
        """The store boxes differ in width (the epilogue slots are then flat, see smem)."""
        return len({width for _, width in self.store_boxes}) > 1

    @property
    def store_width(self) -> int:
        """The widest store box: the columns of each epilogue slot."""
        return max(width for _, width in self.store_boxes)

    @property
    def epilogue_pieces(self) -> int:
        """TMA-store boxes per consumer tile (store_boxes)."""
        return len(self.store_boxes)

    @property
    def epilogue_slots(self) -> int:
        """Persistent blocks stream each consumer's tile out one box at a time through slots of
        their own (stream_tile), so that a box is written while earlier ones' stores read theirs.
        EPILOGUE_SLOTS "even": two where they fit in EPILOGUE_SLOTS_BYTES per consumer and the
        pieces alternate evenly, else one; "fill": at least as many as "even", and more up to the
        tile's boxes, EPILOGUE_SLOTS_BYTES and the smem the ring leaves of RING_SMEM. So fill
        never changes the ring "even" gets (deepest_ring sizes it with even's slots) and only adds
        slots: a 64 x 256 pingpong tile keeps its two slots and four stages, where filling after
        the deepest ring would give it five stages and one slot. A one-tile block writes the whole
        tile at once over the ring."""
        if not self.persistent:
            return self.epilogue_pieces
        piece = self.consumer_rows * self.store_width * dtype_itemsize(self.out_dtype)
        even = 2 if self.epilogue_pieces % 2 == 0 and 2 * piece <= EPILOGUE_SLOTS_BYTES else 1
        if EPILOGUE_SLOTS == "even":
            return even
        left = RING_SMEM - self.pipeline_bytes - 2 * self.stages * 8
        return max(even, min(self.epilogue_pieces, EPILOGUE_SLOTS_BYTES // piece, left // (self.consumers * piece)))

    def epilogue_pending(self, piece: int) -> int:
        """Stores a persistent consumer may leave reading smem before it writes box `piece` of a
        tile into slot piece % epilogue_slots (stream_tile): those issued since that slot's last
        store, which was this tile's box piece - slots, or the previous tile's last box in the
        slot (its stores come in order, epilogue_pieces a tile); at most slots - 1."""
        slots, pieces = self.epilogue_slots, self.epilogue_pieces
        if piece >= slots:
            return slots - 1
        last = piece + slots * ((pieces - 1 - piece) // slots)  # the previous tile's last box in slot `piece`
        return min(slots - 1, pieces - 1 - last + piece)

    @property
    def epilogue_bytes(self) -> int:
        if self.persistent and self.swap_tma_store:
            return (self.consumers * self.transposed_slots * self.consumer_rows * self.transposed_piece
                    * dtype_itemsize(self.out_dtype))
        return (self.consumers * self.epilogue_slots * self.consumer_rows * self.store_width
                * dtype_itemsize(self.out_dtype))

    @property
    def swap_tma_store(self) -> bool:
        """A swapped tile (no split) writes C by TMA: the consumer's C.T tile goes to smem
        transposed, then out in whole lines. A one-tile block writes it all at once over the ring
        (store_tile_transposed); a persistent one streams it through two small slots beside the
        ring (stream_tile_transposed), so the producer keeps loading the next tile. C's rows (the
        user's n) must be 16-byte aligned for a TMA descriptor; else, for split swapped tiles and
        where SWAP_STORE says so, C is written from the registers one element at a time."""
        if SWAP_STORE == "registers" or self.persistent and SWAP_STORE == "one-tile":
            return False
        return (self.swap_ab is True and self.split_k == 1 and not self.pingpong
                and (self.m * dtype_itemsize(self.out_dtype)) % 16 == 0)

    @property
    def transposed_width(self) -> int:
        """Columns of C per TMA-store box of a swapped tile (swap_tma_store): one swizzle span."""
        return SWIZZLE // dtype_itemsize(self.out_dtype)

    @property
    def transposed_piece(self) -> int:
        """Rows of C (columns of the C.T tile) per piece a persistent swapped consumer streams out
        (stream_tile_transposed): a multiple of 8 (a thread's column group), as many as two slots
        hold in EPILOGUE_SLOTS_BYTES and in the smem the ring leaves (deepest_ring sizes the ring
        first: a slot of 8 rows still fits where a deeper ring would not), at least 8; the last
        piece of a tile may be narrower."""
        per_row = 2 * self.consumer_rows * dtype_itemsize(self.out_dtype)  # two slots, one row of C each
        left = RING_SMEM - self.pipeline_bytes - 2 * self.stages * 8
        rows = min(EPILOGUE_SLOTS_BYTES, left // self.consumers) // per_row
        return min(self.tile_n, max(8, rows // 8 * 8))

    @property
    def transposed_pieces(self) -> tuple[tuple[int, int], ...]:
        """(first column, width) of each piece of a consumer's C.T tile (stream_tile_transposed)."""
        piece = self.transposed_piece
        return tuple((start, min(piece, self.tile_n - start)) for start in range(0, self.tile_n, piece))

    @property
    def transposed_slots(self) -> int:
        """Slots a persistent swapped consumer streams its pieces through: two where a tile has more
        than one piece (one is written while the other's store reads it), else one."""
        return 2 if len(self.transposed_pieces) > 1 else 1

    @property
    def cluster_split(self) -> bool:
        """split_k > 1 summed inside a cluster of the tile's split_k blocks (one kernel)."""
        return self.split_k > 1 and self.split_k_reduce == "cluster"

    @property
    def partials_bytes(self) -> int:
        """A cluster-split block's f32 partial tile, parked in smem for its peers (over the ring)."""
        return self.tile_m * self.tile_n * 4

    @property
    def epilogue_beside_ring(self) -> bool:
        """A persistent block's epilogue buffer has smem of its own (the ring is loading the next
        tile while the epilogue writes), unless its tile goes out from the registers."""
        return bool(self.persistent) and (not self.swap_ab or self.swap_tma_store)

    @property
    def smem_bytes(self) -> int:
        return self._used_smem_bytes + (SMEM_PAD + PAD_ALIGNMENT if SMEM_PAD else 0)

    @property
    def _used_smem_bytes(self) -> int:
        if self.cluster_split:  # partials over the ring, one output box per consumer beside them
            staging = self.consumers * self.consumer_rows * self.out_width * dtype_itemsize(self.out_dtype)
            return max(self.pipeline_bytes, self.partials_bytes) + staging + 2 * self.stages * 8
        if self.epilogue_beside_ring:  # the ring keeps loading the next tile while the epilogue writes
            return self.pipeline_bytes + self.epilogue_bytes + 2 * self.stages * 8
        return max(self.pipeline_bytes, self.epilogue_bytes) + 2 * self.stages * 8

    @property
    def threads(self) -> int:
        return (self.consumers + 1) * WARPGROUP

    @property
    def tiles(self) -> int:
        return self.tiles_m * self.tiles_n

    @property
    def cluster_size(self) -> int:
        """Blocks per cluster of a persistent grid that multicasts: 2 (a pair), 4 or 8, else 1."""
        return self.cluster_m * self.cluster_n

    @property
    def slot_writers(self) -> int:
        """Blocks whose loads land in a block's ring slots, its own included: the blocks of its
        cluster column (sharing B) and of its cluster row (sharing A); not a quad's diagonal one."""
        return self.cluster_m + self.cluster_n - 1

    @property
    def unit_blocks(self) -> int:
        """Blocks of one persistent unit: a multicast cluster's, or a stream-K team's (team_m)."""
        return self.cluster_size * self.team_m

    @property
    def work_items(self) -> int:
        """What a persistent block loops over: tiles, or with cluster_m = 2 (cluster_n = 2) tile
        pairs (a cluster's two blocks take the pair's two row (column) tiles), or with both 2 x 2
        quads of tiles; with team_m, a team's team_m tiles of a column."""
        return -(-self.tiles_n // self.cluster_n) * -(-self.tiles_m // (self.cluster_m * self.team_m))

    @property
    def grid(self) -> int:
        if not self.persistent:
            return self.tiles
        size = self.cluster_size
        if self.stream_k:  # every SM: the split tiles spread over all of them
            return self.sms // self.unit_blocks * self.unit_blocks
        per_block = 2 if self.pingpong else 1  # a pingpong block keeps both consumers busy
        # clusters of four or eight: no more than an H200 keeps resident, or the rest would wait
        # for a second wave (a cluster never straddles a GPC)
        resident = self.sms // size if size < 4 else min(self.sms // size, H200_CLUSTERS[size])
        clusters = min(-(-self.work_items // per_block), resident)
        return clusters * size

    def smem(self) -> tuple:
        """The smem tree: ((pipeline ring, epilogue tiles), full barriers, empty barriers), each named
        as the kernel body calls it (the viewers show `a_ring`, `full`, ... not `0.0.0`). A
        one-tile block's epilogue reuses the ring (a Union: the consumers pass a named barrier
        before writing it); a persistent block's has its own buffer."""
        sd = dsl.ShapeDtype
        if self.b_k_major:
            b_slot = (self.stages, self.tile_n, self.tile_k)
        else:
            b_slot = (self.stages, self.tile_n // self.b_chunk, self.tile_k, self.b_chunk)
        b_ring = sd(b_slot, self.dtype, name="b_ring")
        if self.stream_k:  # partial tiles from other blocks arrive in the B buffers (f32, by thread)
            chunks = sd((self.stages, self.consumers, self.partial_groups, WARPGROUP, 4), "float32",
                        name="stream_k_partials")
            b_ring = dsl.Union([b_ring, chunks])
        a_slot = (self.stages, self.tile_m // self.a_chunk, self.tile_k, self.a_chunk) if self.a_mn_major else \
            (self.stages, self.tile_m, self.tile_k)
        ring = (sd(a_slot, self.dtype, name="a_ring"), b_ring)
        if self.swap_tma_store and self.persistent:  # slots of a piece of C.T's tile each, transposed
            epilogue = sd((self.consumers, self.transposed_slots, self.consumer_rows // self.transposed_width,
                           self.transposed_piece, self.transposed_width), self.out_dtype, name="epilogue")
        elif self.swap_tma_store:  # each consumer's C.T tile transposed: (its rows / w, tile_n, w), as many bytes
            epilogue = sd((self.consumers, self.consumer_rows // self.transposed_width, self.tile_n,
                           self.transposed_width), self.out_dtype, name="epilogue")
        elif self.mixed_store_boxes:  # a slot holds any box: (rows, w) for w up to store_width, from its start
            epilogue = sd((self.consumers, self.epilogue_slots, self.consumer_rows * self.store_width),
                          self.out_dtype, name="epilogue")
        else:
            epilogue = sd((self.consumers, self.epilogue_slots, self.consumer_rows, self.out_width), self.out_dtype,
                          name="epilogue")
        if self.cluster_split:
            per_piece = (self.consumer_rows // WGMMA_ROWS) * (self.out_width // 8) * 2  # registers
            partials = sd((self.consumers, self.epilogue_pieces, per_piece, WARPGROUP, 2), "float32",
                          name="split_k_partials")
            staging = sd((self.consumers, self.consumer_rows, self.out_width), self.out_dtype, name="c_staging")
            both = (dsl.Union([ring, partials]), staging)
        else:
            # a swapped tile written from the registers leaves a persistent block's epilogue buffer
            # unused, so it overlaps the ring instead of taking stages from it
            both = (ring, epilogue) if self.epilogue_beside_ring else dsl.Union([ring, epilogue])
        barriers = (dsl.Barriers(self.stages, name="full"), dsl.Barriers(self.stages, name="empty"))
        if SMEM_PAD:  # the SMEM_PAD probe's unused bytes, after everything the kernel indexes
            return (both, *barriers, sd((SMEM_PAD,), "uint8", name="smem_pad"))
        return (both, *barriers)


def deepest_ring(t: GemmTiling) -> int:
    """The most ring slots (2 to MAX_STAGES) whose smem fits in a block and in RING_SMEM (where
    none fits RING_SMEM, the fewest that fit the block), at most WIDE_STAGES for a wide tile where
    that probe is set: the default `stages` (the kernel's resolve_tiling and the model's estimates
    both read it here)."""
    smem = {s: dataclasses.replace(t, stages=s).smem_bytes for s in range(2, MAX_STAGES + 1)}
    fits = [s for s in smem if smem[s] <= SMEM_LIMIT]
    deepest = max([s for s in fits if smem[s] <= RING_SMEM] or fits[:1] or [2])
    if WIDE_STAGES and t.tile_m >= 128 and t.tile_n > 128:
        return min(deepest, WIDE_STAGES)
    return deepest


def tile_origin(t: GemmTiling, tile: ir.Value | None = None, rank: ir.Value | None = None) -> tuple[ir.Value, ir.Value]:
    """(row, column) in C of tile number `tile` (default: this block's). Tiles are numbered
    down groups of `group_m` tile rows, column by column, so tiles running together share
    tiles of A and B in L2. With cluster_m = 2, `tile` numbers pairs of row tiles the same way
    and `rank` (the block's in its cluster) picks the pair's upper or lower tile; with cluster_n
    = 2, pairs of column tiles, `rank` the left or right one; with both, 2 x 2 quads of tiles
    (`cluster_position`); with team_m, runs of team_m row tiles, `rank` the block's in its team."""
    if t.team_m > 1:  # rank: the block's place in its team, down the team's column of tiles
        group = GemmTiling(t.m, t.n, t.k, tile_m=t.team_m * t.tile_m, tile_n=t.tile_n, group_m=t.group_m)
        row0, col0 = tile_origin(group, tile)
        return row0 + rank * t.tile_m, col0
    if t.cluster_size > 1:
        group = GemmTiling(t.m, t.n, t.k, tile_m=t.cluster_m * t.tile_m, tile_n=t.cluster_n * t.tile_n,
                           group_m=t.group_m)
        row0, col0 = tile_origin(group, tile)
        row, col = cluster_position(t, rank)
        return row0 + row * t.tile_m if t.cluster_m > 1 else row0, col0 + col * t.tile_n if t.cluster_n > 1 else col0
    pid = dsl.block_idx("x") if tile is None else tile
    row, col = tile_position(pid, t.tiles_m, t.tiles_n, t.group_m, dsl.min)
    return row * t.tile_m, col * t.tile_n


def cluster_position(t: GemmTiling, rank: Any) -> tuple[Any, Any]:
    """(row, column) of the block of cluster rank `rank` among the cluster_m x cluster_n tiles
    of its cluster: ranks run down a column first (rank = row + cluster_m * column)."""
    if t.cluster_n == 1:
        return rank, 0
    if t.cluster_m == 1:
        return 0, rank
    return rank % t.cluster_m, rank // t.cluster_m


def multicast_peers(t: GemmTiling, rank: Any) -> tuple:
    """The cluster ranks whose loads land in this block's slots besides its own (the others of
    its cluster column, sharing B; of its row, sharing A; never a quad's diagonal block), whose
    'empty' barriers this block's consumers release each slot in too. () outside a cluster.
    (cluster_m and cluster_n are powers of two: flipping a rank's row bits stays in its column.)"""
    if t.cluster_size == 1:
        return ()
    if t.cluster_size == 2:
        return (1 - rank,)
    return (tuple(rank ^ d for d in range(1, t.cluster_m))
            + tuple(rank ^ (d * t.cluster_m) for d in range(1, t.cluster_n)))


def multicast_masks(t: GemmTiling, rank: Any) -> tuple[Any, Any]:
    """The multicast masks of this block's share of A (the ranks of its cluster row: row +
    cluster_m * c) and of B (of its cluster column: cluster_m * col + r), ints where they do not
    depend on the rank; None where not shared."""
    row, col = cluster_position(t, rank)
    a_mask = b_mask = None
    if t.cluster_n > 1:  # a quad: ranks row and row + 2, 0b0101 << row
        row_ranks = sum(1 << (t.cluster_m * c) for c in range(t.cluster_n))
        a_mask = row_ranks if t.cluster_m == 1 else row_ranks << row
    if t.cluster_m > 1:  # a quad: ranks 2 col and 2 col + 1, 0b0011 << 2 col
        column_ranks = (1 << t.cluster_m) - 1
        b_mask = column_ranks if t.cluster_n == 1 else column_ranks << (t.cluster_m * col)
    return a_mask, b_mask


def producer_registers(t: GemmTiling) -> None:
    """The producer gives registers up for the consumers (with one consumer, 256 threads have
    255 registers each without reallocation: nothing to do)."""
    if t.consumers > 1:
        dsl.setmaxnreg(PRODUCER_REGS)


def consumer_registers(t: GemmTiling) -> None:
    if t.consumers > 1:
        dsl.setmaxnreg(THREE_CONSUMER_REGS if t.consumers == 3 else CONSUMER_REGS)


def load_operands(ctx: Any, t: GemmTiling, a: ir.Value, b: ir.Value, ring: tuple, full: Any, empty: Any,
                  row0: ir.Value, col0: ir.Value, k_first: ir.Value | int = 0,
                  steps: ir.Value | int | None = None) -> None:
    """The producer warpgroup of a one-tile block: give up registers, then one thread issues the
    TMA loads of every k-step of the tile, or of its K slice (`steps` k-steps from k_first)."""
    producer_registers(t)
    with dsl.single_thread("warpgroup"):
        load_tile(ctx, t, a, b, ring, full, empty, row0, col0, k_first=k_first, steps=steps)


def load_tile(ctx: Any, t: GemmTiling, a: ir.Value, b: ir.Value, ring: tuple, full: Any, empty: Any,
              row0: ir.Value, col0: ir.Value, first: ir.Value | int = 0, k_first: ir.Value | int = 0,
              steps: ir.Value | int | None = None, rank: ir.Value | None = None) -> None:
    """(One thread.) TMA-load the A and B tiles of every k-step of the C tile at (row0, col0)
    (with split_k: `steps` k-steps from k_first, the slice's part of K). Pipeline iteration `first + kt`
    uses slot (first + kt) % stages once the consumers have released it (with cluster_m = 2:
    the consumers of both blocks); the boxes hang over the arrays' edges where the shape is
    ragged (zero fill). With cluster_m = 2 the block of cluster rank `rank` loads half of the B
    tile (rows of B (n, k), or 64-column chunks of B (k, n)) into both blocks' slot; with
    cluster_n = 2, half of the A tile's rows (of an MN-major A, half of each box's k rows); in a
    quad, half of each, into
    the blocks of its cluster column (B) and row (A)."""
    a_smem, b_smem = ring
    steps = t.k_steps if steps is None else steps
    row, col = cluster_position(t, rank) if t.cluster_size > 1 else (0, 0)
    a_mask, b_mask = multicast_masks(t, rank) if t.cluster_size > 1 else (None, None)

    # rolled whatever its length (one thread issuing copies gains nothing from unrolling):
    # unrolled, a short K's 8 steps of boxes spilled the producer's 40 registers (3009x3296x472
    # in multicast pairs: 76 bytes), and LLVM's partial unroll of 9 (K = 536) spilled 56-112
    # bytes in pairs sharing A and 192-wide B pairs
    @dsl.for_range(0, steps, rolled=isinstance(steps, int))
    def _(kt):
        it = kt + first
        with ctx.named_region("load"):
            empty.wait_for_iteration(it, flip=True)  # passes at once on the first round
            bar, _ = full.for_iteration(it)
            bar.arrive_expect_tx(t.stage_bytes)  # out-of-bounds parts count too (zero filled)
            slot = it % t.stages
            k0 = (kt + k_first) * t.tile_k
            copy = {"barrier": bar, "arrive": False, "swizzle": SWIZZLE, "uniform": False}
            if t.a_mn_major and t.cluster_n > 1:
                # this block's share of every box's k rows (tile_k / cluster_n of them: multiples of
                # the 8 rows the 128-byte swizzle repeats over, so each share lands swizzled as the
                # whole box would), into its cluster row's blocks: what cuBLAS's 1 x 4 clusters share
                rows = t.tile_k // t.cluster_n
                first_row = col * rows
                for j in range(t.tile_m // t.a_chunk):
                    ctx.async_copy(src_ref=a, dst_ref=dsl.memref_slice(a_smem, (slot, j, dsl.ds(first_row, rows))),
                                   gmem_slice=(dsl.ds(k0 + first_row, rows), dsl.ds(row0 + t.a_chunk * j, t.a_chunk)),
                                   **copy, multicast_mask=a_mask)
            elif t.a_mn_major:  # A (k, m): boxes of k rows by one swizzle span of m, as B (k, n)'s
                for j in range(t.tile_m // t.a_chunk):
                    ctx.async_copy(src_ref=a, dst_ref=dsl.memref_slice(a_smem, (slot, j)),
                                   gmem_slice=(dsl.ds(k0, t.tile_k), dsl.ds(row0 + t.a_chunk * j, t.a_chunk)), **copy)
            elif t.cluster_n > 1:  # this block's half of its cluster row's common A rows, into the row's blocks
                rows = t.tile_m // t.cluster_n
                first_row = col * rows
                ctx.async_copy(src_ref=a, dst_ref=dsl.memref_slice(a_smem, (slot, dsl.ds(first_row, rows))),
                               gmem_slice=(dsl.ds(row0 + first_row, rows), dsl.ds(k0, t.tile_k)),
                               **copy, multicast_mask=a_mask)
            else:
                ctx.async_copy(src_ref=a, dst_ref=dsl.memref_slice(a_smem, slot),
                               gmem_slice=(dsl.ds(row0, t.tile_m), dsl.ds(k0, t.tile_k)), **copy)
            if t.cluster_m > 1:
                copy["multicast_mask"] = b_mask
            if t.b_k_major:
                rows = t.tile_n // t.cluster_m
                first_row = row * rows
                ctx.async_copy(src_ref=b, dst_ref=dsl.memref_slice(b_smem, (slot, dsl.ds(first_row, rows))),
                               gmem_slice=(dsl.ds(col0 + first_row, rows), dsl.ds(k0, t.tile_k)), **copy)
                return
            copy["swizzle"] = t.b_chunk * t.itemsize
            boxes = t.tile_n // t.b_chunk
            mine = -(-boxes // t.cluster_m)  # a pair's odd box out (tile_n = 192) is the first block's
            for i in range(mine):
                j = i if t.cluster_m == 1 else row * mine + i

                def load_box(j=j):
                    ctx.async_copy(src_ref=b, dst_ref=dsl.memref_slice(b_smem, (slot, j)),
                                   gmem_slice=(dsl.ds(k0, t.tile_k), dsl.ds(col0 + t.b_chunk * j, t.b_chunk)), **copy)

                if t.cluster_m > 1 and boxes % t.cluster_m and i == mine - 1:
                    with dsl.when(row == 0):
                        load_box()
                else:
                    load_box()


def release_slot(empty: Any, it: ir.Value, peers: Sequence[Any] = (), condition: ir.Value | None = None,
                 lane0: ir.Value | None = None) -> None:
    """A consumer warp is done with the ring slot of pipeline iteration `it`: one arrival per warp
    on its 'empty' barrier, and on that of each of `peers` (cluster ranks: `multicast_peers`,
    whose multicast writes into this block's slots too); condition: only where it holds. lane0:
    `lane_idx() == 0`, if the caller has it (a loop computes it once)."""
    lane0 = dsl.lane_idx() == 0 if lane0 is None else lane0
    with dsl.when(lane0 if condition is None else lane0 & condition):
        slot = empty.for_iteration(it)[0]
        slot.arrive()
        for peer in peers:
            slot.arrive(cta=peer)


_FULL_UNROLL_STEPS = 8  # static k-loops LLVM unrolls in full (it did at 3 and 6 steps; at 10 it peels one)


def multiply(ctx: Any, t: GemmTiling, ring: tuple, full: Any, empty: Any, wg: ir.Value,
             first: ir.Value | int = 0, release_last: bool = False,
             steps: ir.Value | int | None = None, peers: Sequence[Any] = ()) -> dsl.FragmentedArray:
    """Consumer warpgroup `wg` (0-based): its rows of the tile times B over every k-step
    (pipeline iterations first .. first + steps - 1; steps: k_steps unless given).

    Returns the f32 accumulator, (consumer_rows, tile_n) in the WGMMA layout. Each slot is
    released once the wgmma group after it is done; the last one only with release_last
    (a persistent block reuses it; a one-tile block must keep it until the epilogue, which
    writes over the ring). In a multicast cluster, `peers` are the blocks whose multicast writes
    into this block's slots too (`multicast_peers`): each warp releases a slot in those as well."""
    a_smem, b_smem = ring
    lane0 = dsl.lane_idx() == 0
    parts = t.consumer_rows // WGMMA_ROWS  # wgmma row tiles per consumer
    b_major = "k" if t.b_k_major else "mn"
    b_swizzle = SWIZZLE if t.b_k_major else t.b_chunk * t.itemsize
    a_major = "mn" if t.a_mn_major else "k"
    zeros = dsl.WGMMAAccumulator.zeros(t.tile_n)
    width = len(zeros.values)
    initial = tuple(zeros.values) * parts
    if parts > 1:  # every part's zeros in registers before the first k-step's wgmmas: materialized
        # between two parts' wgmmas, ptxas drained the first part's group there (C7517)
        initial = tuple(v for array in dsl.optimization_barrier(*[zeros.value] * parts)
                        for v in dsl.WGMMAAccumulator.from_array(array).values)

    def split(values: Sequence[ir.Value]) -> list[dsl.WGMMAAccumulator]:
        return [dsl.WGMMAAccumulator(list(values[i * width:(i + 1) * width]), t.tile_n) for i in range(parts)]

    def release(it: ir.Value, condition: ir.Value | None = None) -> None:
        release_slot(empty, it, peers, condition, lane0)

    steps = t.k_steps if steps is None else steps

    # rolled where LLVM would unroll in full: a few k-steps known at build time (24 wgmmas for
    # K = 352) doubled ptxas's time on the kernel. Other loops keep LLVM's first-step peeling.
    @dsl.for_range(0, steps, carry=initial,
                   rolled=isinstance(steps, int) and steps <= _FULL_UNROLL_STEPS)
    def accs(kt, values):
        accs = split(values)
        it = kt + first
        with ctx.named_region("wait_data"):
            full.wait_for_iteration(it)
        with ctx.named_region("mma"):
            slot = it % t.stages
            b_tile = dsl.memref_slice(b_smem, slot)
            for i in range(parts):
                if t.a_mn_major:  # 16-bit: the 64 rows are one box of A (k, m) (swap_ab: never pingpong)
                    chunk = wg * parts + i
                    a_tile = dsl.memref_slice(a_smem, (slot, dsl.ds(chunk, 1)))
                else:
                    row = t.row_offset(wg) + WGMMA_ROWS * i
                    a_tile = dsl.memref_slice(a_smem, (slot, dsl.ds(row, WGMMA_ROWS)))
                accs[i] = dsl.wgmma(accs[i], a_tile, b_tile, a_major=a_major, b_major=b_major, swizzle=SWIZZLE,
                                    b_swizzle=b_swizzle)
            dsl.wgmma_commit_group()
            accs = [dsl.wgmma_wait_group(1, acc) for acc in accs]  # the previous k-step is done with its slot
        release(it - 1, kt > 0)
        return tuple(v for acc in accs for v in acc.values)

    accs = [dsl.wgmma_wait_group(0, acc) for acc in split(accs)]
    if release_last:
        release(first + (steps - 1))
    frags = [dsl.FragmentedArray.from_accumulator(acc) for acc in accs]
    # Row tiles stacked: WGMMAFragLayout orders registers (row tile, column group, half).
    return dsl.FragmentedArray([r for f in frags for r in f.registers],
                               dsl.WGMMAFragLayout(t.tile_n, t.consumer_rows))


def release_ring(t: GemmTiling) -> None:
    """The consumers meet at a named barrier: every one of them is done reading the ring, which a
    one-tile block's epilogue buffer (and a cluster split's parked partial) overlaps."""
    dsl.named_barrier(CONSUMER_BARRIER, t.consumers * WARPGROUP)


def store_tile(ctx: Any, t: GemmTiling, tile: dsl.FragmentedArray, epilogue_smem: ir.Value, c_ref: ir.Value,
               row0: ir.Value, col0: ir.Value, wg: ir.Value, split: ir.Value | None = None) -> None:
    """One-tile blocks: write consumer `wg`'s (consumer_rows, tile_n) tile of C at (row0 + its
    rows, col0): round to C's type, store swizzled to smem over the ring, TMA-store it (split_k:
    into C's slice `split`, C being the (split_k, m, n) workspace, so rows past m are clipped,
    not written into the next slice). The consumers meet at a named barrier first: every one of
    them is done reading the ring the epilogue buffer overlaps. (Persistent blocks: stream_tile.)"""
    width = t.out_width
    swizzle = width * dtype_itemsize(t.out_dtype)
    tile = tile.astype(t.out_dtype)
    release_ring(t)
    mine = dsl.memref_slice(epilogue_smem, wg)
    tile.store_tiled(mine, swizzle)
    dsl.fence_async_shared()
    dsl.named_barrier(wg + WG_BARRIER, WARPGROUP)
    with dsl.single_thread("warpgroup"):
        row = row0 + t.row_offset(wg)
        lead = () if split is None else (split,)
        for j in range(t.tile_n // width):
            ctx.async_copy(src_ref=dsl.memref_slice(mine, j), dst_ref=c_ref, swizzle=swizzle, uniform=False,
                           gmem_slice=(*lead, dsl.ds(row, t.consumer_rows), dsl.ds(col0 + j * width, width)))
    ctx.await_async_copy(0, await_read_only=True)


def store_tile_transposed(ctx: Any, t: GemmTiling, tile: dsl.FragmentedArray, epilogue_smem: ir.Value,
                          c_ref: ir.Value, row0: ir.Value, col0: ir.Value, wg: ir.Value) -> None:
    """Swapped one-tile blocks (t.swap_tma_store): write consumer `wg`'s (consumer_rows, tile_n)
    tile of C.T, C's (tile_n, consumer_rows) tile at (col0, row0 + its rows): round to C's type,
    store it transposed and swizzled to smem over the ring, TMA-store it one swizzle span of C's
    columns at a time (clipped at C's edges). The caller passes `release_ring` first, before
    its epilogue: with the barrier here, every value the epilogue computes would have to live
    until it (a residual epilogue on 128 x 152 tiles spilled), where without one each is
    stored as it is done."""
    width = t.transposed_width
    mine = dsl.memref_slice(epilogue_smem, wg)
    tile.astype(t.out_dtype).store_tiled_transposed(mine, SWIZZLE)
    dsl.fence_async_shared()
    dsl.named_barrier(wg + WG_BARRIER, WARPGROUP)
    with dsl.single_thread("warpgroup"):
        col = row0 + t.row_offset(wg)
        for j in range(t.consumer_rows // width):
            ctx.async_copy(src_ref=dsl.memref_slice(mine, j), dst_ref=c_ref, swizzle=SWIZZLE, uniform=False,
                           gmem_slice=(dsl.ds(col0, t.tile_n), dsl.ds(col + j * width, width)))
    ctx.await_async_copy(0, await_read_only=True)


def stream_tile_transposed(ctx: Any, t: GemmTiling, tile: dsl.FragmentedArray, epilogue_smem: ir.Value,
                           c_ref: ir.Value, row0: ir.Value, col0: ir.Value, wg: ir.Value) -> None:
    """Persistent swapped blocks (t.swap_tma_store): write consumer `wg`'s (consumer_rows, tile_n)
    tile of C.T, C's (tile_n, consumer_rows) tile at (col0, row0 + its rows), one piece of C's
    rows (t.transposed_pieces) at a time: round the piece to C's type, store it transposed and
    swizzled into one of the consumer's slots, TMA-store it one swizzle span of C's columns at a
    time (clipped at C's edges). As in stream_tile nothing waits for a store to finish: before a
    slot is written again the issuing thread waits until the store that last read it is done
    (each piece is consumer_rows / w stores, each its own bulk group). With an odd number of
    pieces a tile's first piece reuses the slot of the previous tile's last one, so it waits
    for every store."""
    width = t.transposed_width
    mine = dsl.memref_slice(epilogue_smem, wg)
    col = row0 + t.row_offset(wg)
    stores = t.consumer_rows // width  # bulk groups per piece
    pieces = t.transposed_pieces
    for p, (start, rows) in enumerate(pieces):
        slot = dsl.memref_slice(mine, p % t.transposed_slots)
        if rows < t.transposed_piece:  # the tile's narrower last piece: the first rows of each chunk
            slot = dsl.memref_slice(slot, (slice(None), slice(0, rows)))
        pending = 0 if p == 0 and len(pieces) % 2 else (t.transposed_slots - 1) * stores
        ctx.await_async_copy(pending, await_read_only=True)  # only the issuing thread has groups
        dsl.named_barrier(wg + WG_BARRIER, WARPGROUP)  # ... and the others learn here that the slot is free
        tile.columns(start, rows).astype(t.out_dtype).store_tiled_transposed(slot, SWIZZLE)
        dsl.fence_async_shared()
        dsl.named_barrier(wg + WG_BARRIER, WARPGROUP)
        with dsl.single_thread("warpgroup"):
            for j in range(stores):
                ctx.async_copy(src_ref=dsl.memref_slice(slot, j), dst_ref=c_ref, swizzle=SWIZZLE, uniform=False,
                               gmem_slice=(dsl.ds(col0 + start, rows), dsl.ds(col + j * width, width)))


def stream_tile(ctx: Any, t: GemmTiling, tile: dsl.FragmentedArray, epilogue_smem: ir.Value, c_ref: ir.Value,
                row0: ir.Value, col0: ir.Value, wg: ir.Value) -> None:
    """Persistent blocks: write consumer `wg`'s (consumer_rows, tile_n) tile of C at (row0 +
    its rows, col0) one TMA box (t.store_boxes) at a time through its `epilogue_slots`
    smem slots. Nothing waits for a store to finish: before a slot is written again, the thread
    that issued the stores waits until the store that last read it is done reading (the later
    ones may still be reading: epilogue_pending), so the warpgroup goes back to the tensor
    cores as soon as its last piece is issued. A small buffer leaves the ring its depth (128x256
    tiles: 32 KB instead of 64 KB, 4 stages instead of 3); `drain_stores` ends the block."""
    mine = dsl.memref_slice(epilogue_smem, wg)
    row = row0 + t.row_offset(wg)
    for p, (start, width) in enumerate(t.store_boxes):
        piece = tile.columns(start, width).astype(t.out_dtype)
        slot = dsl.memref_slice(mine, p % t.epilogue_slots)
        if t.mixed_store_boxes:  # a flat slot: this box's (rows, width) from its start
            slot = dsl.memref_unfold(dsl.memref_slice(slot, slice(0, t.consumer_rows * width)), 0,
                                     [t.consumer_rows, width])
        store_box(ctx, t, piece, slot, c_ref, row, col0 + start, wg, pending=t.epilogue_pending(p), width=width)


def store_box(ctx: Any, t: GemmTiling, box: dsl.FragmentedArray, slot: ir.Value, c_ref: ir.Value,
              row: ir.Value, col: ir.Value, wg: ir.Value, pending: int, width: int | None = None) -> None:
    """Consumer `wg` TMA-stores one (consumer_rows, width) box of C (width: out_width unless
    given), already rounded to C's type, at (row, col) through smem `slot`: the thread that
    issues the stores first waits until at most `pending` of its earlier stores are still
    reading smem (the slot is free), the warpgroup learns that at a named barrier, writes the box
    swizzled (one row of the box a swizzled line), fences and meets again."""
    width = t.out_width if width is None else width
    swizzle = width * dtype_itemsize(t.out_dtype)
    ctx.await_async_copy(pending, await_read_only=True)  # only the issuing thread has groups
    dsl.named_barrier(wg + WG_BARRIER, WARPGROUP)  # ... and the others learn here that the slot is free
    box.store_tiled(slot, swizzle)
    dsl.fence_async_shared()
    dsl.named_barrier(wg + WG_BARRIER, WARPGROUP)
    with dsl.single_thread("warpgroup"):
        ctx.async_copy(src_ref=slot, dst_ref=c_ref, swizzle=swizzle, uniform=False,
                       gmem_slice=(dsl.ds(row, t.consumer_rows), dsl.ds(col, width)))


def drain_stores(ctx: Any) -> None:
    """The end of a persistent consumer: its last stores must have read smem before the block exits."""
    ctx.await_async_copy(0, await_read_only=True)


class EpilogueTile:
    """What an epilogue callable gets beside the accumulator: where its tile sits in C and
    loaders of matching register tiles. Loads clamp indices to the arrays, so tiles that hang
    over C's edges read valid memory (those values are never stored).

    The loaders speak C's terms whichever way the kernel tiles it: under swap_ab the accumulator
    holds a tile of C.T (its rows are C's columns), and `columns(bias)` then loads the bias along
    the accumulator's rows, `load(residual)` the residual's transposed tile. An epilogue that
    uses only these loaders and elementwise arithmetic (what `fused` builds) gives the same C
    either way; mark it `fn.swap_safe = True` and the configuration may swap A and B. Positions
    (`thread_rows`, `thread_cols`) exist only on C's own tiles."""

    def __init__(self, t: GemmTiling, row0: ir.Value, col0: ir.Value, width: int | None = None):
        self.tiling = t
        self.shape = (t.consumer_rows, t.tile_n if width is None else width)  # width: a piece of the tile (split-K)
        self.row0 = row0  # first row of this consumer's tile in the tiled product (C, or C.T under swap_ab)
        self.col0 = col0
        self.transposed = t.swap_ab is True

    def thread_rows(self) -> list[ir.Value]:
        """C rows of this thread's registers, per (row tile, half), clamped to m - 1."""
        self._c_tiles_only("thread_rows")
        return self._acc_rows()

    def thread_cols(self, n: int) -> list[ir.Value]:
        """First C column of each of this thread's column pairs, clamped so the pair is inside [0, n)."""
        self._c_tiles_only("thread_cols")
        return self._acc_cols(n)

    def columns(self, ref: ir.Value) -> dsl.FragmentedArray:
        """A (n,) vector (e.g. a bias) at this tile's columns of C, broadcast over its rows, as f32."""
        if self.transposed:
            return self._along_rows(ref, "EpilogueTile.columns")
        return self._along_columns(ref, "EpilogueTile.columns")

    def rows(self, ref: ir.Value) -> dsl.FragmentedArray:
        """A (m,) vector (e.g. per-row scales) at this tile's rows of C, broadcast over its columns, as f32."""
        if self.transposed:
            return self._along_columns(ref, "EpilogueTile.rows")
        return self._along_rows(ref, "EpilogueTile.rows")

    def load(self, ref: ir.Value) -> dsl.FragmentedArray:
        """This tile of an (m, n) array of C's shape (e.g. a residual), as f32 in the accumulator's layout."""
        n = _shape(ref, 2, "EpilogueTile.load")[1]
        if self.transposed:
            return self._load_transposed(ref)
        pair = ir.VectorType.get([2], ir.MemRefType(ref.type).element_type)
        rows, cols = self._acc_rows(), self._acc_cols(n)
        per_tile = len(cols) * 2
        regs = []
        for i in range(self.shape[0] // WGMMA_ROWS):  # register order: (row tile, column group, half)
            for col in cols:
                for h in range(2):
                    regs.append(vector.load(pair, ref, [rows[2 * i + h], col]))
        assert len(regs) == per_tile * (self.shape[0] // WGMMA_ROWS)
        return dsl.FragmentedArray(regs, dsl.WGMMAFragLayout(self.shape[1], self.shape[0])).astype("float32")

    def scalar(self, ref: ir.Value, index: int = 0) -> dsl.FragmentedArray:
        """Element `index` of a 1-d array (e.g. an output scale) splat over the tile, as f32."""
        _shape(ref, 1, "EpilogueTile.scalar")
        value = memref.load(ref, [c(index)])
        f32 = ir.F32Type.get()
        if value.type != f32:
            value = arith.extf(f32, value) if _bits(value.type) < 32 else arith.truncf(f32, value)
        return dsl.FragmentedArray.splat(value, dsl.WGMMAFragLayout(self.shape[1], self.shape[0]))

    # -- the accumulator's own positions (rows and columns of the tiled product) ---------------
    def _c_tiles_only(self, what: str) -> None:
        if self.transposed:
            raise ValueError(f"EpilogueTile.{what}: this tile is of C.T (swap_ab=True), its registers' positions "
                             f"are not C's; an epilogue that reads positions needs C's own tiles (swap_ab=False, or "
                             f"leave the epilogue unmarked: only one with swap_safe = True is swapped)")

    def _acc_rows(self) -> list[ir.Value]:
        """Rows of the tiled product of this thread's registers, per (row tile, half), clamped to its m - 1."""
        base, _ = _thread_base()
        top = self.row0 + base
        return [dsl.min(top + (WGMMA_ROWS * i + 8 * h), self.tiling.m - 1)
                for i in range(self.shape[0] // WGMMA_ROWS) for h in range(2)]

    def _acc_cols(self, n: int) -> list[ir.Value]:
        """First column of the tiled product of each of this thread's column pairs, clamped so the
        pair is inside [0, n)."""
        _, base = _thread_base()
        left = self.col0 + base
        return [dsl.min(left + 8 * j, max(n - 2, 0)) for j in range(self.shape[1] // 8)]

    def _along_columns(self, ref: ir.Value, what: str) -> dsl.FragmentedArray:
        """A vector indexed by the accumulator's columns, broadcast over its rows. Pairs load as one
        vector where the length is even (a pair then never straddles 4 bytes); else two scalars."""
        n = _shape(ref, 1, what)[0]
        elem = ir.MemRefType(ref.type).element_type
        if n % 2 == 0:
            pair = ir.VectorType.get([2], elem)
            regs = [vector.load(pair, ref, [col]) for col in self._acc_cols(n)]
        else:  # an odd length (swap_ab: C's m): the clamped pair may start at an odd element
            pair = ir.VectorType.get([2], elem)
            regs = [vector.from_elements(pair, [memref.load(ref, [dsl.as_index(dsl.min(col + e, n - 1))])
                                                for e in range(2)]) for col in self._acc_cols(n + 1)]
        vec = dsl.FragmentedArray(regs, dsl.WGMMAColLayout(self.shape[1])).astype("float32")
        return vec.broadcast(self.shape)

    def _along_rows(self, ref: ir.Value, what: str) -> dsl.FragmentedArray:
        """A vector indexed by the accumulator's rows, broadcast over its columns."""
        _shape(ref, 1, what)
        one = ir.VectorType.get([1], ir.MemRefType(ref.type).element_type)
        regs = [vector.load(one, ref, [row]) for row in self._acc_rows()]
        vec = dsl.FragmentedArray(regs, dsl.WGMMARowLayout(self.shape[0])).astype("float32")
        return vec.broadcast(self.shape)

    def _load_transposed(self, ref: ir.Value) -> dsl.FragmentedArray:
        """Under swap_ab: the accumulator's (i, j) is C's (j, i), so each register's pair (i, j),
        (i, j + 1) is two elements of a column of `ref` (C's shape), loaded one by one."""
        shape = _shape(ref, 2, "EpilogueTile.load")
        pair = ir.VectorType.get([2], ir.MemRefType(ref.type).element_type)
        c_rows = shape[0]  # C's m: the accumulator's columns
        rows = self._acc_rows()  # C's columns, clamped to its n - 1
        regs = []
        for i in range(self.shape[0] // WGMMA_ROWS):  # register order: (row tile, column group, half)
            for col in self._acc_cols(c_rows + (c_rows % 2)):
                for h in range(2):
                    regs.append(vector.from_elements(pair, [
                        memref.load(ref, [dsl.as_index(dsl.min(col + e, c_rows - 1)), dsl.as_index(rows[2 * i + h])])
                        for e in range(2)]))
        return dsl.FragmentedArray(regs, dsl.WGMMAFragLayout(self.shape[1], self.shape[0])).astype("float32")


def _bits(t: ir.Type) -> int:
    return ir.FloatType(t).width


def _thread_base() -> tuple[ir.Value, ir.Value]:
    """(row, column) of the calling thread's first element in a 64-row WGMMA tile."""
    warp, lane = dsl.thread_in_warpgroup() // 32, dsl.lane_idx()
    return warp * 16 + lane // 4, lane % 4 * 2


def _shape(ref: ir.Value, rank: int, what: str) -> tuple[int, ...]:
    shape = tuple(ir.MemRefType(ref.type).shape)
    if len(shape) != rank:
        raise ValueError(f"{what}: expected a rank-{rank} array, got shape {shape}")
    return shape


Epilogue = Callable[..., dsl.FragmentedArray]


def run_epilogue(epilogue: Epilogue | None, acc: dsl.FragmentedArray, tile: EpilogueTile,
                 extras: Sequence[ir.Value]) -> dsl.FragmentedArray:
    """Apply the user's epilogue and check it kept the tile's shape and layout."""
    if epilogue is None:
        return acc
    out = epilogue(acc, tile, *extras)
    if not isinstance(out, dsl.FragmentedArray) or out.layout != acc.layout:
        got = out.layout if isinstance(out, dsl.FragmentedArray) else type(out).__name__
        raise ValueError(f"gemm epilogue: must return a FragmentedArray in the accumulator's layout {acc.layout}, "
                         f"got {got}")
    return out


def rows_aligned(cols: int, itemsize: int) -> bool:
    """TMA needs row strides that are multiples of 16 bytes."""
    return (cols * itemsize) % 16 == 0


def round_up(x: int, multiple: int) -> int:
    return -(-x // multiple) * multiple
