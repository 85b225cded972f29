"""Every mgpu-lab command: output, errors and exit codes."""

from __future__ import annotations

import subprocess
import sys
import textwrap

import pytest

from mgpu_lab.cli import main
from test_profiler_decode import T0, Block, begin, end, make_spec, write_buffer

KERNEL_FILE = textwrap.dedent("""
    from mgpu_lab.examples.vector_add import make_vector_add

    def small():
        return make_vector_add(1 << 12)

    not_a_kernel = 42

    def tune_problem():
        import functools
        import cupy
        import numpy as np
        n = 1 << 22
        a = cupy.asarray(np.random.default_rng().standard_normal(n).astype(np.float32))
        return dict(make_kernel=functools.partial(make_vector_add, n), space={"block": [128, 256]},
                    args=(a, a), reference=lambda x, y: x + y)

    def bad_problem():
        return [1, 2]
""")


@pytest.fixture
def kernel_file(tmp_path):
    path = tmp_path / "mykernels.py"
    path.write_text(KERNEL_FILE)
    return path


@pytest.fixture
def trace_file(tmp_path):
    from mgpu_lab.profiler.decode import decode_buffer

    spec = make_spec(units=1, capacity=8)
    blk = Block(sm=3, block_id=0, timer_start=T0, timer_end=T0 + 2000, clock_start=100, clock_end=2100,
                units=[[(begin(0), 200), (end(0), 700), (begin(1), 800), (end(1), 1800)]])
    trace = decode_buffer(write_buffer(spec, [blk]), spec, kernel_name="demo_kernel")
    return trace.save(tmp_path / "t.npz")


def test_help_lists_every_command():
    out = subprocess.run([sys.executable, "-m", "mgpu_lab.cli", "--help"], capture_output=True, text=True)
    assert out.returncode == 0
    for command in ("demo", "compile", "export", "trace"):
        assert command in out.stdout


def test_demo_compiles_every_example(capsys):
    assert main(["demo"]) == 0
    text = capsys.readouterr().out
    for name in ("vector_add", "block_sum", "tiled_copy"):
        assert name in text
    assert "regs" in text and "SASS instr" in text


def test_compile_prints_resources_and_sass(kernel_file, capsys, tmp_path):
    assert main(["compile", f"{kernel_file}:small", "--resources", "--sass", "--out", str(tmp_path / "o")]) == 0
    text = capsys.readouterr().out
    assert "vector_add sm_90a:" in text and "registers" in text and "LDG.E.128" in text
    assert (tmp_path / "o" / "vector_add.cubin").exists()


@pytest.mark.parametrize("target, message", [
    ("nofile.py", "KERNEL: expected FILE.py:NAME, got 'nofile.py'"),
    ("missing.py:small", "KERNEL: file 'missing.py' does not exist"),
    ("{file}:nothing", "has no 'nothing'"),
    ("{file}:not_a_kernel", "is neither a Kernel nor a function returning one (got int)"),
])
def test_compile_bad_kernel_argument_exits_2(kernel_file, capsys, target, message):
    assert main(["compile", target.format(file=kernel_file)]) == 2
    assert message in capsys.readouterr().err


def test_export_writes_a_module(kernel_file, tmp_path, capsys):
    out = tmp_path / "exported_vadd.py"
    assert main(["export", f"{kernel_file}:small", str(out)]) == 0
    assert out.exists() and "ProgramLauncher(PROGRAM" in out.read_text()
    assert main(["export", f"{kernel_file}:small", str(tmp_path / "bad-name.py")]) == 2
    assert "is not a Python identifier" in capsys.readouterr().err


def test_trace_summary_and_convert(trace_file, tmp_path, capsys):
    assert main(["trace", "summary", str(trace_file)]) == 0
    text = capsys.readouterr().out
    assert "demo_kernel: 2 events" in text and "load" in text and "mma" in text
    assert main(["trace", "convert", str(trace_file), "-o", str(tmp_path / "t.json")]) == 0
    assert (tmp_path / "t.json").read_text().startswith("{")
    assert main(["trace", "convert", str(trace_file), "-o", str(tmp_path / "t.perfetto-trace")]) == 0
    assert (tmp_path / "t.perfetto-trace").stat().st_size > 0


def test_trace_bad_files_exit_2(tmp_path, capsys):
    assert main(["trace", "summary", str(tmp_path / "none.npz")]) == 2
    assert "does not exist" in capsys.readouterr().err
    junk = tmp_path / "junk.npz"
    junk.write_bytes(b"not a trace")
    assert main(["trace", "summary", str(junk)]) == 2
    assert "is not a trace saved by Trace.save" in capsys.readouterr().err


def test_usage_errors_exit_2():
    out = subprocess.run([sys.executable, "-m", "mgpu_lab.cli", "compile"], capture_output=True, text=True)
    assert out.returncode == 2 and "the following arguments are required: kernel" in out.stderr


def test_tune_bad_setup_exits_2(kernel_file, capsys):
    assert main(["tune", f"{kernel_file}:bad_problem"]) == 2
    assert "must return a dict with make_kernel, space, args" in capsys.readouterr().err
    assert main(["tune", "nocolon"]) == 2


@pytest.mark.gpu
def test_tune_command_prints_the_table_and_exports_the_best(kernel_file, tmp_path, capsys, monkeypatch):
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path))
    out = tmp_path / "best_vadd.py"
    assert main(["tune", f"{kernel_file}:tune_problem", "--export", str(out)]) == 0
    text = capsys.readouterr().out
    assert "median_ms" in text and "best {'block':" in text
    assert out.exists()


@pytest.mark.gpu
def test_demo_runs_and_checks_every_example_on_the_gpu(capsys):
    assert main(["demo"]) == 0
    text = capsys.readouterr().out
    assert text.count("ok (rel. error") == 5 and "FAILED" not in text


def test_the_demo_says_which_compile_times_are_cache_hits():
    """A second run loads every kernel from the on-disk cache: its times are loads, and say so."""
    from mgpu_lab.demo import run_demo

    first, second = [], []
    assert run_demo(first.append) == 0 and run_demo(second.append) == 0
    assert all("(cache hit)" in line for line in second[1:]), second
