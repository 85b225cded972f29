"""The parser of benchmarks/validate_banks.py against a CSV fixture constructed here by hand in the
layout we expect from `ncu --page source --csv --print-source sass` (not one ncu wrote: the device
run keeps ncu's raw CSV so the parser can be checked against the real one)."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "benchmarks"))
import validate_banks  # noqa: E402

FIXTURE = Path(__file__).parent / "fixtures" / "ncu" / "source_page_constructed.csv"


def test_rows_offsets_and_counts_are_read() -> None:
    rows = validate_banks.parse_source_page(FIXTURE.read_text())
    assert [r.offset for r in rows] == [0, 0x1B0, 0x1C0, 0x1D0, 0x1E0]
    lds = rows[3]
    assert lds.sass == "LDS R7, [R7]" and lds.executed == 32768 and lds.wavefronts == 1048576
    assert lds.per_execution == 32 and lds.ideal_wavefronts == 32768
    assert rows[4].per_execution is None  # never executed


def test_compare_matches_by_offset_and_opcode() -> None:
    measured = validate_banks.parse_source_page(FIXTURE.read_text())
    predicted = [
        {"address": 0x1B0, "text": "STS [R9], R4 ;", "predicted": 1.0},
        {"address": 0x1D0, "text": "LDS R7, [R7] ;", "predicted": 1.0},  # wrong on purpose
        {"address": 0x1C0, "text": "LDS R7, [R7] ;", "predicted": 1.0},  # offset of a BAR
        {"address": 0x1E0, "text": "@!P0 STS [R2], R7 ;", "predicted": 1.0},
        {"address": 0x400, "text": "LDS R1, [R1] ;", "predicted": None},
    ]
    verdicts = [r["verdict"] for r in validate_banks.compare(predicted, measured)]
    assert verdicts[0] == "match" and verdicts[1] == "MISMATCH"
    assert verdicts[2].startswith("opcode differs") and verdicts[3] == "not executed"
    assert verdicts[4] == "not in ncu's listing"


def test_a_missing_column_names_it_and_shows_the_header() -> None:
    text = '"Address","Source","Instructions Executed"\n"0x10","LDS R1, [R2]","5"\n'
    with pytest.raises(validate_banks.SourcePageError, match="L1 Wavefronts Shared.*header"):
        validate_banks.parse_source_page(text)
    with pytest.raises(validate_banks.SourcePageError, match="no header row"):
        validate_banks.parse_source_page("nothing,here\n")


def test_opcode_of_either_listing() -> None:
    assert validate_banks.opcode_of("/*01b0*/   @!P0 STS [R2], R7 ;") == "STS"
    assert validate_banks.opcode_of("LDSM.16.M88.4 R4, [R1]") == "LDSM.16.M88.4"
