"""Errors from user input are short and point at the user: no library frames, the user's line,
checks that used to pass silently, warnings that used to hide in logs."""

from __future__ import annotations

import concurrent.futures
import functools
import os
import subprocess
import sys
import textwrap
import traceback
import warnings

import pytest

import mgpu_lab
from mgpu_lab import dsl
from mgpu_lab.dsl import c, gpu, memref
from mgpu_lab.errors import KernelBuildError, PerformanceWarning, ResourceLimitError
from mgpu_lab.user_errors import is_library_file
from test_errors_build import build

THIS_FILE = __file__


def _frames(error: BaseException) -> list[str]:
    return [f.filename for f in traceback.extract_tb(error.__traceback__)]


def test_bad_argument_traceback_has_only_user_frames():
    with pytest.raises(ResourceLimitError) as e:
        build(block=2048)
    frames = _frames(e.value)
    assert frames and all(not is_library_file(f) for f in frames), frames
    assert frames[-1].endswith("test_errors_build.py")  # the build() helper is the innermost user frame


def test_trace_failure_shows_the_body_line_and_no_library_frames():
    def body(ctx, a, out, smem):
        if memref.load(a, [c(0)]) > 0:  # a traced value has no truth value: dsl.when/if_else
            pass

    with pytest.raises(KernelBuildError) as e:
        build(body)
    assert all(not is_library_file(f) for f in _frames(e.value))
    cause = e.value.__cause__
    assert cause is not None and [f for f in _frames(cause)] == [THIS_FILE]  # just the body's line


def test_a_bug_inside_mgpu_lab_keeps_its_whole_traceback(monkeypatch):
    from mgpu_lab.compiler import compile as compile_mod

    def broken(*a, **kw):
        raise RuntimeError("internal bug")

    monkeypatch.setattr(compile_mod, "verify", broken)
    with pytest.raises(RuntimeError, match="internal bug") as e:
        build()
    assert any(is_library_file(f) for f in _frames(e.value))


def test_full_traceback_switch(monkeypatch):
    monkeypatch.setenv("MGPU_LAB_FULL_TRACEBACK", "1")
    with pytest.raises(ResourceLimitError) as e:
        build(block=2048)
    assert any(is_library_file(f) for f in _frames(e.value))


def test_script_error_output_is_short(tmp_path):
    script = tmp_path / "user_script.py"
    script.write_text(textwrap.dedent("""
        import mgpu_lab
        sd = mgpu_lab.ShapeDtype((128,), "float32")
        def body(ctx, a, out, smem):
            pass
        mgpu_lab.kernel(body, grid=1, block=(32, 32, 2), in_shapes=sd, out_shapes=sd)
    """))
    out = subprocess.run([sys.executable, str(script)], capture_output=True, text=True, timeout=120)
    assert out.returncode == 1
    lines = out.stderr.strip().splitlines()
    assert "mgpu_lab/" not in out.stderr, out.stderr
    assert lines[-1] == ("mgpu_lab.errors.ResourceLimitError: block: at most 1024 threads per block, "
                         "got (32, 32, 2) = 2048")
    assert len(lines) <= 5, out.stderr


def test_smem_over_the_targets_limit_fails_at_build_time_without_a_gpu(monkeypatch):
    import mgpu_lab.runtime.device as device

    monkeypatch.setattr(device, "max_dynamic_smem_bytes", lambda dev=None: None)  # as on a machine without GPU
    with pytest.raises(ResourceLimitError) as e:
        build(smem=mgpu_lab.ShapeDtype((240 * 1024,), "uint8"), target="sm_90a")
    assert ("smem: the kernel needs 245760 bytes of shared memory (245760 B of buffers) but sm_90a allows "
            "at most 232448 bytes (227 KiB) per block") in str(e.value)
    build(smem=mgpu_lab.ShapeDtype((227 * 1024,), "uint8"), target="sm_90a")  # exactly the limit builds
    with pytest.raises(ResourceLimitError, match="sm_89 allows at most 101376 bytes"):
        build(smem=mgpu_lab.ShapeDtype((100 * 1024,), "uint8"), target="sm_89")


@pytest.mark.parametrize("block", [96, (32, 5)])
def test_setmaxnreg_needs_whole_warpgroups(block):
    def body(ctx, a, out, smem):
        dsl.setmaxnreg(232)

    with pytest.raises(KernelBuildError) as e:
        build(body, block=block)
    msg = str(e.value)
    assert "setmaxnreg: the block must be whole warpgroups (a multiple of 128 threads)" in msg
    assert "dsl.setmaxnreg(232)" in msg  # the user's line
    build(body, block=256)


def test_wgmma_serialized_by_ptxas_warns_at_the_users_line():
    from mgpu_lab.builder.wgmma import WGMMAAccumulator, wgmma, wgmma_commit_group, wgmma_wait_group

    a_sd, b_sd = mgpu_lab.ShapeDtype((64, 64), "bfloat16"), mgpu_lab.ShapeDtype((64, 64), "bfloat16")

    def serialized(ctx, a, b, out, smem):
        a_s, b_s, bars = smem
        bars.init(2)
        ctx.async_copy(src_ref=a, dst_ref=a_s, barrier=bars[0], swizzle=128)
        ctx.async_copy(src_ref=b, dst_ref=b_s, barrier=bars[0], swizzle=128)
        bars[0].wait(0)
        acc = wgmma(WGMMAAccumulator.zeros(64), a_s, b_s)
        gpu.printf("a call between two wgmmas\n")  # ptxas must serialize around it
        acc = wgmma(acc, a_s, b_s)
        wgmma_commit_group()
        wgmma_wait_group(0, acc)

    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        mgpu_lab.kernel(serialized, grid=1, block=128, in_shapes=(a_sd, b_sd),
                        out_shapes=mgpu_lab.ShapeDtype((64, 64), "float32"),
                        smem=(a_sd, b_sd, mgpu_lab.Barriers(1)), use_cache=False)
    [w] = [w for w in caught if issubclass(w.category, PerformanceWarning)]
    msg = str(w.message)
    assert "ptxas serialized the wgmma instructions of kernel 'serialized'" in msg
    assert f'File "{THIS_FILE}", line' in msg and "gpu.printf(" in msg and "(C75" in msg
    assert w.filename == THIS_FILE  # attributed to the user's call, not to mgpu_lab


def test_a_failing_tune_candidate_is_reported_and_the_tune_goes_on():
    from mgpu_lab.tuning import compile_candidates
    from mgpu_lab.examples.vector_add import make_vector_add

    def make_kernel(block):
        if block == 64:
            raise RuntimeError("no kernel for 64")
        if block == 128:
            return {"block": 128}["missing"]  # KeyError
        return make_vector_add(1 << 12, block=block, use_cache=False)

    with concurrent.futures.ThreadPoolExecutor(2) as pool:
        cands = compile_candidates(make_kernel, {"block": [64, 128, 256]}, executor=pool)
    assert [c.status for c in cands] == ["failed-build", "failed-build", "built"]
    assert cands[0].reason.startswith("RuntimeError: no kernel for 64 (raised by make_kernel at ")
    assert cands[1].reason.startswith("KeyError: 'missing'") and THIS_FILE in cands[1].reason


def test_corrupt_tuning_cache_file_is_a_miss(tmp_path):
    from mgpu_lab.tuning.candidates import cached_best_config as _cached_best_config

    path = tmp_path / "t.json"
    for junk in ("{ not json", '{"median_ms": 1}', '{"best_config": [1, 2]}'):
        path.write_text(junk)
        with pytest.warns(UserWarning, match="ignoring the corrupt tuning cache file"):
            assert _cached_best_config(path) is None
        assert not path.exists()
    path.write_text('{"best_config": {"block": 128}, "median_ms": 0.1}')
    assert _cached_best_config(path) == {"block": 128}


@pytest.mark.gpu
def test_tune_with_a_corrupt_cache_file_tunes_again(tmp_path, monkeypatch):
    import cupy
    import numpy as np

    from mgpu_lab.examples.vector_add import make_vector_add
    from mgpu_lab.tuning.cache_key import key_digest, tune_dir, tune_key
    from mgpu_lab.tuning.timers import CudaTimer

    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path))
    n = 1 << 16
    x = cupy.asarray(np.random.default_rng().standard_normal(n).astype(np.float32))
    make = functools.partial(make_vector_add, n)
    space = {"block": [128, 256]}
    path = tune_dir() / f"{key_digest(tune_key(CudaTimer().device_model(0), make, [(x, x)], space))}.json"
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text("{ truncated")
    with pytest.warns(UserWarning, match="corrupt tuning cache file"):
        result = mgpu_lab.tune(make, space, args=(x, x), reference=lambda a, b: a + b,
                               executor=concurrent.futures.ThreadPoolExecutor(2))
    assert result.best is not None and not result.from_cache
    assert mgpu_lab.tune(make, space, args=(x, x)).from_cache


KERNELS = textwrap.dedent("""
    from mgpu_lab.examples.vector_add import make_vector_add

    def small():
        return make_vector_add(1 << 12)

    def broken_body():
        import mgpu_lab
        sd = mgpu_lab.ShapeDtype((4,), "float32")
        def body(ctx, a, out, smem):
            undefined_name
        return mgpu_lab.kernel(body, grid=1, block=32, in_shapes=sd, out_shapes=sd)

    def raises():
        return {}["nope"]

    def empty_space():
        return dict(make_kernel=small, space={}, args=(1,))
""")


def _cli(args, cwd):
    # With no PYTHONPATH set this leaves a trailing empty entry, which Python reads as the working
    # folder: the CLI must hold up against that too.
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([os.path.dirname(os.path.dirname(THIS_FILE)),
                                                       os.environ.get("PYTHONPATH", "")])}
    return subprocess.run([sys.executable, "-m", "mgpu_lab.cli", *args], capture_output=True, text=True,
                          cwd=cwd, env=env, timeout=300)


@pytest.mark.parametrize("target, message", [
    ("kernels.py:broken_body", "mgpu-lab compile: KernelBuildError: tracing kernel 'body' failed at"),
    ("kernels.py:raises", "mgpu-lab compile: KERNEL: kernels.py:raises() failed at kernels.py, line 15: KeyError: 'nope'"),
    ("syntax.py:x", "mgpu-lab compile: KERNEL: importing syntax.py failed at syntax.py, line 1: SyntaxError"),
    ("imports.py:x", "mgpu-lab compile: KERNEL: importing imports.py failed at imports.py, line 2: "
                     "ModuleNotFoundError: No module named 'no_such_module'"),
])
def test_cli_user_errors_exit_2_without_a_traceback(tmp_path, target, message):
    (tmp_path / "kernels.py").write_text(KERNELS)
    (tmp_path / "syntax.py").write_text("def x(:\n")
    (tmp_path / "imports.py").write_text("x = 1\nimport no_such_module\n")
    out = _cli(["compile", target], tmp_path)
    assert out.returncode == 2, out.stderr
    assert "Traceback" not in out.stderr
    assert out.stderr.startswith(message), out.stderr


def test_cli_tune_with_a_bad_space_exits_2(tmp_path):
    (tmp_path / "kernels.py").write_text(KERNELS)
    out = _cli(["tune", "kernels.py:empty_space"], tmp_path)
    assert out.returncode == 2 and "Traceback" not in out.stderr
    assert out.stderr.startswith("mgpu-lab tune: ValueError: space: expected a non-empty dict"), out.stderr


def test_a_json_py_in_the_working_folder_does_not_break_the_cli(tmp_path):
    (tmp_path / "json.py").write_text("raise RuntimeError('the user json.py was imported')\n")
    (tmp_path / "kernels.py").write_text(KERNELS)
    out = _cli(["compile", "kernels.py:small", "--resources"], tmp_path)
    assert out.returncode == 0, out.stderr
    assert "vector_add sm_90a:" in out.stdout


def test_a_kernel_file_named_like_a_stdlib_module(tmp_path):
    (tmp_path / "json.py").write_text(KERNELS)
    out = _cli(["compile", "json.py:small", "--resources"], tmp_path)
    assert out.returncode == 0, out.stderr
    assert "vector_add sm_90a:" in out.stdout


def test_mosaic_cell_errors_say_cell_in_n(tmp_path):
    IPython = pytest.importorskip("IPython")  # noqa: N806
    from IPython.core.interactiveshell import InteractiveShell

    ip = InteractiveShell.instance()
    try:
        ip.run_line_magic("load_ext", "mgpu_lab")
        ip.run_cell("import mgpu_lab\nsd = mgpu_lab.ShapeDtype((128,), 'float32')", store_history=True)
        count = ip.execution_count
        result = ip.run_cell("%%mosaic k --grid 1 --block 128 --in a=sd --out o=sd\nx = 1\ny = undefined_name\n",
                             store_history=True)
        error = result.error_in_exec
        assert isinstance(error, KernelBuildError)
        assert f"Cell In[{count}], line 3, in k" in str(error)  # the editor's line: %%mosaic is line 1
        assert "y = undefined_name" in str(error)
        assert all(not is_library_file(f) for f in _frames(error))
    finally:
        InteractiveShell.clear_instance()
    assert IPython is not None


@pytest.mark.gpu
def test_launch_argument_errors_show_the_callers_line():
    import cupy
    import numpy as np

    from mgpu_lab.errors import LaunchArgumentError
    from mgpu_lab.examples.vector_add import make_vector_add

    k = make_vector_add(1 << 12)
    x = cupy.zeros(1 << 12, dtype=np.float64)  # the wrong dtype
    with pytest.raises(LaunchArgumentError) as e:
        k(x, x)
    frames = _frames(e.value)
    assert frames == [THIS_FILE], frames


def test_barrier_count_must_be_an_int():
    with pytest.raises(ValueError, match=r"Barriers.count: expected an int >= 1, got 2.5"):
        mgpu_lab.Barriers(2.5)


def test_failed_trace_conversion_leaves_no_output(tmp_path, monkeypatch):
    from mgpu_lab.cli import main
    from mgpu_lab.profiler.trace import Trace

    def half_written(self, path):
        with open(path, "w") as f:
            f.write('{"traceEvents": [')
        raise OSError(28, "No space left on device")

    source = _saved_trace(tmp_path)
    monkeypatch.setattr(Trace, "save_chrome_json", half_written)
    out = tmp_path / "out" / "t.json"
    out.parent.mkdir()
    with pytest.raises(OSError, match="No space left"):
        main(["trace", "convert", str(source), "-o", str(out)])
    assert list(out.parent.iterdir()) == []


def _saved_trace(tmp_path):
    from mgpu_lab.profiler.decode import decode_buffer
    from test_profiler_decode import T0, Block, begin, end, make_spec, write_buffer

    spec = make_spec(units=1, capacity=8)
    blk = Block(sm=0, block_id=0, timer_start=T0, timer_end=T0 + 1000, clock_start=0, clock_end=1000,
                units=[[(begin(0), 100), (end(0), 900)]])
    return decode_buffer(write_buffer(spec, [blk]), spec, kernel_name="k").save(tmp_path / "t.npz")


def _bad_gemm():
    from mgpu_lab.kernels.gemm import make_gemm

    return make_gemm(0, 256, 256)


def _bad_fp8():
    from mgpu_lab.kernels.gemm.fp8 import make_fp8_gemm

    return make_fp8_gemm(256, 256, 256, dtype="bfloat16")


def _bad_fp8_block():
    from mgpu_lab.kernels.gemm.fp8_block import make_fp8_block_scaled_gemm

    return make_fp8_block_scaled_gemm(256, 256, 256, tile_n=256)


def _bad_attention():
    from mgpu_lab.kernels.attention import make_attention

    return make_attention(1, 2, 512, 512, 100)


def _bad_gemm_definition():
    from mgpu_lab.kernels.gemm import gemm_definition

    return gemm_definition(256, -1, 256)


def _bad_attention_definition():
    from mgpu_lab.kernels.attention import attention_definition

    return attention_definition(1, 2, 512, 512, 128, profile_tiles=0)


def _bad_fused():
    from mgpu_lab.kernels.gemm.epilogues import fused

    return fused(256, 256, activation="tanh")


def _bad_view():
    from mgpu_lab.widgets import show

    return show(build(), "registers")


def _bad_export_path():
    return build().export(3)


@pytest.mark.parametrize("make, message", [
    (_bad_gemm, "gemm: m must be a positive int, got 0"),
    (_bad_fp8, "dtype must be 'float8_e4m3fn', got 'bfloat16'"),
    (_bad_fp8_block, r"tile_n must be one of \(32, 64, 128\)"),
    (_bad_attention, r"attention: head_dim must be one of \(64, 128, 256\)"),
    (_bad_gemm_definition, "gemm: n must be a positive int, got -1"),
    (_bad_attention_definition, "attention: profile_tiles must be an int >= 1"),
    (_bad_fused, r"fused: activation must be one of \('relu', 'gelu', 'silu'\) or None, got 'tanh'"),
    (_bad_view, r"what: expected one of \['all', 'sass', 'smem', 'ir'\], got 'registers'"),
    (_bad_export_path, r"path: expected a str or os.PathLike naming a .py file, got int 3")])
def test_library_entry_points_show_only_the_callers_frames(make, message):
    with pytest.raises(ValueError, match=message) as e:
        make()
    frames = _frames(e.value)
    assert frames and all(not is_library_file(f) for f in frames), frames
    assert frames[-1] == THIS_FILE  # the line in the caller's own function that made the call


@pytest.mark.parametrize("shape", [(2.5, 4), "abc", (True, 2), None])
def test_shape_dtype_names_a_shape_that_is_not_ints(shape):
    with pytest.raises(TypeError, match=r"ShapeDtype shape: expected an int or a tuple of ints, got ") as e:
        mgpu_lab.ShapeDtype(shape, "float32")
    assert all(not is_library_file(f) for f in _frames(e.value))
