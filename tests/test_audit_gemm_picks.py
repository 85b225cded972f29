"""benchmarks/audit_gemm_picks.py on the CPU: ptxas's spills and wgmma serialization read per pick."""

from __future__ import annotations

import sys
import warnings
from pathlib import Path
from types import SimpleNamespace

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "benchmarks"))

from audit_gemm_picks import audit  # noqa: E402

from mgpu_lab.kernels.gemm import make_gemm  # noqa: E402

SERIALIZED_LOG = ("ptxas info    : (C7514) Potential Performance Loss: wgmma.mma_async instructions are serialized "
                  "due to non wgmma instructions reading accumulator registers\n"
                  "ptxas info    : (C7508) Potential Performance Loss: 'setmaxnreg' ignored")


def _kernel(*launches):
    """A stand-in Kernel: a program whose launches hold (spill stores, spill loads, ptxas log) CompiledKernels."""
    return SimpleNamespace(program=SimpleNamespace(launches=[SimpleNamespace(compiled=SimpleNamespace(
        resources=SimpleNamespace(spill_stores_bytes=s, spill_loads_bytes=lo), ptxas_log=log))
        for s, lo, log in launches]))


def test_spills_and_serialization_are_summed_over_a_programs_launches():
    found = audit(_kernel((76, 96, SERIALIZED_LOG), (4, 4, "")))
    assert found == {"spilled_bytes": 180, "serialized": ["C7514"], "notes": {"C7514": 1, "C7508": 1}}
    assert audit(_kernel((0, 0, "ptxas info    : (C7508) setmaxnreg ignored"))) == \
        {"spilled_bytes": 0, "serialized": [], "notes": {"C7508": 1}}


def test_a_real_pick_reads_clean():
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        kernel = make_gemm(300, 2000, 1024, transpose_b=True, target="sm_90a")
    found = audit(kernel)
    assert found["spilled_bytes"] == 0 and found["serialized"] == []
    assert "Used" in kernel.compiled.ptxas_log and kernel.compiled.resources.registers > 0  # a real ptxas report
