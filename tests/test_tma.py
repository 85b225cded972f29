"""CPU tests of TMA copies and mbarriers: the kernels build, the PTX passes descriptors as
128-byte grid-constant parameters, the SASS has the TMA instructions, and misuse is explained."""

from __future__ import annotations

import re

import pytest

import mgpu_lab
from mgpu_lab import dsl
from mgpu_lab.compiler.compiled_kernel import KernelParam, TmaDescriptorSpec
from mgpu_lab.errors import KernelBuildError
from mgpu_lab.examples.scaled_add import make_scaled_add


def opcodes(sass: str) -> list[str]:
    return re.findall(r"\*/\s+(?:@!?U?P\w+\s+)?([A-Z][A-Z0-9_.]+)", sass)


def test_scaled_add_uses_tma_load_store_and_mbarriers():
    k = make_scaled_add(1024, 2048)
    ops = opcodes(k.compiled.sass)
    assert "UTMALDG.2D" in ops and "UTMASTG.2D" in ops
    assert any(op.startswith("SYNCS.ARRIVE.TRANS64") for op in ops)  # arrive.expect_tx
    assert any(op.startswith("SYNCS.PHASECHK") for op in ops)  # try_wait.parity
    assert not any(op.startswith(("LDL", "STL")) for op in ops)
    r = k.compiled.resources
    assert r.spill_stores_bytes == r.spill_loads_bytes == r.stack_frame_bytes == 0


def test_descriptors_are_128_byte_grid_constant_params():
    k = make_scaled_add(1024, 2048)
    ptx = k.compiled.ptx
    params = re.findall(r"\.param \.align 64 \.b8 (scaled_add_param_\d+)\[128\]", ptx)
    assert params == ["scaled_add_param_2", "scaled_add_param_3"]
    for p in params:  # read in place through its generic address, never copied to local memory
        assert re.search(rf"mov\.b64\s+%rd\d+, {p};", ptx)
    assert ptx.count("cvta.param.u64") == 2
    assert k.compiled.params == (KernelParam("array", 0), KernelParam("array", 1),
                                 KernelParam("tma", 0), KernelParam("tma", 1))
    # innermost dimension first, as cuTensorMapEncodeTiled wants them
    assert k.compiled.tma_descriptors == (
        TmaDescriptorSpec(0, "float32", (2048, 1024), (2048 * 4,), (256, 32), 0),
        TmaDescriptorSpec(1, "float32", (2048, 1024), (2048 * 4,), (256, 32), 0))


def test_one_descriptor_per_distinct_box():
    sd = mgpu_lab.ShapeDtype((256, 256), "bfloat16")

    def body(ctx, x, y, smem):
        a, b, bars = smem
        bars.init(1)
        for i in range(2):  # the same box twice: one descriptor
            ctx.async_copy(src_ref=x, dst_ref=a, gmem_slice=(dsl.ds(i * 64, 64), slice(0, 64)),
                           barrier=bars[0], swizzle=128)
        ctx.async_copy(src_ref=x, dst_ref=b, gmem_slice=(dsl.ds(0, 128), slice(0, 64)), barrier=bars[0],
                       swizzle=128)
        bars[0].wait(0)
        bars[0].wait(1)

    k = mgpu_lab.kernel(body, grid=1, block=128, in_shapes=sd, out_shapes=sd,
                        smem=(mgpu_lab.ShapeDtype((64, 64), "bfloat16"), mgpu_lab.ShapeDtype((128, 64), "bfloat16"),
                              mgpu_lab.Barriers(2)))
    boxes = [d.box_shape for d in k.compiled.tma_descriptors]
    assert boxes == [(64, 64), (64, 128)]
    assert opcodes(k.compiled.sass).count("UTMALDG.2D") == 3


def _build(copy_kwargs, shape=(256, 256), dtype="float32", smem_shape=(32, 64), **kw):
    sd = mgpu_lab.ShapeDtype(shape, dtype)

    def body(ctx, x, y, smem):
        buf, bars = smem
        kwargs = {"src_ref": x, "dst_ref": buf, "barrier": bars[0]}
        kwargs.update({k: v(x, y, buf, bars) if callable(v) else v for k, v in copy_kwargs.items()})
        ctx.async_copy(**kwargs)

    return mgpu_lab.kernel(body, grid=1, block=128, in_shapes=sd, out_shapes=sd,
                           smem=(mgpu_lab.ShapeDtype(smem_shape, dtype), mgpu_lab.Barriers(1)), **kw)


@pytest.mark.parametrize("copy_kwargs, shape, smem_shape, message", [
    ({"gmem_slice": (slice(0, 32), slice(0, 64))}, (256, 250), (32, 64),
     r"stride of 1000 bytes; TMA needs global strides that are multiples of 16 bytes"),
    ({"gmem_slice": (slice(0, 2), slice(0, 300))}, (256, 512), (2, 300),
     r"has 300 elements in dimension 1; TMA boxes allow 1 to 256"),
    ({"gmem_slice": (slice(0, 32), slice(0, 64)), "swizzle": 128}, (256, 256), (32, 64),
     r"innermost box dimension is 256 bytes \(64 elements\) but swizzle=128 allows at most 128 bytes"),
    ({"gmem_slice": (slice(0, 32), slice(0, 64)), "swizzle": 96}, (256, 256), (32, 64),
     r"swizzle must be one of None, 32, 64, 128"),
    ({"gmem_slice": (slice(0, 32), slice(0, 2))}, (256, 256), (32, 2),
     r"innermost box dimension is 8 bytes \(2 elements\); TMA needs a multiple of 16 bytes"),
    ({"gmem_slice": (slice(0, 16), slice(0, 64))}, (256, 256), (32, 64),
     r"the smem ref has shape \(32, 64\) but gmem_slice selects \(16, 64\)"),
    ({"gmem_slice": (slice(0, 32), slice(0, 64)), "barrier": None}, (256, 256), (32, 64),
     r"GMEM -> SMEM copy needs barrier="),
    ({"gmem_slice": (slice(0, 32), slice(0, 64)), "src_ref": lambda x, y, buf, bars: dsl.memref_slice(x, 0)},
     (256, 256), (32, 64), r"must be a kernel array argument itself"),
])
def test_tma_rules_are_explained(copy_kwargs, shape, smem_shape, message):
    with pytest.raises(KernelBuildError, match=message):
        _build(copy_kwargs, shape=shape, smem_shape=smem_shape)


def test_rank_above_five_is_rejected():
    shape = (2,) * 5 + (64,)
    with pytest.raises(KernelBuildError, match="rank 6; TMA supports ranks 1 to 5"):
        _build({"gmem_slice": ()}, shape=shape, smem_shape=shape)


def test_squeezed_dims_and_rank_3_boxes():
    k = _build({"gmem_slice": (3, dsl.ds(0, 8), slice(0, 64))}, shape=(4, 64, 64), smem_shape=(8, 64))
    [d] = k.compiled.tma_descriptors
    assert d.box_shape == (64, 8, 1) and d.global_shape == (64, 64, 4)
    assert d.global_strides_bytes == (64 * 4, 64 * 64 * 4)
    assert "UTMALDG.3D" in opcodes(k.compiled.sass)


def test_store_with_barrier_is_rejected():
    sd = mgpu_lab.ShapeDtype((64, 64), "float32")

    def body(ctx, x, y, smem):
        buf, bars = smem
        ctx.async_copy(src_ref=buf, dst_ref=y, barrier=bars[0])

    with pytest.raises(KernelBuildError, match="barrier= and arrive= apply to GMEM -> SMEM copies only"):
        mgpu_lab.kernel(body, grid=1, block=128, in_shapes=sd, out_shapes=sd,
                        smem=(mgpu_lab.ShapeDtype((64, 64), "float32"), mgpu_lab.Barriers(1)))


def test_scaled_add_rejects_rows_tma_cannot_stride():
    with pytest.raises(ValueError, match="TMA needs a multiple of 16 bytes"):
        make_scaled_add(64, 1001)


def test_barrier_helpers_track_phases_in_loops():
    from mgpu_lab.builder.barriers import BarrierArray

    sd = mgpu_lab.ShapeDtype((128,), "float32")

    def body(ctx, x, y, smem):
        (bars,) = smem
        assert isinstance(bars, BarrierArray) and len(bars) == 3
        bars.init(1)

        @dsl.for_range(0, 10)
        def _(i):
            bar = bars.wait_for_iteration(i, flip=True)
            bar.arrive()

    k = mgpu_lab.kernel(body, grid=1, block=128, in_shapes=sd, out_shapes=sd, smem=(mgpu_lab.Barriers(3),))
    ptx = k.compiled.ptx
    assert "mbarrier.try_wait.parity.shared::cta.b64" in ptx and "mbarrier.arrive.shared::cta.b64" in ptx
    with pytest.raises(KernelBuildError, match="IndexError: barrier index 3 is out of range for Barriers"):
        mgpu_lab.kernel(lambda ctx, x, y, s: s[0][3], grid=1, block=128, in_shapes=sd, out_shapes=sd,
                        smem=(mgpu_lab.Barriers(3),))


def test_tma_encoder_checks_specs_without_a_gpu():
    pytest.importorskip("cuda.bindings")
    from mgpu_lab.runtime.tma_descriptor import TmaEncoder, check_tma_spec

    ok = TmaDescriptorSpec(0, "bfloat16", (64, 128), (128,), (64, 64), 128)
    check_tma_spec(ok)
    TmaEncoder.from_dicts([{**ok.__dict__}])
    with pytest.raises(ValueError, match="multiples of 16 bytes"):
        check_tma_spec(TmaDescriptorSpec(0, "bfloat16", (63, 128), (126,), (63, 64), 0))
    with pytest.raises(ValueError, match=r"box dims must be in \[1, 256\]"):
        check_tma_spec(TmaDescriptorSpec(0, "float32", (1024,), (), (512,), 0))


@pytest.mark.parametrize("promotion", ["NONE", "L2_64B", "L2_128B", "L2_256B"])
def test_the_l2_promotion_probe_variable_takes_the_four_settings(monkeypatch, promotion):
    """MGPU_LAB_TMA_L2_PROMOTION (read at import, for probe_gemm_alignment.py) picks the
    descriptors' L2 promotion; anything else is refused by name before an encode."""
    pytest.importorskip("cuda.bindings")
    from cuda.bindings import driver

    from mgpu_lab.runtime import tma_descriptor

    spec = {**TmaDescriptorSpec(0, "bfloat16", (64, 128), (128,), (64, 64), 128).__dict__}
    monkeypatch.setattr(tma_descriptor, "_L2_PROMOTION", promotion)
    static = tma_descriptor.TmaEncoder.from_dicts([spec])._static[0]
    assert static[8] == getattr(driver.CUtensorMapL2promotion, "CU_TENSOR_MAP_L2_PROMOTION_" + promotion)
    monkeypatch.setattr(tma_descriptor, "_L2_PROMOTION", "256B")
    with pytest.raises(ValueError, match=r"^MGPU_LAB_TMA_L2_PROMOTION must be one of NONE, L2_64B, L2_128B, "
                                         r"L2_256B, got '256B'$"):
        tma_descriptor.TmaEncoder.from_dicts([spec])


def test_tma_loads_promote_128_bytes_by_default():
    """128 bytes (CUTLASS's): rows off the 128-byte line ran 8-17% faster than at 256 on the H200."""
    import os
    import subprocess
    import sys

    env = {k: v for k, v in os.environ.items() if k != "MGPU_LAB_TMA_L2_PROMOTION"}
    out = subprocess.run([sys.executable, "-c", "from mgpu_lab.runtime import tma_descriptor as t; "
                          "print(t._L2_PROMOTION)"], env=env, capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "L2_128B"


def test_async_copy_records_the_swizzle_of_planned_buffers(monkeypatch):
    import mgpu_lab.builder.launch_context as lc

    contexts = []
    original = lc.LaunchContext.__init__

    def record(self, **kwargs):
        original(self, **kwargs)
        contexts.append(self)

    monkeypatch.setattr(lc.LaunchContext, "__init__", record)
    from mgpu_lab.kernels.gemm import make_gemm

    make_gemm(256, 256, 128, tile_m=128, tile_n=256, stages=4, persistent=False, use_cache=False)
    assert contexts[-1].smem_swizzles == {(0, (4, 128, 64)): 128, (65536, (4, 4, 64, 64)): 128,
                                          (0, (2, 4, 64, 64)): 128}
