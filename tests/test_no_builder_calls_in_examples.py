"""The public face writes index math as Python operators on typed values, never as builder calls.

Issue 11's "done when": no integer `arith.*` call is left in the README, the examples or the
notebooks. This scans their text (notebook cell sources, not outputs, which may print IR) for
`arith.<name>` and fails on any name that is not a float op: integer ops, `arith.constant`,
`arith.select`, casts touching integers and `CmpIPredicate` are all caught. Write `a + b`,
`i // n`, `i % n`, `x == 0`, `dsl.min`/`dsl.max`/`dsl.select`, `dsl.cast`, `dsl.c` instead.
Float ops stay allowed (a fastmath division or a vector `extf`/`truncf` has no operator
spelling), though `+ - * /` on float values and vectors are the preferred spelling there too.
"""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]

# The arith dialect's float ops and attributes (everything else in it touches integers).
FLOAT_OPS = frozenset({
    "addf", "subf", "mulf", "divf", "remf", "negf", "maximumf", "minimumf", "maxnumf", "minnumf",
    "extf", "truncf", "cmpf", "CmpFPredicate", "fastmath", "FastMathFlags",
})
_ARITH_CALL = re.compile(r"\barith\.(\w+)")


def _public_sources() -> list[Path]:
    files = [ROOT / "README.md", ROOT / "mgpu_lab" / "magics.py"]  # magics: the %%mosaic docstring
    files += sorted((ROOT / "mgpu_lab" / "examples").glob("*.py")) + sorted((ROOT / "mgpu_lab" / "kernels").rglob("*.py"))
    files += sorted((ROOT / "notebooks").glob("*.py"))
    # notebooks/executed/ holds records of a GPU run (sources as they were then), not sources
    files += sorted((ROOT / "notebooks").glob("*.ipynb"))
    return files


def _text(path: Path) -> str:
    """The file's text; for a notebook, its cells' sources joined (outputs left out)."""
    if path.suffix != ".ipynb":
        return path.read_text()
    cells = json.loads(path.read_text())["cells"]
    return "\n".join("".join(c["source"]) if isinstance(c["source"], list) else c["source"] for c in cells)


def builder_calls(text: str) -> list[tuple[int, str]]:
    """(line number, op name) of every `arith.<name>` in `text` that is not a float op."""
    return [(text.count("\n", 0, m.start()) + 1, m.group(1)) for m in _ARITH_CALL.finditer(text)
            if m.group(1) not in FLOAT_OPS]


def test_the_scan_covers_the_public_face():
    names = {p.relative_to(ROOT).as_posix() for p in _public_sources()}
    assert {"README.md", "mgpu_lab/kernels/attention.py", "mgpu_lab/kernels/gemm/kernel.py",
            "notebooks/make_notebooks.py", "notebooks/05_flash_attention.ipynb"} <= names


def test_the_scan_finds_integer_builder_calls():
    sample = ("i = arith.addi(a, c(1))\n"
              "ok = dsl.arith.divf(one, r, fastmath=approx)\n"
              "p = arith.cmpi(arith.CmpIPredicate.eq, wg, c(0))\n"
              "z = arith.constant(t, attr)\n"
              "w = arith.index_cast(i32, arith.addf(x, y))\n")
    assert builder_calls(sample) == [(1, "addi"), (3, "cmpi"), (3, "CmpIPredicate"), (4, "constant"),
                                     (5, "index_cast")]


def test_notebook_outputs_are_not_scanned(tmp_path):
    nb = {"cells": [{"cell_type": "code", "source": ["x = a + b\n"], "metadata": {},
                     "outputs": [{"output_type": "stream", "name": "stdout", "text": ["%0 = arith.addi %a, %b\n"]}]}],
          "metadata": {}, "nbformat": 4, "nbformat_minor": 5}
    path = tmp_path / "n.ipynb"
    path.write_text(json.dumps(nb))
    assert builder_calls(_text(path)) == []


@pytest.mark.parametrize("path", _public_sources(), ids=lambda p: p.relative_to(ROOT).as_posix())
def test_no_integer_arith_builder_calls(path):
    found = builder_calls(_text(path))
    assert not found, (f"{path.relative_to(ROOT)}: builder calls where operators belong (line, op): {found}; "
                       f"write index math with operators on typed values (see mgpu_lab/builder/values.py)")
