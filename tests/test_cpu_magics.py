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


# -- the text views and the widget dispatch, on stand-in kernels ---------------------------------

def _stand_in_kernel(trace=None, passes=()):
    from types import SimpleNamespace as NS

    resources = NS(registers=40, total_smem_bytes=33024, dynamic_smem_bytes=32768, spill_stores_bytes=4,
                   spill_loads_bytes=8, stack_frame_bytes=16)
    layout = [NS(offset=0, nbytes=32768, kind="buffer", path="smem[0]", shape=(64, 128), dtype="float32",
                 swizzle=128, union=-1),
              NS(offset=32768, nbytes=16, kind="barriers", path="smem[1]", shape=(2,), dtype="i64",
                 swizzle=0, union=0)]
    sass = "\n".join(["\t.text.k:"] + [f"        /*{16 * i:04x}*/                   NOP ;" for i in range(14)]
                     + ["        // a comment", "  /* unterminated"])
    compiled = NS(name="k", target="sm_90a", grid=(2, 1, 1), block=(128, 1, 1), cluster=(1, 1, 1),
                  resources=resources, smem_layout=layout, sass=sass, passes=passes)
    return NS(compiled=compiled, last_trace=trace)


def test_text_summary_of_every_view():
    from mgpu_lab.magics import text_summary

    text = text_summary(_stand_in_kernel(), ["smem", "sass", "ir", "timeline"])
    nops = [f"    /*{16 * i:04x}*/                   NOP ;" for i in range(12)]
    assert text.splitlines() == [
        "k: sm_90a grid=(2, 1, 1) block=(128, 1, 1) cluster=(1, 1, 1)",
        "  registers 40, smem 33024 B (32768 dynamic), spills 4/8 B, stack 16 B",
        "  shared memory:",
        "    [      0,   32768)  buffer   smem[0] (64, 128) float32 swizzle 128",
        "    [  32768,   32784)  barriers smem[1] (2,) i64 union 0",
        "  SASS: 14 instructions; first ones:",
        *nops,
        "  passes: not recorded (build with keep_passes=True or MGPU_LAB_DUMP_PASSES=1)",
        "  timeline: no profiled call yet (build with --profile and call the kernel)",
    ]
    assert text_summary(_stand_in_kernel(), []).count("\n") == 1


def test_text_summary_lists_passes_and_the_last_trace():
    from test_cpu_profiler_flags import flagged_trace

    from mgpu_lab.magics import text_summary

    trace = flagged_trace()
    text = text_summary(_stand_in_kernel(trace, passes=(("input", ""), ("canonicalize", ""))), ["ir", "timeline"])
    assert "  passes: input, canonicalize" in text.splitlines()
    assert f"  timeline: 5 events\n{trace.summary()}" in text


def test_show_uses_widgets_in_a_widget_frontend_and_text_elsewhere(monkeypatch, capsys):
    import IPython.display

    import mgpu_lab.magics as magics
    import mgpu_lab.widgets as widgets
    from test_cpu_profiler_flags import flagged_trace

    shown, displayed = [], []
    monkeypatch.setattr(widgets, "show", lambda *a: shown.append(a) or f"widget{len(shown)}")
    monkeypatch.setattr(IPython.display, "display", displayed.append)
    monkeypatch.setattr(magics, "_widget_frontend", lambda: True)
    kernel = _stand_in_kernel()
    magics.show(kernel, ["sass", "timeline", "smem"])
    assert shown == [(kernel.compiled, "sass"), (kernel.compiled, "smem")] and displayed == ["widget1", "widget2"]
    assert "timeline: no profiled call yet" in capsys.readouterr().out
    trace = flagged_trace()
    magics.show(_stand_in_kernel(trace), ["timeline"])
    assert shown[-1] == (trace,) and displayed[-1] == "widget3"

    monkeypatch.setattr(magics, "_widget_frontend", lambda: False)
    magics.show(kernel, ["sass"])
    assert "SASS: 14 instructions" in capsys.readouterr().out and len(displayed) == 3


def test_widget_frontend_is_the_zmq_shell_only(monkeypatch):
    import IPython

    import mgpu_lab.magics as magics

    class ZMQInteractiveShell:
        pass

    monkeypatch.setattr(IPython, "get_ipython", lambda: ZMQInteractiveShell())
    assert magics._widget_frontend() is True
    monkeypatch.setattr(IPython, "get_ipython", lambda: None)
    assert magics._widget_frontend() is False
    monkeypatch.setattr(IPython, "get_ipython", lambda: object())
    assert magics._widget_frontend() is False


def test_body_from_cell_signature_and_line_numbers():
    import inspect
    import traceback

    from mgpu_lab.magics import body_from_cell

    code = body_from_cell("cell_body", ["a", "out"], "x = 1\ny = 2\nraise ValueError(smem)\n", "<cell 7>")
    scope: dict = {}
    exec(code, {}, scope)
    body = scope["cell_body"]
    assert list(inspect.signature(body).parameters) == ["ctx", "a", "out", "smem"]
    with pytest.raises(ValueError, match="the smem tree") as e:
        body(None, None, None, "the smem tree")
    frame = traceback.extract_tb(e.value.__traceback__)[-1]
    assert (frame.filename, frame.lineno, frame.name) == ("<cell 7>", 3, "cell_body")
    empty: dict = {}
    exec(body_from_cell("nothing", [], "", "<cell 8>"), {}, empty)
    assert empty["nothing"](None, None) is None


def test_parse_defaults_and_every_bad_view_named():
    args = parse_magic_line("k --grid 1 --block 1")
    assert (args.profile_capacity, args.dump, args.cluster, args.smem, args.tune) == (256, None, None, None, None)
    with pytest.raises(MagicArgumentError, match="; got flame, heat$"):
        parse_magic_line("k --grid 1 --block 1 --show sass,flame,heat")


def test_register_cell_maps_the_label_to_the_cell_number():
    import linecache
    from types import SimpleNamespace

    from mgpu_lab.magics import register_cell

    names: dict = {}
    shell = SimpleNamespace(compile=SimpleNamespace(_filename_map=names), execution_count=7)
    label = register_cell(shell, "x = 1\ny = 2\n")
    assert names == {label: 7} and "7" in label
    assert linecache.getlines(label) == ["x = 1\n", "y = 2\n"]
    bare = SimpleNamespace(compile=SimpleNamespace(), execution_count=3)  # an IPython without the map
    assert "3" in register_cell(bare, "z = 3\n")


def test_show_prints_the_missing_trace_message_exactly(monkeypatch, capsys):
    import mgpu_lab.magics as magics

    monkeypatch.setattr(magics, "_widget_frontend", lambda: True)
    magics.show(_stand_in_kernel(), ["timeline"])
    assert capsys.readouterr().out == "timeline: no profiled call yet (build with --profile and call the kernel)\n"
