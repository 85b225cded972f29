"""The probe MGPU_LAB_GEMM_RING_SMEM: the smem a GEMM block's default ring and a persistent tile's
epilogue slots may use (pieces.RING_SMEM). Unset, every tiling keeps the deepest ring that fits;
set, the default ring is the deepest within it, the model estimates that ring, and records name
the probe so that the model's fit leaves them out."""

from __future__ import annotations

import pytest

from gemm_probes import assert_recorded_and_left_out, import_error
from mgpu_lab.kernels.gemm import model, pieces
from mgpu_lab.kernels.gemm.tiling import settle_tiling

CAP = 196 * 1024 - 1024  # the 196 KB carve-out, less the 1 KB the driver keeps per block


def _tiling(persistent: bool, **given):
    return settle_tiling(631, 8192, 28672, {}, transpose_b=True, tile_m=128, tile_n=160, persistent=persistent,
                         group_m=8, **given)


def test_unset_the_deepest_ring_that_fits_a_block():
    assert pieces.RING_SMEM == pieces.SMEM_LIMIT
    one, persistent = _tiling(False), _tiling(True)
    assert (one.stages, persistent.stages) == (6, 6)
    assert persistent.smem_bytes > CAP and persistent.smem_bytes <= pieces.SMEM_LIMIT


def test_a_cap_makes_the_default_ring_the_deepest_within_it(monkeypatch):
    monkeypatch.setattr(pieces, "RING_SMEM", CAP)
    one, persistent = _tiling(False), _tiling(True)
    # one stage fewer each; the persistent tile keeps one epilogue slot where fill gave it four
    # beside five stages (217 KB, 0.77x cuBLAS on an H100 at 13fe12f, where four stages ran 0.96x)
    assert (one.stages, persistent.stages) == (5, 5) and persistent.epilogue_slots == 1
    assert one.smem_bytes <= CAP and persistent.smem_bytes <= CAP
    assert model.ring_stages(128, 160, "bfloat16", True, False) == 5
    assert model.ring_stages(128, 160, "bfloat16", False, False) == 5
    assert _tiling(True, stages=6).stages == 6  # a ring the user asks for is built as asked


def test_a_cap_no_ring_fits_gives_the_shallowest(monkeypatch):
    monkeypatch.setattr(pieces, "RING_SMEM", pieces.RING_SMEM_FLOOR)
    assert _tiling(True).stages == 2


@pytest.mark.parametrize("value", ["lots", "1000", str(300 * 1024)])
def test_a_bad_value_is_refused_naming_the_variable(value):
    assert (f"MGPU_LAB_GEMM_RING_SMEM must be a number of bytes from 32768 to {pieces.SMEM_LIMIT} (the smem a GEMM "
            f"block's default ring and epilogue slots may use), got {value!r}") in import_error(pieces.RING_SMEM_ENV,
                                                                                               value)


def test_records_name_the_probe_and_the_fit_leaves_them_out(monkeypatch):
    assert_recorded_and_left_out(monkeypatch, pieces.RING_SMEM_ENV, "gemm_ring_smem", str(CAP), str(pieces.SMEM_LIMIT))
