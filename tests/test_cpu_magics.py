"""%%mosaic on the CPU: inputs and outputs bind to the cell's names in order; --cluster, --smem reach the kernel."""

from __future__ import annotations

import pytest

IPython = pytest.importorskip("IPython")

from mgpu_lab.magics import MagicArgumentError, parse_magic_line  # noqa: E402

# The cell runs once, at trace time: its asserts check which memref each name is bound to.
BINDING_CELL = """\
assert ir.MemRefType(a.type).shape == [16], ir.MemRefType(a.type).shape
assert ir.MemRefType(b.type).shape == [32, 8], ir.MemRefType(b.type).shape
assert str(ir.MemRefType(b.type).element_type) == "i32"
assert ir.MemRefType(first.type).shape == [48]
assert ir.MemRefType(second.type).shape == [8, 4]
assert str(ir.MemRefType(second.type).element_type) == "f16"
bound_names.append("checked")
"""


@pytest.fixture
def shell():
    from IPython.core.interactiveshell import InteractiveShell

    ip = InteractiveShell.instance()
    ip.run_line_magic("load_ext", "mgpu_lab")
    ip.run_cell("import mgpu_lab\nfrom mgpu_lab import dsl\nfrom mgpu_lab.dsl import arith, c, ir, vector\n"
                "bound_names = []\n"
                "A = mgpu_lab.ShapeDtype((16,), 'float32')\nB = mgpu_lab.ShapeDtype((32, 8), 'int32')\n"
                "O1 = mgpu_lab.ShapeDtype((48,), 'float32')\nO2 = mgpu_lab.ShapeDtype((8, 4), 'float16')")
    yield ip
    InteractiveShell.clear_instance()


def test_inputs_and_outputs_bind_in_order(shell):
    shell.run_cell_magic("mosaic", "two_in_two_out --grid 1 --block 128 --in a=A --in b=B "
                                   "--out first=O1 --out second=O2", BINDING_CELL)
    assert shell.user_ns["bound_names"] == ["checked"]
    compiled = shell.user_ns["two_in_two_out"].compiled
    assert [(s.shape, s.dtype) for s in compiled.inputs] == [((16,), "float32"), ((32, 8), "int32")]
    assert [(s.shape, s.dtype) for s in compiled.outputs] == [((48,), "float32"), ((8, 4), "float16")]


def test_swapped_declarations_swap_the_binding(shell):
    from mgpu_lab.errors import KernelBuildError

    with pytest.raises(KernelBuildError, match=r"AssertionError: \[32, 8\]"):
        shell.run_cell_magic("mosaic", "swapped --grid 1 --block 128 --in a=B --in b=A "
                                       "--out first=O1 --out second=O2", BINDING_CELL)


@pytest.mark.parametrize("cluster, grid, expected", [("'(2, 1, 1)'", 4, (2, 1, 1)), ("CL", 2, (1, 2, 1)),
                                                     (None, 2, (1, 1, 1))])
def test_cluster_grid_block_and_smem_reach_the_kernel(shell, cluster, grid, expected):
    shell.run_cell("CL = (1, 2, 1)\nG = %d" % grid)
    line = "k --grid '(G, 2)' --block 128 --in a=A --out first=O1 --smem 'mgpu_lab.ShapeDtype((256,), \"float32\")'"
    if cluster:
        line += f" --cluster {cluster}"
    shell.run_cell_magic("mosaic", line, "pass\n")
    compiled = shell.user_ns["k"].compiled
    assert tuple(compiled.cluster) == expected
    assert tuple(compiled.grid) == (grid, 2, 1) and tuple(compiled.block) == (128, 1, 1)
    assert compiled.dynamic_smem_bytes >= 256 * 4


def test_cluster_expression_errors_name_the_option(shell):
    with pytest.raises(MagicArgumentError, match=r"--cluster='nope' could not be evaluated: NameError"):
        shell.run_cell_magic("mosaic", "k --grid 2 --block 128 --in a=A --out first=O1 --cluster nope", "pass\n")


def test_parse_keeps_repeated_in_and_out_in_order():
    args = parse_magic_line("k --grid 1 --block 1 --in z=S --in y=T --in x=U --out w=V --out v=W --cluster (2,1,1)")
    assert args.inputs == ["z=S", "y=T", "x=U"] and args.outputs == ["w=V", "v=W"]
    assert args.cluster == "(2,1,1)"
