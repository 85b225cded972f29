"""%%mosaic and %mosaic_show in a headless IPython shell."""

from __future__ import annotations

import pytest

IPython = pytest.importorskip("IPython")

from mgpu_lab.magics import MagicArgumentError, parse_magic_line  # noqa: E402

CELL = """\
i = arith.muli(arith.addi(arith.muli(dsl.block_idx(), c(256)), dsl.thread_idx()), c(4))
v4 = ir.VectorType.get([4], ir.F32Type.get())
with ctx.named_region("add"):
    vector.store(arith.addf(vector.load(v4, a, [i]), vector.load(v4, b, [i])), out, [i])
"""


@pytest.fixture
def shell():
    from IPython.core.interactiveshell import InteractiveShell

    ip = InteractiveShell.instance()
    ip.run_line_magic("load_ext", "mgpu_lab")
    ip.run_cell("import mgpu_lab\nfrom mgpu_lab import dsl\nfrom mgpu_lab.dsl import arith, c, ir, vector\n"
                "N = 1 << 16\nsd = mgpu_lab.ShapeDtype((N,), 'float32')")
    yield ip
    InteractiveShell.clear_instance()


def test_parse_magic_line():
    args = parse_magic_line("vadd --grid N//1024 --block 256 --in a=sd --in b=sd --out out=sd --profile --show sass,ir")
    assert args.name == "vadd" and args.grid == "N//1024" and args.inputs == ["a=sd", "b=sd"]
    assert args.profile and args.show == ["sass", "ir"]


@pytest.mark.parametrize("line, message", [
    ("vadd --block 256", "the following arguments are required: --grid"),
    ("1bad --grid 1 --block 1", "NAME must be a Python identifier, got '1bad'"),
    ("k --grid 1 --block 1 --in sd", "--in expects NAME=EXPR (e.g. a=sd), got 'sd'"),
    ("k --grid 1 --block 1 --show sass,flame", "--show takes a comma list of timeline, sass, smem, ir; got flame"),
])
def test_bad_magic_lines(line, message):
    with pytest.raises(MagicArgumentError) as e:
        parse_magic_line(line)
    assert message in str(e.value)


def test_cell_builds_a_kernel_and_prints_text_views(shell, capsys):
    shell.run_cell_magic("mosaic", "vadd --grid 'N // 1024' --block 256 --in a=sd --in b=sd --out out=sd "
                                   "--profile --show sass,smem,ir,timeline", CELL)
    kernel = shell.user_ns["vadd"]
    assert kernel.compiled.name == "vadd" and kernel.compiled.profiler.region_names == ("add",)
    text = capsys.readouterr().out
    assert "vadd: sm_90a grid=(64, 1, 1) block=(256, 1, 1)" in text
    assert "SASS:" in text and "profiler" in text and "passes: input, canonicalize" in text  # --show ir keeps them
    assert "no profiled call yet" in text
    # The line map points into the cell itself.
    files = {s.file for s in kernel.compiled.line_map}
    assert files == {f"Cell In[{shell.execution_count}]"}  # IPython's own label for the cell
    # The %%mosaic line is the cell's line 1 in the editor, and in the registered source.
    source = kernel.compiled.sources[f"Cell In[{shell.execution_count}]"]
    assert source.startswith("%%mosaic vadd --grid") and source.split("\n", 1)[1] == CELL
    lines = {s.line for s in kernel.compiled.line_map}
    assert 4 in lines  # 0-based: the vector.store line of the cell

    shell.run_line_magic("mosaic_show", "vadd smem")
    assert "shared memory:" in capsys.readouterr().out


def test_errors_in_the_cell_point_at_the_cell_line(shell):
    from mgpu_lab.errors import KernelBuildError

    bad = "x = memref_that_does_not_exist\n"
    with pytest.raises(KernelBuildError) as e:
        shell.run_cell_magic("mosaic", "k --grid 1 --block 128 --in a=sd --out o=sd", bad)
    assert "line 2" in str(e.value) and "memref_that_does_not_exist" in str(e.value)  # line 1: %%mosaic


def test_option_expression_errors_name_the_option(shell):
    with pytest.raises(MagicArgumentError, match=r"--grid='nope \+ 1' could not be evaluated: NameError"):
        shell.run_cell_magic("mosaic", "k --grid 'nope + 1' --block 128 --in a=sd --out o=sd", "pass\n")


def test_mosaic_show_unknown_kernel(shell):
    with pytest.raises(MagicArgumentError, match="'nothing' is not a kernel built by %%mosaic"):
        shell.run_line_magic("mosaic_show", "nothing")


def test_tune_needs_args():
    with pytest.raises(MagicArgumentError, match="--tune needs --args"):
        parse_magic_line("k --grid 1 --block 128 --in a=sd --out o=sd --tune '{\"B\": [1]}'")


TUNED_CELL = """\
i = arith.muli(arith.addi(arith.muli(dsl.block_idx(), c(BLOCK)), dsl.thread_idx()), c(4))
v4 = ir.VectorType.get([4], ir.F32Type.get())
vector.store(arith.addf(vector.load(v4, a, [i]), vector.load(v4, b, [i])), out, [i])
"""


@pytest.mark.gpu
def test_tune_picks_a_block_size_from_the_cell(shell, capsys, tmp_path, monkeypatch):
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path))
    shell.run_cell("import cupy, numpy as np\nx = cupy.asarray(np.random.default_rng().standard_normal(N, dtype=np.float32))")
    shell.run_cell_magic("mosaic", "vt --grid 'N // (4 * BLOCK)' --block BLOCK --in a=sd --in b=sd --out out=sd "
                                   "--tune '{\"BLOCK\": [64, 128, 256]}' --args '(x, x)' --reference 'lambda a, b: a + b'",
                         TUNED_CELL)
    result = shell.user_ns["vt_tuning"]
    assert [c.status for c in result.candidates] == ["timed"] * 3
    kernel = shell.user_ns["vt"]
    assert kernel.compiled.block[0] == result.best_config["BLOCK"]
    x = shell.user_ns["x"]
    assert (kernel(x, x) == 2 * x).all()
    assert "median_ms" in capsys.readouterr().out
