"""The examples' SASS is unchanged by the typed-value rewrite: same opcode counts as recorded.

The fixture was recorded before kernel bodies moved from `arith.*` builder calls to Python
operators on typed values; the operators emit the same ops, so the SASS must not move.
Re-recorded on purpose, three times: the GEMM entries when `WGMMAAccumulator.store_swizzled` became
`FragmentedArray.store_tiled` (one register tile type; 55 fewer integer instructions in the
epilogue, same stores); gemm_nt_profiled when the profiler's region records became
predicated PTX instead of `if leader` branches (no branch for LLVM to thread through the
mainloop: the profiled GEMM now has the unprofiled one's loop shape and wgmma schedule, 16
HGMMA / 4 WARPGROUP.ARRIVE / 5 WARPGROUP.DEPBAR, with 25 fewer BRA); the three GEMM entries
when the producer's k-loop stayed a loop for K of at most 8 k-steps, as the consumers' does
(these 4 k-steps: 2-3 UTMALDG instead of 8-12; unrolled, a multicast pair's producer spilled).
Everything else is as first recorded. When a default changed, the entry was pinned at the options
it was recorded with and the new default added beside it (d 256's K/V tiles; d 64's exp2 on the
FMA pipes, `attention_d64_exp2_fma`; pingpong off for full attention at d 128, `attention_d128_nopp`). The attention entries were
added (recorded before `mgpu_lab/kernels/attention.py` moved to operators) without touching the others.
"""

from __future__ import annotations

import json

import pytest

from sass_baseline import FIXTURE, kernels, measure

RECORDED = json.loads(FIXTURE.read_text())


def test_every_kernel_has_a_recording():
    assert sorted(RECORDED) == sorted(kernels())


@pytest.mark.parametrize("name", sorted(RECORDED))
def test_sass_opcode_counts_unchanged(name):
    now = measure(name)
    before = RECORDED[name]
    diff = {op: (before.get(op, 0), now.get(op, 0)) for op in sorted(set(before) | set(now))
            if before.get(op, 0) != now.get(op, 0)}
    assert not diff, f"{name}: opcode counts moved (recorded, now): {diff}"
