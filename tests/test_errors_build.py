"""Errors raised while building and compiling: each names the argument or the user's line."""

from __future__ import annotations

import pytest

import mgpu_lab
from mgpu_lab.dsl import arith, c, llvm, memref, nvvm
from mgpu_lab.errors import KernelBuildError, KernelCompileError, PtxasError, ResourceLimitError

SD = mgpu_lab.ShapeDtype((128,), "float32")
THIS_FILE = __file__


def _noop(ctx, a, out, smem):
    memref.store(memref.load(a, [c(0)]), out, [c(0)])


def build(body=_noop, **kw):
    args = dict(grid=1, block=128, in_shapes=SD, out_shapes=SD, use_cache=False)
    args.update(kw)
    return mgpu_lab.kernel(body, **args)


@pytest.mark.parametrize("kw, message", [
    (dict(block=(1025,)), "block: dimension x may be at most 1024, got 1025"),
    (dict(block=(32, 32, 2)), "block: at most 1024 threads per block, got (32, 32, 2) = 2048"),
    (dict(block=(1, 1, 65)), "block: dimension z may be at most 64, got 65"),
    (dict(grid=(1, 70000)), "grid: dimension y may be at most 65535, got 70000"),
    (dict(grid=0), "grid: every dimension must be >= 1, got (0, 1, 1)"),
    (dict(grid=6, cluster=4), "grid: dimension x (6) must be a multiple of the cluster's (4)"),
    (dict(grid=16, cluster=16), "cluster: at most 8 blocks per cluster, got (16, 1, 1) = 16"),
])
def test_launch_dimensions_out_of_range(kw, message):
    with pytest.raises(ResourceLimitError) as e:
        build(**kw)
    assert message in str(e.value)


def test_bad_dims_type_names_the_argument():
    with pytest.raises(TypeError, match=r"block: expected an int or a tuple of 1-3 ints, got '128'"):
        build(block="128")


def test_bad_dtype_and_shape_name_the_argument():
    with pytest.raises(TypeError, match=r"dtype: expected one of .*got 'float128x'"):
        mgpu_lab.ShapeDtype((4,), "float128x")
    with pytest.raises(ValueError, match=r"shape: expected positive dimensions, got \(4, 0\)"):
        mgpu_lab.ShapeDtype((4, 0), "float32")
    with pytest.raises(TypeError, match=r"in_shapes\[1\]: expected a ShapeDtype"):
        build(in_shapes=(SD, 3))


def test_body_that_is_not_callable():
    with pytest.raises(TypeError, match="body: expected a callable"):
        mgpu_lab.kernel(42, grid=1, block=1)


def test_exception_while_tracing_points_at_the_users_line():
    def body(ctx, a, out, smem):
        x = memref.load(a, [c(0)])
        y = x + 1 if x > 0 else x  # a traced value has no Python truth value: TypeError here
        memref.store(y, out, [c(0)])

    with pytest.raises(KernelBuildError) as e:
        build(body)
    msg = str(e.value)
    assert f'File "{THIS_FILE}"' in msg and "y = x + 1 if x > 0" in msg and "TypeError" in msg
    assert "dsl.when" in msg and "dsl.if_else" in msg
    assert isinstance(e.value.__cause__, TypeError)


def test_verifier_failure_shows_the_diagnostic_and_the_users_line():
    from mgpu_lab._mlir import arith as upstream_arith  # dsl.arith refuses the mix at trace time already

    def body(ctx, a, out, smem):
        x = memref.load(a, [c(0)])
        y = upstream_arith.addf(x, c(1.0, "float16"))  # f32 + f16: invalid
        memref.store(y, out, [c(0)])

    with pytest.raises(KernelCompileError) as e:
        build(body)
    msg = str(e.value)
    assert "'arith.addf' op requires the same type for all operands and results" in msg
    assert f'File "{THIS_FILE}", line' in msg and 'upstream_arith.addf(x, c(1.0, "float16"))' in msg
    assert "see current operation" not in msg


def test_pass_failure_names_the_pass_and_the_users_line():
    def body(ctx, a, out, smem):
        nvvm.wgmma_fence_aligned()  # Hopper-only: fails when compiling for sm_80

    with pytest.raises(KernelCompileError) as e:
        build(body, target="sm_80")
    msg = str(e.value)
    assert "pass 'nvvm-attach-target{chip=sm_80" in msg
    assert "'nvvm.wgmma.fence.aligned' op is not supported on sm_80" in msg
    assert "nvvm.wgmma_fence_aligned()  # Hopper-only" in msg
    assert "pass pipeline failed" not in msg.lower()


def test_ptxas_failure_shows_ptxas_message_and_the_users_line():
    def body(ctx, a, out, smem):
        llvm.inline_asm(None, [], "bogus.instruction;", "", has_side_effects=True)

    with pytest.raises(PtxasError) as e:
        build(body)
    msg = str(e.value)
    assert "Not a name of any known instruction: 'bogus'" in msg
    assert f'comes from File "{THIS_FILE}"' in msg and '"bogus.instruction;"' in msg


def test_smem_over_the_device_limit_gives_both_numbers(monkeypatch):
    import mgpu_lab.runtime.device as device

    monkeypatch.setattr(device, "max_dynamic_smem_bytes", lambda dev=None: 232448)
    big = mgpu_lab.ShapeDtype((240 * 1024,), "uint8")
    with pytest.raises(ResourceLimitError) as e:
        build(smem=big)
    assert "needs 245760 bytes of shared memory" in str(e.value)
    assert "allows at most 232448 bytes per block" in str(e.value)


def test_smem_tree_with_a_bad_leaf_names_its_path():
    with pytest.raises(TypeError, match=r"smem\.b\.1: expected ShapeDtype, Barriers, Union"):
        build(smem={"a": SD, "b": (SD, "oops")})
