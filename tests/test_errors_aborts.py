"""Inputs that used to abort the Python process inside LLVM/MLIR now raise Python errors.

Each case runs in a child process: if it still aborted (LLVM ERROR, an MLIR assertion), the
child dies with a signal and this test fails instead of pytest itself dying.
"""

from __future__ import annotations

import subprocess
import sys
import textwrap

import pytest

import mgpu_lab
from mgpu_lab.compiler.kernel_names import check_kernel_name, is_valid_kernel_name, kernel_name_from
from mgpu_lab.compiler.options import CompileOptions
from mgpu_lab.errors import CompileOptionError, KernelNameError, ShapeError

PRELUDE = """
import mgpu_lab
from mgpu_lab.dsl import memref, c
SD = mgpu_lab.ShapeDtype((128,), "float32")
def _copy(ctx, a, out, smem):
    memref.store(memref.load(a, [c(0)]), out, [c(0)])
def build(body=_copy, **kw):
    args = dict(grid=1, block=128, in_shapes=SD, out_shapes=SD, use_cache=False)
    args.update(kw)
    return mgpu_lab.kernel(body, **args)
"""


def run_child(code: str) -> subprocess.CompletedProcess:
    script = PRELUDE + textwrap.dedent(code)
    return subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=300)


def expect_python_error(code: str, error: str, message: str) -> None:
    """The child raises `error` with `message` in it: a Python exit, no abort signal."""
    wrapped = textwrap.dedent(f"""
        try:
        {textwrap.indent(textwrap.dedent(code), '    ')}
        except Exception as e:
            print("RAISED", type(e).__name__, e)
        else:
            print("NO ERROR")
    """)
    proc = run_child(wrapped)
    assert proc.returncode == 0, f"child died (exit {proc.returncode}):\n{proc.stderr[-2000:]}"
    assert f"RAISED {error}" in proc.stdout, proc.stdout + proc.stderr[-2000:]
    assert message in proc.stdout, proc.stdout


def test_function_with_non_ascii_name_builds_under_an_ascii_name():
    proc = run_child("""
        def añadir(ctx, a, out, smem):
            memref.store(memref.load(a, [c(0)]), out, [c(0)])
        k = build(añadir)
        print("NAME", k.name, ".entry anadir(" in k.compiled.ptx)
    """)
    assert proc.returncode == 0, f"child died (exit {proc.returncode}):\n{proc.stderr[-2000:]}"
    assert "NAME anadir True" in proc.stdout


def test_explicit_non_ascii_name_is_rejected_with_a_suggestion():
    expect_python_error('build(name="kérnel²")', "KernelNameError",
                        "name: expected an ASCII identifier of at most 200 characters")
    expect_python_error('build(name="kérnel²")', "KernelNameError", "got 'kérnel²'; e.g. 'kernel2'")


def test_mosaic_cell_with_non_ascii_name():
    pytest.importorskip("IPython")
    proc = run_child("""
        from IPython.core.interactiveshell import InteractiveShell
        ip = InteractiveShell.instance()
        ip.run_line_magic("load_ext", "mgpu_lab")
        ip.user_ns.update(SD=SD, memref=memref, c=c)
        ip.run_cell_magic("mosaic", "vécteur --grid 1 --block 128 --in a=SD --out o=SD",
                          "memref.store(memref.load(a, [c(0)]), o, [c(0)])\\n")
        print("NAME", ip.user_ns["vécteur"].name)
    """)
    assert proc.returncode == 0, f"child died (exit {proc.returncode}):\n{proc.stderr[-2000:]}"
    assert "NAME vecteur" in proc.stdout


@pytest.mark.parametrize("option, message", [
    ("opt_level=4", "opt_level: expected an int 0-3 (ptxas -O0..-O3), got 4"),
    ("opt_level=True", "opt_level: expected an int 0-3"),
    ('ptx_version="ptx60"', "ptx_version: expected one of ptx70,"),
    ('ptx_version="ptx99"', "got 'ptx99'"),
    ('target="sm_bogus"', "target: expected one of sm_80, sm_86"),
    ('target="sm_90a features=+ptx60"', "target: expected one of"),
    ('target="sm_100a", ptx_version="ptx80"', "ptx_version: sm_100a needs PTX ISA 8.6 or newer (ptx86), got 'ptx80'"),
    ("min_blocks_per_sm=2**40", "min_blocks_per_sm: at most 32 blocks are resident on an SM"),
    ("mbarrier_timeout_s=-1", "mbarrier_timeout_s: expected a positive number of seconds or None, got -1"),
    ('optlevel=2', "optlevel: not a compile option; the options are cache_dir,"),
])
def test_bad_compile_options_raise_instead_of_aborting(option, message):
    expect_python_error(f"build({option})", "CompileOptionError", message)


def test_blackwell_target_compiles_with_the_ptx_it_needs():
    proc = run_child("""
        k = build(target="sm_100a")
        print("PTX", [l for l in k.compiled.ptx.splitlines() if l.startswith((".version", ".target"))])
    """)
    assert proc.returncode == 0, f"child died (exit {proc.returncode}):\n{proc.stderr[-2000:]}"
    assert "'.version 8.6', '.target sm_100a'" in proc.stdout


def test_shape_whose_bytes_overflow_int64_is_rejected_with_its_size():
    expect_python_error('build(in_shapes=mgpu_lab.ShapeDtype((2**62, 4), "float32"))', "ShapeError",
                        "shape: (4611686018427387904, 4) float32 is 73786976294838206464 bytes, more than "
                        "the 9223372036854775807 (2**63 - 1) bytes")


def test_options_are_checked_when_made():
    with pytest.raises(CompileOptionError, match="target: expected one of"):
        CompileOptions(target="sm_70")
    with pytest.raises(CompileOptionError, match="ptxas_args: expected a tuple of str, got '-v'"):
        CompileOptions(ptxas_args="-v")
    with pytest.raises(CompileOptionError, match="use_cache: expected True or False, got 'no'"):
        CompileOptions(use_cache="no")
    assert CompileOptions(target="sm_90a", ptx_version="ptx85").ptx_version == "ptx85"


def test_bad_timeout_in_the_environment_is_named(monkeypatch):
    monkeypatch.setenv("MGPU_LAB_MBARRIER_TIMEOUT_S", "ten")
    with pytest.raises(CompileOptionError, match="MGPU_LAB_MBARRIER_TIMEOUT_S: expected a number of seconds, got 'ten'"):
        CompileOptions.from_env()


def test_unsupported_gpu_as_default_target_names_it(monkeypatch):
    from mgpu_lab.compiler import target

    monkeypatch.setattr(target, "device_capability", lambda: (7, 0))
    with pytest.raises(CompileOptionError, match=r"the current GPU is sm_70; pass target= explicitly.*got 'sm_70'"):
        target.default_target()


@pytest.mark.parametrize("text, name", [("añadir", "anadir"), ("kérnel²", "kernel2"), ("1st", "k_1st"),
                                        ("_", "kernel"), ("my-kernel", "my_kernel"), ("λ", "kernel"),
                                        ("a" * 300, "a" * 200)])
def test_names_from_functions_become_valid(text, name):
    assert kernel_name_from(text) == name and is_valid_kernel_name(name)


@pytest.mark.parametrize("bad", ["", "_", "1st", "a b", "a-b", "kérnel", "a" * 201, "../x"])
def test_invalid_explicit_names(bad):
    with pytest.raises(KernelNameError, match="name: expected an ASCII identifier"):
        check_kernel_name(bad)


def test_shape_dtype_itself_rejects_the_overflow():
    with pytest.raises(ShapeError, match="more than the 9223372036854775807"):
        mgpu_lab.ShapeDtype((2**62, 4), "float32")
    assert mgpu_lab.ShapeDtype((2**60, 4), "uint8").nbytes == 2**62
