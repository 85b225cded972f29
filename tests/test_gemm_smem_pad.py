"""The probe MGPU_LAB_GEMM_SMEM_PAD: unused smem added to every GEMM block (pieces.SMEM_PAD), so a
shallow ring can be timed at a deep ring's smem size. Unset, nothing changes; set, a ring the user
asks for keeps its stages and epilogue slots while the block's smem grows by the pad, a default
ring gives up stages to make room, and records name the probe so that the model's fit leaves
them out."""

from __future__ import annotations

import pytest

from gemm_probes import assert_recorded_and_left_out, import_error
from mgpu_lab.kernels.gemm import make_gemm, pieces
from mgpu_lab.kernels.gemm.tiling import settle_tiling

PAD = 32 * 1024


def _tiling(**given):
    return settle_tiling(631, 8192, 28672, {}, transpose_b=True, tile_m=128, tile_n=160, persistent=True,
                         group_m=8, **given)


def test_unset_adds_nothing():
    assert pieces.SMEM_PAD == 0
    t = _tiling(stages=4)
    assert len(t.smem()) == 3  # (ring and epilogue, full barriers, empty barriers)
    assert t.smem_bytes == t.pipeline_bytes + t.epilogue_bytes + 2 * t.stages * 8


def test_a_given_ring_keeps_its_stages_and_slots_and_the_block_grows(monkeypatch):
    plain = _tiling(stages=4)
    plain_bytes, plain_slots = plain.smem_bytes, plain.epilogue_slots
    monkeypatch.setattr(pieces, "SMEM_PAD", PAD)
    padded = _tiling(stages=4)
    assert (padded.stages, padded.epilogue_slots) == (4, plain_slots)
    assert padded.smem_bytes == plain_bytes + PAD + pieces.PAD_ALIGNMENT
    *_, pad = padded.smem()
    assert pad.name == "smem_pad" and pad.shape == (PAD,) and pad.dtype == "uint8"


def test_a_default_ring_gives_up_stages_for_the_pad(monkeypatch):
    deepest = _tiling()
    monkeypatch.setattr(pieces, "SMEM_PAD", PAD)
    padded = _tiling()
    assert padded.stages < deepest.stages
    assert padded.smem_bytes <= pieces.SMEM_LIMIT


def test_a_given_ring_that_no_longer_fits_is_refused_naming_stages(monkeypatch):
    monkeypatch.setattr(pieces, "SMEM_PAD", PAD)
    with pytest.raises(ValueError, match="stages"):
        _tiling(stages=6)  # 229 KB of ring and slots: fits alone, not beside 32 KB more


def test_the_compiled_kernel_asks_for_the_padded_smem(monkeypatch):
    # a shape no other test builds: the padded kernel must not come from an in-process cache
    given = dict(transpose_b=True, tile_m=128, tile_n=160, persistent=True, stages=4, group_m=8)
    plain = make_gemm(648, 4096, 2048, **given).program.launches[0].compiled.resources
    monkeypatch.setattr(pieces, "SMEM_PAD", PAD)
    padded = make_gemm(648, 4096, 2056, **given).program.launches[0].compiled.resources
    # the pad lands on a 1 KB boundary: the block asks for PAD more, and at most what smem_bytes counts
    assert plain.dynamic_smem_bytes + PAD <= padded.dynamic_smem_bytes
    assert padded.dynamic_smem_bytes <= plain.dynamic_smem_bytes + PAD + pieces.PAD_ALIGNMENT
    assert padded.spill_stores_bytes == 0


@pytest.mark.parametrize("value", ["lots", "100", str(300 * 1024)])
def test_a_bad_value_is_refused_naming_the_variable(value):
    limit = pieces.SMEM_LIMIT - pieces.RING_SMEM_FLOOR
    assert (f"MGPU_LAB_GEMM_SMEM_PAD must be a number of bytes from 0 to {limit}, a multiple of 128 (unused smem "
            f"added to every GEMM block), got {value!r}") in import_error(pieces.SMEM_PAD_ENV, value)


def test_records_name_the_probe_and_the_fit_leaves_them_out(monkeypatch):
    assert_recorded_and_left_out(monkeypatch, pieces.SMEM_PAD_ENV, "gemm_smem_pad", str(PAD), "0")
