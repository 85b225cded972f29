"""Writes the worked notebooks from the cell lists below (kept as code so diffs stay readable).

    python notebooks/make_notebooks.py      # regenerates notebooks/*.ipynb (outputs cleared)

Cells tagged "gpu" need a GPU: CI executes every other cell; on the H200 all of them run.
"""

from __future__ import annotations

from pathlib import Path

import nbformat

HERE = Path(__file__).parent


def md(text: str) -> nbformat.NotebookNode:
    return nbformat.v4.new_markdown_cell(text.strip())


def code(text: str, gpu: bool = False) -> nbformat.NotebookNode:
    cell = nbformat.v4.new_code_cell(text.strip())
    if gpu:
        cell.metadata["tags"] = ["gpu"]
    return cell


FIRST_KERNEL = [
    md("""
# 01 · A first kernel: vector add, its SASS and its resources

A kernel body is Python that emits MLIR. `mgpu_lab.kernel` traces it, compiles it to PTX,
cubin and SASS, and returns a callable. Everything the compiler produced is data on
`kernel.compiled`.
"""),
    code("""
import numpy as np
import mgpu_lab
from mgpu_lab import dsl
from mgpu_lab.dsl import arith, c, ir, vector

N, BLOCK, VEC = 1 << 24, 256, 4
sd = mgpu_lab.ShapeDtype((N,), "float32")

def vadd(ctx, a, b, out, smem):
    i = arith.muli(arith.addi(arith.muli(dsl.block_idx(), c(BLOCK)), dsl.thread_idx()), c(VEC))
    v = ir.VectorType.get([VEC], ir.F32Type.get())
    vector.store(arith.addf(vector.load(v, a, [i]), vector.load(v, b, [i])), out, [i])

k = mgpu_lab.kernel(vadd, grid=N // (BLOCK * VEC), block=BLOCK, in_shapes=(sd, sd), out_shapes=sd)
k
"""),
    md("""
## Resources and SASS

`ptxas -v` is parsed into `resources`. The SASS carries `//## File ..., line N` markers and
`line_map` ties each of your lines to the PTX and SASS lines it produced: the two vector
loads became `LDG.E.128` (16-byte accesses, because the launcher guarantees 16-byte aligned
arrays and says so to LLVM).
"""),
    code("""
print(k.compiled.resources)
sass = k.compiled.sass.splitlines()
for span in k.compiled.line_map:
    src = k.compiled.sources[span.file].splitlines()[span.line].strip()
    print(f"line {span.line + 1:3}: {src[:70]:70} -> {[sass[i].split(';')[0].split('*/')[-1].strip() for i in span.sass_lines][:4]}")
"""),
    code("""
import collections, re
ops = re.findall(r"\\*/\\s+(?:@!?U?P\\w+\\s+)?([A-Z][A-Z0-9_.]+)", k.compiled.sass)
collections.Counter(ops).most_common(8)
"""),
    md("## Run it (GPU)\nFresh random inputs, a NaN-poisoned output, a float64 reference."),
    code("""
import cupy
rng = np.random.default_rng()
a, b = (rng.standard_normal(N).astype(np.float32) for _ in range(2))
out = cupy.full((N,), np.nan, np.float32)
k(cupy.asarray(a), cupy.asarray(b), out=out)
ref = a.astype(np.float64) + b
print("max abs error vs float64:", np.abs(out.get() - ref).max())
np.testing.assert_array_equal(out.get(), a + b)  # bit-exact against numpy's float32 sum
""", gpu=True),
    code("""
from mgpu_lab.runtime.timing import time_cuda
A, B = cupy.asarray(a), cupy.asarray(b)
t = time_cuda(lambda i: k(A, B, out=out)).median_ms
print(f"{t * 1e3:.1f} us, {3 * 4 * N / t / 1e6:.0f} GB/s")
""", gpu=True),
    md("""
## The IR after every pass

`keep_passes=True` records the module after each pass (the notebook IR viewer shows the
diffs); `dump_dir=` writes every artifact to a folder.
"""),
    code("""
k2 = mgpu_lab.kernel(vadd, grid=N // (BLOCK * VEC), block=BLOCK, in_shapes=(sd, sd), out_shapes=sd,
                     keep_passes=True, use_cache=False)
[name for name, _ in k2.compiled.passes]
"""),
]


def write(name: str, cells: list) -> Path:
    nb = nbformat.v4.new_notebook()
    nb.cells = cells
    nb.metadata["kernelspec"] = {"name": "python3", "display_name": "Python 3", "language": "python"}
    path = HERE / name
    nbformat.write(nb, path)
    return path


NOTEBOOKS = {"01_first_kernel.ipynb": FIRST_KERNEL}

if __name__ == "__main__":
    for name, cells in NOTEBOOKS.items():
        print(write(name, cells))
