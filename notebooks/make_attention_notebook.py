"""Writes notebooks/05_flash_attention.ipynb from the cells below (kept as code so diffs stay readable).

    python notebooks/make_attention_notebook.py      # regenerates it (outputs cleared)

Cells tagged "gpu" need a GPU: CI executes every other cell; on the H200 all of them run.
"""

from __future__ import annotations

from pathlib import Path

import nbformat
from make_notebooks import code, md  # the cell helpers of the other notebooks (same folder)

HERE = Path(__file__).parent


FLASH_ATTENTION = [
    md("""
# 05 · Flash attention: the FlashAttention-3 schedule, built, checked, profiled and tuned

`mgpu_lab/kernels/attention.py` is a forward pass with FA3's structure, written from the public DSL:

- a **producer** warpgroup (`setmaxnreg 24`) loads Q once and streams K and V tiles into a ring of
  smem slots with TMA; K and V have their own barriers, so S can start before V lands;
- two **consumer** warpgroups (`setmaxnreg 240`), 64 query rows each: S = Q K^T by WGMMA from smem,
  the online softmax in registers (`FragmentedArray`: row max and sum by shuffles, `exp2` with the
  scale folded into one FMA), and O += P V by WGMMA with **P straight from registers** (the
  accumulator layout is the A-operand layout);
- **intra-warpgroup overlap**: the softmax of tile i runs while the tensor cores do P_{i-1} V_{i-1};
- **pingpong**: the consumers take turns issuing their GEMMs through two named barriers, so one's
  softmax overlaps the other's GEMMs.
"""),
    code("""
import re, collections
import numpy as np
import mgpu_lab
from mgpu_lab.kernels.attention import make_attention, reference_attention

k = make_attention(4, 16, 4096, 4096, 128)
print(k)
ops = re.findall(r"\\*/\\s+(?:@!?U?P\\w+\\s+)?([A-Z][A-Z0-9_.]+)", k.compiled.sass)
print({op: n for op, n in collections.Counter(ops).items()
       if "GMMA" in op or op.startswith(("UTMA", "BAR", "MUFU", "USETMAXREG"))})
assert not any(op.startswith(("LDL", "STL")) for op in ops) and "serialized" not in k.compiled.ptxas_log
"""),
    md("""
The two GEMMs in the SASS: `HGMMA.64x128x16.F32.BF16 R24, gdesc[...]` is S (both operands in
smem), `HGMMA.64x128x16.F32.BF16 R88, R152, gdesc[...].tnspB` is PV with A in registers and V
read transposed. `BAR.ARV` / `BAR.SYNC` are the pingpong handoffs. No wgmma is serialized: ptxas
would say so in its log if a register an in-flight wgmma reads were rewritten (that is why P is
converted to bf16 only after the PV GEMM of the previous tile has finished).
"""),
    code("""
from mgpu_lab.widgets import show
show(k, "sass")
"""),
    md("## Check it against a float64 reference (GPU)\nFresh random inputs, outputs poisoned with NaN first."),
    code("""
import torch
rng = np.random.default_rng()
small = make_attention(1, 4, 1000, 1000, 128, causal=True)
q, kk, v = (torch.tensor(rng.standard_normal((1, 4, 1000, 128)), dtype=torch.bfloat16, device="cuda")
            for _ in range(3))
out = torch.full((1, 4, 1000, 128), float("nan"), dtype=torch.bfloat16, device="cuda")
lse = torch.full((1, 4, 1000), float("nan"), dtype=torch.float32, device="cuda")
small(q, kk, v, out=(out, lse))
ref_out, ref_lse = reference_attention(*(x.float().cpu().numpy() for x in (q, kk, v)), causal=True)
print("max |out - ref|", np.abs(out.float().cpu().numpy() - ref_out).max(),
      " max |lse - ref|", np.abs(lse.cpu().numpy() - ref_lse).max())
""", gpu=True),
    md("## Speed against torch SDPA with the cuDNN backend (GPU)"),
    code("""
import torch.nn.functional as F
from torch.nn.attention import SDPBackend, sdpa_kernel
from mgpu_lab import bench
q, kk, v = (torch.randn(4, 16, 4096, 128, device="cuda", dtype=torch.bfloat16) for _ in range(3))
out = torch.empty_like(q)
lse = torch.empty(4, 16, 4096, device="cuda")
flops = 4 * 4 * 16 * 4096 * 4096 * 128
ours = bench.measure(lambda: k(q, kk, v, out=(out, lse))).median_ms   # CUDA events, L2 flushed
with sdpa_kernel(SDPBackend.CUDNN_ATTENTION):
    peer = bench.measure(lambda: F.scaled_dot_product_attention(q, kk, v)).median_ms
print(f"ours {flops / ours / 1e9:.0f} TFLOP/s, cuDNN {flops / peer / 1e9:.0f} TFLOP/s")
""", gpu=True),
    md("""
## The schedule in the timeline (GPU)

Named regions per warpgroup: `load K` / `load V` (producer), `wait turn`, `S GEMM`, `rescale O`,
`PV GEMM`, `softmax` and `epilogue` (consumers). With pingpong, one consumer's `softmax` lines up
with the other's GEMM regions: the picture of FA3's figure 1, recorded on the device. (Two K/V
stages: the profile buffer takes smem too.)
"""),
    code("""
kp = make_attention(4, 16, 4096, 4096, 128, stages=2, profile=True)
kp(q, kk, v, out=(out, lse))
trace = kp.last_trace
print(trace.summary())
show(trace)
""", gpu=True),
    md("""
How much of one consumer's softmax runs while the other consumer is *also* in its softmax? With
pingpong the two take turns (one does softmax while the other issues and waits on its GEMMs), so
the share is small; built without pingpong both consumers run the same phase at once. Measured
on the device's timestamps, per block, for both builds:
"""),
    code("""
def softmax_overlap(trace):
    \"\"\"Share of consumer softmax time during which the block's other consumer is in softmax too.\"\"\"
    spans = collections.defaultdict(list)
    for e in trace.events():
        if e.name == "softmax" and e.unit in (1, 2):
            spans[(e.block, e.unit)].append((e.start_ns, e.end_ns))
    both = total = 0.0
    for (block, unit), mine in spans.items():
        a = np.array(mine)
        b = np.array(spans.get((block, 3 - unit), [(0.0, 0.0)]))
        inter = np.minimum.outer(a[:, 1], b[:, 1]) - np.maximum.outer(a[:, 0], b[:, 0])
        both += np.clip(inter, 0, None).sum()
        total += (a[:, 1] - a[:, 0]).sum()
    return both / total

kn = make_attention(4, 16, 4096, 4096, 128, stages=2, profile=True, pingpong=False)
kn(q, kk, v, out=(out, lse))
print(f"softmax overlap between the two consumers: pingpong {softmax_overlap(trace):.0%}, "
      f"without pingpong {softmax_overlap(kn.last_trace):.0%}")
""", gpu=True),
    md("## Tuning (GPU) and export\nK/V tile width, ring depth and pingpong; each candidate is checked and timed."),
    code("""
import functools
make = functools.partial(make_attention, 4, 16, 4096, 4096, 128)
space = {"block_kv": [128, 176], "stages": [2, 3], "pingpong": [True, False]}

def reference(q, k, v):
    return F.scaled_dot_product_attention(q.float(), k.float(), v.float()).cpu().numpy()

result = mgpu_lab.tune(make, space, args=(q, kk, v), reference=reference)
print(result)
path = result.best_kernel.export("attention_d128_s4096.py", overwrite=True)
print("exported to", path)
""", gpu=True),
]


def write() -> Path:
    nb = nbformat.v4.new_notebook()
    nb.cells = FLASH_ATTENTION
    for i, cell in enumerate(nb.cells):  # stable ids: regenerating changes only what was edited
        cell.id = f"attention-{i:02d}"
    nb.metadata["kernelspec"] = {"name": "python3", "display_name": "Python 3", "language": "python"}
    path = HERE / "05_flash_attention.ipynb"
    nbformat.write(nb, path)
    return path


if __name__ == "__main__":
    print(write())
