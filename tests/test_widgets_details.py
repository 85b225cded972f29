"""Viewer details: smem names, barriers, ldmatrix and the kernel's own smem instructions;
SASS key classes, cell names and region lines; timeline shares and opening span; tabs."""

from __future__ import annotations

import sys
from pathlib import Path

import numpy as np
import pytest

sys.path.insert(0, str(Path(__file__).parent / "fixtures" / "widgets"))
from widget_fixtures import fixture_kernel, synthetic_trace

import mgpu_lab
from mgpu_lab.builder.smem import plan_smem
from mgpu_lab.widgets.bank_model import BufferGeometry, bank_conflicts, pattern_accesses
from mgpu_lab.widgets.region_lines import region_source_lines
from mgpu_lab.widgets.sass_parse import is_scaffolding, key_class, parse_line
from mgpu_lab.widgets.smem_instructions import smem_instructions
from mgpu_lab.widgets.source_names import display_file_name
from mgpu_lab.profiler.summary import recorded_unit_time_ns
from mgpu_lab.widgets.timeline_stats import event_span_ns


def test_shape_dtype_name_names_the_smem_buffer() -> None:
    records = plan_smem((mgpu_lab.ShapeDtype((64, 64), "bfloat16", name="a_tile"), {"acc": mgpu_lab.ShapeDtype((8,), "float32")})).records
    assert [r.path for r in records] == ["a_tile", "1.acc"]
    assert mgpu_lab.ShapeDtype((4,), "float32", name="x") == mgpu_lab.ShapeDtype((4,), "float32")
    with pytest.raises(TypeError, match="ShapeDtype name: expected a str, got int"):
        mgpu_lab.ShapeDtype((4,), "float32", name=3)


def test_barriers_get_no_bank_analysis_and_choices_have_no_duplicates() -> None:
    from mgpu_lab.widgets import SmemView

    view = SmemView(fixture_kernel(), buffer="barriers")
    assert view.grid["kind"] == "barrier" and "no bank analysis" in view.conflict_summary
    assert view.to_html().count("Banks of") == 0
    view.buffer = 0
    for buf in view.buffers:
        assert len(buf["vector_choices"]) == len(set(buf["vector_choices"]))


def test_ldmatrix_conflicts_without_swizzle_and_none_with_it() -> None:
    plain = bank_conflicts(pattern_accesses(BufferGeometry.from_shape(0, (64, 64), 2, 0), "ldmatrix", 0, 16))
    swizzled = bank_conflicts(pattern_accesses(BufferGeometry.from_shape(0, (64, 64), 2, 128), "ldmatrix", 0, 16))
    assert (plain.max_way, plain.wavefronts) == (8, 32)
    assert (swizzled.max_way, swizzled.wavefronts) == (1, 4)


def test_smem_instructions_give_width_and_lane_pattern() -> None:
    sass = "\n".join([
        "        /*0100*/                   STS.128 [UR4+0x30040], R8 ;",
        "        /*0110*/                   LDS.U16 R2, [R3] ;",
        "        /*0120*/                   LDSM.16.M88.4 R4, [R5] ;",
        "        /*0130*/                   LDG.E R2, desc[UR4][R2.64] ;",
        "        /*0140*/                   LDS R7, [R3+0x10] ;",
        "        /*0150*/                   EXIT ;",
    ])
    found = [(i.opcode, i.width, i.pattern, i.line) for i in smem_instructions(sass)]
    # The lane addresses sit in registers: the pattern is unknown, never guessed from the opcode.
    assert found == [("STS.128", 16, "unknown", 0), ("LDS.U16", 2, "unknown", 1), ("LDSM.16.M88.4", 16, "unknown", 2), ("LDS", 4, "unknown", 4)]
    assert all("lane addresses not derived" in i.why for i in smem_instructions(sass))


def test_smem_view_takes_the_access_from_a_kernel_instruction() -> None:
    from dataclasses import replace

    from mgpu_lab.compiler.compiled_kernel import Disassembly
    from mgpu_lab.widgets import SmemView

    # The SASS lives in the kernel's Disassembly (`kernel.sass` reads it): a listing of one LDSM.
    listing = "        /*0000*/                   LDSM.16.M88.4 R4, [R5] ;\n        /*0010*/  EXIT ;"
    kernel = replace(fixture_kernel(), disassembly=Disassembly(listing))
    view = SmemView(kernel, buffer="epilogue.acc")
    assert [i["opcode"] for i in view.instructions] == ["LDSM.16.M88.4"]
    view.instruction = 0
    assert view.pattern == "unknown" and view.grid["hits"] == []
    assert "LDSM.16.M88.4 R4, [R5]: 16 B a lane; access pattern unknown (lane addresses not derived" in view.conflict_summary
    # The ldmatrix what-if stays on offer (the SASS has LDSM), labelled hypothetical.
    view.pattern = "ldmatrix"
    assert view.instruction == -1 and view.conflict_summary.startswith("hypothetical ldmatrix.x4 (LDSM) tile 0")
    assert "8-way bank conflict" in view.conflict_summary  # epilogue.acc is not swizzled


def test_sass_key_classes_and_scaffolding() -> None:
    assert [key_class(m) for m in ("HGMMA", "UTMALDG", "UBLKCP", "LDSM", "STG", "SYNCS", "BAR", "IMAD")] == [
        "HGMMA", "UTMA", "UTMA", "LDS/STS", "LDG/STG", "SYNCS", "BAR", ""]
    assert is_scaffolding(parse_line(0, '\t//## File "/a/k.py", line 3'))
    assert is_scaffolding(parse_line(0, "\t.elftype\t@\"ET_EXEC\""))
    assert is_scaffolding(parse_line(0, "gemm:"))
    assert not is_scaffolding(parse_line(0, ".L_x_3:"))
    assert not is_scaffolding(parse_line(0, "        /*0000*/                   EXIT ;"))


def test_cell_file_names_read_like_ipython(monkeypatch: pytest.MonkeyPatch) -> None:
    from mgpu_lab.widgets import source_names

    monkeypatch.setattr(source_names, "_shell_filename_map", lambda: {"/tmp/ipykernel_42/123456.py": 7, "/tmp/ipykernel_42/5.py": 0})
    assert display_file_name("/tmp/ipykernel_42/123456.py") == "Cell In[7]"
    assert display_file_name("/tmp/ipykernel_42/99.py") == "Cell In[?]"
    assert display_file_name("/tmp/ipykernel_42/5.py") == "Cell In[?]"  # cached without its number
    assert display_file_name("Cell In[3]") == "Cell In[3]"
    assert display_file_name("/home/u/kernels/gemm.py") == "gemm.py"


def test_region_lines_are_the_with_body() -> None:
    text = "def k(ctx):\n    with ctx.named_region('load'):\n        a()\n\n        b()\n    c()\n    with ctx.named_region(name):\n        d()\n"
    assert region_source_lines({"k.py": text}) == {"load": [("k.py", 1), ("k.py", 2), ("k.py", 4)]}


def test_sass_view_maps_regions_to_their_instructions() -> None:
    from mgpu_lab.widgets import SassView

    view = SassView(fixture_kernel(with_line_map=True))
    mma = view.region_sass["mma"]
    assert any("HGMMA" in "".join(t for _, t in view.lines[i]) for i in mma)
    assert view.file_labels == ["gemm_tile.py"]
    assert view.key_classes == ["HGMMA", "UTMA", "LDS/STS", "LDG/STG", "SYNCS", "BAR"]


def test_shares_count_only_the_units_that_recorded() -> None:
    trace = synthetic_trace(num_sms=4, waves=2, units=2)
    full = recorded_unit_time_ns(trace)
    life = np.asarray(trace.block_end_ns) - np.asarray(trace.block_start_ns)
    assert full == pytest.approx(2 * life.sum())  # every unit of every block recorded
    kept = trace.filter(block=[0])
    if len(kept.block_ids) > 1:  # filtering keeps every block's lifetime: shares must not drop
        assert recorded_unit_time_ns(kept) == pytest.approx(2 * life[0])
    shares = {r["region"]: r["share"] for r in kept.summary().rows}
    assert 0.5 < shares["mainloop"] < 1.0


def test_timeline_opens_on_the_span_with_events() -> None:
    from mgpu_lab.profiler.trace import Trace
    from mgpu_lab.widgets import Timeline

    trace = Trace.load(Path(__file__).parent.parent / "benchmarks" / "results" / "gemm_8192_trace_sample.npz")
    view = Timeline(trace)
    t0, t1 = event_span_ns(trace)
    assert view.view_range == [t0, t1] and t1 <= trace.duration_ns
    shares = dict(zip([r["region"] for r in trace.summary().rows], view.summary_shares))
    assert shares["mma"] > 0.2  # over the 8 recorded blocks, not all 2,048
    assert "rows without events not drawn" in view.to_html()


def test_tabs_display_static_first() -> None:
    from mgpu_lab.widgets import show

    tabs = show(fixture_kernel())
    static = tabs.static_bundle()["text/html"]
    assert all(f'data-mgl-static="{child._static_id}"' in static for child in tabs.children)
    assert "application/vnd.jupyter.widget-view+json" in tabs.widget_bundle()


def test_an_instruction_on_the_profiler_header_moves_the_view_there_and_says_so() -> None:
    # The profiler's header stores (STS.128 [UR4+...]) have lane addresses the view derives; they
    # land in the profiler's area, so the view shows that buffer, not "touches no element of" the first one.
    from mgpu_lab.widgets import SmemView
    from test_profiler_global_buffer import build

    view = SmemView(build("global", smem=mgpu_lab.ShapeDtype((64, 64), "bfloat16", name="tile")))
    profiler = next(k for k, e in enumerate(view.entries) if e.buffer.kind == "profiler")
    start, size = view.entries[profiler].buffer.offset, view.entries[profiler].buffer.nbytes
    header = next(k for k, ins in enumerate(view._instructions)
                  if ins.derived and ins.text.startswith("STS") and start <= next(a for a in ins.lanes if a is not None) < start + size)
    view.instruction = header
    assert view.buffer == profiler
    assert view.conflict_summary.startswith(view._instructions[header].text.rstrip(" ;") + ": writes profiler")
    assert "no bank analysis" in view.conflict_summary and "touches no element" not in view.conflict_summary


def test_views_take_a_kernel_of_one_launch_and_name_what_they_refuse() -> None:
    from mgpu_lab.widgets import IrView, SassView, SmemView, Timeline
    from test_profiler_global_buffer import _regions

    kernel = mgpu_lab.kernel(_regions, grid=4, block=256, in_shapes=mgpu_lab.ShapeDtype((1024,), "float32"),
                             out_shapes=mgpu_lab.ShapeDtype((1024,), "float32"), target="sm_90a", use_cache=False)
    for view in (IrView, SassView, SmemView):
        assert view(kernel).to_html() == view(kernel.compiled).to_html()  # the Kernel stands for its one launch
        with pytest.raises(TypeError, match=rf"{view.__name__}: kernel: expected a Kernel or a CompiledKernel, "
                                            r"got Trace"):
            view(synthetic_trace())
    with pytest.raises(TypeError, match=r"Timeline: trace: expected a Trace, got Kernel \(a kernel's trace is "
                                        r"kernel.last_trace, after a call with profile=True\)") as e:
        Timeline(kernel)
    from mgpu_lab.user_errors import is_library_file
    import traceback

    assert not any(is_library_file(f.filename) for f in traceback.extract_tb(e.value.__traceback__))


def test_views_of_a_program_of_several_launches_say_which_to_pick() -> None:
    from mgpu_lab.kernels.gemm import make_gemm
    from mgpu_lab.widgets import SassView

    split = make_gemm(512, 512, 16384, split_k=16, split_k_reduce="workspace", target="sm_90a")
    assert len(split.launches) == 2
    with pytest.raises(TypeError, match=r"SassView: kernel: expected one launch, got a Kernel of 2 launches "
                                        r"\(.+\); pass kernel.launches\[i\], or show\(kernel, \.\.\.\)"):
        SassView(split)
    assert "HGMMA" in SassView(split.launches[0]).to_html()
