"""GPU: persistent GEMM tiles that store C in boxes of mixed widths (MGPU_LAB_GEMM_STORE_BOXES=mixed,
GemmTiling.store_boxes) against a float32 matmul, fresh random inputs, outputs poisoned with NaN
first; ragged shapes, so the last tile's boxes are clipped at C's edges."""

from __future__ import annotations

import pytest
from test_gemm_gpu import _run

from mgpu_lab.kernels.gemm import pieces

pytestmark = pytest.mark.gpu


@pytest.mark.parametrize("m, n, k, transpose_b, kwargs", [
    (2048, 5632, 2048, True, {"tile_m": 128, "tile_n": 176, "persistent": "pingpong"}),
    (2000, 5000, 1000, True, {"tile_m": 128, "tile_n": 176, "persistent": "pingpong", "cluster_m": 2}),
    (1999, 3001, 520, False, {"tile_m": 128, "tile_n": 160, "persistent": "pingpong"}),
    (1000, 2900, 968, True, {"tile_m": 128, "tile_n": 176, "persistent": True}),
    (3100, 2000, 1000, True, {"tile_m": 128, "tile_n": 224, "persistent": "stream_k"}),
    (700, 1800, 456, True, {"tile_m": 128, "tile_n": 176, "persistent": True, "out_dtype": "float32"}),
], ids=["176-pingpong", "176-pingpong-pairs", "160-pingpong-nn", "176-persistent", "224-stream-k", "176-f32-out"])
def test_mixed_store_boxes(m, n, k, transpose_b, kwargs, rng, monkeypatch):
    monkeypatch.setattr(pieces, "STORE_BOXES", "mixed")
    tol = 1e-4 if kwargs.get("out_dtype") == "float32" else 1e-2
    assert _run(m, n, k, rng, transpose_b, runs=1, **kwargs) <= tol
