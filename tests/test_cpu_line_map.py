"""The source-line map from PTX `.loc` directives and nvdisasm `//## File` comments, on fixed text."""

from __future__ import annotations

from mgpu_lab.compiler.compiled_kernel import SourceSpan
from mgpu_lab.compiler.disassemble import build_line_map, ptx_line_sources, sass_line_sources

PTX = """\
.version 8.0
.target sm_90a
\t.file\t1 "/home/u/kernel.py"
\t.file\t2 "Cell In[5]", 1700000000, 0
.visible .entry k(
\t.param .u64 k_param_0
)
{
\t.reg .b32 \t%r<4>;
\t.loc\t1 10 3
\tmov.u32 \t%r1, %tid.x;
$L__BB0_1:
\t.loc\t2 4 0
\tadd.s32 \t%r2, %r1, 1;
\t// a comment
\tst.global.u32 \t[%rd1], %r2;
\t.loc\t1 0 0
\tret;
\t.loc\t3 7 1
\tbar.sync \t0;
}
\tmov.u32 \t%r3, 0;
"""

SASS = """\
\t.text.k:
        /*0000*/                   MOV R1, c[0x0][0x28] ;
\t//## File "/home/u/kernel.py", line 10
        /*0010*/                   S2R R0, SR_TID.X ;
\t//## File "Cell In[5]", line 4
        /*0020*/                   IADD3 R2, R0, 0x1, RZ ;
        /*0030*/                   STG.E [R4.64], R2 ;
        // no instruction here
\t//## File "/home/u/kernel.py", line 10
        /*0040*/                   EXIT ;
"""


def test_ptx_lines_follow_loc_directives_and_stop_at_the_function_end():
    sources = ptx_line_sources(PTX)
    assert sources == {10: ("/home/u/kernel.py", 10), 13: ("Cell In[5]", 4), 15: ("Cell In[5]", 4)}


def test_sass_lines_follow_the_last_file_comment_and_only_count_instructions():
    sources = sass_line_sources(SASS)
    assert sources == {3: ("/home/u/kernel.py", 10), 5: ("Cell In[5]", 4), 6: ("Cell In[5]", 4),
                       9: ("/home/u/kernel.py", 10)}


def test_spans_are_sorted_zero_based_and_join_ptx_and_sass(tmp_path):
    source = tmp_path / "k.py"
    source.write_text("line 1\nline 2\n")
    ptx = PTX.replace("/home/u/kernel.py", str(source)).replace("\t.loc\t1 10 3", "\t.loc\t1 2 3")
    sass = SASS.replace("/home/u/kernel.py", str(source)).replace("line 10", "line 2")
    spans, sources = build_line_map(ptx, sass)
    assert spans == (SourceSpan(str(source), 1, (10,), (3, 9)), SourceSpan("Cell In[5]", 3, (13, 15), (5, 6)))
    assert sources == {str(source): "line 1\nline 2\n"}  # the cell has no file to read


PTX_EDGES = """\
\t.file\t1 /src/unquoted.py
.visible .entry k()
{
\t.loc\t1 1 0
\t.reg .pred \t%p<2>;
\t{
\tmov.u32 \t%r1, 1;
\t}
\t.loc\t1 9 0
\tret;
}
\tmov.u32 \t%r9, 9;
"""


def test_unquoted_files_line_one_and_lines_that_are_not_instructions():
    # .reg and braces are not instructions; line 1 counts; after the function's "}" nothing maps.
    assert ptx_line_sources(PTX_EDGES) == {6: ("/src/unquoted.py", 1), 9: ("/src/unquoted.py", 9)}


def test_lines_with_only_ptx_or_only_sass_still_get_a_span():
    sass = '\t//## File "/src/unquoted.py", line 1\n        /*0000*/  MOV R1, R2 ;\n'
    spans, _ = build_line_map(PTX_EDGES, sass)
    assert spans == (SourceSpan("/src/unquoted.py", 0, (6,), (1,)), SourceSpan("/src/unquoted.py", 8, (9,), ()))
    spans, _ = build_line_map("", sass)
    assert spans == (SourceSpan("/src/unquoted.py", 0, (), (1,)),)
