"""benchmarks/compare_random_runs.py: two drawn-shape runs of one seed, per shape and per family."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).parent.parent / "benchmarks"))
from compare_random_runs import compare, family, main  # noqa: E402


def _record(seed: int, shapes: dict, prefix: str = "gemm_random") -> dict:
    figures = {}
    for shape, (ratio, config) in shapes.items():
        stem = f"{prefix}_seed{seed}_{shape}"
        figures.update({f"{stem}_kernel_vs_cublas": ratio, f"{stem}_ours_us": 10.0, f"{stem}_config": config})
    figures[f"{prefix}_seed{seed}_geomean_vs_cublas"] = 1.0  # totals are not shapes
    return {"figures": figures}


PAIR_B = {"tile_m": 128, "tile_n": 256, "persistent": "stream_k", "cluster_m": 2, "source": "model", "model_us": 9.0}
PAIR_A = {"tile_m": 128, "tile_n": 256, "persistent": True, "cluster_n": 2, "source": "model", "model_us": 8.0}
QUAD = {"tile_m": 128, "tile_n": 128, "persistent": True, "cluster_m": 2, "cluster_n": 2}
SWAP = {"tile_m": 128, "tile_n": 136, "swap_ab": True, "split_k": 2, "split_k_reduce": "cluster"}


def test_changes_are_ratios_of_ratios_grouped_by_the_new_family():
    base = _record(21, {"639x6536x5224_nt": (0.7, PAIR_B), "1161x1424x11496_nn": (0.6, PAIR_B),
                        "100x4096x4096_nt": (1.0, SWAP), "4096x4096x4096_nt": (1.0, PAIR_B)})
    other = _record(21, {"639x6536x5224_nt": (0.84, PAIR_A), "1161x1424x11496_nn": (0.75, QUAD),
                         "100x4096x4096_nt": (0.99, {**SWAP, "model_us": 3.0}), "4096x4096x4096_nt": (1.02, PAIR_B)})
    rows, summary = compare(base["figures"], other["figures"])
    by_shape = {r["shape"]: r for r in rows}
    assert by_shape["639x6536x5224_nt"]["change"] == pytest.approx(1.2) and by_shape["639x6536x5224_nt"]["changed"]
    assert not by_shape["100x4096x4096_nt"]["changed"]  # the same configuration, another estimate
    assert summary["shapes"] == 4 and summary["changed"] == 2
    assert summary["changed_geomean"] == pytest.approx((1.2 * 1.25) ** 0.5)
    assert summary["unchanged_geomean"] == pytest.approx((0.99 * 1.02) ** 0.5)
    assert summary["families"] == {"clusters of four 2x2, persistent": (1, pytest.approx(1.25)),
                                   "pairs sharing A, persistent": (1, pytest.approx(1.2))}


def test_families_name_what_the_model_switches_offer():
    assert family(PAIR_B) == "pairs sharing B, stream-K"
    assert family({**PAIR_B, "tile_n": 192}) == "pairs sharing B (tile_n 192), stream-K"
    assert family({"tile_m": 128, "tile_n": 256, "persistent": True, "cluster_m": 4}) == \
        "clusters of four 4x1, persistent"
    assert family({**SWAP, "persistent": True}) == "swapped, persistent"
    assert family({"tile_m": 64, "tile_n": 96, "split_k": 4}) == "one tile a block, split-K 4"


def test_runs_with_an_epilogue_compare_too_and_other_seeds_are_refused(tmp_path, capsys):
    a, b, c = tmp_path / "a.json", tmp_path / "b.json", tmp_path / "c.json"
    a.write_text(json.dumps(_record(5, {"7x4096x4096_nt": (1.0, SWAP)}, "gemm_random_bias")))
    b.write_text(json.dumps(_record(5, {"7x4096x4096_nt": (1.1, {**SWAP, "split_k": 4})}, "gemm_random_bias")))
    c.write_text(json.dumps(_record(6, {"7x4096x4096_nt": (1.1, SWAP)})))
    assert main([str(a), str(b)]) == 0
    out = capsys.readouterr().out
    assert "7x4096x4096_nt" in out and "x1.100" in out and "1 configurations changed" in out
    assert main([str(a), str(c)]) == 2
    assert "must be drawn-shape records of the same seed; got seeds [5] and [6]" in capsys.readouterr().err
