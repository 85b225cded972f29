"""Flash attention forward on Hopper (the FlashAttention-3 structure), from the public DSL.

    out[b, h, i, :] = sum_j softmax_j(scale * q[b, h, i] . k[b, hk, j]) v[b, hk, j, :]
    lse[b, h, i]    = log sum_j exp(scale * q[b, h, i] . k[b, hk, j])     (natural log, float32)

Arrays are [batch, heads, seq, head_dim], row-major, bf16 or f16: q (batch, heads, seq_q, d),
k and v (batch, kv_heads, seq_kv, d); out like q, lse (batch, heads, seq_q) float32. Grouped-
query attention: head h reads kv head h // (heads // kv_heads). Causal masking is top-left
aligned, as torch's `is_causal`: query i sees keys j <= i.

One block per (128 query rows, head, batch), 3 warpgroups:

- warpgroup 0 is the producer (setmaxnreg 24): one thread loads the block's Q tile once, then
  streams K and V tiles (block_kv rows) into a ring of `stages` slots with TMA (128-byte
  swizzle, head_dim split in 64-column chunks). K and V have their own full/empty barriers,
  so S = Q K^T can start while V is still landing. Rows past seq_kv arrive as zeros (TMA
  fills out-of-bounds boxes), and are masked to -inf in the scores.
- warpgroups 1 and 2 are consumers (setmaxnreg 240), 64 query rows each. Per K/V tile i:
  issue S_i = Q K_i^T (WGMMA from smem), rescale O by the last softmax's factor, issue
  O += P_{i-1} V_{i-1} (WGMMA with P in registers: the accumulator layout is the A-operand
  layout), wait for S_i only, and run the online softmax of S_i (exp2 with the scale folded
  into one FMA) while the PV GEMM runs on the tensor cores; P_i becomes bf16/f16 only once
  that GEMM is done (rewriting registers an in-flight wgmma reads makes ptxas serialize every
  wgmma). At head dim 64, 3/16 of the exponentials are an FMA polynomial instead of MUFU
  ops (`exp2_fma_fraction`): MUFU's 16 ex2 per clock per SM would take as long as the GEMMs.
  Pingpong (`default_pingpong`: all but full attention at head dim 128 with one block per tile):
  the two consumers take turns issuing their GEMMs, handing the
  turn over through two named barriers (FA3's warp scheduler barriers), so one's softmax
  overlaps the other's GEMMs. Tiles that need no mask (interior tiles;
  below the diagonal when causal) run a loop without any masking code; the diagonal and the
  ragged tail run a masked loop; tiles above the diagonal are never loaded.
- epilogue: O / l is rounded to the input type, written (swizzled) over the consumer's own
  rows of the Q tile and TMA-stored (rows past seq_q are clipped by TMA); lse is stored by
  the one lane of each row's four that owns it, rows past seq_q skipped.

Causal blocks run heaviest first (the grid's x order is reversed) so the tail of the launch
is short blocks.

Persistent (`persistent=True`; the default for several waves of short blocks, see
`default_persistent`): min(items, 132) blocks, block b running work items b, b + grid, ... (an
item is one 128-row query tile of one head; order in `work_item`: causal heaviest first within
L2-sized sections of heads). A block's prologue (barrier init, setmaxnreg) is paid once, and
the next item's loads overlap this item's tail and epilogue:

- producer warp 0 streams K/V through the same ring across items (the ring iteration runs on in
  the loop carry, producer and consumers alike, so slots and barrier phases stay in step); warps
  1 and 2 each own one consumer's 64-row half of Q, with its own Q-full and Q-free barriers, and
  reload it for the next item as soon as that consumer frees it, never waiting on K/V.
- where smem allows (d 64; d 128 with 2 stages: `has_out_buffer`) the output has a buffer of its
  own: a consumer frees its Q half right after its last S GEMM, so the next Q loads during its
  last PV GEMM and epilogue, and it waits for its previous TMA store to have read the buffer only
  when it writes the next output. Otherwise (the K/V ring leaves no room for 128 x d more) the
  output goes over the consumer's Q rows as above, and the Q half is freed once the TMA store has
  read it. Per-consumer halves mean each consumer's reload starts at its own epilogue, half a
  pingpong period before the other's.
- pingpong turns form one sequence over the block's items: consumer 1 hands the turn to consumer
  0 after its last GEMM of an item when the block has a next item (whose first turn is consumer
  0's), so every bar.arrive has its bar.sync.
"""

from __future__ import annotations

import heapq
import math
from typing import Any

import numpy as np

import mgpu_lab
from mgpu_lab import dsl
from mgpu_lab.arguments import alternatives, choice, count, fail, flag, number, size
from mgpu_lab.builder.profiling import check_buffer_mode
from mgpu_lab.dsl import FragmentedArray, WGMMAAccumulator
from mgpu_lab.kernels.gemm.configs import SMS
from mgpu_lab.user_errors import user_facing

TILE_Q = 128  # query rows per block: 64 per consumer warpgroup
CHUNK = 64  # head_dim columns per TMA box / K-major wgmma operand (one 128-byte swizzle span of 16-bit)
SWIZZLE = 128
WARPGROUP = 128
CONSUMERS = 2
PRODUCER_REGS, CONSUMER_REGS = 24, 240  # 24 * 128 + 2 * 240 * 128 = 168 * 384 (the launch's registers)
SMEM_LIMIT = 227 * 1024
# Rows are int32 in the kernel (TMA box coordinates, the masks' row and column arithmetic): the
# last query tile's rows reach TILE_Q - 1 past seq_q and must still be int32.
MAX_SEQ = 2**31 - TILE_Q
HEAD_DIMS = (64, 128, 256)
DTYPES = ("bfloat16", "float16")
_LOG2E = 1.4426950408889634
_PINGPONG_BARRIER = 4  # + consumer index: named barrier "your turn to issue GEMMs" (1-3: warpgroup barriers)
_DEFAULT_BLOCK_KV = {64: 128, 128: 128, 256: 64}  # 256: the O accumulator alone is 128 registers
# One block per tile (not persistent), d 256 with 80-row K/V tiles ran 1.07x (causal 1.02x) the 64-row
# ones at seq 4096 (benchmarks/results/attention_2026-12-01T021549Z_c2f058bc.json); persistent, they spill.
_WIDE_BLOCK_KV = {256: 80}
_MAX_BLOCK_KV = {64: 192, 128: 176, 256: 80}  # beyond these ptxas spills (measured on the SASS)
# Share of the softmax's exp2s done by an FMA polynomial (FA4's trick): at head dim 64 the MUFU
# unit's 16 ex2 per clock per SM take as long as the tile's two GEMMs. d 64: 3/16 ran 1.01-1.09x all
# on MUFU, 1.04-1.10x causal (1/8 and 1/4 close, 3/8 less); d 128 is GEMM-bound: 1/8 ran 0.91-0.99x full,
# 0.99-1.04x causal
# (attention_options_2026-12-01T051638Z_81f61284.json, attention_options_2026-12-01T052216Z_c8c80d8c.json).
_EXP2_FMA_FRACTION = {64: 0.1875, 128: 0.0, 256: 0.0}
# K/V tiles a profiled consumer records per work item (make_attention's profile_tiles): every tile's
# 8 events in the issue-bound loop cost 1.26x at d 128, seq 8192 (profiler_2026-12-02T1846*).
PROFILE_TILES = 8
# Blocks that record regions when profiled (every n-th, `mgpu_lab.kernel`'s profile_blocks) in the
# one-block-per-item kernel: they record every tile, the others run the plain code.
PROFILE_BLOCKS = 16
L2_KV_BYTES = 32 * 1024 * 1024  # causal persistent order: K/V of the heads in one section fit in L2


def attention_smem_bytes(head_dim: int, block_kv: int, stages: int, *, persistent: bool = False,
                         out_buffer: bool = False) -> int:
    """Q tile + `stages` K and V slots + barriers; persistent blocks have 2 Q-full and 2 Q-free
    barriers (one per consumer half) and, with `out_buffer`, an output tile of their own."""
    tile_bytes = 2 * head_dim
    barriers = (4 if persistent else 1) + 4 * stages
    out = TILE_Q * tile_bytes if out_buffer else 0
    return TILE_Q * tile_bytes + out + 2 * stages * block_kv * tile_bytes + 8 * barriers


def has_out_buffer(head_dim: int, block_kv: int, stages: int) -> bool:
    """A persistent block stages its output in a buffer of its own when smem allows (d 64 with the
    default stages; d 128 with 2 stages); otherwise the output goes over the consumer's Q rows."""
    return attention_smem_bytes(head_dim, block_kv, stages, persistent=True, out_buffer=True) <= SMEM_LIMIT


def kv_section(heads: int, batch: int, seq_kv: int, head_dim: int, kv_heads: int) -> int:
    """(head, batch) pairs per section of the causal persistent order: their K/V fit in L2."""
    return max(1, min(heads * batch, L2_KV_BYTES * (heads // kv_heads) // (4 * seq_kv * head_dim)))


def work_item(item: int | dsl.IndexValue, q_blocks: int, pairs: int, section: int,
              causal: bool) -> tuple[int | dsl.IndexValue, int | dsl.IndexValue]:
    """(query tile, (head, batch) pair = head + heads * batch) of persistent work item `item`, an
    int or an index value (the kernel runs this same function). Full attention: query tiles
    fastest, so blocks running together share K/V in L2. Causal: sections of `section` pairs, each
    section heaviest query tile first, so the launch ends with short items and the K/V a section
    re-reads stays in L2."""
    if not causal:
        return item % q_blocks, item // q_blocks
    per_section = section * q_blocks
    first = item // per_section * section  # the section's first pair
    within = item % per_section
    last = pairs - (pairs - 1) // section * section  # pairs in the last section (1 .. section)
    # divisions by constants only (a division by a value costs the producer's few registers)
    in_last = first + section > pairs
    pick = (lambda a, b: a if in_last else b) if isinstance(in_last, bool) else \
        (lambda a, b: dsl.select(in_last, a, b))
    return q_blocks - 1 - pick(within // last, within // section), first + pick(within % last, within % section)


def visible_tiles(q_block: int, seq_kv: int, block_kv: int, causal: bool) -> int:
    """K/V tiles a block of query tile `q_block` visits."""
    kv_tiles = -(-seq_kv // block_kv)
    return min((q_block * TILE_Q + TILE_Q + block_kv - 1) // block_kv, kv_tiles) if causal else kv_tiles


# Cost model of the default (in K/V tile times): a block's prologue and epilogue are exposed once
# per block without persistence, mostly hidden behind the neighbouring items' tiles with it.
_ITEM_OVERHEAD = {False: 1.5, True: 0.5}


def default_persistent(batch: int, heads: int, seq_q: int, seq_kv: int, head_dim: int, causal: bool,
                       block_kv: int, kv_heads: int | None = None) -> bool:
    """Persistent when the one-block-per-tile grid runs several waves of short blocks (on average at
    most 20 K/V tiles of 128 x 128 per block, d 64 tiles counting half: where a block's prologue and
    epilogue are a large share of its time: seq <= 2048 at d 128, causal seq 4096, and seq 4096 at
    d 64, which ran 1.035x one block per tile twice: attention_options_2026-12-01T052216Z_c8c80d8c.json,
    attention_2026-12-01T052107Z_81f61284.json), the block has room for an
    output buffer of its own (so its epilogue overlaps the next item's loads: not d 256, where
    persistence measured 0.86x causal and 0.98-1.06x full at seq 512-1024), and the static item assignment
    (`work_item`, item = block + k * SMS) is not predicted to be slower than the hardware's block
    scheduling (greedy, overhead per block included): causal items differ in length, and a static
    stride can leave one SM with more than its share. Long sequences keep one block per tile.
    (Tile thresholds from the cost model below; on the H200, persistent measured 1.08-1.26x one block
    per tile at d 64 seq <= 1024 and 1.02x at d 128 seq 512-1024: attention_2026-12-01T035935Z_390545ba.json.)"""
    q_blocks = -(-seq_q // TILE_Q)
    items = q_blocks * heads * batch
    tile_work = block_kv * head_dim / (128 * 128)  # a K/V tile's GEMM work against a 128 x 128 one
    if q_blocks <= _ENUMERATED_Q_BLOCKS:
        tiles = [visible_tiles(qb, seq_kv, block_kv, causal) for qb in range(q_blocks)]
        mean_tiles = sum(tiles) / q_blocks
    else:  # millions of query tiles: an even sample gives the mean (and the simulation below is skipped)
        step = q_blocks / _ENUMERATED_Q_BLOCKS
        mean_tiles = sum(visible_tiles(int(i * step), seq_kv, block_kv, causal)
                         for i in range(_ENUMERATED_Q_BLOCKS)) / _ENUMERATED_Q_BLOCKS
    if items <= 2 * SMS or mean_tiles * tile_work > 20:
        return False
    if not has_out_buffer(head_dim, block_kv, 2):  # d 256: measured 0.86-1.06x one block per tile
        return False
    if not causal:
        return True
    if items > 1 << 17:  # too many to simulate; both schedules are close to balanced then
        return True
    pairs = heads * batch
    section = kv_section(heads, batch, seq_kv, head_dim, kv_heads or heads)
    static = [0.0] * SMS
    for item in range(items):
        static[item % SMS] += tiles[work_item(item, q_blocks, pairs, section, True)[0]] + _ITEM_OVERHEAD[True]
    greedy = [0.0] * SMS  # the hardware starts the grid's blocks in order (x fastest), each on the first free SM
    for b in range(pairs):
        for qb in range(q_blocks - 1, -1, -1):
            heapq.heapreplace(greedy, greedy[0] + tiles[qb] + _ITEM_OVERHEAD[False])
    return max(static) <= max(greedy)


_ENUMERATED_Q_BLOCKS = 1 << 12  # query tiles default_persistent lists one by one at most


def default_pingpong(head_dim: int, causal: bool, persistent: bool) -> bool:
    """Pingpong everywhere but full (non-causal) attention at head dim 128 with one block per tile:
    there the two consumers keep the tensor cores as busy issuing freely and the turn handoffs
    cost 1-7% (pingpong off ran 1.01-1.07x on at seq 4096 and 16384 and with GQA; on ran
    0.98-1.18x off when causal, 1.07-1.12x with the persistent blocks of seq 512-1024, and is the
    only way d 64 keeps MUFU and the tensor cores both busy: off ran 0.90-0.93x;
    attention_options_2026-12-01T051638Z_81f61284.json, attention_2026-12-01T052107Z_81f61284.json)."""
    return causal or persistent or head_dim != 128


def persistent_stages(head_dim: int, block_kv: int) -> int:
    """A persistent block's default ring: the deepest that leaves room for an output buffer of its
    own (d 128: 2 stages ran 1.12x, causal 1.14x, the 3 that put the output over Q, at seq 512:
    attention_2026-12-01T035935Z_390545ba.json), else `default_stages`."""
    fits = [s for s in range(2, 5) if has_out_buffer(head_dim, block_kv, s)]
    return max(fits) if fits else default_stages(head_dim, block_kv)


def default_stages(head_dim: int, block_kv: int) -> int:
    """As many K/V slots as fit, at most 4."""
    return max([s for s in range(2, 5) if attention_smem_bytes(head_dim, block_kv, s) <= SMEM_LIMIT], default=2)


def check_problem(batch: Any, heads: Any, seq_q: Any, seq_kv: Any, head_dim: Any,
                  kv_heads: Any) -> tuple[int, int, int, int, int, int]:
    """The sizes as ints, bounded before anything is computed from them (the default tiling
    enumerates the query tiles: a sequence of 2**62 rows would never finish)."""
    batch, heads, seq_q, seq_kv, kv_heads = (size(name, value, where="attention") for name, value in (
        ("batch", batch), ("heads", heads), ("seq_q", seq_q), ("seq_kv", seq_kv), ("kv_heads", kv_heads)))
    choice("head_dim", head_dim, HEAD_DIMS, where="attention")
    if heads % kv_heads:
        raise ValueError(f"attention: kv_heads must divide heads (grouped-query attention), got heads={heads} "
                         f"and kv_heads={kv_heads}")
    if heads > 65535 or batch > 65535:
        raise ValueError(f"attention: heads and batch index the grid's y and z (at most 65535), got heads={heads}, "
                         f"batch={batch}")
    if seq_q > MAX_SEQ or seq_kv > MAX_SEQ:
        raise ValueError(f"attention: seq_q and seq_kv may be at most {MAX_SEQ} (2**31 - {TILE_Q}: the kernel "
                         f"addresses rows with int32 TMA coordinates and masks, the last {TILE_Q}-row query tile "
                         f"included), got seq_q={seq_q}, seq_kv={seq_kv}")
    return batch, heads, seq_q, seq_kv, head_dim, kv_heads


def _check(scale: float, dtype: str, head_dim: int, block_kv: int, stages: int, persistent: bool | None,
           exp2_fma_fraction: float, pingpong: bool | None) -> None:
    choice("dtype", dtype, DTYPES, expected=alternatives(DTYPES), where="attention")
    number("scale", scale, positive=True, where="attention")
    block_kv_range = "a multiple of 16 in [64, 256]"
    count("block_kv", block_kv, minimum=64, maximum=256, expected=block_kv_range, where="attention")
    if block_kv % 16:
        raise fail("block_kv", block_kv_range, block_kv, where="attention")
    if block_kv > _MAX_BLOCK_KV[head_dim]:
        raise ValueError(f"attention: head_dim {head_dim} allows block_kv up to {_MAX_BLOCK_KV[head_dim]} (O, S and P "
                         f"must fit in the 240 registers a consumer thread has), got block_kv={block_kv}")
    count("stages", stages, minimum=2, where="attention")
    number("exp2_fma_fraction", exp2_fma_fraction, minimum=0, maximum=1, where="attention")
    flag("pingpong", pingpong, optional=True, where="attention")
    flag("persistent", persistent, optional=True, where="attention")
    need = attention_smem_bytes(head_dim, block_kv, stages, persistent=persistent is not False)
    if need > SMEM_LIMIT:
        raise ValueError(f"attention: {stages} K/V stages of {block_kv} x {head_dim} need {need} bytes of smem, more "
                         f"than the {SMEM_LIMIT} a Hopper block can have; use fewer stages")


@user_facing  # an argument error shows the caller's line, not the library's frames
def make_attention(batch: int, heads: int, seq_q: int, seq_kv: int, head_dim: int, *, causal: bool = False,
                   kv_heads: int | None = None, scale: float | None = None, dtype: str = "bfloat16",
                   block_kv: int | None = None, stages: int | None = None, pingpong: bool | None = None,
                   persistent: bool | None = None, exp2_fma_fraction: float | None = None,
                   profile_tiles: int | None | str = "auto", **options) -> mgpu_lab.Kernel:
    """Flash attention forward: `kernel(q, k, v)` returns (out, lse); shapes in the module doc.

    scale defaults to 1 / sqrt(head_dim); kv_heads to heads. block_kv and stages (K/V ring slots)
    default per head_dim (block_kv 128 for d 64 and 128; for d 256, 80 with one block per tile and
    64 when persistent). pingpong: the two consumers take turns issuing their GEMMs (None:
    `default_pingpong`). persistent: at most one block per SM, each looping over (query tile,
    head, batch) items (None: `default_persistent`; with the widest K/V tiles, 176 for d 128 and
    80 for d 256, a persistent consumer spills a few bytes). exp2_fma_fraction: the share of the softmax's
    exponentials computed by an FMA polynomial instead of MUFU (`FragmentedArray.exp2`; None: per
    head_dim, `_EXP2_FMA_FRACTION`). Other keywords go to `mgpu_lab.kernel` (profile=...).

    profile_tiles (with profile=True): each consumer records its per-tile regions (S GEMM,
    softmax, rescale O, PV GEMM, wait turn) on this many unmasked K/V tiles in the middle of each
    work item's loop, plus the first tile, the masked ones and the epilogue; the other tiles run
    with no region records (`ctx.unprofiled()`), so the timeline shows a sample of the steady
    state with gaps around it. None records every tile. "auto" (the default): None where a block
    runs one work item, and there only every PROFILE_BLOCKS-th block records (`profile_blocks`,
    which the caller may set); PROFILE_TILES in the persistent kernel, whose every block records.
    Every tile of every block cost 1.26x at d 128, seq 8192 on the H200."""
    definition = attention_definition(batch, heads, seq_q, seq_kv, head_dim, causal=causal, kv_heads=kv_heads,
                                      scale=scale, dtype=dtype, block_kv=block_kv, stages=stages,
                                      pingpong=pingpong, persistent=persistent,
                                      exp2_fma_fraction=exp2_fma_fraction,
                                      profile_buffer=options.get("profile_buffer", "auto"),
                                      profile_tiles=profile_tiles)
    capacity = definition.pop("profile_capacity")
    blocks = definition.pop("profile_blocks")
    if options.get("profile"):
        options.setdefault("profile_capacity", capacity)
        options.setdefault("profile_blocks", blocks)
    return mgpu_lab.kernel(**definition, **options)


@user_facing
def attention_definition(batch: int, heads: int, seq_q: int, seq_kv: int, head_dim: int, *, causal: bool = False,
                         kv_heads: int | None = None, scale: float | None = None, dtype: str = "bfloat16",
                         block_kv: int | None = None, stages: int | None = None, pingpong: bool | None = None,
                         persistent: bool | None = None, exp2_fma_fraction: float | None = None,
                         profile_buffer: str = "auto", profile_tiles: int | None | str = "auto") -> dict:
    """The attention kernel as `mgpu_lab.kernel` arguments (body, grid, block, shapes, smem,
    name) plus the profile_capacity its named regions need and the profile_blocks it records in. profile_buffer: the one the kernel
    will be profiled with; "global" and "auto" hold every event ("auto" keeps them in shared
    memory where they fit beside the kernel's buffers, else in global memory, which the GEMM's
    and attention's runs on the H200 measured at the same cost); "smem" cuts the capacity to what
    fits (later events are counted but dropped). profile_tiles: `make_attention`'s."""
    check_buffer_mode(profile_buffer)
    if profile_tiles is not None and profile_tiles != "auto":
        profile_tiles = count("profile_tiles", profile_tiles, minimum=1,
                              expected="an int >= 1 (K/V tiles a consumer records per work item), None (every tile) "
                                       "or 'auto'",
                              where="attention")
    batch, heads, seq_q, seq_kv, head_dim, kv_heads = check_problem(batch, heads, seq_q, seq_kv, head_dim,
                                                                    heads if kv_heads is None else kv_heads)
    flag("causal", causal, where="attention")
    scale = 1.0 / math.sqrt(head_dim) if scale is None else scale
    default_tiles, default_ring = block_kv is None, stages is None
    block_kv = _DEFAULT_BLOCK_KV.get(head_dim, 64) if block_kv is None else block_kv
    stages = default_stages(head_dim, block_kv) if stages is None and head_dim in HEAD_DIMS else stages
    if exp2_fma_fraction is None:
        exp2_fma_fraction = _EXP2_FMA_FRACTION.get(head_dim, 0.0)
    _check(scale, dtype, head_dim, block_kv, stages, persistent, exp2_fma_fraction, pingpong)
    if persistent is None:
        persistent = default_persistent(batch, heads, seq_q, seq_kv, head_dim, causal, block_kv, kv_heads)
    if profile_tiles == "auto":  # a persistent block is every block: it samples tiles instead
        profile_tiles = PROFILE_TILES if persistent else None
    if default_tiles and not persistent and head_dim in _WIDE_BLOCK_KV:
        block_kv = _WIDE_BLOCK_KV[head_dim]
        stages = default_stages(head_dim, block_kv) if default_ring else stages
        _check(scale, dtype, head_dim, block_kv, stages, persistent, exp2_fma_fraction, pingpong)
    if default_ring and persistent:
        stages = persistent_stages(head_dim, block_kv)
    if pingpong is None:
        pingpong = default_pingpong(head_dim, causal, persistent)

    chunks = head_dim // CHUNK
    q_blocks = -(-seq_q // TILE_Q)
    kv_tiles = -(-seq_kv // block_kv)
    group = heads // kv_heads
    scale_log2 = float(scale) * _LOG2E
    kv_bytes = block_kv * head_dim * 2  # one K (or V) tile; out-of-bounds rows count too (zero-filled)
    n_items = q_blocks * heads * batch  # work items: (query tile, head, batch)
    if persistent and n_items >= 1 << 31:  # the persistent loop counts items in 32 bits
        raise fail("persistent", f"False (the persistent loop counts work items in 32 bits; this problem has "
                   f"{n_items} query tiles x heads x batch)", persistent, where="attention")
    blocks = min(n_items, SMS) if persistent else n_items  # persistent: item = block + k * blocks
    out_buffer = persistent and has_out_buffer(head_dim, block_kv, stages)
    section = kv_section(heads, batch, seq_kv, head_dim, kv_heads)  # causal persistent order: work_item

    q_sd = mgpu_lab.ShapeDtype((batch, heads, seq_q, head_dim), dtype)
    kv_sd = mgpu_lab.ShapeDtype((batch, kv_heads, seq_kv, head_dim), dtype)
    lse_sd = mgpu_lab.ShapeDtype((batch, heads, seq_q), "float32")
    tile_sd = mgpu_lab.ShapeDtype((chunks, TILE_Q, CHUNK), dtype)
    smem = (tile_sd,  # Q, then the output tile (unless there is an output buffer)
            mgpu_lab.ShapeDtype((stages, chunks, block_kv, CHUNK), dtype),  # K ring
            mgpu_lab.ShapeDtype((stages, chunks, block_kv, CHUNK), dtype),  # V ring
            mgpu_lab.Barriers(2 if persistent else 1),  # Q landed (persistent: per consumer half)
            mgpu_lab.Barriers(stages), mgpu_lab.Barriers(stages),  # K full, K empty
            mgpu_lab.Barriers(stages), mgpu_lab.Barriers(stages))  # V full, V empty
    if persistent:
        smem += (mgpu_lab.Barriers(2),)  # Q half free (its consumer is done with it)
        if out_buffer:
            smem += (tile_sd,)

    def block_coords():
        """(first query row, head, kv head, batch) of this block; causal blocks heaviest first."""
        qb = dsl.block_idx("x")
        if causal:
            qb = q_blocks - 1 - qb
        head = dsl.block_idx("y")
        return qb * TILE_Q, head, head // group, dsl.block_idx("z")

    def item_coords(item):
        """(first query row, head, kv head, batch) of persistent work item `item`."""
        qb, pair = work_item(item, q_blocks, heads * batch, section, causal)
        head = pair % heads
        return qb * TILE_Q, head, head // group, pair // heads

    def tile_counts(q0):
        """(K/V tiles this block visits, how many of the first ones need no mask)."""
        if not causal:
            return _opaque(kv_tiles), _opaque(seq_kv // block_kv)
        visible = (q0 + (TILE_Q + block_kv - 1)) // block_kv  # tiles starting <= last row
        below = (q0 + 1) // block_kv  # tiles entirely at or left of the first row
        return dsl.min(visible, kv_tiles), dsl.min(below, seq_kv // block_kv)

    copy = {"arrive": False, "swizzle": SWIZZLE, "uniform": False}

    def load_kv(ctx, k, v, k_smem, v_smem, k_full, k_empty, v_full, v_empty, item, base):
        """Stream the item's K/V tiles into the ring; ring iteration = base + tile."""
        q0, _, kv_head, b = item
        n_tiles, _ = tile_counts(q0)

        def load(src, ring, full, empty, i):
            it = i if base is None else base + i
            empty.wait_for_iteration(it, flip=True)  # a fresh slot passes at once
            bar, _ = full.for_iteration(it)
            bar.arrive_expect_tx(kv_bytes)
            slot = it % stages
            row = i * block_kv
            for j in range(chunks):
                ctx.async_copy(src_ref=src, dst_ref=dsl.memref_slice(ring, (slot, j)), barrier=bar,
                               gmem_slice=(b, kv_head, dsl.ds(row, block_kv), dsl.ds(j * CHUNK, CHUNK)), **copy)

        @dsl.for_range(0, n_tiles)
        def _(i):
            with ctx.named_region("load K"):
                load(k, k_smem, k_full, k_empty, i)
            with ctx.named_region("load V"):
                load(v, v_smem, v_full, v_empty, i)
        return n_tiles

    def producer(ctx, q, k, v, q_smem, k_smem, v_smem, q_full, k_full, k_empty, v_full, v_empty):
        dsl.setmaxnreg(PRODUCER_REGS)
        item = block_coords()
        q0, head, kv_head, b = item
        with dsl.single_thread("warpgroup"):
            with ctx.named_region("load Q"):
                q_full[0].arrive_expect_tx(TILE_Q * head_dim * 2)
                for j in range(chunks):
                    ctx.async_copy(src_ref=q, dst_ref=dsl.memref_slice(q_smem, j), barrier=q_full[0],
                                   gmem_slice=(b, head, dsl.ds(q0, TILE_Q), dsl.ds(j * CHUNK, CHUNK)), **copy)
            load_kv(ctx, k, v, k_smem, v_smem, k_full, k_empty, v_full, v_empty, item, None)

    def persistent_producer(ctx, q, k, v, q_smem, k_smem, v_smem, q_full, k_full, k_empty, v_full, v_empty,
                            q_free):
        """Warp 0 streams K/V through the ring across the block's items (the ring iteration runs
        on); warps 1 and 2 each reload one consumer's half of Q as soon as that consumer frees it."""
        dsl.setmaxnreg(PRODUCER_REGS)
        block = dsl.block_idx("x")
        warp = dsl.warp_idx()
        with dsl.when(warp == 0), dsl.single_thread("warp"):
            @dsl.for_range(block, n_items, blocks, carry=dsl.c(0))
            def _(item, base):
                return base + load_kv(ctx, k, v, k_smem, v_smem, k_full, k_empty, v_full, v_empty,
                                      item_coords(item), base)
        for half in range(CONSUMERS):
            with dsl.when(warp == 1 + half), dsl.single_thread("warp"):
                @dsl.for_range(block, n_items, blocks, carry=dsl.c(0, "int32"))
                def _(item, j):
                    q0, head, _, b = item_coords(item)
                    with ctx.named_region("load Q"):  # recorded with profile_unit="warp"
                        q_free[half].wait((j & 1) ^ 1)  # the consumer's previous item is done with it
                        q_full[half].arrive_expect_tx(64 * head_dim * 2)
                        for c in range(chunks):
                            ctx.async_copy(src_ref=q, dst_ref=dsl.memref_slice(q_smem, (c, dsl.ds(half * 64, 64))),
                                           barrier=q_full[half], gmem_slice=(b, head, dsl.ds(q0 + half * 64, 64),
                                                                             dsl.ds(c * CHUNK, CHUNK)), **copy)
                    return j + 1

    def consumer(ctx, out, lse, q_smem, o_smem, k_smem, v_smem, q_full, k_full, k_empty, v_full, v_empty, q_free,
                 wg):
        dsl.setmaxnreg(CONSUMER_REGS)
        if persistent:  # read again after setmaxnreg: a value kept across it can spill (d 256)
            wg = _opaque(dsl.warpgroup_idx()) - 1
        lane0 = dsl.lane_idx() == 0
        def own_tiles(ref, wg):
            return [dsl.memref_slice(ref, (j, dsl.ds(wg * 64, 64))) for j in range(chunks)]

        q_tiles = own_tiles(q_smem, wg)
        o_tiles = own_tiles(q_smem if o_smem is None else o_smem, wg)
        s_layout = dsl.WGMMAFragLayout(block_kv)

        def release(empty, i):
            with dsl.when(lane0):  # one arrival per warp
                empty.for_iteration(i)[0].arrive()

        def my_turn():
            """Pingpong: wait until the other consumer has issued its GEMMs (FA3's warp scheduler
            barrier), so one warpgroup's GEMMs run while the other does its softmax."""
            if pingpong:
                with ctx.named_region("wait turn"):
                    dsl.named_barrier(wg + _PINGPONG_BARRIER, CONSUMERS * WARPGROUP)

        def their_turn():
            if pingpong:
                dsl.named_barrier(_PINGPONG_BARRIER + 1 - wg, CONSUMERS * WARPGROUP, arrive=True)

        def issue_qk(it):
            """S = Q K^T of ring iteration `it`, committed as one group (K has landed)."""
            with ctx.named_region("S GEMM"):
                slot = it % stages
                s = dsl.wgmma_fence(WGMMAAccumulator.zeros(block_kv))
                for j in range(chunks):
                    s = dsl.wgmma(s, q_tiles[j], dsl.memref_slice(k_smem, (slot, j)), b_major="k",
                                  swizzle=SWIZZLE, accumulate=j > 0, fence=False)
                dsl.wgmma_commit_group()
            return s

        def issue_pv(it, o, p):
            """O += P V (P from registers; V of ring iteration `it`), committed as one group."""
            with ctx.named_region("PV GEMM"):
                v_full.wait_for_iteration(it)
                slot = it % stages
                o, p = dsl.wgmma_fence(o, p)  # O's rescale and P's conversion stay above the fence
                o = dsl.wgmma(o, p, dsl.memref_slice(v_smem, slot), b_major="mn", swizzle=SWIZZLE, fence=False)
                dsl.wgmma_commit_group()
            return o

        def mask(s, i, row0):
            """Scores of keys a row may not see (past seq_kv; right of the diagonal) -> -inf."""
            kv0 = dsl.cast(i * block_kv, "int32")  # signed from here: limits may go negative
            indices = s_layout.indices()
            limits = []
            for h in range(2):  # the thread's two rows (+0, +8)
                limit = seq_kv - kv0
                if causal:
                    row = dsl.cast(row0 + indices[h][0], "int32")
                    limit = dsl.min(limit, row + 1 - kv0)
                # persistent: opaque per tile, or LLVM rewrites min(seq_kv - kv0, row + 1 - kv0) - col as
                # min(seq_kv - col, ...) - kv0 and hoists seq_kv - col for every column out of the item
                # loop: registers held through the epilogue (it spilled)
                limits.append(_opaque_i32(limit) if persistent else limit)
            bits = []
            for r, (_, col) in enumerate(indices):
                left = limits[r % 2] - dsl.cast(col, "int32")  # visible columns from this one on
                bits.append(dsl.vector.from_elements(dsl.ir.VectorType.get([2], dsl.ir.IntegerType.get_signless(1)),
                                                     [left > e for e in range(2)]))
            visible = FragmentedArray(bits, s_layout, signed=False)
            return dsl.where(visible, s, float("-inf"))

        def exp2_shifted(s, m_scaled):
            """exp2(s * scale_log2 - m_scaled) with one FMA per element."""
            shift = (-m_scaled).broadcast((64, block_kv))
            regs = [dsl.fma(r, scale_log2, sh) for r, sh in zip(s.registers, shift.registers)]
            return FragmentedArray(regs, s.layout).exp2(fma_fraction=exp2_fma_fraction)

        def softmax(s_acc, i, row0, state, masked):
            """Online softmax of S_i: (P_i in f32, m, l, alpha) from (m, l) before. P stays f32 here:
            converting it now would rewrite P_{i-1}'s registers while the PV GEMM still reads them
            (ptxas then serializes every wgmma); the conversion waits for the GEMM."""
            with ctx.named_region("softmax"):
                s = FragmentedArray.from_accumulator(s_acc)
                if masked:
                    s = mask(s, i, row0)
                m_tile = s.reduce_max(axis=1)
                if state is None:
                    m_new = m_tile
                    # a row with every key masked would make -inf - -inf; it never happens (top-left
                    # causal and the ragged tail leave key 0 of the first tile visible), but keep it finite
                    m_scaled = dsl.where(m_new == float("-inf"), 0.0, m_new * scale_log2)
                else:
                    m_old, l_old = state
                    m_new = m_old.max(m_tile)
                    m_scaled = m_new * scale_log2
                p = exp2_shifted(s, m_scaled)
                row_sum = p.reduce_sum(axis=1)
                if state is None:
                    return p, m_new, row_sum, FragmentedArray.splat(1.0, row_sum.layout, "float32")
                alpha = (m_old * scale_log2 - m_scaled).exp2()
                return p, m_new, l_old * alpha + row_sum, alpha

        def rescale(o, alpha):
            with ctx.named_region("rescale O"):
                frag = FragmentedArray.from_accumulator(o) * alpha.broadcast((64, head_dim))
                return frag.to_accumulator()

        def run_item(item, base, q_parity, hand_over, epilogue_item=None):
            """One work item: its K/V tiles are ring iterations base, base + 1, ... (base None: 0).
            hand_over: a callable, whether consumer 1 gives the turn to consumer 0 after its last GEMM
            (it does when the block has another item, whose first turn is consumer 0's). epilogue_item: a
            callable giving the item's coordinates again for the epilogue (recomputed there rather
            than kept in registers through the mainloop)."""
            q0, head, _, b = item
            n_tiles, n_unmasked = tile_counts(q0)
            row0 = q0 + wg * 64  # this warpgroup's first query row
            if base is not None:  # per item, from an opaque copy of wg: LLVM would hoist the Q tiles'
                # descriptors out of the item loop, keeping them in registers through the epilogue
                q_tiles[:] = own_tiles(q_smem, _opaque(wg))

            def at(i):
                return i if base is None else base + i

            with ctx.named_region("wait Q"):
                (q_full[0] if base is None else q_full[wg]).wait(q_parity)
            if pingpong and base is None:  # consumer 0 issues first
                with dsl.when(wg == 1):
                    their_turn()

            # Tile 0: S_0 and its softmax, nothing to overlap with yet.
            k_full.wait_for_iteration(at(0))
            my_turn()
            s = issue_qk(at(0))
            their_turn()
            s = dsl.wgmma_wait_group(0, s)
            release(k_empty, at(0))
            p, m, l, alpha = softmax(s, 0, row0, None, masked=True)
            o = WGMMAAccumulator.zeros(head_dim)

            def step(masked):
                def body(i, state):
                    o, p, m, l, alpha = state  # alpha: the factor O still owes the last softmax
                    k_full.wait_for_iteration(at(i))
                    my_turn()
                    s = issue_qk(at(i))
                    o = rescale(o, alpha)  # by the softmax of tile i - 1, while S_i runs
                    o = issue_pv(at(i - 1), o, p)
                    their_turn()
                    s = dsl.wgmma_wait_group(1, s)  # S_i is done; P_{i-1} V_{i-1} may still run
                    release(k_empty, at(i))
                    p, m, l, alpha = softmax(s, i, row0, (m, l), masked)
                    o = dsl.wgmma_wait_group(0, o)
                    release(v_empty, at(i - 1))
                    return o, p.astype(dtype), m, l, alpha
                return body

            split = dsl.max(n_unmasked, 1)
            state = (o, p.astype(dtype), m, l, alpha)  # the loop's carry: a tuple of register tiles
            if ctx.profiling and profile_tiles is not None:
                # Record profile_tiles unmasked tiles in the middle of the loop; the tiles before
                # and after run in copies of the loop with no region records (see make_attention).
                start = 1 + (dsl.max(split, profile_tiles + 1) - (profile_tiles + 1)) // 2
                stop = dsl.min(start + profile_tiles, split)
                with ctx.unprofiled():
                    state = dsl.for_range(1, start, carry=state)(step(masked=False))
                state = dsl.for_range(start, stop, carry=state)(step(masked=False))
                with ctx.unprofiled():
                    state = dsl.for_range(stop, split, carry=state)(step(masked=False))
            else:
                state = dsl.for_range(1, split, carry=state)(step(masked=False))
            state = dsl.for_range(split, n_tiles, carry=state)(step(masked=True))
            o, p, m, l, alpha = state
            if out_buffer:  # every S GEMM of the item is done: the producer may reload these Q rows
                with dsl.when(lane0):
                    q_free[wg].arrive()
            last = n_tiles - 1
            my_turn()
            o = issue_pv(at(last), rescale(o, alpha), p)
            if pingpong:  # consumer 1's last turn of the block; consumer 0 has no turn left to be given
                with dsl.when(wg == 0 if hand_over is None else (wg == 0) | hand_over()):
                    their_turn()
            o = dsl.wgmma_wait_group(0, o)
            release(v_empty, at(last))

            with ctx.named_region("epilogue"):
                if epilogue_item is not None:
                    q0, head, _, b = epilogue_item()
                    row0 = q0 + wg * 64
                inv_l = 1.0 / l
                result = (FragmentedArray.from_accumulator(o) * inv_l.broadcast((64, head_dim))).astype(dtype)
                if out_buffer:  # the previous item's store has read the buffer
                    ctx.await_async_copy(0, await_read_only=True, sync="warpgroup")
                # this warpgroup's S GEMMs are done with its Q rows
                result.store_tiled(dsl.memref_slice(o_smem if out_buffer else q_smem, (slice(None), dsl.ds(wg * 64, 64))),
                                   SWIZZLE)
                dsl.fence_async_shared()
                dsl.warpgroup_barrier()
                with dsl.single_thread("warpgroup"):
                    for j in range(chunks):
                        ctx.async_copy(src_ref=o_tiles[j], dst_ref=out, swizzle=SWIZZLE, uniform=False,
                                       gmem_slice=(b, head, dsl.ds(row0, 64), dsl.ds(j * CHUNK, CHUNK)))
                    if persistent and not out_buffer:  # the output has left these Q rows: free them
                        ctx.await_async_copy(0, await_read_only=True)
                        q_free[wg].arrive()
                # lse = m * scale + ln(l), by the lane of each row's four that owns it, rows < seq_q only
                row_lse = m * float(scale) + l.log()
                owner = row_lse.layout.owner()
                for reg, (row,) in zip(row_lse.registers, row_lse.layout.indices()):
                    abs_row = row0 + row
                    with dsl.when(owner & (abs_row < seq_q)):
                        dsl.vector.store(reg, lse, [b, head, abs_row])
                if not persistent:
                    ctx.await_async_copy(0, await_read_only=True)
            return n_tiles

        if not persistent:
            run_item(block_coords(), None, 0, None)
            return
        if pingpong:  # consumer 0 takes the block's first turn
            with dsl.when(wg == 1):
                their_turn()
        block = dsl.block_idx("x")
        my_items = (n_items - 1 - block) // blocks + 1

        # Only the item's number j and the ring base (both 32-bit) stay live through the mainloop: the
        # epilogue recomputes the coordinates from an opaque copy of j (LLVM would otherwise reuse
        # the first computation and keep its results in registers the mainloop needs; d 256 spilled).
        @dsl.for_range(0, my_items, carry=dsl.c(0, "int32"), dtype="int32")
        def _(j, base):
            n_tiles = run_item(item_coords(block + dsl.as_index(j) * blocks), dsl.as_index(base), j & 1,
                               lambda: j + 1 < dsl.cast(my_items, "int32"),
                               lambda: item_coords(block + _opaque(dsl.as_index(j)) * blocks))
            return base + dsl.cast(n_tiles, "int32")
        ctx.await_async_copy(0, await_read_only=True)  # the last store has read its smem

    def attention(ctx, q, k, v, out, lse, smem):
        q_smem, k_smem, v_smem, q_full, k_full, k_empty, v_full, v_empty = smem[:8]
        q_free = smem[8] if persistent else None
        o_smem = smem[9] if out_buffer else None
        q_full.init(1, sync=False)
        k_full.init(1, sync=False)
        v_full.init(1, sync=False)
        if persistent:  # freed by each warp after its S GEMMs, or by the thread whose store read it
            q_free.init(WARPGROUP // 32 if out_buffer else 1, sync=False)
        k_empty.init(CONSUMERS * WARPGROUP // 32, sync=False)
        v_empty.init(CONSUMERS * WARPGROUP // 32)  # (this one synchronizes the block)
        barriers = (q_full, k_full, k_empty, v_full, v_empty)
        wg = dsl.warpgroup_idx()
        if persistent:
            dsl.if_else(wg == 0,
                        lambda: persistent_producer(ctx, q, k, v, q_smem, k_smem, v_smem, *barriers, q_free),
                        lambda: consumer(ctx, out, lse, q_smem, o_smem, k_smem, v_smem, *barriers, q_free, wg - 1))
            return
        dsl.if_else(wg == 0,
                    lambda: producer(ctx, q, k, v, q_smem, k_smem, v_smem, *barriers),
                    lambda: consumer(ctx, out, lse, q_smem, None, k_smem, v_smem, *barriers, None, wg - 1))

    kind = "causal" if causal else "full"
    gqa = f"_g{group}" if group > 1 else ""
    name = (f"attention_{kind}_d{head_dim}_{batch}x{heads}x{seq_q}x{seq_kv}{gqa}{'' if pingpong else '_nopp'}"
            f"{'_persistent' if persistent else ''}")
    # Profile events (2 per region): the producer 2 regions per tile, a consumer 5 per tile plus its
    # prologue and epilogue, per item; a persistent block runs up to ceil(items / blocks) items. With
    # profile_buffer="smem", at most what fits in the smem left (3 warpgroup units of 8-byte events;
    # later events are counted but not recorded); "auto" then takes global memory instead.
    items_per_block = -(-n_items // blocks)
    smem_left = SMEM_LIMIT - attention_smem_bytes(head_dim, block_kv, stages, persistent=persistent,
                                                  out_buffer=out_buffer) - 2048
    # With profile_tiles, a consumer records the window, its first tile and the masked ones (at most
    # TILE_Q / block_kv + 2: the diagonal and the ragged end); the producer records every tile.
    recorded = kv_tiles if profile_tiles is None else min(kv_tiles, profile_tiles + TILE_Q // block_kv + 3)
    events = items_per_block * (max(10 * recorded, 4 * kv_tiles) + 16) + 16
    capacity = max(64, min(events, smem_left // (3 * 8))) if profile_buffer == "smem" else events
    grid = (blocks, 1, 1) if persistent else (q_blocks, heads, batch)
    return dict(body=attention, grid=grid, block=(CONSUMERS + 1) * WARPGROUP,
                in_shapes=(q_sd, kv_sd, kv_sd), out_shapes=(q_sd, lse_sd), smem=smem, name=name,
                profile_capacity=capacity, profile_blocks=1 if persistent else PROFILE_BLOCKS)


def _opaque_i32(value: dsl.IntValue) -> dsl.IntValue:
    """An int32 value LLVM cannot see through (nor hoist out of the loop it is in)."""
    return dsl.llvm.inline_asm(dsl.ir.IntegerType.get_signless(32), [value], "mov.u32 $0, $1;", "=r,r",
                               has_side_effects=True)


def _opaque(value: int | dsl.IndexValue) -> dsl.IndexValue:
    """`value` (below 2**31) as an index value LLVM cannot see through: loops over constant bounds
    get unrolled and rescheduled into more live registers than a consumer has, and a computation
    repeated from an opaque copy is not merged with the first one."""
    return dsl.cast(_opaque_i32(dsl.cast(value, "int32")), dsl.ir.IndexType.get(), unsigned=False)


def reference_attention(q: np.ndarray, k: np.ndarray, v: np.ndarray, *, causal: bool = False,
                        scale: float | None = None) -> tuple[np.ndarray, np.ndarray]:
    """float64 (out, lse) of make_attention's kernel on host arrays [batch, heads, seq, d]."""
    q64, k64, v64 = (x.astype(np.float64) for x in (q, k, v))
    heads, kv_heads = q64.shape[1], k64.shape[1]
    k64 = np.repeat(k64, heads // kv_heads, axis=1)
    v64 = np.repeat(v64, heads // kv_heads, axis=1)
    scale = 1.0 / math.sqrt(q64.shape[-1]) if scale is None else scale
    s = np.einsum("bhid,bhjd->bhij", q64, k64, optimize=True) * scale
    if causal:
        seq_q, seq_kv = s.shape[-2:]
        s = np.where(np.arange(seq_kv)[None, :] <= np.arange(seq_q)[:, None], s, -np.inf)
    m = s.max(axis=-1, keepdims=True)
    e = np.exp(s - m)
    total = e.sum(axis=-1, keepdims=True)
    out = np.einsum("bhij,bhjd->bhid", e / total, v64, optimize=True)
    return out, (m + np.log(total))[..., 0]


__all__ = ["DTYPES", "HEAD_DIMS", "PROFILE_BLOCKS", "PROFILE_TILES", "SMEM_LIMIT", "TILE_Q", "attention_definition", "attention_smem_bytes",
           "default_persistent", "default_pingpong", "default_stages", "has_out_buffer", "kv_section", "make_attention",
           "persistent_stages", "reference_attention", "visible_tiles", "work_item"]
