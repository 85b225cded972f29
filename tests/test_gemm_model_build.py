"""The model's pick builds (compiles) for random shapes it has never seen: m log-uniform in
1..16384, n and k multiples of 8 in 256..32768, either layout; the tuned table switched off.
A small sample (12) keeps it near 30 s; the on-disk kernel cache makes reruns fast."""

from __future__ import annotations

import math
import random

import pytest

from mgpu_lab.kernels.gemm import make_gemm
from mgpu_lab.kernels.gemm.configs import MODEL_ENV, TABLE_ENV, gemm_config


def _shapes(count: int, seed: int) -> list[tuple[int, int, int, bool]]:
    rng = random.Random(seed)
    out = []
    for _ in range(count):
        m = round(math.exp(rng.uniform(0, math.log(16384))))
        n, k = (8 * round(math.exp(rng.uniform(math.log(256), math.log(32768))) / 8) for _ in range(2))
        out.append((m, n, k, rng.random() < 0.5))
    return out


@pytest.mark.parametrize("m, n, k, transpose_b", _shapes(12, 28))
def test_the_models_pick_builds(monkeypatch, m, n, k, transpose_b):
    monkeypatch.setenv(TABLE_ENV, "0")
    monkeypatch.setenv(MODEL_ENV, "1")
    picked = gemm_config(m, n, k, transpose_b=transpose_b)
    assert picked["source"] == "model"
    kern = make_gemm(m, n, k, transpose_b=transpose_b)
    t = kern.program.notes.get("tiling") if hasattr(kern.program, "notes") and kern.program.notes else None
    if t is not None:  # one-launch programs carry their tiling
        assert (t.tile_m, t.tile_n) == (picked["tile_m"], picked["tile_n"])
