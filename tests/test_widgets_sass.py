"""SASS parsing, line cross references and the SassView's Python side (no browser)."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).parent / "fixtures" / "widgets"))
from widget_fixtures import HERE as FIXTURES
from widget_fixtures import SOURCE_FILE, fixture_kernel

from mgpu_lab.compiler.compiled_kernel import SourceSpan
from mgpu_lab.widgets.line_xref import (
    build_xref,
    derive_spans,
    match_source_file,
    ptx_line_info,
)
from mgpu_lab.widgets.sass_listing import build_listing
from mgpu_lab.widgets.sass_parse import (
    code_instructions,
    instruction_mix,
    opcode_family,
    parse_line,
    parse_sass,
    sass_line_info,
)

SASS = (FIXTURES / "gemm_tile.sass").read_text()
PTX = (FIXTURES / "gemm_tile.ptx").read_text()


def _line_with(text: str) -> int:
    return next(i for i, line in enumerate(SASS.splitlines()) if text in line)


def test_instruction_line_tokens() -> None:
    line = parse_line(0, "        /*0070*/              @!P0 IMAD.MOV.U32 R0, RZ, RZ, 0x900 ;")
    assert (line.kind, line.address, line.predicate, line.opcode, line.mnemonic) == (
        "instruction", 0x70, "@!P0", "IMAD.MOV.U32", "IMAD")
    classes = [cls for cls, _ in line.tokens if cls]
    assert classes == ["addr", "pred", "op", "reg", "reg", "reg", "imm"]
    assert "".join(text for _, text in line.tokens) == line.text  # tokens cover the line exactly


def test_operand_classes_cover_hopper_syntax() -> None:
    line = parse_line(0, "        /*0390*/                   HGMMA.64x8x16.F32.BF16 R24, gdesc[UR4], RZ, !UPT, gsb0 ;")
    kinds = {text: cls for cls, text in line.tokens}
    assert kinds["R24"] == "reg" and kinds["UR4"] == "ureg" and kinds["!UPT"] == "preg" and kinds["gsb0"] == "kw"
    line = parse_line(0, "        /*0010*/                   S2R R5, SR_TID.X ;")
    assert ("sreg", "SR_TID.X") in line.tokens
    line = parse_line(0, "        /*0000*/                   LDC R1, c[0x0][0x28] ;")
    assert ("const", "c[0x0][0x28]") in line.tokens
    line = parse_line(0, "        /*0080*/               @P0 BRA `(.L_x_1) ;")
    assert ("label", "`(.L_x_1)") in line.tokens


def test_line_kinds_of_the_listing() -> None:
    lines = parse_sass(SASS)
    kinds = {ln.kind for ln in lines}
    assert kinds == {"instruction", "lineinfo", "label", "directive", "blank", "comment"}
    assert all("".join(t for _, t in ln.tokens) == ln.text for ln in lines)


def test_padding_nops_are_not_code() -> None:
    lines = parse_sass(SASS)
    code = code_instructions(lines)
    assert code[-1].opcode == "BRA" and all(ln.mnemonic != "NOP" for ln in code)
    assert len([ln for ln in lines if ln.mnemonic == "NOP"]) > 0  # the listing has padding


def test_instruction_mix_families() -> None:
    mix = dict(instruction_mix(parse_sass(SASS)))
    assert mix["tensor core"] == 3  # WARPGROUP.ARRIVE, HGMMA, WARPGROUP.DEPBAR
    assert mix["TMA / bulk copy"] == 2  # two UTMALDG
    assert mix["global memory"] == 1  # STG.E.128
    assert sum(mix.values()) == len(code_instructions(parse_sass(SASS)))
    assert opcode_family("LDS") == "shared memory" and opcode_family("STL") == "local memory (spills)"
    assert opcode_family("FFMA") == "fp32" and opcode_family("XYZZY") == "other"


def test_sass_line_info_follows_the_comments() -> None:
    info = sass_line_info(parse_sass(SASS))
    assert info[_line_with("WARPGROUP.ARRIVE")] == (SOURCE_FILE, 38)  # 1-based line 39
    assert info[_line_with("STG.E.128")] == (SOURCE_FILE, 41)
    assert _line_with("NOP") not in info


def test_ptx_line_info_and_derived_spans() -> None:
    ptx_info = ptx_line_info(PTX)
    mma = next(i for i, line in enumerate(PTX.splitlines()) if "wgmma.mma_async" in line)
    assert ptx_info[mma] == (SOURCE_FILE, 38)
    spans = {s.line: s for s in derive_spans(PTX, parse_sass(SASS))}
    assert mma in spans[38].ptx_lines and _line_with("WARPGROUP.ARRIVE") in spans[38].sass_lines
    assert ptx_line_info('.file 1 "a.py"\n.loc 1 0 0\nadd.s32 %r1, %r2, %r3;') == {}  # line 0: none


def test_xref_both_directions() -> None:
    spans = [SourceSpan("k.py", 3, (10, 11), (20, 21)), SourceSpan("k.py", 5, (12,), (21, 22))]
    xref = build_xref(spans)
    assert xref.source_to_sass[("k.py", 3)] == (20, 21)
    assert xref.sass_to_source[21] == (("k.py", 3), ("k.py", 5))
    assert xref.ptx_for_sass(21) == (10, 11, 12)
    assert xref.ptx_for_sass(99) == ()


def test_match_source_file_by_basename() -> None:
    sources = {"kernels/gemm.py": "", "other/util.py": ""}
    assert match_source_file("/abs/path/kernels/gemm.py", sources) == "kernels/gemm.py"
    assert match_source_file("gemm.py", {"a/gemm.py": "", "b/gemm.py": ""}) is None  # ambiguous
    assert match_source_file("kernels/gemm.py", sources) == "kernels/gemm.py"


@pytest.mark.parametrize("with_line_map", [True, False])
def test_listing_from_kernel(with_line_map: bool) -> None:
    listing = build_listing(fixture_kernel(with_line_map=with_line_map))
    assert listing.line_info_derived is (not with_line_map)
    arrive = _line_with("WARPGROUP.ARRIVE")
    assert listing.sass_source[arrive] == (0, 38)
    assert listing.source_text(0, 38).strip() == "acc = mgl.wgmma(acc, smem.a, smem.b.T)"
    key = listing.source_keys.index((0, 38))
    assert arrive in listing.source_sass[key]
    assert any("wgmma.mma_async" in listing.ptx_lines[p] for p in listing.source_ptx[key])
    assert {q: v for q, v, _ in listing.resources}["registers / thread"] == "30"


def test_sass_view_state_and_static() -> None:
    from mgpu_lab.widgets import SassView

    view = SassView(fixture_kernel())
    assert len(view.lines) == len(SASS.splitlines())
    assert view.sass_source[_line_with("STG.E.128")] == [0, 41]
    assert view.sass_lines_of(42) == [
        _line_with("LDC.64 R2, c[0x0][0x340]"), _line_with("IMAD.WIDE.U32"), _line_with("STG.E.128")]
    view.select_source(39)
    assert view.selected_source == [0, 38]
    assert "derived" in view.notes[0]
    html = view.to_html()
    assert "HGMMA.64x8x16.F32.BF16" in html and "gemm_tile.py:39" in html and "registers / thread" in html


def test_sass_view_without_line_info_says_so() -> None:
    from mgpu_lab.widgets import SassView

    kernel = fixture_kernel()
    kernel.set_disassembly("\n".join(ln for ln in SASS.splitlines() if "//##" not in ln), kernel.line_map,
                           kernel.sources)
    kernel.ptx = "\n".join(ln for ln in PTX.splitlines() if ".loc" not in ln)
    view = SassView(kernel)
    assert view.source_keys == [] and "no line info" in view.notes[0]
