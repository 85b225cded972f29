"""The resource report of a compiled kernel: what ptxas allocated and what it costs in occupancy.

Per-SM limits are Hopper's (sm_90): 64K 32-bit registers, 228 KB of shared memory of which a
block may use 227 KB, 1 KB reserved by the system per resident block, 32 resident blocks and
64 resident warps. Registers are allocated per warp in units of 256 (8 per thread).
"""

from __future__ import annotations

from typing import Any

REGISTERS_PER_SM = 65536
REGISTER_UNIT_PER_THREAD = 8
SMEM_PER_SM = 228 * 1024
SMEM_PER_BLOCK_MAX = 227 * 1024
SMEM_RESERVED_PER_BLOCK = 1024
MAX_BLOCKS_PER_SM = 32
MAX_WARPS_PER_SM = 64


def _kib(n: int) -> str:
    return f"{n:,} B" if n < 1024 else f"{n / 1024:.1f} KiB ({n:,} B)"


def blocks_per_sm(registers: int, threads: int, smem_bytes: int) -> dict[str, int]:
    """Resident blocks per SM allowed by each limit (registers, shared memory, warps, blocks)."""
    warps = max(-(-threads // 32), 1)
    regs_per_thread = -(-max(registers, 1) // REGISTER_UNIT_PER_THREAD) * REGISTER_UNIT_PER_THREAD
    limits = {
        "registers": REGISTERS_PER_SM // (regs_per_thread * 32 * warps),
        "shared memory": SMEM_PER_SM // (smem_bytes + SMEM_RESERVED_PER_BLOCK),
        "warps": MAX_WARPS_PER_SM // warps,
        "blocks": MAX_BLOCKS_PER_SM,
    }
    return limits


def resource_rows(kernel: Any) -> list[tuple[str, str, str]]:
    """(quantity, value, note) rows for a `CompiledKernel`; notes flag what needs attention."""
    res = kernel.resources
    threads = int(kernel.threads_per_block)
    smem = int(res.total_smem_bytes)
    rows: list[tuple[str, str, str]] = [
        ("registers / thread", str(res.registers), "at the 255 limit" if res.registers >= 255 else ""),
        ("threads / block", f"{threads} ({threads // 128} warpgroups)" if threads % 128 == 0 else str(threads), ""),
        ("registers / block", f"{res.registers * threads:,}", ""),
        ("static shared memory", _kib(res.static_smem_bytes), ""),
        ("dynamic shared memory", _kib(res.dynamic_smem_bytes), ""),
        (
            "total shared memory",
            _kib(smem),
            f"over the {SMEM_PER_BLOCK_MAX // 1024} KiB a block may use" if smem > SMEM_PER_BLOCK_MAX else
            f"{100 * smem / SMEM_PER_BLOCK_MAX:.0f}% of {SMEM_PER_BLOCK_MAX // 1024} KiB",
        ),
        ("spill stores", _kib(res.spill_stores_bytes), "spills to local memory" if res.spill_stores_bytes else ""),
        ("spill loads", _kib(res.spill_loads_bytes), "spills to local memory" if res.spill_loads_bytes else ""),
        ("stack frame", _kib(res.stack_frame_bytes), ""),
        ("named barriers", str(res.barriers), ""),
    ]
    if res.const_bytes:
        rows.append(("constant memory", _kib(res.const_bytes), ""))
    limits = blocks_per_sm(res.registers, threads, smem)
    resident = min(limits.values())
    limiter = ", ".join(k for k, v in limits.items() if v == resident)
    rows.append(("resident blocks / SM", str(resident), f"limited by {limiter}" if resident else "does not fit"))
    return rows
