"""The parallel tune on real GPUs: one timing worker per GPU, candidates that trap or hang on the
device cost their worker a restart and are reported, the rest are timed and checked."""

from __future__ import annotations

import functools

import numpy as np
import pytest

import mgpu_lab
from mgpu_lab import dsl
from mgpu_lab.examples.vector_add import make_vector_add

pytestmark = pytest.mark.gpu

N = 1 << 22
BLOCK = 128
_SD = mgpu_lab.ShapeDtype((N,), "float32")


def _trap_kernel() -> mgpu_lab.Kernel:
    def trap(ctx, a, b, out, smem):
        dsl.llvm.intr_trap()

    return mgpu_lab.kernel(trap, grid=1, block=BLOCK, in_shapes=(_SD, _SD), out_shapes=_SD)


def _hang_kernel() -> mgpu_lab.Kernel:
    def hang(ctx, a, b, out, barriers):
        barriers.init(1)
        barriers[0].wait(0)  # nobody arrives: never returns

    return mgpu_lab.kernel(hang, grid=1, block=BLOCK, in_shapes=(_SD, _SD), out_shapes=_SD,
                           smem=mgpu_lab.Barriers(1))


def make_candidate(kind: str, block: int) -> mgpu_lab.Kernel:
    if kind == "trap":
        return _trap_kernel()
    if kind == "hang":
        return _hang_kernel()
    return make_vector_add(N, block=block)


def make_inputs():
    rng = np.random.default_rng(1)
    return [tuple(rng.standard_normal(N, dtype=np.float32) for _ in range(2)) for _ in range(2)]


def test_faults_and_hangs_cost_their_worker_only(tmp_path, monkeypatch):
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path))
    space = {"kind": ["ok", "trap", "hang"], "block": [64, 128, 256, 512]}
    result = mgpu_lab.tune(make_candidate, space, args=make_inputs, reference=lambda a, b: a + b, gpus="all",
                           timeout_s=10.0, progress=False)
    by = {(c.config["kind"], c.config["block"]): c for c in result.candidates}
    for block in space["block"]:
        assert by["ok", block].status == "timed" and by["ok", block].rel_error == 0.0
        assert by["trap", block].status in ("fault", "crashed"), by["trap", block].reason
        assert by["hang", block].status == "hung"
    assert result.best_config["kind"] == "ok"
    a, b = make_inputs()[0]
    import cupy

    out = result.best_kernel(cupy.asarray(a), cupy.asarray(b))
    np.testing.assert_array_equal(out.get(), a + b)
    print(result.to_dataframe().to_string())


def test_a_gemm_space_on_every_gpu(tmp_path, monkeypatch):
    from mgpu_lab.builder.dtypes import numpy_dtype
    from mgpu_lab.kernels.gemm import make_gemm

    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path))
    rng = np.random.default_rng(2)
    a, b = (rng.standard_normal((1024, 1024), dtype=np.float32).astype(numpy_dtype("bfloat16")) for _ in range(2))
    ref = a.astype(np.float32) @ b.astype(np.float32)
    space = {"tile_n": [128, 256], "stages": [3, 4], "persistent": [False, True]}
    result = mgpu_lab.tune(functools.partial(make_gemm, 1024, 1024, 1024), space, args=(a, b),
                           reference=lambda *_: ref, gpus="all", progress=False)
    timed = [c for c in result.candidates if c.status == "timed"]
    assert len(timed) == 8 and all(c.rel_error < 1e-2 for c in timed)
    assert result.best in timed and result.best.retimed_ms is not None
