"""`mgpu_lab.bench.measure`: CUDA-event medians with an L2 flush or rotating inputs."""

from __future__ import annotations

import pytest

import mgpu_lab


@pytest.mark.parametrize("kw, message", [
    (dict(inputs=[]), "inputs: expected a non-empty sequence"),
    (dict(iters=0), "warmup, iters: expected ints"),
    (dict(warmup=-1), "warmup, iters: expected ints"),
])
def test_bad_arguments_name_the_argument(kw, message):
    with pytest.raises(ValueError, match=message):
        mgpu_lab.bench.measure(lambda *a: None, **kw)


@pytest.mark.gpu
def test_measure_times_each_run_and_rotates_inputs():
    import cupy

    from mgpu_lab.examples.vector_add import make_vector_add

    n = 1 << 22
    k = make_vector_add(n)
    sets = [(cupy.ones(n, cupy.float32), cupy.ones(n, cupy.float32)) for _ in range(3)]
    seen = []
    t = mgpu_lab.bench.measure(lambda a, b: seen.append(id(a)) or k(a, b), inputs=sets, warmup=2, iters=9)
    assert len(t.runs_ms) == 9 and all(ms > 0 for ms in t.runs_ms)
    assert seen == [id(sets[i % 3][0]) for i in range(2 + 9)]  # call i (warm-up included) uses set i % 3
    flushed = mgpu_lab.bench.measure(lambda: k(*sets[0]), warmup=2, iters=5)
    assert len(flushed.runs_ms) == 5 and flushed.median_ms > 0
