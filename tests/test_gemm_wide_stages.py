"""The probe MGPU_LAB_GEMM_WIDE_STAGES: the deepest default ring of a tile with 128 rows or more and
more than 128 columns (pieces.WIDE_STAGES). Unset, every tiling keeps the deepest ring that fits;
set, those tiles' default ring is capped (the model estimates that ring), narrower or shorter
tiles and rings the user gives keep theirs, and records name the probe so that the model's fit
leaves them out."""

from __future__ import annotations

import pytest

from gemm_probes import assert_recorded_and_left_out, import_error
from mgpu_lab.kernels.gemm import model, pieces
from mgpu_lab.kernels.gemm.tiling import settle_tiling


def _stages(tile_m: int, tile_n: int, persistent: bool = True, **given) -> int:
    return settle_tiling(631, 8192, 28672, {}, transpose_b=True, tile_m=tile_m, tile_n=tile_n, persistent=persistent,
                         group_m=8, **given).stages


def test_unset_the_deepest_ring_that_fits():
    assert pieces.WIDE_STAGES is None
    assert (_stages(128, 160), _stages(128, 192), _stages(128, 256), _stages(64, 160)) == (6, 5, 4, 7)


def test_set_it_caps_wide_tiles_only(monkeypatch):
    monkeypatch.setattr(pieces, "WIDE_STAGES", 4)
    assert (_stages(128, 160), _stages(128, 160, persistent=False), _stages(128, 192)) == (4, 4, 4)
    assert _stages(128, 256) == 4 and _stages(256, 128) == 4  # no deeper than they were
    assert _stages(128, 128) == 6 and _stages(64, 160) == 7  # 128 columns, or 64 rows: not wide
    assert _stages(128, 160, stages=6) == 6  # a ring the user asks for is built as asked
    model.ring_stages.cache_clear()
    try:
        assert model.ring_stages(128, 160, "bfloat16", True, False) == 4
    finally:
        model.ring_stages.cache_clear()


@pytest.mark.parametrize("value", ["deep", "1", "9"])
def test_a_bad_value_is_refused_naming_the_variable(value):
    assert (f"MGPU_LAB_GEMM_WIDE_STAGES must be a number of stages from 2 to {pieces.MAX_STAGES} (the deepest "
            f"default ring of a tile of 128+ rows by 136+ columns), got {value!r}") in import_error(
                pieces.WIDE_STAGES_ENV, value)


def test_records_name_the_probe_and_the_fit_leaves_them_out(monkeypatch):
    assert_recorded_and_left_out(monkeypatch, pieces.WIDE_STAGES_ENV, "gemm_wide_stages", "4", None)
