"""Bank conflicts from the kernel's real addresses: the SASS lane evaluator (`sass_lanes`) on
hand-written listings, including every way an answer becomes "unknown", and the predicted
wavefronts of each shared-memory instruction of real kernels built with the public DSL
(`benchmarks/bank_kernels.py`, the same kernels benchmarks/validate_banks.py measures on the H200)."""

from __future__ import annotations

import functools
import re
import sys
from pathlib import Path

import numpy as np
import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "benchmarks"))
import bank_kernels  # noqa: E402

from mgpu_lab.widgets.sass_lanes import LOOP_ITERATIONS, LaunchShape, evaluate, parse_program  # noqa: E402
from mgpu_lab.widgets.smem_instructions import DERIVED, UNKNOWN, smem_instructions  # noqa: E402


def listing(*instructions: str) -> str:
    """A listing in nvdisasm's layout: `/*addr*/  INSTR ;` lines, labels kept as they are."""
    out, address = [], 0
    for text in instructions:
        if text.endswith(":"):
            out.append(text)
            continue
        out.append(f"        /*{address:04x}*/                   {text} ;")
        address += 0x10
    return "\n".join(out)


SMEM_BASE = ("S2R R0, SR_TID.X", "S2UR UR4, SR_CgaCtaId", "UMOV UR5, 0x400", "ULEA UR4, UR4, UR5, 0x18")


def lds(*body: str, block=(32, 1, 1)):
    """The one LDS/STS/LDSM of a listing (the SMEM_BASE prologue, then `body`, then EXIT)."""
    found = [i for i in smem_instructions(listing(*SMEM_BASE, *body, "EXIT"), block) if i.kind == "lsu"]
    assert len(found) == 1
    return found[0]


# ---- the evaluator's arithmetic ---------------------------------------------------------------

def test_row_and_column_reads_of_a_32_wide_float_tile() -> None:
    row = lds("LEA R1, R0, UR4, 0x2", "LDS R2, [R1]")
    assert row.derived and row.wavefronts == 1 and row.lanes[:3] == (0, 4, 8)
    column = lds("IMAD R1, R0, 0x80, RZ", "IADD3 R1, R1, UR4, RZ", "LDS R2, [R1+0x4]")
    assert column.derived and column.wavefronts == 32 and column.max_way == 32
    assert column.lanes[1] == 0x84


def test_wide_imad_writes_its_carry_and_takes_one_in() -> None:
    """ptxas divides a 64-bit ring counter by a non-power-of-two stage count with IMAD.WIDE.U32
    writing the sum's carry to a predicate, and .X taking one in (a persistent GEMM of 5 stages):
    the evaluator must follow both, or every TMA address after them is unknown."""
    addend = 0xFFFFFFFE80000000  # 2**64 - 3 * 2**31: lane t's t * 2**31 carries out from t = 3
    setup = ("MOV R6, 0x80000000", "MOV R7, 0xfffffffe", "IMAD.WIDE.U32 R4, P0, R0, 0x80000000, R6")
    carry = lds(*setup, "IADD3.X R8, RZ, RZ, RZ, P0, !PT", "LEA R1, R8, UR4, 0x2", "LDS R2, [R1]")
    assert carry.derived and list(carry.lanes) == [4 * (t >= 3) for t in range(32)]
    high = lds(*setup, "LOP3.LUT R9, R5, 0xf, RZ, 0xc0, !PT", "LEA R1, R9, UR4, 0x2", "LDS R2, [R1]")
    assert list(high.lanes) == [4 * (((t * 2**31 + addend) % 2**64 >> 32) & 0xF) for t in range(32)]
    # .X: the carry comes back in (0 or 1 on top of the product and the addend)
    taken = lds(*setup, "IMAD.WIDE.U32.X R10, R0, 0x2, RZ, P0", "LEA R1, R10, UR4, 0x2", "LDS R2, [R1]")
    assert list(taken.lanes) == [4 * (2 * t + (t >= 3)) for t in range(32)]


def test_lop3_shf_sgxt_prmt_and_imad_variants() -> None:
    # lane t: ((t >> 1) ^ 3) & 0xf ... composed so each op changes the answer if it is wrong.
    ins = lds("SHF.R.U32.HI R1, RZ, 0x1, R0", "LOP3.LUT R1, R1, 0x3, RZ, 0x3c, !PT", "SGXT.U32 R1, R1, 0x4",
              "IMAD.SHL.U32 R1, R1, 0x8, RZ", "IMAD.IADD R1, R1, 0x1, UR4", "LDS.64 R2, [R1]")
    want = [(((t >> 1) ^ 3) & 0xF) * 8 for t in range(32)]
    assert list(ins.lanes) == want
    # Two half-warps; lane pairs share an 8-byte word (a broadcast) and a half-warp's 8 words are
    # 64 contiguous bytes: conflict-free, one wavefront each.
    assert ins.width == 8 and ins.wavefronts == 2 and ins.ideal_wavefronts == 2
    prmt = lds("PRMT R1, R0, 0x3210, RZ", "LEA R1, R1, UR4, 0x2", "LDS R2, [R1]")  # identity byte order
    assert prmt.lanes[5] == 20 and prmt.wavefronts == 1


def test_ldsm_x4_rows_are_eight_lane_phases() -> None:
    # Lane l gives row l of a 32-row tile of 16-byte rows: 4 matrices, 4 conflict-free phases.
    plain = lds("IMAD.SHL.U32 R1, R0, 0x10, RZ", "IADD3 R1, R1, UR4, RZ", "LDSM.16.M88.4 R4, [R1]")
    assert plain.derived and plain.wavefronts == 4 and plain.ideal_wavefronts == 4
    # 128-byte row pitch: the 8 rows of a matrix share banks 0-3: 8 wavefronts a phase.
    strided = lds("IMAD.SHL.U32 R1, R0, 0x80, RZ", "IADD3 R1, R1, UR4, RZ", "LDSM.16.MT88.2 R4, [R1]")
    assert strided.wavefronts == 2 * 8  # .2: only lanes 0-15 give addresses


def test_loop_iterations_are_followed_and_their_wavefronts_averaged() -> None:
    # for i in range(3): LDS [t * (4 << i)]: strides 4, 8, 16 bytes: 1, 2, 4 wavefronts.
    ins = lds("IMAD.MOV.U32 R3, RZ, RZ, 0x2", "MOV R5, RZ", ".L_x_1:", "SHF.L.U32 R1, R0, R3, RZ",
              "IADD3 R1, R1, UR4, RZ", "LDS R2, [R1]", "VIADD R3, R3, 0x1", "IADD3 R5, R5, 0x1, RZ",
              "ISETP.GE.U32.AND P0, PT, R5, 0x3, PT", "@!P0 BRA `(.L_x_1)")
    assert ins.derived and ins.executions == 3 and ins.varies
    assert ins.wavefronts == pytest.approx((1 + 2 + 4) / 3)


def test_a_long_loop_is_left_after_its_first_iterations_and_what_changed_is_unknown() -> None:
    body = ("LEA R4, R0, UR4, 0x2", "MOV R5, RZ", "MOV R1, R4", ".L_x_1:", "LDS R2, [R1]", "IADD3 R1, R1, 0x80, RZ",
            "IADD3 R5, R5, 0x1, RZ", "ISETP.GE.U32.AND P0, PT, R5, 0x64, PT", "@!P0 BRA `(.L_x_1)")
    sass = listing(*SMEM_BASE, *body, "STS [R4], R2", "STS [R1], R2", "EXIT")
    inside, invariant, variant = smem_instructions(sass, (32, 1, 1))
    assert inside.derived and inside.executions == LOOP_ITERATIONS + 2 and inside.lanes[0] == 0
    assert invariant.derived and invariant.lanes[1] == 4  # R4 is the same in every iteration
    assert variant.pattern == UNKNOWN and "changes between iterations of the loop" in variant.why


def test_divergent_predicate_keeps_only_the_lanes_that_run() -> None:
    ins = lds("ISETP.NE.U32.AND P0, PT, R0, RZ, PT", "IADD3 R1, RZ, UR4, RZ", "@!P0 STS [R1], R0")
    assert ins.lanes[0] == 0 and all(a is None for a in ins.lanes[1:]) and ins.wavefronts == 1


def test_two_dimensional_blocks_give_each_lane_its_thread_index() -> None:
    sass = listing(*SMEM_BASE, "S2R R6, SR_TID.Y", "IMAD R1, R6, 0x80, RZ", "LEA R1, R0, R1, 0x2",
                   "IADD3 R1, R1, UR4, RZ", "LDS R2, [R1]", "EXIT")
    ins = smem_instructions(sass, (8, 4, 1))[0]
    assert ins.lanes[:10] == (0, 4, 8, 12, 16, 20, 24, 28, 128, 132)
    assert ins.executions == 1  # 32 threads: one warp


# ---- unknown, and why -------------------------------------------------------------------------

@pytest.mark.parametrize("body, reason", [
    (("LDG.E R1, desc[UR6][R2.64]", "LDS R2, [R1]"), "LDG.E"),  # a loaded index: data
    (("LDC R1, c[0x0][0x210]", "LDS R2, [R1]"), "kernel parameter"),  # a parameter
    (("FADD R1, R0, R0", "LDS R2, [R1]"), "FADD"),  # an opcode not modelled
    (("LDS R2, [R9]",), "R9 is read before"),  # never written
])
def test_addresses_that_cannot_be_derived_say_why(body, reason) -> None:
    ins = lds(*body)
    assert ins.pattern == UNKNOWN and reason in ins.why and ins.wavefronts is None and ins.lanes == ()


def test_data_dependent_path_and_unknown_predicate_are_unknown() -> None:
    inside = lds("LDG.E R7, desc[UR6][R2.64]", "ISETP.NE.AND P1, PT, R7, RZ, PT", "@P1 BRA `(.L_x_9)",
                 "LEA R1, R0, UR4, 0x2", "STS [R1], R0", ".L_x_9:")
    assert inside.pattern == UNKNOWN and "data-dependent path" in inside.why
    guarded = lds("LDG.E R7, desc[UR6][R2.64]", "ISETP.NE.AND P1, PT, R7, RZ, PT", "LEA R1, R0, UR4, 0x2",
                  "@P1 STS [R1], R0")
    assert guarded.pattern == UNKNOWN and "under predicate P1 that is not known" in guarded.why


def test_after_a_data_dependent_branch_rejoins_the_addresses_are_known_again() -> None:
    ins = lds("LDG.E R7, desc[UR6][R2.64]", "ISETP.NE.AND P1, PT, R7, RZ, PT", "@P1 BRA `(.L_x_9)",
              "FADD R8, R7, R7", "BRA `(.L_x_10)", ".L_x_9:", "MOV R8, R7", ".L_x_10:", "LEA R1, R0, UR4, 0x2",
              "STS [R1], R8")
    assert ins.derived and ins.wavefronts == 1


def test_bad_input_never_crashes() -> None:
    odd = listing(*SMEM_BASE, "FROB.X R1, ???, [[R2", "LDS R2, [R1]", "BRA `(.L_nowhere)", "EXIT")
    found = smem_instructions(odd, (32, 1, 1))
    assert found[0].pattern == UNKNOWN and found[0].why
    assert smem_instructions("garbage\n/*0000*/ LDS R1, [R2] ;", (32, 1, 1))[0].pattern == UNKNOWN
    no_shape = smem_instructions(listing(*SMEM_BASE, "LDS R2, [R0]"))
    assert no_shape[0].pattern == UNKNOWN and "block shape" in no_shape[0].why


def test_step_budget_bounds_the_evaluation() -> None:
    sass = listing(".L_x_0:", "LEA R1, R0, RZ, 0x2", "LDS R2, [R1]", "BRA `(.L_x_0)")
    trace = evaluate(sass, LaunchShape((32, 1, 1)), lambda ins: ins.mnemonic == "LDS", budget=10)
    assert "budget" in trace.stopped[0] and len(trace.executions[2]) == 3  # line 2: the LDS, step 2 of each 3
    program, labels = parse_program(sass)
    assert labels[".L_x_0"] == 0 and len(program) == 3


# ---- real kernels -----------------------------------------------------------------------------

# Predicted wavefronts of each LDS/STS of the kernel, in listing order, as (opcode, wavefronts).
EXPECTED = {
    "transpose_unpadded": [("STS", 1), ("LDS", 32)],  # the column read: one bank, 32 words
    "transpose_padded": [("STS", 1), ("LDS", 1)],  # 33 columns: lane t's word is in bank t
    "four_way": [("STS", 1)] * 4 + [("LDS", 4)],
    "block_sum": [("STS", 1), ("LDS", 1)],  # lane 0 of each warp; then warp 0's 8 lanes
    "tiled_copy": [("STS.128", 4)] * 4 + [("LDS.128", 4)] * 4,  # 512 contiguous bytes: 4 quarter-warps
    "gemm": [("STS", 1)] * 64,  # the epilogue's swizzled stores (128 B swizzle): conflict-free
    "attention": [("STS", 1)] * 16,
}


@functools.lru_cache(maxsize=None)
def kernel_instructions(name: str) -> tuple:
    """A bank kernel's shared-memory instructions with their derived answers (built once)."""
    compiled = bank_kernels.KERNELS[name]().compiled
    return tuple(smem_instructions(compiled.sass, compiled.block, compiled.grid))


@pytest.mark.parametrize("name", sorted(EXPECTED))
def test_predicted_wavefronts_of_each_kernels_shared_memory_instructions(name: str) -> None:
    instructions = kernel_instructions(name)
    lsu = [i for i in instructions if i.kind == "lsu"]
    assert all(i.pattern == DERIVED for i in lsu), [(i.text, i.why) for i in lsu if not i.derived]
    assert [(i.opcode, i.wavefronts) for i in lsu] == EXPECTED[name]
    assert not any(i.varies for i in lsu)


def test_tma_and_wgmma_say_what_their_operands_tell_and_give_no_wavefronts() -> None:
    instructions = kernel_instructions("gemm")
    tma = [i for i in instructions if i.kind == "tma"]
    wgmma = [i for i in instructions if i.kind == "wgmma"]
    assert tma and wgmma and all(i.wavefronts is None and i.pattern == UNKNOWN for i in tma + wgmma)
    assert "shared memory at offset 0x0" in tma[0].detail and "TMA" in tma[0].why
    # The descriptors' start and swizzle are those of the smem plan's A and B buffers.
    layout = {b.offset: b.swizzle for b in bank_kernels.make_gemm_kernel().compiled.smem_layout}
    found = re.findall(r"([AB]) at offset (0x[0-9a-f]+) \(swizzle (\d+) B", wgmma[0].detail)
    assert [operand for operand, _, _ in found] == ["A", "B"]
    for _, start, swizzle in found:
        assert layout.get(int(start, 16)) == int(swizzle)


def test_the_view_shows_the_transposes_column_read_as_32_way() -> None:
    from mgpu_lab.widgets import SmemView

    view = SmemView(bank_kernels.make_transpose(64, 0).compiled)
    assert view.patterns == ["row", "column"]  # no WGMMA / ldmatrix what-ifs for an f32 transpose
    view.instruction = next(k for k, i in enumerate(view.instructions) if i["opcode"] == "LDS")
    assert view.pattern == DERIVED and view.grid["wavefronts"] == 32 and view.grid["max_way"] == 32
    assert "from the kernel's own addresses: 32-way bank conflict" in view.conflict_summary
    assert len(view.grid["hits"]) == 32  # the 32 words of column 0, all in bank 0
    assert {bank for _, bank, _, _ in view.grid["hits"]} == {0}
    assert "32-way bank conflict" in view.to_html()
    padded = SmemView(bank_kernels.make_transpose(64, 1).compiled)
    padded.instruction = next(k for k, i in enumerate(padded.instructions) if i["opcode"] == "LDS")
    assert "conflict-free" in padded.conflict_summary
    assert np.unique([bank for _, bank, _, _ in padded.grid["hits"]]).size == 32
