"""Signals between the blocks of one launch through flags in global memory: one block writes
data, then `signal(flags, i)`; another waits for it with `wait_signal(flags, i)` and reads the
data. What a stream-K GEMM uses to hand a partial tile from the block that computed its last
k-steps to the block that finishes the tile.

`signal` is a release at GPU scope (`fence.acq_rel.gpu` + a relaxed store of 1), so every write
the signalling thread has observed before it, its own and those ordered before it by a barrier
(the writers `bar.arrive`, the signaller `bar.sync`s), is visible to a thread that acquires
the flag. `wait_signal` spins on an acquire load until the flag is 1, then resets it to 0 for
the next launch and orders the async proxy (bulk copies, TMA) after the acquire.

Flags are u32 (int32 arrays) that start at 0: allocate them zeroed once; each is signalled and
waited for once per launch, and the waiter's reset leaves them at 0 again. Both sides must be
resident at once (a persistent grid of at most one block per SM), or a waiter can hold the SM
the signaller needs. With `CompileOptions.mbarrier_timeout_s` set a wait that lasts longer traps,
as mbarrier waits do.
"""

from __future__ import annotations

from typing import Any

from .._mlir import arith, ir
from .launch_context import active_options
from .ptx import global_address, i64, inline_ptx
from .values import as_index

__all__ = ["signal", "wait_signal"]

_POLL_NS = 32  # nanosleep between polls: the flag's line is shared with the writer's L2 slice


def _flag_address(flags: ir.Value, index: Any, what: str) -> ir.Value:
    ref_type = ir.MemRefType(flags.type)
    if ref_type.memory_space is not None or len(ref_type.shape) != 1 or \
            not (isinstance(ref_type.element_type, ir.IntegerType) and ir.IntegerType(ref_type.element_type).width == 32):
        raise ValueError(f"{what}: flags must be a 1-d global array of 32-bit ints, got {ref_type}")
    return global_address(flags) + arith.index_cast(i64(), as_index(index)) * 4


def signal(flags: ir.Value, index: Any) -> None:
    """(The calling thread.) Set flags[index] to 1 with release semantics at GPU scope."""
    address = _flag_address(flags, index, "signal")
    inline_ptx("fence.acq_rel.gpu;\nst.relaxed.gpu.global.u32 [$0], 1;", [address], ["l"])


def wait_signal(flags: ir.Value, index: Any, *, reset: bool = True) -> None:
    """(The calling thread.) Wait until flags[index] is 1 (acquire, GPU scope); with reset (the
    default) set it back to 0. Then `fence.proxy.async.global`: bulk copies and TMA loads the
    thread issues next read what the signaller's side wrote."""
    address = _flag_address(flags, index, "wait_signal")
    timeout = active_options().mbarrier_timeout_s
    check = ""
    if timeout:
        check = (f"mov.u64 now, %globaltimer;\nsub.u64 now, now, start;\nsetp.lt.u64 done, now, {int(timeout * 1e9)};\n"
                 "@!done trap;\n")
    clear = "st.relaxed.gpu.global.u32 [$0], 0;\n" if reset else ""
    inline_ptx(
        "{\n.reg .pred done;\n.reg .u32 value;\n.reg .u64 start, now;\nmov.u64 start, %globaltimer;\n"
        "signal_wait_loop:\n"
        "ld.acquire.gpu.global.u32 value, [$0];\n"
        "setp.eq.u32 done, value, 1;\n"
        "@done bra signal_wait_done;\n"
        f"nanosleep.u32 {_POLL_NS};\n"
        f"{check}"
        "bra signal_wait_loop;\n"
        "signal_wait_done:\n"
        f"{clear}"
        "fence.proxy.async.global;\n}", [address], ["l"])
