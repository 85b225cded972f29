"""The device side of the profiler: compiled away when off, bounded when on, and (GPU) traces."""

from __future__ import annotations

import re
import warnings

import numpy as np
import pytest

import mgpu_lab
from mgpu_lab import dsl
from mgpu_lab.dsl import arith, c, ir, vector
from mgpu_lab.errors import ResourceLimitError

N = 1 << 20
SD = mgpu_lab.ShapeDtype((N,), "float32")


def _with_regions(ctx, a, b, out, smem):
    i = arith.muli(arith.addi(arith.muli(dsl.block_idx(), c(256)), dsl.thread_idx()), c(4))
    v4 = ir.VectorType.get([4], ir.F32Type.get())
    with ctx.named_region("load"):
        x = vector.load(v4, a, [i])
        y = vector.load(v4, b, [i])
    with ctx.named_region("store"):
        with ctx.named_region("add"):
            s = arith.addf(x, y)
        vector.store(s, out, [i])


def _without_regions(ctx, a, b, out, smem):
    i = arith.muli(arith.addi(arith.muli(dsl.block_idx(), c(256)), dsl.thread_idx()), c(4))
    v4 = ir.VectorType.get([4], ir.F32Type.get())
    x = vector.load(v4, a, [i])
    y = vector.load(v4, b, [i])
    s = arith.addf(x, y)
    vector.store(s, out, [i])


def build(body, **kw):
    return mgpu_lab.kernel(body, grid=N // 1024, block=256, in_shapes=(SD, SD), out_shapes=SD, **kw)


def instructions(sass: str) -> list[str]:
    return [re.sub(r"\s+", " ", line.strip()) for line in sass.splitlines() if re.search(r"/\*[0-9a-f]{4}\*/", line)]


def test_regions_compile_away_without_profiling():
    off = build(_with_regions).compiled
    plain = build(_without_regions).compiled
    assert instructions(off.sass) == instructions(plain.sass)
    assert off.profiler is None and off.dynamic_smem_bytes == 0


def test_profiled_kernel_records_regions_in_smem():
    k = build(_with_regions, profile=True).compiled
    spec = k.profiler
    assert spec.region_names == ("load", "store", "add")
    assert spec.units_per_block == 2 and spec.unit == "warpgroup"
    [rec] = [b for b in k.smem_layout if b.kind == "profiler"]
    assert rec.nbytes == spec.words_per_block * 4 == k.dynamic_smem_bytes
    ops = instructions(k.sass)
    assert any("CS2R" in op and "SR_CLOCKLO" in op or "S2R" in op and "SR_CLOCKLO" in op for op in ops)
    assert any("GLOBALTIMER" in op for op in ops)
    assert k.params[-1].kind == "profile"


def test_per_warp_recording_and_bad_options():
    k = build(_with_regions, profile=True, profile_unit="warp", profile_capacity=8).compiled
    assert k.profiler.units_per_block == 8 and k.profiler.capacity == 8
    with pytest.raises(ValueError, match="profile_unit: expected 'warpgroup' or 'warp', got 'thread'"):
        build(_with_regions, profile=True, profile_unit="thread")
    with pytest.raises(ValueError, match="profile_capacity: expected a positive int"):
        build(_with_regions, profile=True, profile_capacity=0)


def test_profiler_buffer_counts_against_the_smem_budget(monkeypatch):
    import mgpu_lab.runtime.device as device

    monkeypatch.setattr(device, "max_dynamic_smem_bytes", lambda dev=None: 232448)
    smem = mgpu_lab.ShapeDtype((200 * 1024,), "uint8")
    with pytest.raises(ResourceLimitError, match=r"204800 B of buffers \+ \d+ B of profiler buffer"):
        mgpu_lab.kernel(lambda ctx, a, b, o, s: _with_regions(ctx, a, b, o, s), grid=N // 1024, block=256,
                        in_shapes=(SD, SD), out_shapes=SD, smem=smem, profile=True, profile_capacity=4096,
                        profile_buffer="smem")
    # profile_buffer="auto" (the default) sends the events to global memory instead
    from mgpu_lab.errors import ProfilerNote

    with pytest.warns(ProfilerNote, match=r"does not fit beside the kernel's 204800 B of shared memory"):
        k = mgpu_lab.kernel(lambda ctx, a, b, o, s: _with_regions(ctx, a, b, o, s), grid=N // 1024, block=256,
                            in_shapes=(SD, SD), out_shapes=SD, smem=smem, profile=True, profile_capacity=4096)
    assert k.compiled.profiler.buffer == "global"


@pytest.mark.gpu
def test_gpu_trace_has_every_region_on_every_warpgroup(rng):
    import cupy

    from mgpu_lab.runtime.device import sm_count

    k = build(_with_regions, profile=True)
    a, b = (cupy.asarray(rng.standard_normal(N).astype(np.float32)) for _ in range(2))
    out = cupy.full((N,), np.nan, np.float32)
    start, end = cupy.cuda.Event(), cupy.cuda.Event()
    start.record()
    k(a, b, out=out)
    end.record()
    end.synchronize()
    kernel_ns = cupy.cuda.get_elapsed_time(start, end) * 1e6
    np.testing.assert_allclose(out.get(), a.get() + b.get(), rtol=1e-6)
    trace = k.last_trace
    blocks, units = k.compiled.num_blocks, 2
    assert trace.num_events == blocks * units * 3
    for name in ("load", "store", "add"):
        sub = trace.filter(region=name)
        assert sub.num_events == blocks * units
        assert set(zip(sub.block.tolist(), sub.unit.tolist())) == {(b, u) for b in range(blocks) for u in range(units)}
    assert (trace.end_ns >= trace.start_ns).all()
    assert trace.duration_ns <= kernel_ns * 1.05 + 2000
    assert int(trace.sm.max()) < sm_count() and int(trace.sm.min()) >= 0
    assert set(trace.filter(region="add").depth.tolist()) == {1}
    assert trace.dropped == 0


@pytest.mark.gpu
def test_gpu_overflow_is_bounded_and_reported(rng):
    import cupy

    from mgpu_lab.profiler.decode import ProfilerOverflowWarning

    k = build(_with_regions, profile=True, profile_capacity=4)
    a = cupy.asarray(rng.standard_normal(N).astype(np.float32))
    out = cupy.full((N,), np.nan, np.float32)
    k(a, a, out=out)
    np.testing.assert_allclose(out.get(), 2 * a.get(), rtol=1e-6)  # data intact
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        trace = k.last_trace
    assert trace.dropped == k.compiled.num_blocks * 2 * 2  # 6 events per unit, 4 kept
    msg = " ".join(str(w.message) for w in caught if issubclass(w.category, ProfilerOverflowWarning))
    assert f"{k.compiled.num_blocks * 2 * 2} events were dropped" in msg
    assert "a capacity of 6 would have held them all" in msg
