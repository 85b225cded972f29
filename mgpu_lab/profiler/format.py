"""The profiler buffer format, shared by the device side (writer) and the host side (decoder).

The runtime allocates a uint32 buffer of shape (num_blocks, words_per_block). Each block
writes its own row: thread 0 the header at block start, each unit's leader its unit header
(and, with events kept in shared memory, its warp the events) when the unit ends, and the last
unit to end the end stamps:

    word 0      MAGIC
    word 1      SM id (%smid)
    word 2      linear block id: x + grid_x * (y + grid_y * z)
    word 3      units per block (warpgroups or warps that record)
    words 4,5   %globaltimer at block start, ns (lo, hi)
    words 6,7   %globaltimer at block end (when its last unit ended), ns (lo, hi)
    word 8      %clock at block start (the same instant as words 4,5, cycles, wraps at 2**32)
    word 9      %clock at block end (the same instant as words 6,7)
    words 10-15 reserved (0)

then for each unit u (BLOCK_HEADER_WORDS + u * unit_words, unit_words = UNIT_HEADER_WORDS
+ EVENT_WORDS * capacity):

    word 0      events the unit tried to record (may exceed capacity: the rest were dropped)
    word 1      reserved (0)
    then `capacity` events of EVENT_WORDS words: [tag, %clock]
        tag bit 31 set: region begins; clear: region ends; bits 0-30: region id (index into
        ProfilerSpec.region_names)

Events are written in program order per unit, so begin/end pairs nest like a stack. Only the
first `capacity` events are kept; writes past capacity are skipped on the device, so a full
buffer never touches memory outside it.

Time: events carry 32-bit %clock cycles (cheap to read, per SM). The host turns them into
nanoseconds with the block's two (%globaltimer, %clock) pairs: the cycle period is pooled over
all blocks (sum of globaltimer spans over sum of clock spans, which averages out the
globaltimer's coarse tick), and each block's events are placed at
    start_ns(block) + (clock - clock_start(block)) * ns_per_cycle,
with clocks unwrapped modulo 2**32 relative to the block's start clock. All times in a Trace
are nanoseconds from the earliest block start.
"""

MAGIC = 0x4D475055  # "MGPU"
BLOCK_HEADER_WORDS = 16
UNIT_HEADER_WORDS = 2
EVENT_WORDS = 2
BEGIN_BIT = 1 << 31
REGION_ID_MASK = BEGIN_BIT - 1


def unit_words(capacity: int) -> int:
    """Words one recording unit occupies in a block's row."""
    return UNIT_HEADER_WORDS + EVENT_WORDS * capacity


def words_per_block(units_per_block: int, capacity: int) -> int:
    """Words of one block's row in the profiler buffer."""
    return BLOCK_HEADER_WORDS + units_per_block * unit_words(capacity)
