"""Profiling a GEMM must not change its wgmma schedule (CPU: compile for sm_90a, read the SASS).

Users read the profiler's timeline to judge the real kernel, so `profile=True` may add the
recording code but not change how the tensor-core instructions are issued. The regression this
guards: region markers emitted as `if leader:` branches let LLVM thread the records of the
GEMM's first k-step into a leader and a non-leader copy of its mbarrier wait; on the tuned
4096^3 tile (256x128, two wgmma row tiles per consumer) ptxas then found a WG.DP it had to
insert in a divergent path (C7518) and serialized every wgmma: a WARPGROUP.DEPBAR after each
HGMMA.
"""

from __future__ import annotations

import re
import warnings

import pytest

from mgpu_lab.errors import PerformanceWarning
from mgpu_lab.kernels.gemm import make_gemm, resolve_tiling

_WGMMA_OP = re.compile(r"/\*[0-9a-f]{4,}\*/\s+(?:@!?U?P\w+\s+)?((?:HGMMA|WARPGROUP)[^;]*);")


def wgmma_schedule(sass: str) -> list[str]:
    """The HGMMA / WARPGROUP.* instructions in order; an HGMMA as its shape and whether it
    signals the group (gsb0), its registers left out (allocation is not the schedule)."""
    return [op.split()[0] + (" gsb0" if "gsb0" in op else "") if op.startswith("HGMMA") else op.strip()
            for op in _WGMMA_OP.findall(sass)]


def depbar_after_each_hgmma(schedule: list[str]) -> bool:
    """True when every HGMMA is followed at once by a WARPGROUP.DEPBAR (ptxas's serialized form)."""
    return all(i + 1 < len(schedule) and schedule[i + 1].startswith("WARPGROUP.DEPBAR")
               for i, op in enumerate(schedule) if op.startswith("HGMMA"))


def compiled(profile: bool, **tiles):
    with warnings.catch_warnings():
        warnings.simplefilter("error", PerformanceWarning)  # a serialized wgmma fails the test here
        return make_gemm(4096, 4096, 4096, transpose_b=True, profile=profile, target="sm_90a",
                         use_cache=False, **tiles).compiled


def test_the_tuned_config_is_the_two_row_tile_one():
    # The case below must keep covering the 256x128 tile (two 64-row wgmmas per consumer).
    t = resolve_tiling(4096, 4096, 4096, transpose_b=True)
    assert (t.tile_m, t.tile_n, t.consumers) == (256, 128, 2)


@pytest.mark.parametrize("tiles", [{}, {"tile_m": 128, "tile_n": 256}, {"tile_m": 192, "tile_n": 192}],
                         ids=["tuned_256x128", "128x256", "192x192"])
def test_profiling_leaves_the_wgmma_schedule_alone(tiles):
    plain = compiled(False, **tiles)
    profiled = compiled(True, **tiles)
    assert "C7518" not in profiled.ptxas_log and "serialized" not in profiled.ptxas_log, profiled.ptxas_log
    before, after = wgmma_schedule(plain.sass), wgmma_schedule(profiled.sass)
    assert before and not depbar_after_each_hgmma(before)
    assert not depbar_after_each_hgmma(after), after
    count = sum(op.startswith("HGMMA") for op in before)
    assert sum(op.startswith("HGMMA") for op in after) == count
    # The same HGMMA groups in the same order, and no wait the plain build does not have (ptxas
    # may drop a wait of its own that the plain build needed: with the event count in a register
    # the profiled first k-step no longer needs it).
    assert [op for op in after if not op.startswith("WARPGROUP.DEPBAR")] == \
        [op for op in before if not op.startswith("WARPGROUP.DEPBAR")]
    assert all(a <= b for a, b in zip(_waits_between_groups(after), _waits_between_groups(before), strict=True))


def _waits_between_groups(schedule: list[str]) -> list[int]:
    """How many WARPGROUP.DEPBARs follow each HGMMA group (elementwise `<=` compares schedules)."""
    waits, current = [], 0
    for op in schedule:
        if op == "WARPGROUP.ARRIVE":
            waits.append(current)
            current = 0
        elif op.startswith("WARPGROUP.DEPBAR"):
            current += 1
    return [*waits[1:], current]
