"""Predicted vs measured shared-memory wavefronts, per SASS instruction, on the GPU under Nsight Compute.

For each kernel of `bank_kernels.KERNELS` the driver builds it, predicts each LDS/STS/LDSM/STSM's
wavefronts per execution from the kernel's own SASS (`mgpu_lab.widgets.smem_instructions`), runs

    ncu --clock-control none --section SourceCounters --import-source no -k regex:<name> -c 1 \
        -f -o <report> python benchmarks/validate_banks.py --child <kernel>

(the child builds the kernel and launches it once on fresh random inputs, outputs poisoned first),
exports the per-instruction source page (`ncu --import <report>.ncu-rep --page source --csv
--print-source sass`), matches instructions by their offset in the function (and checks the
opcode), and compares predicted wavefronts with measured "L1 Wavefronts Shared" / "Instructions
Executed". One kernel's failure is recorded and the next one runs. The raw CSV of each kernel is
kept under $OUT/validate_banks/ (or benchmarks/results/validate_banks/) so the parser can be
fixed if ncu names its columns differently; the record (date, device, commit, per kernel per
instruction predicted vs measured) is written by `common.write_record`.

    python benchmarks/validate_banks.py                   # all kernels
    python benchmarks/validate_banks.py --kernels gemm,four_way --ncu /path/to/ncu
"""

from __future__ import annotations

import argparse
import csv
import io
import json
import os
import re
import subprocess
import sys
import tempfile
import traceback
from dataclasses import dataclass
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))
sys.path.insert(0, str(HERE.parent))

import bank_kernels  # noqa: E402
import common  # noqa: E402

MATCH_TOLERANCE = 0.01  # wavefronts per execution: the counts are integers, their mean is exact


# ---------------------------------------------------------------------------- the ncu source page

@dataclass(frozen=True)
class MeasuredInstruction:
    """One SASS instruction of ncu's source page."""

    offset: int  # from the function's first instruction
    sass: str
    wavefronts: float | None
    ideal_wavefronts: float | None
    executed: float | None

    @property
    def per_execution(self) -> float | None:
        """Measured wavefronts per executed warp-level instruction."""
        if self.wavefronts is None or not self.executed:
            return None
        return self.wavefronts / self.executed


class SourcePageError(ValueError):
    """The CSV is not the source page this parser expects (the message names what is missing)."""


def _find_column(header: list[str], *must: str, avoid: tuple[str, ...] = ()) -> int | None:
    """Index of the first column whose lower-cased name contains every `must` and no `avoid`."""
    for k, name in enumerate(header):
        low = name.strip().lower()
        if all(m in low for m in must) and not any(a in low for a in avoid):
            return k
    return None


def _number(cell: str) -> float | None:
    cell = cell.strip().replace(",", "")
    if not cell or cell.lower() in ("n/a", "-", "nan"):
        return None
    try:
        return float(cell)
    except ValueError:
        return None


def parse_source_page(text: str) -> list[MeasuredInstruction]:
    """The per-instruction rows of `ncu --page source --csv --print-source sass` output.

    Tolerant: lines before the header (ncu's `==PROF==` notes, a kernel title) are skipped, the
    header is the first row naming an address and a source column, and columns are found by
    case-insensitive substrings. Raises `SourcePageError` naming the missing column and the header.
    """
    rows = list(csv.reader(io.StringIO(text)))
    start = next((k for k, row in enumerate(rows)
                  if _find_column(row, "address") is not None and _find_column(row, "source") is not None), None)
    if start is None:
        raise SourcePageError("no header row with an 'Address' and a 'Source' column; first lines: "
                              + " | ".join(",".join(r) for r in rows[:3]))
    header = rows[start]
    address = _find_column(header, "address")
    source = _find_column(header, "source", avoid=("address",))
    wavefronts = _find_column(header, "wavefronts shared", avoid=("ideal", "excessive", "%"))
    ideal = _find_column(header, "wavefronts shared ideal")
    executed = _find_column(header, "instructions executed", avoid=("thread", "predicated", "%"))
    missing = [name for name, col in (("L1 Wavefronts Shared", wavefronts), ("Instructions Executed", executed),
                                      ("Source", source)) if col is None]
    if missing:
        raise SourcePageError(f"column(s) {', '.join(missing)} not found; header: {header}")
    out = []
    base = None
    for row in rows[start + 1 :]:
        if len(row) <= max(address, source, wavefronts, executed):
            continue
        cell = row[address].strip()
        try:
            pc = int(cell, 16)  # ncu prints addresses in hex, with or without 0x
        except ValueError:
            continue
        base = pc if base is None else base
        out.append(MeasuredInstruction(pc - base, row[source].strip(), _number(row[wavefronts]),
                                       _number(row[ideal]) if ideal is not None else None, _number(row[executed])))
    return out


def opcode_of(sass: str) -> str:
    """The opcode of a SASS line in either listing (`@!P0 STS [R2], R7 ;` -> `STS`), for matching."""
    text = re.sub(r"/\*[0-9a-fA-F]+\*/", "", sass).strip()
    text = re.sub(r"^@!?U?P(?:T|\d+)\s+", "", text)
    return text.split()[0] if text else ""


# ------------------------------------------------------------------------------------ comparison

def compare(predicted: list[dict], measured: list[MeasuredInstruction]) -> list[dict]:
    """Per predicted instruction: measured wavefronts per execution and whether they agree."""
    by_offset = {m.offset: m for m in measured}
    rows = []
    for p in predicted:
        m = by_offset.get(p["address"])
        row = dict(p)
        if m is None:
            row.update(verdict="not in ncu's listing")
        elif opcode_of(m.sass) != opcode_of(p["text"]):
            row.update(verdict=f"opcode differs at this offset: ncu has {m.sass!r}")
        else:
            row.update(measured_wavefronts=m.wavefronts, measured_ideal=m.ideal_wavefronts, executed=m.executed,
                       measured_per_execution=m.per_execution)
            if m.per_execution is None:
                row.update(verdict="not executed")
            elif p["predicted"] is None:
                row.update(verdict="predicted unknown")
            else:
                ok = abs(m.per_execution - p["predicted"]) <= MATCH_TOLERANCE
                row.update(verdict="match" if ok else "MISMATCH")
        rows.append(row)
    return rows


def predictions(kernel) -> tuple[str, list[dict]]:
    """The main launch's function name and the predicted wavefronts of its shared-memory instructions."""
    from mgpu_lab.widgets.smem_instructions import smem_instructions

    compiled = kernel.compiled
    rows = []
    for ins in smem_instructions(compiled.sass, compiled.block, compiled.grid):
        if ins.kind != "lsu":
            continue
        rows.append({"address": ins.address, "text": ins.text, "predicted": ins.wavefronts,
                     "predicted_ideal": ins.ideal_wavefronts, "executions_seen": ins.executions,
                     "varies": ins.varies, "why_unknown": ins.why})
    return compiled.name, rows


# ----------------------------------------------------------------------------------- the runs

def run_child(name: str) -> None:
    """Build `name` and launch it once on fresh random inputs (outputs poisoned first)."""
    import cupy
    import numpy as np

    from mgpu_lab.builder.dtypes import numpy_dtype

    kernel = bank_kernels.KERNELS[name]()
    rng = np.random.default_rng()
    inputs = [cupy.asarray(rng.standard_normal(spec.shape).astype(np.float32).astype(numpy_dtype(spec.dtype)))
              for spec in kernel.inputs]
    outputs = [cupy.asarray(np.full(spec.shape, np.nan, dtype=numpy_dtype(spec.dtype))) for spec in kernel.outputs]
    kernel(*inputs, out=tuple(outputs) if len(outputs) > 1 else outputs[0])
    cupy.cuda.runtime.deviceSynchronize()
    left = [int(cupy.isnan(o).sum()) for o in outputs if o.dtype == cupy.float32]
    print(f"child {name}: launched once; NaN left in float32 outputs: {left}")


def profile(name: str, ncu: str, raw_dir: Path) -> dict:
    """Build, predict, profile and compare one kernel."""
    kernel = bank_kernels.KERNELS[name]()
    function, predicted = predictions(kernel)
    with tempfile.TemporaryDirectory() as tmp:
        report = Path(tmp) / name
        cmd = [ncu, "--clock-control", "none", "--section", "SourceCounters", "--import-source", "no",
               "-k", f"regex:^{re.escape(function)}$", "-c", "1", "-f", "-o", str(report),
               sys.executable, str(Path(__file__).resolve()), "--child", name]
        run = subprocess.run(cmd, capture_output=True, text=True, timeout=900)
        (raw_dir / f"{name}.ncu.log").write_text(" ".join(cmd) + "\n\n" + run.stdout + "\n" + run.stderr)
        if run.returncode != 0:
            raise RuntimeError(f"ncu exited {run.returncode}: {run.stderr[-2000:] or run.stdout[-2000:]}")
        export = subprocess.run([ncu, "--import", f"{report}.ncu-rep", "--page", "source", "--csv",
                                 "--print-source", "sass"], capture_output=True, text=True, timeout=600)
        (raw_dir / f"{name}.csv").write_text(export.stdout)
        if export.returncode != 0:
            raise RuntimeError(f"ncu --import exited {export.returncode}: {export.stderr[-2000:]}")
    rows = compare(predicted, parse_source_page(export.stdout))
    return {"function": function, "instructions": rows,
            "matches": sum(r.get("verdict") == "match" for r in rows),
            "mismatches": sum(r.get("verdict") == "MISMATCH" for r in rows)}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--child", help="(internal) build and launch this kernel once")
    parser.add_argument("--kernels", default=",".join(bank_kernels.KERNELS), help="comma-separated kernel names")
    parser.add_argument("--ncu", default="ncu", help="the Nsight Compute CLI")
    args = parser.parse_args(argv)
    if args.child:
        run_child(args.child)
        return 0
    raw_dir = Path(os.environ.get("OUT") or common.RESULTS) / "validate_banks"
    raw_dir.mkdir(parents=True, exist_ok=True)
    figures: dict[str, dict] = {}
    for name in args.kernels.split(","):
        try:
            figures[name] = profile(name, args.ncu, raw_dir)
        except Exception as err:  # noqa: BLE001 - record it and go on to the next kernel
            figures[name] = {"error": f"{type(err).__name__}: {err}", "traceback": traceback.format_exc()[-4000:]}
        print_table(name, figures[name])
    path = common.write_record("validate_banks", figures, {"match_tolerance": MATCH_TOLERANCE,
                                                           "raw_csv": str(raw_dir)})
    print(f"record: {path}")
    return 0


def print_table(name: str, result: dict) -> None:
    """A short table: one line per instruction, predicted vs measured wavefronts per execution."""
    if "error" in result:
        print(f"{name}: ERROR {result['error']}")
        return
    print(f"{name} ({result['function']}): {result['matches']} match, {result['mismatches']} mismatch")
    for r in result["instructions"]:
        pred = "unknown" if r["predicted"] is None else f"{r['predicted']:.2f}"
        meas = r.get("measured_per_execution")
        meas = "-" if meas is None else f"{meas:.2f}"
        print(f"  {r['address']:#06x} {r['text'][:44]:44s} predicted {pred:>7s} measured {meas:>7s}  {r.get('verdict', '')}")


if __name__ == "__main__":
    sys.exit(main())
