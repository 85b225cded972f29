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

N, BLOCK, VEC = 1 << 24, 256, 4
sd = mgpu_lab.ShapeDtype((N,), "float32")

def vadd(ctx, a, b, out, smem):
    i = (dsl.block_idx() * BLOCK + dsl.thread_idx()) * VEC   # index values have Python operators
    v = dsl.ir.VectorType.get([VEC], dsl.ir.F32Type.get())
    dsl.vector.store(dsl.vector.load(v, a, [i]) + dsl.vector.load(v, b, [i]), out, [i])

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
from mgpu_lab import bench
A, B = cupy.asarray(a), cupy.asarray(b)
t = bench.measure(lambda: k(A, B, out=out)).median_ms   # CUDA events, L2 flushed before each run
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


TMA_SWIZZLE = [
    md("""
# 02 · TMA and swizzling

Hopper's tensor memory accelerator (TMA) copies tiles between global and shared memory on its
own, completing on an mbarrier. With a 128-byte swizzle the 16-byte chunks of each 128-byte row
are XOR-permuted by the row index, so a warp reading a *column* of a bf16 tile hits 8 different
banks instead of one. This notebook builds a TMA kernel, then looks at its smem layout and the
bank conflicts of column accesses with and without the swizzle.
"""),
    code("""
import numpy as np
import mgpu_lab
from mgpu_lab.examples.scaled_add import make_scaled_add
from mgpu_lab.widgets import show
from mgpu_lab.widgets.bank_model import BufferGeometry, bank_conflicts, column_access

k = make_scaled_add(4096, 4096, a=2.0, b=1.0)
for buf in k.compiled.smem_layout:
    print(f"{buf.path:10} offset {buf.offset:6}  {buf.nbytes:6} B  {buf.shape} {buf.dtype}  swizzle {buf.swizzle}")
"""),
    code("""
import re
ops = re.findall(r"\\*/\\s+(?:@!?U?P\\w+\\s+)?([A-Z][A-Z0-9_.]+)", k.compiled.sass)
print(sorted({op for op in ops if op.startswith(("UTMA", "SYNCS", "UBLKCP"))}))
"""),
    md("""
## Bank conflicts of a column read: 64 x 64 bf16 tile (128-byte rows)

Each thread of a warp reads 16 bytes from the same column of consecutive rows (what an
`ldmatrix` or a WGMMA operand fetch does); 16-byte accesses are served 8 threads at a time.
Without swizzle every row starts in bank 0, so those 8 collide: an 8-way conflict. With the
128-byte swizzle the chunks land in 8 different banks and the read takes the ideal 4 wavefronts.
"""),
    code("""
for swizzle in (0, 32, 64, 128):
    geom = BufferGeometry.from_shape(base=0, shape=(64, 64), itemsize=2, swizzle=swizzle)
    report = bank_conflicts(column_access(geom, col=0, vector_bytes=16))
    print(f"swizzle {swizzle:3}: {report.wavefronts} wavefronts (ideal {report.ideal_wavefronts}), "
          f"worst bank {report.max_way}-way")
"""),
    md("The smem viewer shows the same interactively: pick a buffer, an access pattern and a swizzle."),
    code("show(k, 'smem')"),
    md("## Run it (GPU): y = a * x + b through TMA tiles"),
    code("""
import cupy
from mgpu_lab import bench
x = cupy.asarray(np.random.default_rng().standard_normal((4096, 4096), dtype=np.float32))
y = cupy.full_like(x, np.nan)
k(x, out=y)
np.testing.assert_allclose(y.get(), 2 * x.get() + 1, rtol=1e-6)
t = bench.measure(lambda: k(x, out=y)).median_ms
print(f"{2 * x.nbytes / t / 1e6:.0f} GB/s (read + write)")
""", gpu=True),
]

GEMM = [
    md("""
# 03 · The Hopper GEMM: pipeline, warp specialization, timeline, tuning, export

`mgpu_lab/kernels/gemm/kernel.py`: a producer warpgroup streams A and B tiles with TMA into a ring of
`stages` smem slots; two consumer warpgroups multiply them with WGMMA (128B-swizzled operands,
f32 accumulators in registers, `setmaxnreg` 40/232). Read the source, then its SASS.
"""),
    code("""
import re, collections
import numpy as np
import mgpu_lab
from mgpu_lab.kernels.gemm import make_gemm

k = make_gemm(4096, 4096, 4096, transpose_b=True)
print(k.compiled.resources)
ops = re.findall(r"\\*/\\s+(?:@!?U?P\\w+\\s+)?([A-Z][A-Z0-9_.]+)", k.compiled.sass)
print({op: n for op, n in collections.Counter(ops).items() if "GMMA" in op or op.startswith(("UTMA", "SYNCS"))})
assert not any(op.startswith(("LDL", "STL")) for op in ops)
"""),
    code("""
from mgpu_lab.widgets import show
show(k, "sass")
"""),
    md("## Correctness and speed against cuBLAS (GPU)"),
    code("""
import torch
from mgpu_lab import bench
# torch tensors go straight in (bf16 included); outputs can be torch tensors too.
ta, tb = (torch.randn(4096, 4096, device="cuda").to(torch.bfloat16) for _ in range(2))
tc = torch.full((4096, 4096), float("nan"), device="cuda", dtype=torch.bfloat16)
k(ta, tb, out=tc)
ref = ta.float() @ tb.float().T
print("relative error", float(torch.linalg.norm(tc.float() - ref) / torch.linalg.norm(ref)))
flops = 2 * 4096 ** 3
ours = bench.measure(lambda: k(ta, tb, out=tc)).median_ms
peer = bench.measure(lambda: torch.matmul(ta, tb.T)).median_ms
print(f"ours {flops / ours / 1e9:.0f} TFLOP/s, torch {flops / peer / 1e9:.0f} TFLOP/s")
""", gpu=True),
    md("## The profiled timeline (GPU)\nRegions: `load` (producer), `wait_data` and `mma` (consumers), `epilogue`."),
    code("""
kp = make_gemm(4096, 4096, 4096, transpose_b=True, profile=True)
kp(ta, tb, out=tc)
trace = kp.last_trace
print(trace.summary())
show(trace)
""", gpu=True),
    md("## Tuning (GPU) and export\nCandidates compile in parallel processes; each is checked and timed."),
    code("""
import functools
make = functools.partial(make_gemm, 4096, 4096, 4096, transpose_b=True)
result = mgpu_lab.tune(make, {"tile_n": [128, 256], "stages": [3, 4]}, args=(ta, tb),
                       reference=lambda a, b: (ta.float() @ tb.float().T).cpu().numpy())
print(result)
path = result.best_kernel.export("gemm_4096_nt.py", overwrite=True)
print("exported to", path)
""", gpu=True),
]

BUBBLE = [
    md("""
# 04 · Reading a timeline: finding a pipeline bubble and fixing it

With only two smem stages the producer cannot run far enough ahead: consumers spend much of
each k-step in `wait_data`. The timeline shows it, the summary quantifies it, and more stages
fix it.
"""),
    code("""
import numpy as np
from mgpu_lab.kernels.gemm import make_gemm, default_stages
print("stages that fit with tile_n=256:", default_stages(256))
shallow = make_gemm(4096, 4096, 4096, transpose_b=True, stages=2, profile=True)
deep = make_gemm(4096, 4096, 4096, transpose_b=True, profile=True)
print(shallow.compiled.resources.dynamic_smem_bytes, deep.compiled.resources.dynamic_smem_bytes)
"""),
    code("""
import torch
from mgpu_lab import bench
from mgpu_lab.widgets import show
ta, tb = (torch.randn(4096, 4096, device="cuda").to(torch.bfloat16) for _ in range(2))
tc = torch.empty(4096, 4096, device="cuda", dtype=torch.bfloat16)
shares = {}
for name, k in (("2 stages", shallow), ("deep", deep)):
    k(ta, tb, out=tc)
    rows = {r["region"]: r for r in k.last_trace.summary().rows}
    ms = bench.measure(lambda: k(ta, tb, out=tc)).median_ms
    shares[name] = rows["wait_data"]["share"]
    print(f"{name:8}: {ms:.3f} ms, consumers waiting for data {100 * rows['wait_data']['share']:.1f}% "
          f"of their time, mean wait {rows['wait_data']['mean_ns']:.0f} ns")
assert shares["2 stages"] > shares["deep"]
""", gpu=True),
    code("show(shallow.last_trace)", gpu=True),
]


def write(name: str, cells: list) -> Path:
    nb = nbformat.v4.new_notebook()
    nb.cells = cells
    nb.metadata["kernelspec"] = {"name": "python3", "display_name": "Python 3", "language": "python"}
    path = HERE / name
    nbformat.write(nb, path)
    return path


NOTEBOOKS = {
    "01_first_kernel.ipynb": FIRST_KERNEL,
    "02_tma_and_swizzling.ipynb": TMA_SWIZZLE,
    "03_hopper_gemm.ipynb": GEMM,
    "04_reading_a_timeline.ipynb": BUBBLE,
}

if __name__ == "__main__":
    for name, cells in NOTEBOOKS.items():
        print(write(name, cells))
