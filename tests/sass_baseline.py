"""The kernels whose SASS the typed-value rewrite must leave unchanged, and their opcode counts.

Each entry builds one kernel on the CPU (target sm_90a): every example, the GEMM at a small
shape (with and without the profiler), flash attention in the configurations whose code differs
(head_dim 64/128/256, causal, GQA, ragged seq, pingpong off), the README's first kernel and
notebook 01's kernel.
`python tests/sass_baseline.py` rewrites the fixture (only when codegen is meant to change);
`python tests/sass_baseline.py NAME...` records only those entries and keeps the others.
"""

from __future__ import annotations

import json
import re
from collections import Counter
from collections.abc import Callable
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
FIXTURE = Path(__file__).parent / "fixtures" / "sass_opcode_counts.json"
_INSTRUCTION = re.compile(r"/\*[0-9a-f]{4,}\*/\s+(?:@!?U?P\w+\s+)?([A-Z][A-Z0-9_.]*)")


def opcode_counts(sass: str) -> dict[str, int]:
    """Full opcode (modifiers included) -> count, trailing padding NOPs excluded."""
    ops = _INSTRUCTION.findall(sass)
    while ops and ops[-1] == "NOP":
        ops.pop()
    return dict(sorted(Counter(ops).items()))


def _first_python_block(markdown: str) -> str:
    return re.search(r"```python\n(.*?)```", markdown, re.S).group(1)


def _readme_kernel():
    # The README's first kernel, up to (not including) the first line that needs a GPU.
    code = _first_python_block((ROOT / "README.md").read_text())
    code = code.split("\nx = cupy", 1)[0].replace("import numpy as np, cupy", "import numpy as np")
    scope: dict = {}
    exec(compile(code, str(ROOT / "README.md"), "exec"), scope)
    return scope["k"]


def _notebook_kernel():
    import sys

    sys.path.insert(0, str(ROOT / "notebooks"))
    try:
        import make_notebooks
    finally:
        sys.path.pop(0)
    source = next(cell.source for cell in make_notebooks.FIRST_KERNEL
                  if cell.cell_type == "code" and "mgpu_lab.kernel(" in cell.source)
    scope: dict = {}
    exec(compile(source, "notebooks/01_first_kernel.ipynb", "exec"), scope)
    return scope["k"]


def kernels() -> dict[str, Callable[[], object]]:
    """name -> a function building the kernel (sm_90a, no GPU needed)."""
    from mgpu_lab.kernels.attention import make_attention
    from mgpu_lab.examples.block_sum import make_block_sum
    from mgpu_lab.kernels.gemm import make_gemm
    from mgpu_lab.examples.scaled_add import make_scaled_add
    from mgpu_lab.examples.softmax import make_softmax
    from mgpu_lab.examples.tiled_copy import make_tiled_copy
    from mgpu_lab.examples.vector_add import make_vector_add

    t = {"target": "sm_90a"}
    return {
        "vector_add_f32": lambda: make_vector_add(1 << 20, **t),
        "vector_add_i32_tail": lambda: make_vector_add(1000, "int32", **t),
        "block_sum": lambda: make_block_sum(**t),
        "tiled_copy": lambda: make_tiled_copy(**t),
        "scaled_add_f32": lambda: make_scaled_add(**t),
        "scaled_add_bf16": lambda: make_scaled_add(512, 512, dtype="bfloat16", **t),
        "softmax": lambda: make_softmax(1024, 256, **t),
        "gemm_nt_256x256x256": lambda: make_gemm(256, 256, 256, transpose_b=True, tile_m=128, tile_n=128, **t),
        "gemm_nn_256x256x256": lambda: make_gemm(256, 256, 256, tile_m=128, tile_n=128, **t),
        "gemm_nt_profiled": lambda: make_gemm(256, 256, 256, transpose_b=True, tile_m=128, tile_n=128, profile=True, **t),
        # pinned at the options they were recorded with: every exp2 on MUFU (d 64 moves 3/16 to the
        # FMA pipes by default since), pingpong on (full attention at d 128 defaults to off since)
        "attention_d64": lambda: make_attention(1, 2, 512, 512, 64, exp2_fma_fraction=0.0, **t),
        "attention_d64_exp2_fma": lambda: make_attention(1, 2, 512, 512, 64, **t),
        "attention_d128": lambda: make_attention(1, 2, 512, 512, 128, pingpong=True, **t),
        # d 256 pinned at the 64-row K/V tiles it was recorded with (its default became 80 since)
        "attention_d256": lambda: make_attention(1, 2, 512, 512, 256, block_kv=64, **t),
        "attention_d128_causal": lambda: make_attention(1, 2, 512, 512, 128, causal=True, **t),
        "attention_d128_gqa_f16": lambda: make_attention(1, 8, 512, 512, 128, kv_heads=2, dtype="float16", pingpong=True,
                                                         **t),
        "attention_d128_nopp": lambda: make_attention(1, 2, 512, 512, 128, **t),
        "attention_d128_ragged_causal": lambda: make_attention(1, 2, 1000, 1000, 128, causal=True, **t),
        "attention_d256_ragged": lambda: make_attention(1, 2, 384, 700, 256, dtype="float16", block_kv=64, **t),
        "attention_d128_causal_nopp": lambda: make_attention(1, 2, 512, 512, 128, causal=True, pingpong=False, **t),
        "readme_add": lambda: _readme_kernel(),
        "notebook01_vadd": lambda: _notebook_kernel(),
    }


def measure(name: str) -> dict[str, int]:
    return opcode_counts(kernels()[name]().compiled.sass)


if __name__ == "__main__":
    import sys

    only = sys.argv[1:]
    unknown = sorted(set(only) - set(kernels()))
    if unknown:
        sys.exit(f"unknown kernel names {unknown}; known: {sorted(kernels())}")
    counts = json.loads(FIXTURE.read_text()) if only else {}
    counts.update({name: measure(name) for name in (only or kernels())})
    FIXTURE.write_text(json.dumps(counts, indent=1, sort_keys=True) + "\n")
    print(f"wrote {FIXTURE}")
