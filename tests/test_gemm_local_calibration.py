"""The GEMM model's local calibration (mgpu_lab/kernels/gemm/local_calibration.py), CPU only: the
scale it gives an estimate near and far from its samples, that it moves the model's pick only
when its switch is on, for 16-bit problems and for the constants it was taken against, that the
shipped files belong to the constants each GPU picks with, and a clear error for a bad file."""

from __future__ import annotations

import dataclasses
import json
import math
import sys
from pathlib import Path

import pytest

from mgpu_lab.kernels.gemm import local_calibration, model

sys.path.insert(0, str(Path(__file__).parent.parent / "benchmarks"))

PLAIN = {"tile_m": 128, "tile_n": 128, "persistent": True}
SWAPPED = {"tile_m": 128, "tile_n": 64, "swap_ab": True, "split_k": 2, "split_k_reduce": "cluster"}


def calibration(samples, constants=None, **kwargs):
    return local_calibration.from_samples(constants or model.Constants(), samples, **kwargs)


def test_the_scale_follows_nearby_errors_of_the_same_kind_and_is_shrunk_where_few_are_near():
    # Ten samples of one kind at 1024^3 measured 20% slower than estimated.
    near = calibration([(PLAIN, 1024, 1024, 1024, False, math.log(1.2))] * 10)
    at = near.log_factor(1024, 1024, 1024, False, local_calibration.error_kind(PLAIN))
    assert at == pytest.approx(10 * math.log(1.2) / (10 + 1.0))  # shrunk by one sample's weight
    far = near.log_factor(16, 16384, 1024, False, local_calibration.error_kind(PLAIN))
    assert 0 <= far < 0.01 * at
    assert near.log_factor(1024, 1024, 1024, False, local_calibration.error_kind(SWAPPED)) == 0.0
    # B's layout counts as distance: the other layout gets less of the same error.
    assert 0 < near.log_factor(1024, 1024, 1024, True, local_calibration.error_kind(PLAIN)) < at


def test_kinds_part_block_schemes_tile_heights_and_wide_tiles():
    kinds = {local_calibration.error_kind(c) for c in (
        PLAIN, {**PLAIN, "tile_m": 64}, {**PLAIN, "tile_n": 192}, {**PLAIN, "persistent": "pingpong"},
        SWAPPED, {**PLAIN, "cluster_m": 2})}
    assert len(kinds) == 6
    assert local_calibration.error_kind({**PLAIN, "tile_n": 256}) == local_calibration.error_kind(
        {**PLAIN, "tile_n": 192})


def test_a_calibration_survives_its_file_and_a_bad_file_names_itself(tmp_path):
    c = calibration([(PLAIN, 512, 2048, 4096, True, 0.1), (SWAPPED, 32, 4096, 4096, False, -0.05)],
                    bandwidth=0.4, shrink=2.0)
    path = tmp_path / "local.json"
    path.write_text(json.dumps(c.to_json()))
    back = local_calibration.read(str(path))
    assert back.bandwidth == 0.4 and back.shrink == 2.0 and back.matches(model.Constants())
    for kind in (local_calibration.error_kind(PLAIN), local_calibration.error_kind(SWAPPED)):
        assert back.log_factor(600, 2000, 4000, True, kind) == pytest.approx(c.log_factor(600, 2000, 4000, True, kind),
                                                                              abs=1e-4)
    bad = tmp_path / "bad.json"
    bad.write_text('{"constants": {}}')
    with pytest.raises(ValueError, match=r"bad\.json.*--write-local.*KeyError"):
        local_calibration.read(str(bad))


def test_it_belongs_to_the_constants_it_was_taken_against():
    c = calibration([(PLAIN, 512, 2048, 4096, True, 0.1)])
    assert c.matches(model.Constants())
    assert not c.matches(dataclasses.replace(model.Constants(), eff_one=0.85))


def test_the_shipped_files_belong_to_the_constants_each_gpu_picks_with():
    # A change of a GPU's constants without a new --write-local would leave its calibration unused.
    for gpu in local_calibration.DEVICE_FILES:
        local = local_calibration.for_constants(model.constants_for(f"NVIDIA {gpu}"))
        assert local is not None, gpu
        assert sum(len(e) for e in local.errors.values()) > 1000


def test_the_switch_moves_a_pick_only_when_on_for_16_bit_problems_with_matching_constants(monkeypatch):
    p = model.Problem(4096, 4096, 4096, transpose_b=True)
    c = model.Constants()
    pick = model.ranked(p, c)[0][1]
    # A calibration that finds the pick's kind 3x slower than estimated around this shape.
    slow = calibration([(pick, 4096, 4096, 4096, True, math.log(3.0))] * 20)
    monkeypatch.setattr(local_calibration, "_device_calibrations", lambda: (slow,))
    monkeypatch.setattr(model, "OFFER_LOCAL_CALIBRATION", False)
    assert model.ranked(p, c)[0][1] == pick
    monkeypatch.setattr(model, "OFFER_LOCAL_CALIBRATION", True)
    moved = model.ranked(p, c)[0][1]
    assert local_calibration.error_kind(moved) != local_calibration.error_kind(pick)
    other = dataclasses.replace(c, eff_one=0.85)
    monkeypatch.setattr(model, "OFFER_LOCAL_CALIBRATION", False)
    unscaled_other = model.ranked(p, other)[0][1]
    monkeypatch.setattr(model, "OFFER_LOCAL_CALIBRATION", True)
    assert model.ranked(p, other)[0][1] == unscaled_other  # taken against other constants: unused
    fp8 = model.Problem(4096, 4096, 4096, transpose_b=True, dtype="float8_e4m3fn")
    monkeypatch.setattr(model, "OFFER_LOCAL_CALIBRATION", False)
    fp8_pick = model.ranked(fp8, c)[0][1]
    monkeypatch.setattr(model, "OFFER_LOCAL_CALIBRATION", True)
    assert model.ranked(fp8, c)[0][1] == fp8_pick  # bf16 samples say nothing of FP8


def test_the_cross_validation_scores_both_ways_on_held_out_commits():
    from fit_gemm_model import Sample, local_cross_validation

    c = model.Constants()
    p = model.Problem(2048, 2048, 2048, transpose_b=True)
    configs, kinds = [], set()
    for _, config in model.ranked(p, c):  # the fastest of three kinds (one kind is scaled as one)
        if local_calibration.error_kind(config) not in kinds and len(configs) < 3:
            kinds.add(local_calibration.error_kind(config))
            configs.append(config)
    # Two commits time the same three alternatives; the model's pick is measured the slowest.
    samples = []
    for commit in ("aaaaaaa", "bbbbbbb"):
        shape = (2048, 2048, 2048 + (commit == "bbbbbbb") * 256)  # a shape near, where the same kind leads
        q = model.Problem(*shape, transpose_b=True)
        fastest = min(configs, key=lambda config: model.estimate_us(q, config, c))
        for config in configs:
            us = model.estimate_us(q, config, c) * (2.0 if config is fastest else 1.0)
            samples.append(Sample(q, config, us, f"gemm_options_x_{commit}.json:bf16_2048x2048x{shape[2]}"))
    from fit_gemm_model import local_errors

    out = local_cross_validation(local_errors(samples, c), samples, c, bandwidth=0.5, shrink=1.0)
    assert out["groups"] == 2
    assert out["pick_over_best_model"] == pytest.approx(2.0, rel=0.05)
    assert out["pick_over_best_local"] < out["pick_over_best_model"]  # learnt from the other commit
