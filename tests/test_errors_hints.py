"""Issue 29 item 4: the first mistakes in a kernel body are errors at the user's line that say
how to fix them, with no MLIR or mgpu_lab frames, in scripts, notebooks and %%mosaic cells."""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap
import traceback

import pytest

import mgpu_lab
from mgpu_lab import dsl
from mgpu_lab.errors import KernelBuildError
from mgpu_lab.user_errors import is_library_file

THIS_FILE = __file__
SD = mgpu_lab.ShapeDtype((128,), "float32")
SD2 = mgpu_lab.ShapeDtype((8, 16), "float32")
BF = mgpu_lab.ShapeDtype((128,), "bfloat16")
I32 = mgpu_lab.ShapeDtype((128,), "int32")


def _build(body, in_shapes=SD):
    return mgpu_lab.kernel(body, grid=1, block=128, in_shapes=in_shapes, out_shapes=SD, use_cache=False)


def _failure(body, in_shapes=SD) -> KernelBuildError:
    with pytest.raises(KernelBuildError) as e:
        _build(body, in_shapes)
    return e.value


def _frames(error: BaseException) -> list[str]:
    return [f.filename for f in traceback.extract_tb(error.__traceback__)]


def _v4():
    return dsl.ir.VectorType.get([4], dsl.ir.F32Type.get())


def test_python_int_index_names_the_index_and_the_fix_at_the_users_line():
    def body(ctx, a, out, smem):
        dsl.memref.load(a, [0])

    error = _failure(body)
    assert "index 0: expected an index value, got the Python int 0; write dsl.c(0)" in str(error)
    assert "dsl.memref.load(a, [0])" in str(error)  # the user's line
    cause = error.__cause__
    assert isinstance(cause, TypeError) and _frames(cause) == [THIS_FILE]  # no MLIR frames
    assert all(not is_library_file(f) for f in _frames(error))


@pytest.mark.parametrize("statement, message", [
    ("dsl.memref.store(dsl.memref.load(a, [dsl.c(0)]), out, [dsl.c(0), 5][1:])",
     "memref.store: index 0: expected an index value, got the Python int 5; write dsl.c(5)"),
    ("dsl.vector.load(_v4(), a, [4])", "vector.load: index 0: expected an index value, got the Python int 4"),
    ("dsl.vector.store(dsl.vector.load(_v4(), a, [dsl.c(0)]), out, [8])",
     "vector.store: index 0: expected an index value, got the Python int 8; write dsl.c(8)"),
    ("dsl.memref.load(a, [1.5])", "index 0: expected an index value, got the Python float 1.5"),
    ("dsl.arith.addi(dsl.thread_idx(), 1)",
     "arith.addi: rhs: expected a value of type index, got the Python int 1; write dsl.c(1), or use the operator"),
    ("dsl.arith.mulf(2, dsl.memref.load(a, [dsl.c(0)]))",
     "arith.mulf: lhs: expected a value of type f32, got the Python int 2; write dsl.c(2.0, 'float32')"),
])
def test_a_python_number_where_a_value_is_needed(statement, message):
    def body(ctx, a, out, smem):
        eval(statement)

    error = _failure(body)
    assert message in str(error), str(error)
    assert all(not is_library_file(f) for f in _frames(error.__cause__))


def test_an_upstream_builder_given_a_number_names_the_argument():
    """Builders outside the checked ones (here upstream arith, as `mgpu_lab._mlir` gives it)
    still get the argument named from the bindings' 'Operand N ... must be a Value'."""
    from mgpu_lab._mlir import arith, memref

    def body(ctx, a, out, smem):
        memref.load(a, [dsl.c(0), 3][1:])

    assert "memref.load: index 0: expected an index value, got the Python int 3; write dsl.c(3)" in str(_failure(body))

    def add(ctx, a, out, smem):
        arith.addi(dsl.thread_idx(), 7)

    assert "arith.addi: rhs: expected a value of type index, got the Python int 7" in str(_failure(add))


@pytest.mark.parametrize("indices, count", [("[dsl.c(0)]", 1), ("[dsl.c(0), dsl.c(1), dsl.c(2)]", 3)])
def test_wrong_index_count_names_the_rank_and_the_count(indices, count):
    def body(ctx, a, out, smem):
        eval(f"dsl.memref.load(a, {indices})")

    message = str(_failure(body, SD2))
    assert (f"memref.load: indices: expected 2 indices, one per dimension of the rank-2 memref<8x16xf32>, "
            f"got {count}") in message
    assert "KernelCompileError" not in message  # at trace time, not from the verifier


def test_vector_load_with_too_few_indices():
    def body(ctx, a, out, smem):
        dsl.vector.load(_v4(), a, [dsl.c(0)])

    assert "vector.load: indices: expected 2 indices, one per dimension of the rank-2" in str(_failure(body, SD2))


@pytest.mark.parametrize("statement, types, fix", [
    ("dsl.memref.load(a, [dsl.c(0)]) + dsl.memref.load(b, [dsl.c(0)])", "(f32 and bf16)",
     "dsl.cast(right, 'float32') or dsl.cast(left, 'bfloat16')"),
    ("dsl.arith.addf(dsl.memref.load(a, [dsl.c(0)]), dsl.memref.load(b, [dsl.c(0)]))",
     "expected a value of lhs's type f32, got bf16", "dsl.cast(rhs, 'float32') or dsl.cast(lhs, 'bfloat16')"),
])
def test_f32_and_bf16_mixed_name_both_types_and_the_cast(statement, types, fix):
    def body(ctx, a, b, out, smem):
        eval(statement)

    message = str(_failure(body, (SD, BF)))
    assert types in message and fix in message, message


@pytest.mark.parametrize("statement, message", [
    ("dsl.memref.load(i, [dsl.c(0)]) + dsl.thread_idx()",
     "operand types differ (i32 and index); convert one with dsl.cast(value, type): dsl.cast(right, 'int32') "
     "or dsl.cast(left, dsl.ir.IndexType.get())"),
    ("dsl.memref.load(a, [dsl.memref.load(i, [dsl.c(0)])])",
     "memref.load: index 0: expected an index value, got a value of type i32; "
     "convert it with dsl.cast(value, dsl.ir.IndexType.get())"),
    ("dsl.memref.store(dsl.c(1, 'int32'), out, [dsl.c(0)])",
     "memref.store: value: expected a value of type f32 (the memref's element type), got i32; "
     "convert it with dsl.cast(value, 'float32')"),
])
def test_i32_where_index_or_f32_is_needed(statement, message):
    def body(ctx, a, i, out, smem):
        eval(statement)

    assert message in str(_failure(body, (SD, I32)))


def test_the_checked_dialects_still_build_correct_kernels():
    def body(ctx, a, out, smem):
        i = dsl.thread_idx() * 4
        v = dsl.vector.load(_v4(), a, [i])
        dsl.vector.store(v, out, [i])
        x = dsl.memref.load(a, [dsl.c(0)])
        dsl.memref.store(dsl.arith.addf(x, x), out, [dsl.c(0)])

    mgpu_lab.kernel(body, grid=1, block=32, in_shapes=SD, out_shapes=SD, use_cache=False)
    assert dsl.memref.subview is dsl.memref._upstream.subview  # every other name is upstream's
    assert "load" in dir(dsl.memref) and "LoadOp" in dir(dsl.vector)


def test_script_output_has_no_mlir_frames_and_the_hint(tmp_path):
    script = tmp_path / "user_script.py"
    script.write_text(textwrap.dedent("""
        import mgpu_lab
        from mgpu_lab import dsl
        sd = mgpu_lab.ShapeDtype((128,), "float32")
        def body(ctx, a, out, smem):
            x = dsl.memref.load(a, [0])
        mgpu_lab.kernel(body, grid=1, block=128, in_shapes=sd, out_shapes=sd)
    """))
    # this checkout's mgpu_lab, whatever an installed one says
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([os.path.dirname(os.path.dirname(THIS_FILE)),
                                                       os.environ.get("PYTHONPATH", "")])}
    out = subprocess.run([sys.executable, str(script)], capture_output=True, text=True, timeout=120, env=env)
    assert out.returncode == 1
    assert "mgpu_lab/" not in out.stderr and "mlir/" not in out.stderr, out.stderr
    assert out.stderr.count(f'File "{script}"') == 3  # the body's line (cause), the call, the body again
    assert out.stderr.strip().endswith(
        "TypeError: memref.load: index 0: expected an index value, got the Python int 0; write dsl.c(0)")


@pytest.fixture
def shell():
    pytest.importorskip("IPython")
    from IPython.core.interactiveshell import InteractiveShell

    ip = InteractiveShell.instance()
    ip.run_line_magic("load_ext", "mgpu_lab")
    ip.run_cell("import mgpu_lab\nfrom mgpu_lab import dsl\nsd = mgpu_lab.ShapeDtype((128,), 'float32')",
                store_history=True)
    yield ip
    InteractiveShell.clear_instance()


def test_a_plain_notebook_cell_is_named_cell_in_n(shell):
    count = shell.execution_count
    result = shell.run_cell("def body(ctx, a, o, smem):\n    x = 1\n    dsl.memref.load(a, [0])\n"
                            "mgpu_lab.kernel(body, grid=1, block=128, in_shapes=sd, out_shapes=sd)\n",
                            store_history=True)
    error = result.error_in_exec
    assert isinstance(error, KernelBuildError)
    assert f"Cell In[{count}], line 3, in body" in str(error), str(error)
    assert "ipython-input" not in str(error)
    assert all(not is_library_file(f) for f in _frames(error.__cause__))


def test_a_mosaic_cell_reports_the_editors_line(shell):
    count = shell.execution_count
    result = shell.run_cell("%%mosaic k --grid 1 --block 128 --in a=sd --out o=sd\nx = 1\ny = dsl.memref.load(a, [0])\n",
                            store_history=True)
    error = result.error_in_exec
    assert isinstance(error, KernelBuildError)
    # The editor shows the %%mosaic line as line 1, so the load is on line 3.
    assert f"Cell In[{count}], line 3, in k\n    y = dsl.memref.load(a, [0])" in str(error), str(error)
    assert "write dsl.c(0)" in str(error)
    assert all(not is_library_file(f) for f in _frames(error))


def test_body_from_cell_starts_where_the_editor_does():
    from mgpu_lab.magics import body_from_cell

    scope: dict = {}
    exec(body_from_cell("cell_body", [], "x = 1\nraise ValueError(x)\n", "<cell 9>", first_line=2), {}, scope)
    with pytest.raises(ValueError) as e:
        scope["cell_body"](None, None)
    assert traceback.extract_tb(e.value.__traceback__)[-1].lineno == 3
